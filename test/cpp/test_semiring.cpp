// GoogleTest of the C core's semiring products and pattern union
// (sf_semiring.c, templates/semiring.h) against tiny hand computations:
// present and absent outputs (arg == -1), the monoids' NaN rule, and the
// status codes of bad arguments (NULL pointers, unknown codes, columns out
// of range or unsorted, a decreasing crow, a crow_out that disagrees).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "sparsefill_core.h"

namespace {

using Vec = std::vector<int64_t>;

// A (3 x 3):  row 0: A[0,0] = 2, A[0,2] = 3;  row 1: empty;  row 2: A[2,1] = 5.
struct Fixture {
  Vec crow{0, 2, 2, 3};
  Vec col{0, 2, 1};
  std::vector<double> val{2, 3, 5};
};

// out and arg of A (op) x for x = {1, 10, 4}, x_present (NULL: all).
struct Mv {
  std::vector<double> out = std::vector<double>(3, -7);
  Vec arg = Vec(3, -7);
  sf_status st;
};

Mv mv(int monoid, int op, const uint8_t* present, const std::vector<double>& x = {1, 10, 4}) {
  Fixture a;
  Mv r;
  r.st = sf_csr_semiring_mv_f64(r.out.data(), r.arg.data(), a.crow.data(), a.col.data(),
                                a.val.data(), 3, 3, 3, x.data(), present, monoid, op, 0, 3);
  return r;
}

TEST(SemiringMv, MinPlusEveryXPresent) {
  Mv r = mv(SF_MONOID_MIN, SF_OP_PLUS, nullptr);
  ASSERT_EQ(r.st, SF_OK);
  EXPECT_EQ(r.out[0], 3);  // min(2 + 1, 3 + 4)
  EXPECT_EQ(r.arg[0], 0);  // the first present term's position in A
  EXPECT_EQ(r.arg[1], -1); // an empty row: absent, out 0
  EXPECT_EQ(r.out[1], 0);
  EXPECT_EQ(r.out[2], 15); // 5 + 10
  EXPECT_EQ(r.arg[2], 2);
}

TEST(SemiringMv, AbsentXMakesNoTerm) {
  const uint8_t present[3] = {1, 0, 1};  // x[1] absent
  Mv r = mv(SF_MONOID_MIN, SF_OP_PLUS, present);
  ASSERT_EQ(r.st, SF_OK);
  EXPECT_EQ(r.out[0], 3);
  EXPECT_EQ(r.arg[0], 0);
  EXPECT_EQ(r.arg[2], -1);  // its only term meets x[1]
  EXPECT_EQ(r.out[2], 0);
  const uint8_t first_absent[3] = {0, 1, 1};
  r = mv(SF_MONOID_PLUS, SF_OP_TIMES, first_absent);
  ASSERT_EQ(r.st, SF_OK);
  EXPECT_EQ(r.out[0], 12);  // 3 * 4 only
  EXPECT_EQ(r.arg[0], 1);   // the first present term is A's position 1
}

TEST(SemiringMv, OtherMonoids) {
  Mv r = mv(SF_MONOID_PLUS, SF_OP_TIMES, nullptr);
  ASSERT_EQ(r.st, SF_OK);
  EXPECT_EQ(r.out[0], 14);  // 2 * 1 + 3 * 4
  EXPECT_EQ(r.out[2], 50);
  r = mv(SF_MONOID_MAX, SF_OP_PLUS, nullptr);
  EXPECT_EQ(r.out[0], 7);
  r = mv(SF_MONOID_ANY, SF_OP_PLUS, nullptr);
  EXPECT_EQ(r.out[0], 3);   // any keeps the first term
  r = mv(SF_MONOID_TIMES, SF_OP_SECOND, nullptr);
  EXPECT_EQ(r.out[0], 4);   // x[0] * x[2]
  r = mv(SF_MONOID_LOR, SF_OP_MINUS, nullptr, {2, 10, 3});
  EXPECT_EQ(r.out[0], 0);   // 2 - 2 == 0 or 3 - 3 == 0
  EXPECT_EQ(r.arg[0], 0);   // present although its value is 0
  r = mv(SF_MONOID_LAND, SF_OP_PAIR, nullptr);
  EXPECT_EQ(r.out[0], 1);
}

TEST(SemiringMv, MinMaxPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int monoid : {SF_MONOID_MIN, SF_MONOID_MAX}) {
    Mv r = mv(monoid, SF_OP_PLUS, nullptr, {nan, 10, 4});  // first term NaN
    ASSERT_EQ(r.st, SF_OK);
    EXPECT_TRUE(std::isnan(r.out[0]));
    r = mv(monoid, SF_OP_PLUS, nullptr, {1, 10, nan});     // a later term NaN
    EXPECT_TRUE(std::isnan(r.out[0]));
  }
}

// A row long enough for the two-lane min/max loop (every x present): the
// fixture's rows have at most two terms, which never reach the lanes.
TEST(SemiringMv, LongRowTwoLanes) {
  Vec crow{0, 5}, col{0, 1, 2, 3, 4}, arg(1, -7);
  std::vector<double> val{5, 1, 4, 2, 3}, x(5, 0), out(1, -7);
  for (int monoid : {SF_MONOID_MIN, SF_MONOID_MAX}) {
    ASSERT_EQ(sf_csr_semiring_mv_f64(out.data(), arg.data(), crow.data(), col.data(), val.data(),
                                     1, 5, 5, x.data(), nullptr, monoid, SF_OP_PLUS, 0, 1),
              SF_OK);
    EXPECT_EQ(out[0], monoid == SF_MONOID_MIN ? 1 : 5);
    EXPECT_EQ(arg[0], 0);
  }
}

TEST(SemiringMv, RowRangeWritesOnlyItsRows) {
  Fixture a;
  std::vector<double> x{1, 10, 4}, out(3, -7);
  Vec arg(3, -7);
  ASSERT_EQ(sf_csr_semiring_mv_f64(out.data(), arg.data(), a.crow.data(), a.col.data(),
                                   a.val.data(), 3, 3, 3, x.data(), nullptr, SF_MONOID_MIN,
                                   SF_OP_PLUS, 2, 3),
            SF_OK);
  EXPECT_EQ(out[0], -7);
  EXPECT_EQ(arg[0], -7);
  EXPECT_EQ(out[2], 15);
}

TEST(SemiringMv, I64WrapsAndRefusesDivision) {
  Vec crow{0, 2}, col{0, 1}, val{INT64_MAX, 1}, x{1, 1}, out(1), arg(1);
  ASSERT_EQ(sf_csr_semiring_mv_i64(out.data(), arg.data(), crow.data(), col.data(), val.data(), 1,
                                   2, 2, x.data(), nullptr, SF_MONOID_PLUS, SF_OP_TIMES, 0, 1),
            SF_OK);
  EXPECT_EQ(out[0], INT64_MIN);  // INT64_MAX + 1 wraps, as torch's does
  EXPECT_EQ(sf_csr_semiring_mv_i64(out.data(), arg.data(), crow.data(), col.data(), val.data(),
                                   1, 2, 2, x.data(), nullptr, SF_MONOID_PLUS, SF_OP_DIV, 0, 1),
            SF_ERR_INVALID_ARGUMENT);
}

TEST(SemiringMv, BadArguments) {
  Fixture a;
  std::vector<double> x{1, 10, 4}, out(3);
  Vec arg(3);
  auto call = [&](double* o, const int64_t* crow, const int64_t* col, int monoid, int op,
                  int64_t b, int64_t e) {
    return sf_csr_semiring_mv_f64(o, arg.data(), crow, col, a.val.data(), 3, 3, 3, x.data(),
                                  nullptr, monoid, op, b, e);
  };
  EXPECT_EQ(call(nullptr, a.crow.data(), a.col.data(), 2, 0, 0, 3), SF_ERR_NULL_POINTER);
  EXPECT_EQ(call(out.data(), nullptr, a.col.data(), 2, 0, 0, 3), SF_ERR_NULL_POINTER);
  EXPECT_EQ(call(out.data(), a.crow.data(), nullptr, 2, 0, 0, 3), SF_ERR_NULL_POINTER);
  EXPECT_EQ(call(out.data(), a.crow.data(), a.col.data(), 99, 0, 0, 3), SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(call(out.data(), a.crow.data(), a.col.data(), 2, 99, 0, 3), SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(call(out.data(), a.crow.data(), a.col.data(), 2, 0, 2, 1), SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(call(out.data(), a.crow.data(), a.col.data(), 2, 0, 0, 4), SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(call(nullptr, a.crow.data(), a.col.data(), 2, 0, 1, 1), SF_OK);  // no rows
  Vec far{0, 3, 1};  // a column >= ncols, in every loop form
  for (int monoid : {SF_MONOID_PLUS, SF_MONOID_MIN, SF_MONOID_ANY})
    EXPECT_EQ(call(out.data(), a.crow.data(), far.data(), monoid, 0, 0, 3),
              SF_ERR_INDEX_OUT_OF_RANGE);
  Vec negative{0, -1, 1};
  EXPECT_EQ(call(out.data(), a.crow.data(), negative.data(), 0, 0, 0, 3),
            SF_ERR_INDEX_OUT_OF_RANGE);
  Vec decreasing{0, 2, 1, 3};
  EXPECT_EQ(call(out.data(), decreasing.data(), a.col.data(), 0, 0, 0, 3),
            SF_ERR_CROW_DECREASING);
  Vec past{0, 2, 2, 4};  // beyond nse
  EXPECT_EQ(call(out.data(), past.data(), a.col.data(), 0, 0, 0, 3), SF_ERR_CROW_DECREASING);
}

// u (op) A, u = {0: 1, 2: 2}.
TEST(SemiringVm, PlusTimesAndAbsentOutputs) {
  Fixture a;
  Vec keys{0, 2}, arg(3, -7);
  std::vector<double> u{1, 2}, out(3, -7);
  ASSERT_EQ(sf_csr_semiring_vm_f64(out.data(), arg.data(), a.crow.data(), a.col.data(),
                                   a.val.data(), 3, 3, 3, keys.data(), u.data(), 2,
                                   SF_MONOID_PLUS, SF_OP_TIMES),
            SF_OK);
  EXPECT_EQ(out, (std::vector<double>{2, 10, 3}));
  EXPECT_EQ(arg, (Vec{0, 2, 1}));
  Vec only_empty_row{1};
  ASSERT_EQ(sf_csr_semiring_vm_f64(out.data(), arg.data(), a.crow.data(), a.col.data(),
                                   a.val.data(), 3, 3, 3, only_empty_row.data(), u.data(), 1,
                                   SF_MONOID_MIN, SF_OP_PLUS),
            SF_OK);
  EXPECT_EQ(arg, (Vec{-1, -1, -1}));
  EXPECT_EQ(out, (std::vector<double>{0, 0, 0}));
}

TEST(SemiringVm, FoldsSeveralRowsIntoOneOutput) {
  // B (2 x 1): B[0,0] = 4, B[1,0] = 6;  u = {0: 1, 1: 3}.
  Vec crow{0, 1, 2}, col{0, 0}, keys{0, 1}, arg(1);
  std::vector<double> val{4, 6}, u{1, 3}, out(1);
  ASSERT_EQ(sf_csr_semiring_vm_f64(out.data(), arg.data(), crow.data(), col.data(), val.data(), 2,
                                   1, 2, keys.data(), u.data(), 2, SF_MONOID_MIN, SF_OP_PLUS),
            SF_OK);
  EXPECT_EQ(out[0], 5);  // min(1 + 4, 3 + 6)
  EXPECT_EQ(arg[0], 0);
  ASSERT_EQ(sf_csr_semiring_vm_f64(out.data(), arg.data(), crow.data(), col.data(), val.data(), 2,
                                   1, 2, keys.data(), u.data(), 2, SF_MONOID_MAX, SF_OP_RMINUS),
            SF_OK);
  EXPECT_EQ(out[0], 3);  // max(4 - 1, 6 - 3)
}

TEST(SemiringVm, BadArguments) {
  Fixture a;
  std::vector<double> u{1, 2}, out(3);
  Vec arg(3);
  auto call = [&](const int64_t* crow, const int64_t* col, const Vec& keys, int monoid) {
    return sf_csr_semiring_vm_f64(out.data(), arg.data(), crow, col, a.val.data(), 3, 3, 3,
                                  keys.data(), u.data(), (int64_t)keys.size(), monoid,
                                  SF_OP_PLUS);
  };
  EXPECT_EQ(call(nullptr, a.col.data(), {0}, 0), SF_ERR_NULL_POINTER);
  EXPECT_EQ(call(a.crow.data(), nullptr, {0}, 0), SF_ERR_NULL_POINTER);
  EXPECT_EQ(call(a.crow.data(), a.col.data(), {2, 0}, 0), SF_ERR_NOT_COALESCED);
  EXPECT_EQ(call(a.crow.data(), a.col.data(), {0, 0}, 0), SF_ERR_NOT_COALESCED);
  EXPECT_EQ(call(a.crow.data(), a.col.data(), {3}, 0), SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(call(a.crow.data(), a.col.data(), {0}, 42), SF_ERR_INVALID_ARGUMENT);
  Vec far{0, 3, 1};
  EXPECT_EQ(call(a.crow.data(), far.data(), {0}, 0), SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(sf_csr_semiring_vm_f64(nullptr, arg.data(), a.crow.data(), a.col.data(), a.val.data(),
                                   3, 3, 3, nullptr, nullptr, 0, 0, 0),
            SF_ERR_NULL_POINTER);
}

// The masked product A (op) A under M = {(0,1), (0,2), (2,0)}: by dots (B^T)
// and by rows (B). A @ A: C[0,0] = 2*2, C[0,1] = 3*5, C[0,2] = 2*3; row 2 of
// A meets only the empty row 1, so (2,0) is absent.
struct Masked {
  Vec crow_m{0, 2, 2, 3}, col_m{1, 2, 0};
  Vec crow_bt{0, 1, 2, 3}, col_bt{0, 2, 0};  // A^T
  std::vector<double> val_bt{2, 5, 3};
};

TEST(SemiringMasked, DotsAndRowsAgreeWithHand) {
  Fixture a;
  Masked k;
  for (int monoid : {SF_MONOID_PLUS, SF_MONOID_MIN}) {
    const int op = monoid == SF_MONOID_PLUS ? SF_OP_TIMES : SF_OP_PLUS;
    const std::vector<double> want =
      monoid == SF_MONOID_PLUS ? std::vector<double>{15, 6} : std::vector<double>{8, 5};
    std::vector<double> out(3, -7);
    Vec arg(3, -7);
    ASSERT_EQ(sf_csr_semiring_masked_f64(out.data(), arg.data(), k.crow_m.data(), k.col_m.data(),
                                         3, a.crow.data(), a.col.data(), a.val.data(), 3,
                                         k.crow_bt.data(), k.col_bt.data(), k.val_bt.data(), 3, 3,
                                         3, monoid, op, 0, 3),
              SF_OK);
    EXPECT_EQ(out[0], want[0]);
    EXPECT_EQ(out[1], want[1]);
    EXPECT_EQ(arg, (Vec{1, 0, -1}));  // A's position of the first common k; (2,0) absent
    std::vector<double> out_r(3, -7);
    Vec arg_r(3, -7), mark(3, -1);
    ASSERT_EQ(sf_csr_semiring_masked_rows_f64(out_r.data(), arg_r.data(), mark.data(),
                                              k.crow_m.data(), k.col_m.data(), 3, a.crow.data(),
                                              a.col.data(), a.val.data(), 3, a.crow.data(),
                                              a.col.data(), a.val.data(), 3, 3, 3, 3, monoid, op,
                                              0, 3),
              SF_OK);
    EXPECT_EQ(out_r[0], want[0]);
    EXPECT_EQ(out_r[1], want[1]);
    EXPECT_EQ(arg_r, (Vec{1, 0, -1}));
    EXPECT_EQ(mark, (Vec{-1, -1, -1}));  // scratch restored
  }
}

TEST(SemiringMasked, BadArguments) {
  Fixture a;
  Masked k;
  std::vector<double> out(3);
  Vec arg(3), mark(3, -1);
  auto dots = [&](double* o, const Vec& col_m, int monoid) {
    return sf_csr_semiring_masked_f64(o, arg.data(), k.crow_m.data(), col_m.data(), 3,
                                      a.crow.data(), a.col.data(), a.val.data(), 3,
                                      k.crow_bt.data(), k.col_bt.data(), k.val_bt.data(), 3, 3, 3,
                                      monoid, SF_OP_PLUS, 0, 3);
  };
  auto rows = [&](double* o, const Vec& col_m, const Vec& col_a, int monoid) {
    return sf_csr_semiring_masked_rows_f64(o, arg.data(), mark.data(), k.crow_m.data(),
                                           col_m.data(), 3, a.crow.data(), col_a.data(),
                                           a.val.data(), 3, a.crow.data(), a.col.data(),
                                           a.val.data(), 3, 3, 3, 3, monoid, SF_OP_PLUS, 0, 3);
  };
  EXPECT_EQ(dots(nullptr, k.col_m, 0), SF_ERR_NULL_POINTER);
  EXPECT_EQ(rows(nullptr, k.col_m, a.col, 0), SF_ERR_NULL_POINTER);
  EXPECT_EQ(dots(out.data(), {1, 3, 0}, 0), SF_ERR_INDEX_OUT_OF_RANGE);  // a mask column >= n
  EXPECT_EQ(rows(out.data(), {1, 3, 0}, a.col, 0), SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(rows(out.data(), k.col_m, {0, 3, 1}, 0), SF_ERR_INDEX_OUT_OF_RANGE);  // A's >= k
  EXPECT_EQ(dots(out.data(), k.col_m, 77), SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rows(out.data(), k.col_m, a.col, 77), SF_ERR_INVALID_ARGUMENT);
}

// Patterns for the union: A as above; B: row 0 {2: 10}, row 1 {0: 20},
// row 2 {0: 30, 1: 40}.
struct Union {
  Vec crow_b{0, 1, 2, 4}, col_b{2, 0, 0, 1};
  std::vector<double> val_b{10, 20, 30, 40};
};

TEST(SemiringUnion, RowNseAndMerge) {
  Fixture a;
  Union b;
  Vec nse(3, -7);
  std::vector<uint64_t> marks(1, 0);
  for (uint64_t* m : {(uint64_t*)nullptr, marks.data()}) {
    std::fill(nse.begin(), nse.end(), -7);
    ASSERT_EQ(sf_csr_union_row_nse(nse.data(), m, a.crow.data(), a.col.data(), 3, b.crow_b.data(),
                                   b.col_b.data(), 4, 3, 3, 0, 3),
              SF_OK);
    EXPECT_EQ(nse, (Vec{2, 1, 2}));
    EXPECT_EQ(marks[0], 0u);
  }
  Vec crow_out{0, 2, 3, 5}, col_out(5, -7);
  std::vector<double> val_out(5, -7);
  ASSERT_EQ(sf_csr_ewise_union_f64(col_out.data(), val_out.data(), crow_out.data(), 5,
                                   a.crow.data(), a.col.data(), a.val.data(), 3, b.crow_b.data(),
                                   b.col_b.data(), b.val_b.data(), 4, 3, SF_OP_PLUS, nullptr,
                                   nullptr, 0, 3),
            SF_OK);
  EXPECT_EQ(col_out, (Vec{0, 2, 0, 0, 1}));
  EXPECT_EQ(val_out, (std::vector<double>{2, 13, 20, 30, 45}));  // ewise_add: one side as is
  const double a_default = 100, b_default = 1000;
  ASSERT_EQ(sf_csr_ewise_union_f64(col_out.data(), val_out.data(), crow_out.data(), 5,
                                   a.crow.data(), a.col.data(), a.val.data(), 3, b.crow_b.data(),
                                   b.col_b.data(), b.val_b.data(), 4, 3, SF_OP_MINUS, &a_default,
                                   &b_default, 0, 3),
            SF_OK);
  // ewise_union: the absent side takes its default; op is a - b.
  EXPECT_EQ(val_out, (std::vector<double>{2 - 1000, 3 - 10, 100 - 20, 100 - 30, 5 - 40}));
}

// The count pass checks the columns through the merge (a row is valid
// exactly when the merged columns increase strictly within [0, ncols)):
// against the plain rule -- A's columns checked before B's, the first bad
// one named -- on random rows with a duplicate, a swap or an out-of-range
// column planted in one side, and each row's union size where all is valid.
TEST(SemiringUnion, CountChecksAsTheColumnByColumnRule) {
  std::mt19937_64 rng(5);
  const int64_t ncols = 12;
  auto row = [&](int64_t k) {
    Vec all(ncols);
    for (int64_t j = 0; j < ncols; ++j) all[j] = j;
    std::shuffle(all.begin(), all.end(), rng);
    Vec r(all.begin(), all.begin() + k);
    std::sort(r.begin(), r.end());
    return r;
  };
  auto plain = [&](const Vec& a, const Vec& b, int64_t* size) {
    for (const Vec* v : {&a, &b}) {
      for (size_t p = 0; p < v->size(); ++p) {
        if ((*v)[p] < 0 || (*v)[p] >= ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
        if (p > 0 && (*v)[p] <= (*v)[p - 1]) return SF_ERR_COL_UNSORTED;
      }
    }
    Vec u(a);
    u.insert(u.end(), b.begin(), b.end());
    std::sort(u.begin(), u.end());
    *size = std::unique(u.begin(), u.end()) - u.begin();
    return SF_OK;
  };
  for (int trial = 0; trial < 4000; ++trial) {
    Vec a = row(rng() % 7), b = row(rng() % 7);
    Vec& side = rng() % 2 ? a : b;
    const int64_t kind = rng() % 4, at = side.empty() ? 0 : rng() % side.size();
    if (!side.empty() && kind == 1 && at > 0) side[at] = side[at - 1];  // a duplicate
    if (!side.empty() && kind == 2 && at > 0) std::swap(side[at], side[at - 1]);
    if (!side.empty() && kind == 3) side[at] = rng() % 2 ? -1 - (int64_t)(rng() % 3) : ncols;
    int64_t want = -1;
    const sf_status expect = plain(a, b, &want);
    // the row under test is the second of two; the first is empty. By the
    // merge and by marks (one word, left all zero, errors included).
    Vec crow_a{0, 0, (int64_t)a.size()}, crow_b{0, 0, (int64_t)b.size()};
    std::vector<uint64_t> marks(1, 0);
    for (uint64_t* m : {(uint64_t*)nullptr, marks.data()}) {
      Vec nse{-7, -7};
      const sf_status st = sf_csr_union_row_nse(nse.data(), m, crow_a.data(), a.data(), a.size(),
                                                crow_b.data(), b.data(), b.size(), 2, ncols, 0, 2);
      ASSERT_EQ(st, expect) << "trial " << trial << (m ? " marks" : " merge");
      ASSERT_EQ(marks[0], 0u) << "trial " << trial;
      if (st == SF_OK) {
        EXPECT_EQ(nse[0], 0);
        EXPECT_EQ(nse[1], want) << "trial " << trial << (m ? " marks" : " merge");
      }
    }
  }
}

// Marks serve many rows in turn: each row's count by marks equals the
// merge's, on 300 rows over 200 columns (4 words, the last partial), rows of
// 0 to 60 columns, many within the last 64 columns (ties there); then a
// planted bad column in one row, checked alone, gives the merge's error; the
// words are all zero after every call.
TEST(SemiringUnion, MarksAsTheMerge) {
  std::mt19937_64 rng(11);
  const int64_t ncols = 200, m = 300;
  Vec crow_a{0}, crow_b{0}, col_a, col_b;
  for (int64_t i = 0; i < m; ++i) {
    for (auto* side : {&col_a, &col_b}) {
      const int64_t k = rng() % 61, from = rng() % 2 ? 0 : ncols - 64;
      Vec all(ncols - from);
      for (int64_t j = 0; j < (int64_t)all.size(); ++j) all[j] = from + j;
      std::shuffle(all.begin(), all.end(), rng);
      Vec r(all.begin(), all.begin() + std::min<int64_t>(k, all.size()));
      std::sort(r.begin(), r.end());
      side->insert(side->end(), r.begin(), r.end());
    }
    crow_a.push_back(col_a.size());
    crow_b.push_back(col_b.size());
  }
  std::vector<uint64_t> marks(ncols / 64 + 1, 0);
  const std::vector<uint64_t> clear(marks.size(), 0);
  Vec by_merge(m, -7), by_marks(m, -9);
  auto run = [&](int64_t* out, uint64_t* mk, const Vec& ca, const Vec& cb, int64_t r0,
                 int64_t r1) {
    return sf_csr_union_row_nse(out, mk, crow_a.data(), ca.data(), ca.size(), crow_b.data(),
                                cb.data(), cb.size(), m, ncols, r0, r1);
  };
  ASSERT_EQ(run(by_merge.data(), nullptr, col_a, col_b, 0, m), SF_OK);
  ASSERT_EQ(run(by_marks.data(), marks.data(), col_a, col_b, 0, m), SF_OK);
  EXPECT_EQ(by_marks, by_merge);
  EXPECT_EQ(marks, clear);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t i = rng() % m;
    const bool in_a = rng() % 2;
    const Vec& crow = in_a ? crow_a : crow_b;
    if (crow[i + 1] == crow[i]) continue;
    Vec ca = col_a, cb = col_b;
    Vec& side = in_a ? ca : cb;
    const int64_t at = crow[i] + rng() % (crow[i + 1] - crow[i]);
    side[at] = rng() % 2 ? ncols + (int64_t)(rng() % 100) : -1 - (int64_t)(rng() % 100);
    const sf_status want = run(by_merge.data(), nullptr, ca, cb, i, i + 1);
    ASSERT_NE(want, SF_OK);
    EXPECT_EQ(run(by_marks.data(), marks.data(), ca, cb, i, i + 1), want) << "trial " << trial;
    ASSERT_EQ(marks, clear) << "trial " << trial;
  }
}

// The write pass merges each row from both ends at once: against a plain
// merge on random rows (long enough for the two-ended loop, ties at either
// end), a - b so that a swapped side shows, with and without defaults; a
// crow_out one or two short or one long is refused with nothing written outside
// its row.
TEST(SemiringUnion, WriteAsAPlainMerge) {
  std::mt19937_64 rng(9);
  const int64_t ncols = 20;
  auto row = [&](int64_t k) {
    Vec all(ncols);
    for (int64_t j = 0; j < ncols; ++j) all[j] = j;
    std::shuffle(all.begin(), all.end(), rng);
    Vec r(all.begin(), all.begin() + k);
    std::sort(r.begin(), r.end());
    return r;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    // trial 0: equal rows, the case where a crow_out two short leaves no room at all
    const Vec a = trial ? row(rng() % 12) : Vec{3, 5}, b = trial ? row(rng() % 12) : Vec{3, 5};
    std::vector<double> va(a.size()), vb(b.size());
    for (auto& v : va) v = (double)(rng() % 1000);
    for (auto& v : vb) v = (double)(rng() % 1000) / 8;
    const bool defaults = rng() % 2;
    const double da = -3.5, db = 7.25;
    Vec want_col;
    std::vector<double> want_val;
    for (int64_t j = 0; j < ncols; ++j) {
      auto ia = std::find(a.begin(), a.end(), j), ib = std::find(b.begin(), b.end(), j);
      const bool in_a = ia != a.end(), in_b = ib != b.end();
      if (!in_a && !in_b) continue;
      const double x = in_a ? va[ia - a.begin()] : da, y = in_b ? vb[ib - b.begin()] : db;
      want_col.push_back(j);
      want_val.push_back(in_a && in_b ? x - y : defaults ? x - y : in_a ? x : y);
    }
    const int64_t n = want_col.size();
    Vec crow_a{0, (int64_t)a.size()}, crow_b{0, (int64_t)b.size()};
    for (int64_t wrong : {0, -1, -2, 1}) {
      if (n + wrong < 0) continue;
      Vec crow_out{0, n + wrong}, col_out(n + wrong + 2, -7);
      std::vector<double> val_out(n + wrong + 2, -7);
      const sf_status st = sf_csr_ewise_union_f64(
          col_out.data(), val_out.data(), crow_out.data(), n + wrong, crow_a.data(), a.data(),
          va.data(), a.size(), crow_b.data(), b.data(), vb.data(), b.size(), 1, SF_OP_MINUS,
          defaults ? &da : nullptr, defaults ? &db : nullptr, 0, 1);
      ASSERT_EQ(st, wrong ? SF_ERR_INVALID_ARGUMENT : SF_OK) << "trial " << trial;
      for (int64_t k = n + wrong; k < n + wrong + 2; ++k) {
        ASSERT_EQ(col_out[k], -7) << "trial " << trial;  // nothing past the row
        ASSERT_EQ(val_out[k], -7) << "trial " << trial;
      }
      if (!wrong) {
        col_out.resize(n);
        val_out.resize(n);
        ASSERT_EQ(col_out, want_col) << "trial " << trial;
        ASSERT_EQ(val_out, want_val) << "trial " << trial;
      }
    }
  }
}

TEST(SemiringUnion, BadArguments) {
  Fixture a;
  Union b;
  Vec nse(3);
  std::vector<uint64_t> words(1, 0);
  for (uint64_t* marks : {(uint64_t*)nullptr, words.data()}) {
    auto count = [&](int64_t* out, const Vec& col_a, const Vec& col_b, int64_t ncols) {
      return sf_csr_union_row_nse(out, marks, a.crow.data(), col_a.data(), 3, b.crow_b.data(),
                                  col_b.data(), 4, 3, ncols, 0, 3);
    };
    EXPECT_EQ(count(nullptr, a.col, b.col_b, 3), SF_ERR_NULL_POINTER);
    EXPECT_EQ(count(nse.data(), {2, 0, 1}, b.col_b, 3), SF_ERR_COL_UNSORTED);
    EXPECT_EQ(count(nse.data(), {0, 0, 1}, b.col_b, 3), SF_ERR_COL_UNSORTED);  // duplicate
    EXPECT_EQ(count(nse.data(), a.col, {2, 0, 1, 0}, 3), SF_ERR_COL_UNSORTED);
    EXPECT_EQ(count(nse.data(), {0, 2, 3}, b.col_b, 3), SF_ERR_INDEX_OUT_OF_RANGE);
    EXPECT_EQ(count(nse.data(), a.col, {2, -1, 0, 1}, 3), SF_ERR_INDEX_OUT_OF_RANGE);
    EXPECT_EQ(count(nse.data(), {0, -64, 2}, b.col_b, 3), SF_ERR_INDEX_OUT_OF_RANGE);
    EXPECT_EQ(count(nse.data(), a.col, b.col_b, -1), SF_ERR_NEGATIVE_SIZE);
    EXPECT_EQ(words[0], 0u);
  }
  Vec decreasing{0, 2, 1, 3};
  EXPECT_EQ(sf_csr_union_row_nse(nse.data(), nullptr, decreasing.data(), a.col.data(), 3,
                                 b.crow_b.data(), b.col_b.data(), 4, 3, 3, 0, 3),
            SF_ERR_CROW_DECREASING);
  EXPECT_EQ(sf_csr_union_row_nse(nse.data(), nullptr, a.crow.data(), a.col.data(), 3,
                                 b.crow_b.data(), b.col_b.data(), 4, 3, 3, 2, 1),
            SF_ERR_INVALID_ARGUMENT);

  Vec col_out(5);
  std::vector<double> val_out(5);
  const double d = 0;
  auto merge = [&](const Vec& crow_out, const double* ad, const double* bd) {
    return sf_csr_ewise_union_f64(col_out.data(), val_out.data(), crow_out.data(), 5,
                                  a.crow.data(), a.col.data(), a.val.data(), 3, b.crow_b.data(),
                                  b.col_b.data(), b.val_b.data(), 4, 3, SF_OP_PLUS, ad, bd, 0, 3);
  };
  EXPECT_EQ(merge({0, 1, 3, 5}, nullptr, nullptr), SF_ERR_INVALID_ARGUMENT);  // row 0 too short
  EXPECT_EQ(merge({0, 2, 3, 5}, &d, nullptr), SF_ERR_INVALID_ARGUMENT);  // one default only
  EXPECT_EQ(merge({0, 2, 3, 5}, nullptr, &d), SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_csr_ewise_union_f64(col_out.data(), val_out.data(), Vec{0, 2, 3, 5}.data(), 5,
                                   a.crow.data(), a.col.data(), a.val.data(), 3, b.crow_b.data(),
                                   b.col_b.data(), b.val_b.data(), 4, 3, 99, nullptr, nullptr, 0,
                                   3),
            SF_ERR_INVALID_ARGUMENT);
}

}  // namespace
