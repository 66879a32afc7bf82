// GoogleTest of the C core's BSR product (sf_bsr.c) against a naive dense
// reference written here: block shapes that hit the full tiles and the
// edges, a fill or none, split block-row ranges (the same bits), padded
// strides, both dtypes, and malformed index data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "sparsefill_core.h"

namespace {

using Vec = std::vector<int64_t>;

struct Bsr {
  int64_t nbrows, nbcols, r, c;
  Vec crow, col;
  std::vector<double> val;  // nblocks x r x c
};

Bsr random_bsr(int64_t nbrows, int64_t nbcols, int64_t r, int64_t c, double density,
               std::mt19937_64& rng) {
  Bsr a{nbrows, nbcols, r, c, Vec(nbrows + 1, 0), {}, {}};
  std::uniform_real_distribution<double> u(0, 1), v(-2, 2);
  for (int64_t i = 0; i < nbrows; ++i) {
    for (int64_t j = 0; j < nbcols; ++j) {
      if (u(rng) < density) {
        a.col.push_back(j);
        for (int64_t e = 0; e < r * c; ++e) a.val.push_back(v(rng));
      }
    }
    a.crow[i + 1] = (int64_t)a.col.size();
  }
  return a;
}

// The dense matrix: the blocks where stored, f elsewhere.
std::vector<double> densify(const Bsr& a, double f) {
  const int64_t m = a.nbrows * a.r, k = a.nbcols * a.c;
  std::vector<double> d(m * k, f);
  for (int64_t i = 0; i < a.nbrows; ++i)
    for (int64_t p = a.crow[i]; p < a.crow[i + 1]; ++p)
      for (int64_t u = 0; u < a.r; ++u)
        for (int64_t v = 0; v < a.c; ++v)
          d[(i * a.r + u) * k + a.col[p] * a.c + v] = a.val[(p * a.r + u) * a.c + v];
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

template <class T>
std::vector<T> cast(const std::vector<double>& x) {
  return std::vector<T>(x.begin(), x.end());
}

// C through the core, block rows split at `split`, row strides padded by `pad`.
template <class T, class F>
std::vector<double> run(F spmm, const Bsr& a, const std::vector<double>& b, int64_t n, double f,
                        bool with_fill, int64_t split, int64_t pad) {
  const int64_t m = a.nbrows * a.r, k = a.nbcols * a.c, ldb = n + pad, ldc = n + pad;
  std::vector<T> bb(k * ldb, T(1e30)), cc(m * ldc, T(-7)), val = cast<T>(a.val);
  for (int64_t j = 0; j < k; ++j)
    for (int64_t t = 0; t < n; ++t) bb[j * ldb + t] = (T)b[j * n + t];
  std::vector<T> colsum(n, 0);
  for (int64_t j = 0; j < k; ++j)
    for (int64_t t = 0; t < n; ++t) colsum[t] += bb[j * ldb + t];
  const T fill = (T)f;
  const int64_t nb = (int64_t)a.col.size();
  for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, split}, {split, a.nbrows}}) {
    EXPECT_EQ(spmm(cc.data(), ldc, a.crow.data(), a.col.data(), val.data(), a.nbrows, a.nbcols,
                   nb, a.r, a.c, bb.data(), ldb, n, with_fill ? &fill : nullptr,
                   with_fill ? colsum.data() : nullptr, lo, hi),
              SF_OK);
  }
  std::vector<double> out(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t t = 0; t < n; ++t) out[i * n + t] = cc[i * ldc + t];
  return out;
}

TEST(Bsr, SpmmMatchesDense) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> g(0, 1);
  // (r, c, n): full tiles only, edges in rows, in columns, both; 1 x 1 blocks.
  for (auto [r, c, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {4, 4, 16}, {16, 16, 32}, {3, 5, 7}, {8, 2, 19}, {5, 8, 40}, {1, 1, 3}, {2, 3, 1}}) {
    for (double density : {0.0, 0.3, 1.0}) {
      Bsr a = random_bsr(5, 4, r, c, density, rng);
      const int64_t m = a.nbrows * r, k = a.nbcols * c;
      std::vector<double> b(k * n);
      for (auto& x : b) x = g(rng);
      for (double f : {0.0, 1.5, -0.25}) {
        std::vector<double> want = dense_mm(densify(a, f), b, m, k, n);
        for (int64_t split : {int64_t(0), int64_t(2), a.nbrows}) {
          for (int64_t pad : {int64_t(0), int64_t(3)}) {
            auto got64 = run<double>(sf_bsr_spmm_f64, a, b, n, f, true, split, pad);
            auto got32 = run<float>(sf_bsr_spmm_f32, a, b, n, f, true, split, pad);
            for (int64_t e = 0; e < m * n; ++e) {
              ASSERT_NEAR(got64[e], want[e], 1e-10 * (1 + std::abs(want[e])))
                  << "r=" << r << " c=" << c << " n=" << n << " f=" << f << " e=" << e;
              ASSERT_NEAR(got32[e], want[e], 1e-4 * (1 + std::abs(want[e])));
            }
          }
        }
        if (f == 0.0) {  // no fill pointer: fill 0, no correction
          auto got = run<double>(sf_bsr_spmm_f64, a, b, n, 0.0, false, 1, 0);
          for (int64_t e = 0; e < m * n; ++e) ASSERT_NEAR(got[e], want[e], 1e-10);
        }
      }
    }
  }
}

TEST(Bsr, SplitGivesTheSameBits) {
  std::mt19937_64 rng(9);
  std::normal_distribution<double> g(0, 1);
  Bsr a = random_bsr(7, 6, 16, 16, 0.4, rng);
  std::vector<double> b(6 * 16 * 24);
  for (auto& x : b) x = g(rng);
  auto whole = run<float>(sf_bsr_spmm_f32, a, b, 24, 0.5, true, 0, 0);
  for (int64_t split = 1; split < 7; ++split)
    EXPECT_EQ(run<float>(sf_bsr_spmm_f32, a, b, 24, 0.5, true, split, 0), whole);
}

TEST(Bsr, MalformedIndicesAreRefused) {
  // 2 x 2 block rows and columns of 2 x 2 blocks, 4 x 3 dense operand.
  std::vector<double> val(3 * 4, 1.0), b(4 * 3, 1.0), c(4 * 3);
  auto call = [&](const Vec& crow, const Vec& col, int64_t lo, int64_t hi) {
    return sf_bsr_spmm_f64(c.data(), 3, crow.data(), col.data(), val.data(), 2, 2,
                           (int64_t)col.size(), 2, 2, b.data(), 3, 3, nullptr, nullptr, lo, hi);
  };
  EXPECT_EQ(call({0, 2, 3}, {0, 1, 1}, 0, 2), SF_OK);
  EXPECT_EQ(call({0, 2, 3}, {0, 2, 1}, 0, 2), SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(call({0, 2, 3}, {0, 1, -1}, 0, 2), SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(call({0, 3, 2}, {0, 1, 1}, 0, 2), SF_ERR_CROW_DECREASING);
  EXPECT_EQ(call({0, 2, 4}, {0, 1, 1}, 0, 2), SF_ERR_CROW_DECREASING);
  EXPECT_EQ(call({-1, 2, 3}, {0, 1, 1}, 0, 1), SF_ERR_CROW_DECREASING);
  EXPECT_EQ(call({0, 2, 3}, {0, 1, 1}, 1, 3), SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(call({0, 2, 3}, {0, 1, 1}, 2, 1), SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_bsr_spmm_f64(c.data(), 2, nullptr, nullptr, nullptr, 2, 2, 0, 2, 2, b.data(), 3,
                            3, nullptr, nullptr, 0, 2),
            SF_ERR_INVALID_ARGUMENT);  // ldc < n
  EXPECT_EQ(sf_bsr_spmm_f64(c.data(), 3, nullptr, nullptr, nullptr, 2, 2, 0, 2, 2, b.data(), 3,
                            3, nullptr, nullptr, 0, 2),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_bsr_spmm_f64(c.data(), 3, nullptr, nullptr, nullptr, -1, 2, 0, 2, 2, b.data(), 3,
                            3, nullptr, nullptr, 0, 0),
            SF_ERR_NEGATIVE_SIZE);
  // An empty range reads nothing.
  EXPECT_EQ(sf_bsr_spmm_f64(c.data(), 3, nullptr, nullptr, nullptr, 2, 2, 0, 2, 2, b.data(), 3,
                            3, nullptr, nullptr, 1, 1),
            SF_OK);
}

}  // namespace
