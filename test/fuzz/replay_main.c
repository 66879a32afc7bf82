/* Replays fuzz inputs through the harness without libFuzzer, so that ctest
 * (with any compiler, under ASan/UBSan in the sanitized build) checks every
 * committed corpus seed: usage fuzz_replay FILE... */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  static uint8_t buffer[1 << 16];
  for (int i = 1; i < argc; ++i) {
    FILE *f = fopen(argv[i], "rb");
    if (f == NULL) {
      perror(argv[i]);
      return 1;
    }
    const size_t n = fread(buffer, 1, sizeof buffer, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buffer, n);
  }
  printf("replayed %d inputs\n", argc - 1);
  return 0;
}
