/* libFuzzer harness for the C core's validation and conversion entry points.
 *
 * The input bytes choose an entry point and supply arbitrary sizes and index
 * values (negative, huge, unsorted, duplicated); buffer lengths always match
 * the contract, as the C++ layer guarantees. Validation must reject bad data
 * with a status, never read or write out of bounds (ASan/UBSan watch), and
 * whatever it accepts must round-trip exactly (abort() otherwise).
 * Built by CMake with -DSPARSEFILL_FUZZ=ON (clang); run with `make fuzz`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sparsefill_core.h"

#define MAX_NSE 64
#define MAX_DIM 4

typedef struct {
  const uint8_t *data;
  size_t size;
} reader;

static uint8_t take_u8(reader *r) {
  if (r->size == 0) return 0;
  uint8_t v = r->data[0];
  r->data++;
  r->size--;
  return v;
}

/* Mostly small values (to reach valid inputs), sometimes extreme ones. */
static int64_t take_i64(reader *r) {
  const uint8_t kind = take_u8(r);
  if (kind < 200) return (int64_t)(kind % 16) - 2;
  int64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (int64_t)((uint64_t)v << 8 | take_u8(r));
  return v;
}

/* a + b with wrap-around (the harness must not overflow itself). */
static int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

static void require(int cond) {
  if (!cond) abort();
}

static void fuzz_coo(reader *r) {
  const int64_t sparse_dim = take_u8(r) % (MAX_DIM + 1);
  const int64_t nse = take_u8(r) % (MAX_NSE + 1);
  int64_t sizes[MAX_DIM], indices[MAX_DIM * MAX_NSE];
  for (int64_t d = 0; d < sparse_dim; ++d) sizes[d] = take_i64(r);
  for (int64_t k = 0; k < sparse_dim * nse; ++k) indices[k] = take_i64(r);
  sf_site site = {-1, -1, -1};
  int coalesced = -1;
  if (sf_coo_check(&site, &coalesced, indices, sparse_dim, nse, sizes) != SF_OK) return;
  int64_t linear[MAX_NSE], back[MAX_DIM * MAX_NSE], unique[MAX_NSE], segment[MAX_NSE];
  require(sf_coo_linearize(linear, indices, sparse_dim, nse, sizes) == SF_OK);
  require(sf_coo_delinearize(back, linear, sparse_dim, nse, sizes) == SF_OK);
  require(memcmp(back, indices, sizeof(int64_t) * (size_t)(sparse_dim * nse)) == 0);
  int64_t nse_out = -1;
  require(sf_coalesce_plan(unique, segment, &nse_out, linear, nse) == SF_OK);
  require(nse_out >= 0 && nse_out <= nse);
  for (int64_t k = 1; k < nse_out; ++k) require(unique[k] > unique[k - 1]);
  for (int64_t k = 0; k < nse; ++k) {
    require(segment[k] >= 0 && segment[k] < nse_out && unique[segment[k]] == linear[k]);
  }
  require((coalesced == 1) == (nse_out == nse && (nse == 0 || memcmp(unique, linear,
                                                                     sizeof(int64_t) * (size_t)nse) == 0)));
}

static void fuzz_csr(reader *r) {
  const int64_t nrows = take_u8(r) % 17;
  const int64_t ncols = take_i64(r);
  const int64_t nse = take_u8(r) % (MAX_NSE + 1);
  int64_t crow[18], col[MAX_NSE], rows[MAX_NSE], crow_back[18];
  for (int64_t i = 0; i <= nrows; ++i) crow[i] = wrap_add(take_i64(r), i > 0 ? crow[i - 1] : 0);
  if (take_u8(r) & 1) crow[0] = 0;       /* help the fuzzer reach valid pointers */
  if (take_u8(r) & 1) crow[nrows] = nse;
  for (int64_t k = 0; k < nse; ++k) col[k] = take_i64(r);
  sf_site site = {-1, -1, -1};
  if (sf_csr_check(&site, crow, col, nrows, ncols, nse) != SF_OK) return;
  require(sf_csr_rows_from_crow(rows, crow, nrows) == SF_OK);
  require(sf_crow_from_rows(crow_back, rows, nse, nrows) == SF_OK);
  require(memcmp(crow, crow_back, sizeof(int64_t) * (size_t)(nrows + 1)) == 0);
}

static void fuzz_rows(reader *r) {
  const int64_t nrows = take_u8(r) % 17;
  const int64_t nse = take_u8(r) % (MAX_NSE + 1);
  int64_t rows[MAX_NSE], crow[18];
  for (int64_t k = 0; k < nse; ++k) rows[k] = take_i64(r);
  if (sf_crow_from_rows(crow, rows, nse, nrows) != SF_OK) return;
  require(crow[0] == 0 && crow[nrows] == nse);
  for (int64_t i = 0; i < nrows; ++i) require(crow[i + 1] >= crow[i]);
}

static void fuzz_union(reader *r) {
  int64_t a[MAX_NSE], b[MAX_NSE], out[2 * MAX_NSE], src_a[2 * MAX_NSE], src_b[2 * MAX_NSE];
  const int64_t na = take_u8(r) % (MAX_NSE + 1), nb = take_u8(r) % (MAX_NSE + 1);
  int64_t acc = take_i64(r);
  for (int64_t k = 0; k < na; ++k) a[k] = acc = wrap_add(acc, take_i64(r)); /* often increasing */
  acc = take_i64(r);
  for (int64_t k = 0; k < nb; ++k) b[k] = acc = wrap_add(acc, take_i64(r));
  int64_t n = -1;
  if (sf_union_count(&n, a, na, b, nb) != SF_OK) return;
  require(n >= (na > nb ? na : nb) && n <= na + nb);
  int64_t written = -1;
  require(sf_union_plan(&written, out, src_a, src_b, a, na, b, nb) == SF_OK);
  require(written == n);
  for (int64_t k = 0; k < n; ++k) {
    require(k == 0 || out[k] > out[k - 1]);
    require(src_a[k] >= 0 || src_b[k] >= 0);
    if (src_a[k] >= 0) require(src_a[k] < na && a[src_a[k]] == out[k]);
    if (src_b[k] >= 0) require(src_b[k] < nb && b[src_b[k]] == out[k]);
  }
}

static void fuzz_gather(reader *r) {
  const int64_t nse = take_u8(r) % 9, n = take_u8(r) % 17;
  const size_t row_bytes = (size_t)(take_u8(r) % 20);
  unsigned char values[8 * 20], fill[20], out[16 * 20];
  int64_t src[16];
  for (size_t i = 0; i < sizeof values; ++i) values[i] = (unsigned char)i;
  memset(fill, 0xAB, sizeof fill);
  for (int64_t k = 0; k < n; ++k) src[k] = take_i64(r);
  if (sf_gather_rows_with_fill(out, values, nse, fill, src, n, row_bytes) != SF_OK) return;
  for (int64_t k = 0; k < n; ++k) {
    require(src[k] < nse);
    const unsigned char *expect = src[k] < 0 ? fill : values + (size_t)src[k] * row_bytes;
    require(row_bytes == 0 || memcmp(out + (size_t)k * row_bytes, expect, row_bytes) == 0);
  }
}

static void fuzz_sizes(reader *r) {
  const int64_t ndim = take_u8(r) % 6;
  int64_t sizes[6], numel = -1;
  for (int64_t d = 0; d < ndim; ++d) sizes[d] = take_i64(r);
  if (sf_sizes_numel(&numel, sizes, ndim) != SF_OK) return;
  require(numel >= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  reader r = {data, size};
  switch (take_u8(&r) % 6) {
    case 0: fuzz_coo(&r); break;
    case 1: fuzz_csr(&r); break;
    case 2: fuzz_rows(&r); break;
    case 3: fuzz_union(&r); break;
    case 4: fuzz_gather(&r); break;
    default: fuzz_sizes(&r); break;
  }
  return 0;
}
