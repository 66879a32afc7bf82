// GoogleTest of the C core's products (sf_products.c) against dense
// references written here: every fill form (scalar, per row, per column),
// row ranges, both dtypes, and malformed index data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "sparsefill_core.h"

namespace {

using Vec = std::vector<int64_t>;

struct Csr {
  int64_t m, k;
  Vec crow, col;
  std::vector<double> val;
};

Csr random_csr(int64_t m, int64_t k, double density, std::mt19937_64& rng) {
  Csr a{m, k, Vec(m + 1, 0), {}, {}};
  std::uniform_real_distribution<double> u(0, 1), v(-2, 2);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      if (u(rng) < density) {
        a.col.push_back(j);
        a.val.push_back(v(rng));
      }
    }
    a.crow[i + 1] = (int64_t)a.col.size();
  }
  return a;
}

// Dense A with F[i, j] = rf[i * stride] + cf[j] at unspecified elements.
std::vector<double> densify(const Csr& a, const double* rf, int64_t stride, const double* cf) {
  std::vector<double> d(a.m * a.k);
  for (int64_t i = 0; i < a.m; ++i)
    for (int64_t j = 0; j < a.k; ++j) d[i * a.k + j] = (rf ? rf[i * stride] : 0) + (cf ? cf[j] : 0);
  for (int64_t i = 0; i < a.m; ++i)
    for (int64_t p = a.crow[i]; p < a.crow[i + 1]; ++p) d[i * a.k + a.col[p]] = a.val[p];
  return d;
}

std::vector<double> dense_mm(const std::vector<double>& a, const std::vector<double>& b,
                             int64_t m, int64_t k, int64_t n) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t t = 0; t < n; ++t) c[i * n + t] += a[i * k + j] * b[j * n + t];
  return c;
}

std::vector<double> random_vec(int64_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> v(-1, 1);
  std::vector<double> x(n);
  for (auto& e : x) e = v(rng);
  return x;
}

enum Kind { kScalar, kRow, kCol };

class SpmmFills : public ::testing::TestWithParam<int> {};

TEST_P(SpmmFills, MatchesDenseProductInTwoRowRanges) {
  const Kind kind = static_cast<Kind>(GetParam());
  std::mt19937_64 rng(7 + GetParam());
  const int64_t m = 13, k = 9, n = 5;
  Csr a = random_csr(m, k, 0.3, rng);
  std::vector<double> b = random_vec(k * n, rng);
  std::vector<double> rfill = random_vec(m, rng), cfill = random_vec(k, rng);
  const double* rf = kind == kCol ? nullptr : rfill.data();
  const int64_t stride = kind == kRow ? 1 : 0;
  const double* cf = kind == kCol ? cfill.data() : nullptr;
  std::vector<double> colsum(n, 0.0), corr(n, 0.0);
  for (int64_t j = 0; j < k; ++j)
    for (int64_t t = 0; t < n; ++t) {
      colsum[t] += b[j * n + t];
      corr[t] += cfill[j] * b[j * n + t];
    }
  auto expected = dense_mm(densify(a, rf, stride, cf), b, m, k, n);
  std::vector<double> c(m * n, NAN);
  const int64_t nse = (int64_t)a.val.size();
  for (auto range : {std::pair<int64_t, int64_t>{0, 6}, {6, m}}) {
    ASSERT_EQ(sf_csr_spmm_f64(c.data(), n, a.crow.data(), a.col.data(), a.val.data(), m, k, nse,
                              b.data(), n, n, rf, stride, cf, kind == kCol ? nullptr : colsum.data(),
                              kind == kCol ? corr.data() : nullptr, range.first, range.second, nullptr),
              SF_OK);
  }
  for (int64_t e = 0; e < m * n; ++e) EXPECT_NEAR(c[e], expected[e], 1e-12) << e;

  // SpMV on column 2 of B (stride n) against the same reference.
  std::vector<double> y(m, NAN);
  double xsum = colsum[2], cor = corr[2];
  ASSERT_EQ(sf_csr_spmv_f64(y.data(), 1, a.crow.data(), a.col.data(), a.val.data(), m, k, nse,
                            b.data() + 2, n, rf, stride, cf, kind == kCol ? 0.0 : xsum,
                            kind == kCol ? cor : 0.0, 0, m, nullptr),
            SF_OK);
  for (int64_t i = 0; i < m; ++i) EXPECT_NEAR(y[i], expected[i * n + 2], 1e-12) << i;
}

INSTANTIATE_TEST_SUITE_P(Products, SpmmFills, ::testing::Values(0, 1, 2));

TEST(Products, SpmmFloatAndPaddedStrides) {
  // float32, with ldb and ldc larger than n, a fill of 0.5 and an empty row.
  const int64_t m = 3, k = 2, n = 2, ld = 4;
  Vec crow{0, 1, 1, 3}, col{1, 0, 1};
  std::vector<float> val{2, 3, 4}, b{1, 2, -1, -1, 3, 4, -1, -1}, c(m * ld, -7.f);
  const float fill = 0.5f;
  float colsum[2] = {4, 6};
  ASSERT_EQ(sf_csr_spmm_f32(c.data(), ld, crow.data(), col.data(), val.data(), m, k, 3, b.data(),
                            ld, n, &fill, 0, nullptr, colsum, nullptr, 0, m, nullptr),
            SF_OK);
  // dense A = [[.5, 2], [.5, .5], [3, 4]]
  const float expect[3][2] = {{0.5f + 6, 1 + 8}, {0.5f + 1.5f, 1 + 2}, {3 + 12, 6 + 16}};
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t t = 0; t < n; ++t) EXPECT_FLOAT_EQ(c[i * ld + t], expect[i][t]);
    for (int64_t t = n; t < ld; ++t) EXPECT_EQ(c[i * ld + t], -7.f);  // padding untouched
  }
}

TEST(Products, Sddmm) {
  std::mt19937_64 rng(3);
  const int64_t m = 8, k = 6, n = 13;  // one block of 8 lanes and a tail
  Csr a = random_csr(m, k, 0.4, rng);
  auto x = random_vec(m * n, rng), y = random_vec(k * n, rng);
  std::vector<double> out(a.val.size());
  ASSERT_EQ(sf_csr_sddmm_f64(out.data(), a.crow.data(), a.col.data(), m, k, (int64_t)a.val.size(),
                             x.data(), n, y.data(), n, n, 0, m),
            SF_OK);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = a.crow[i]; p < a.crow[i + 1]; ++p) {
      double e = 0;
      for (int64_t t = 0; t < n; ++t) e += x[i * n + t] * y[a.col[p] * n + t];
      EXPECT_NEAR(out[p], e, 1e-12);
    }
}

TEST(Products, TransposeIsStableAndValid) {
  std::mt19937_64 rng(5);
  Csr a = random_csr(7, 11, 0.3, rng);
  const int64_t nse = (int64_t)a.val.size();
  Vec crow_t(12), col_t(nse), perm(nse);
  ASSERT_EQ(sf_csr_transpose(crow_t.data(), col_t.data(), perm.data(), a.crow.data(), a.col.data(),
                             7, 11, nse),
            SF_OK);
  ASSERT_EQ(sf_csr_check(nullptr, crow_t.data(), col_t.data(), 11, 7, nse), SF_OK);
  auto d = densify(a, nullptr, 0, nullptr);
  for (int64_t j = 0; j < 11; ++j)
    for (int64_t q = crow_t[j]; q < crow_t[j + 1]; ++q) {
      EXPECT_EQ(a.col[perm[q]], j);
      EXPECT_EQ(d[col_t[q] * 11 + j], a.val[perm[q]]);
    }
}

// (m, k, n, density of A, density of B): short rows (insertion sort), rows
// dense in a narrow span (bitmap), rows of about one column per word of a
// wide span (the bitmap's branch-free first two bits per word) and long rows
// over a wide span (qsort).
class Spgemm : public ::testing::TestWithParam<std::tuple<int, int, int, double, double>> {};

INSTANTIATE_TEST_SUITE_P(Products, Spgemm,
                         ::testing::Values(std::make_tuple(10, 7, 9, 0.35, 0.35),
                                           std::make_tuple(12, 30, 300, 0.3, 0.3),
                                           std::make_tuple(30, 40, 4000, 0.2, 0.002),
                                           std::make_tuple(20, 60, 4000, 0.3, 0.004),
                                           std::make_tuple(6, 40, 20000, 0.1, 0.0005)));

TEST_P(Spgemm, MatchesDenseAndIsSorted) {
  std::mt19937_64 rng(11);
  const auto [m_, k_, n_, da, db] = GetParam();
  const int64_t m = m_, k = k_, n = n_;
  Csr a = random_csr(m, k, da, rng), b = random_csr(k, n, db, rng);
  const int64_t nse_a = (int64_t)a.val.size(), nse_b = (int64_t)b.val.size();
  Vec bound(m);
  for (auto range : {std::pair<int64_t, int64_t>{0, m / 3}, {m / 3, m}}) {
    ASSERT_EQ(sf_csr_spgemm_bounds(bound.data(), a.crow.data(), a.col.data(), m, k, nse_a,
                                   b.crow.data(), nse_b, range.first, range.second),
              SF_OK);
  }
  int64_t products = 0;
  for (int64_t i = 0; i < m; ++i) {
    int64_t want = 0;
    for (int64_t p = a.crow[i]; p < a.crow[i + 1]; ++p)
      want += b.crow[a.col[p] + 1] - b.crow[a.col[p]];
    ASSERT_EQ(bound[i], want) << i;
    products += want;
  }
  // Two row ranges, each into its own buffer that starts small and grows
  // when a row's bound does not fit (as the CPU op does).
  Vec row_nse(m, -1), col_c;
  std::vector<double> val_c, acc(n);
  std::vector<uint64_t> bits((n + 63) / 64);
  for (auto range : {std::pair<int64_t, int64_t>{0, m / 2}, {m / 2, m}}) {
    int64_t cap = std::min<int64_t>(products, 3), used = 0, grown = 0;
    Vec col(cap);
    std::vector<double> val(cap);
    for (int64_t next = range.first;;) {
      int64_t stop = -1;
      ASSERT_EQ(sf_csr_spgemm_rows_f64(col.data(), val.data(), cap, &used, row_nse.data(), &stop,
                                       bound.data(), a.crow.data(), a.col.data(), a.val.data(), m,
                                       k, nse_a, b.crow.data(), b.col.data(), b.val.data(), n,
                                       nse_b, acc.data(), bits.data(), next, range.second),
                SF_OK);
      ASSERT_GE(stop, next);
      if (stop == range.second) break;
      ASSERT_GT(bound[stop], cap - used);  // it stopped only where the row did not fit
      cap = std::max(2 * cap, used + bound[stop]);
      col.resize(cap);
      val.resize(cap);
      next = stop;
      ++grown;
    }
    if (range.second - range.first > 2 && products > 3) EXPECT_GT(grown, 0);
    col_c.insert(col_c.end(), col.begin(), col.begin() + used);
    val_c.insert(val_c.end(), val.begin(), val.begin() + used);
  }
  Vec crow_c(m + 1, 0);
  for (int64_t i = 0; i < m; ++i) {
    ASSERT_GE(row_nse[i], 0);
    ASSERT_LE(row_nse[i], bound[i]);
    crow_c[i + 1] = crow_c[i] + row_nse[i];
  }
  ASSERT_EQ(crow_c[m], (int64_t)col_c.size());
  ASSERT_EQ(sf_csr_check(nullptr, crow_c.data(), col_c.data(), m, n, crow_c[m]), SF_OK);
  auto expected = dense_mm(densify(a, nullptr, 0, nullptr), densify(b, nullptr, 0, nullptr), m, k, n);
  std::vector<double> got(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = crow_c[i]; q < crow_c[i + 1]; ++q) got[i * n + col_c[q]] = val_c[q];
  for (int64_t e = 0; e < m * n; ++e) ASSERT_NEAR(got[e], expected[e], 1e-12) << e;
  // A bound below a row's size is refused, never written past.
  int64_t widest = 0;
  for (int64_t i = 1; i < m; ++i) widest = row_nse[i] > row_nse[widest] ? i : widest;
  ASSERT_GT(row_nse[widest], 0);
  Vec short_bound = bound;
  short_bound[widest] = row_nse[widest] - 1;
  Vec col(crow_c[m]);
  std::vector<double> val(crow_c[m]);
  int64_t used = 0, stop = -1;
  EXPECT_EQ(sf_csr_spgemm_rows_f64(col.data(), val.data(), crow_c[m], &used, row_nse.data(), &stop,
                                   short_bound.data(), a.crow.data(), a.col.data(), a.val.data(),
                                   m, k, nse_a, b.crow.data(), b.col.data(), b.val.data(), n,
                                   nse_b, acc.data(), bits.data(), 0, m),
            SF_ERR_INVALID_ARGUMENT);
}

TEST(Products, SddmmSparse) {
  std::mt19937_64 rng(13);
  const int64_t m = 6, k = 5, n = 8;
  Csr p = random_csr(m, k, 0.5, rng), x = random_csr(m, n, 0.4, rng), s = random_csr(k, n, 0.4, rng);
  auto dx = densify(x, nullptr, 0, nullptr), ds = densify(s, nullptr, 0, nullptr);
  std::vector<double> out(p.val.size()), acc(n);
  ASSERT_EQ(sf_csr_sddmm_sparse_f64(out.data(), p.crow.data(), p.col.data(), m, k,
                                    (int64_t)p.val.size(), x.crow.data(), x.col.data(),
                                    x.val.data(), (int64_t)x.val.size(), s.crow.data(),
                                    s.col.data(), s.val.data(), (int64_t)s.val.size(), n,
                                    acc.data(), 0, m),
            SF_OK);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = p.crow[i]; q < p.crow[i + 1]; ++q) {
      double e = 0;
      for (int64_t t = 0; t < n; ++t) e += dx[i * n + t] * ds[p.col[q] * n + t];
      EXPECT_NEAR(out[q], e, 1e-12);
    }
  for (double v : acc) EXPECT_EQ(v, 0.0);  // scratch handed back clean
}

TEST(Products, MalformedIndicesAreRefused) {
  Vec crow{0, 2, 1}, good_col{0, 1}, col{0, 5};
  std::vector<double> val{1, 2}, b(6, 1.0), c(6);
  double fill = 0;
  // a decreasing row pointer
  EXPECT_EQ(sf_csr_spmm_f64(c.data(), 2, crow.data(), good_col.data(), val.data(), 2, 3, 2, b.data(), 2,
                            2, &fill, 0, nullptr, nullptr, nullptr, 0, 2, nullptr),
            SF_ERR_CROW_DECREASING);
  // a row pointer past nse, though non-decreasing
  Vec crow_far{0, 100, 100};
  EXPECT_EQ(sf_csr_spmm_f64(c.data(), 2, crow_far.data(), col.data(), val.data(), 2, 3, 2,
                            b.data(), 2, 2, &fill, 0, nullptr, nullptr, nullptr, 0, 2, nullptr),
            SF_ERR_CROW_DECREASING);
  // a column out of range
  Vec crow_ok{0, 1, 2};
  EXPECT_EQ(sf_csr_spmm_f64(c.data(), 2, crow_ok.data(), col.data(), val.data(), 2, 3, 2, b.data(),
                            2, 2, &fill, 0, nullptr, nullptr, nullptr, 0, 2, nullptr),
            SF_ERR_INDEX_OUT_OF_RANGE);
  std::vector<double> out(2);
  EXPECT_EQ(sf_csr_sddmm_f64(out.data(), crow_ok.data(), col.data(), 2, 3, 2, b.data(), 2,
                             b.data(), 2, 2, 0, 2),
            SF_ERR_INDEX_OUT_OF_RANGE);
  Vec crow_t(4), col_t(2), perm(2);
  EXPECT_EQ(sf_csr_transpose(crow_t.data(), col_t.data(), perm.data(), crow_ok.data(), col.data(),
                             2, 3, 2),
            SF_ERR_INDEX_OUT_OF_RANGE);
  // bad row ranges and missing pointers
  EXPECT_EQ(sf_csr_spmm_f64(c.data(), 2, crow_ok.data(), col.data(), val.data(), 2, 3, 2, b.data(),
                            2, 2, &fill, 0, nullptr, nullptr, nullptr, 1, 3, nullptr),
            SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_csr_spmm_f64(c.data(), 1, crow_ok.data(), col.data(), val.data(), 2, 3, 2, b.data(),
                            2, 2, &fill, 0, nullptr, nullptr, nullptr, 0, 2, nullptr),
            SF_ERR_INVALID_ARGUMENT);  // ldc < n
  EXPECT_EQ(sf_csr_spmm_f64(c.data(), 2, crow_ok.data(), nullptr, val.data(), 2, 3, 2, b.data(), 2,
                            2, &fill, 0, nullptr, nullptr, nullptr, 0, 2, nullptr),
            SF_ERR_NULL_POINTER);
  Vec row_bound(2);
  Vec bad_col{0, 7};
  EXPECT_EQ(sf_csr_spgemm_bounds(row_bound.data(), crow_ok.data(), bad_col.data(), 2, 3, 2,
                                 crow_ok.data(), 2, 0, 2),
            SF_ERR_INDEX_OUT_OF_RANGE);
  Vec bad_crow{0, 3, 2};  // B's row pointers past its nse
  EXPECT_EQ(sf_csr_spgemm_bounds(row_bound.data(), crow_ok.data(), good_col.data(), 2, 2, 2,
                                 bad_crow.data(), 2, 0, 2),
            SF_ERR_CROW_DECREASING);
  // a used count beyond the capacity is refused
  int64_t used = 5, stop = 0;
  uint64_t bits1[1];
  std::vector<double> acc1(3);
  Vec out_col(4);
  std::vector<double> out_val(4);
  EXPECT_EQ(sf_csr_spgemm_rows_f64(out_col.data(), out_val.data(), 4, &used, row_bound.data(),
                                   &stop, row_bound.data(), crow_ok.data(), col.data(), val.data(),
                                   2, 3, 2, crow_ok.data(), col.data(), val.data(), 3, 2,
                                   acc1.data(), bits1, 0, 2),
            SF_ERR_INVALID_ARGUMENT);
}

// The cancellation fact: per column sum |s_j x_jt| / max, the smallest over
// the columns with a non-zero finite product; non-finite products left out.
TEST(Products, DenseSpread) {
  // 3 x 2, row stride 3: column 0 = (1, -2, 4) -> 7/4; column 1 = (0, 0, 0) -> none
  std::vector<double> x{1, 0, 99, -2, 0, 99, 4, 0, 99}, cmax(2), csum(2);
  double spread = 0;
  ASSERT_EQ(sf_dense_spread_f64(&spread, cmax.data(), csum.data(), x.data(), 3, 2, 3, nullptr), SF_OK);
  EXPECT_DOUBLE_EQ(spread, 7.0 / 4.0);
  EXPECT_EQ(cmax[0], 4.0);
  EXPECT_EQ(cmax[1], 0.0);
  // a per-row scale: |(1, -2, 4) * (8, 1, 0)| = (8, 2, 0) -> 10/8; an
  // infinite product is not counted
  std::vector<double> s{8, 1, 0};
  ASSERT_EQ(sf_dense_spread_f64(&spread, cmax.data(), csum.data(), x.data(), 3, 2, 3, s.data()), SF_OK);
  EXPECT_DOUBLE_EQ(spread, 10.0 / 8.0);
  x[6] = INFINITY;
  s[2] = 1;
  ASSERT_EQ(sf_dense_spread_f64(&spread, cmax.data(), csum.data(), x.data(), 3, 2, 3, s.data()), SF_OK);
  EXPECT_DOUBLE_EQ(spread, 10.0 / 8.0);
  // a vector at stride 2 in float32 (products in double: no overflow)
  std::vector<float> v{3e38f, 7.f, 3e38f, 7.f}, fs{4.f, 4.f};
  ASSERT_EQ(sf_dense_spread_f32(&spread, cmax.data(), csum.data(), v.data(), 2, 1, 2, fs.data()), SF_OK);
  EXPECT_DOUBLE_EQ(spread, 2.0);
  // nothing non-zero: +inf; empty: +inf without reading anything
  std::vector<double> z(4, 0.0);
  ASSERT_EQ(sf_dense_spread_f64(&spread, cmax.data(), csum.data(), z.data(), 2, 2, 2, nullptr), SF_OK);
  EXPECT_EQ(spread, INFINITY);
  ASSERT_EQ(sf_dense_spread_f64(&spread, nullptr, nullptr, nullptr, 0, 2, 2, nullptr), SF_OK);
  EXPECT_EQ(spread, INFINITY);
  EXPECT_EQ(sf_dense_spread_f64(&spread, cmax.data(), csum.data(), z.data(), 2, 2, 1, nullptr),
            SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_dense_spread_f64(nullptr, cmax.data(), csum.data(), z.data(), 2, 2, 2, nullptr),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_dense_spread_f64(&spread, nullptr, csum.data(), z.data(), 2, 2, 2, nullptr),
            SF_ERR_NULL_POINTER);
}

// The range facts of the fast path: sf_dense_facts over a vector (strided)
// and a padded block, and the kernels' max |values| of their row range.
TEST(Products, RangeFacts) {
  std::mt19937_64 rng(11);
  const int64_t rows = 21, cols = 3, ld = 5;  // lanes of 8 and a tail
  std::vector<double> b = random_vec(rows * ld, rng);
  double want = 0, want_sum = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < cols; ++t) want = std::max(want, std::fabs(b[r * ld + t]));
  for (int64_t r = 0; r < rows; ++r) want_sum += b[r * ld + 1];
  double amax = -1, sum = NAN;
  ASSERT_EQ(sf_dense_facts_f64(&amax, nullptr, b.data(), rows, cols, ld), SF_OK);
  EXPECT_EQ(amax, want);
  // column 1 as a vector at stride ld: its own max and sum
  double col_max = 0;
  for (int64_t r = 0; r < rows; ++r) col_max = std::max(col_max, std::fabs(b[r * ld + 1]));
  ASSERT_EQ(sf_dense_facts_f64(&amax, &sum, b.data() + 1, rows, 1, ld), SF_OK);
  EXPECT_EQ(amax, col_max);
  EXPECT_NEAR(sum, want_sum, 1e-12);
  // a NaN anywhere gives NaN, an infinity inf; nothing gives 0
  b[7 * ld + 2] = NAN;
  ASSERT_EQ(sf_dense_facts_f64(&amax, nullptr, b.data(), rows, cols, ld), SF_OK);
  EXPECT_TRUE(std::isnan(amax));
  std::vector<float> f{1.f, -INFINITY, 2.f};
  float famax = 0, fsum = 0;
  ASSERT_EQ(sf_dense_facts_f32(&famax, &fsum, f.data(), 3, 1, 1), SF_OK);
  EXPECT_EQ(famax, INFINITY);
  EXPECT_EQ(fsum, -INFINITY);
  ASSERT_EQ(sf_dense_facts_f32(&famax, &fsum, nullptr, 0, 1, 1), SF_OK);
  EXPECT_EQ(famax, 0.f);
  EXPECT_EQ(fsum, 0.f);
  EXPECT_EQ(sf_dense_facts_f64(&amax, nullptr, b.data(), rows, cols, 2), SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_dense_facts_f64(nullptr, nullptr, b.data(), rows, cols, ld), SF_ERR_NULL_POINTER);

  // The kernels: max |values| over their own range only, NaN flagged.
  Vec crow{0, 2, 3, 7}, col{0, 2, 1, 0, 1, 2, 3};
  std::vector<double> val{1, -9, 4, 2, -3, 5, 6}, x{1, 1, 1, 1}, y(3), c(3 * 2);
  std::vector<double> b2(4 * 2, 1.0);
  const double fill = 0.5;
  double vmax = -1;
  ASSERT_EQ(sf_csr_spmv_f64(y.data(), 1, crow.data(), col.data(), val.data(), 3, 4, 7, x.data(), 1,
                            &fill, 0, nullptr, 4.0, 0.0, 1, 3, &vmax),
            SF_OK);
  EXPECT_EQ(vmax, 6.0);  // rows 1 and 2: 4, 2, -3, 5, 6 (row 0's -9 is not theirs)
  ASSERT_EQ(sf_csr_spmm_f64(c.data(), 2, crow.data(), col.data(), val.data(), 3, 4, 7, b2.data(), 2,
                            2, &fill, 0, nullptr, nullptr, nullptr, 0, 1, &vmax),
            SF_OK);
  EXPECT_EQ(vmax, 9.0);
  val[4] = NAN;
  ASSERT_EQ(sf_csr_spmv_f64(y.data(), 1, crow.data(), col.data(), val.data(), 3, 4, 7, x.data(), 1,
                            &fill, 0, nullptr, 4.0, 0.0, 2, 3, &vmax),
            SF_OK);
  EXPECT_TRUE(std::isnan(vmax));
  ASSERT_EQ(sf_csr_spmm_f64(c.data(), 2, crow.data(), col.data(), val.data(), 3, 4, 7, b2.data(), 2,
                            2, &fill, 0, nullptr, nullptr, nullptr, 2, 3, &vmax),
            SF_OK);
  EXPECT_TRUE(std::isnan(vmax));
  ASSERT_EQ(sf_csr_spmv_f64(y.data(), 1, crow.data(), col.data(), val.data(), 3, 4, 7, x.data(), 1,
                            &fill, 0, nullptr, 4.0, 0.0, 1, 1, &vmax),
            SF_OK);
  EXPECT_EQ(vmax, 0.0);  // an empty range
}

TEST(Products, EmptyOperands) {
  Vec crow{0, 0, 0};
  double fill = 2.0, colsum[3] = {1, 2, 3};
  std::vector<double> c(6, NAN);
  ASSERT_EQ(sf_csr_spmm_f64(c.data(), 3, crow.data(), nullptr, nullptr, 2, 0, 0, nullptr, 3, 3,
                            &fill, 0, nullptr, colsum, nullptr, 0, 2, nullptr),
            SF_OK);
  for (int64_t e = 0; e < 6; ++e) EXPECT_EQ(c[e], 2.0 * colsum[e % 3]);
  Vec crow_t(1);
  EXPECT_EQ(sf_csr_transpose(crow_t.data(), nullptr, nullptr, crow.data(), nullptr, 2, 0, 0), SF_OK);
  EXPECT_EQ(crow_t[0], 0);
}

}  // namespace
