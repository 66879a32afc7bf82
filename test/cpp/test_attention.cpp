// GoogleTest of the fused sparse attention kernel (sf_csr_attention in
// sf_products.c) against a naive reference written here: scores on the
// stored elements, a two-pass softmax per row, the weighted sum of V rows.
// Empty rows, rows of -inf only, nan and +inf scores, row ranges, both
// dtypes and malformed index data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "sparsefill_core.h"

namespace {

using Vec = std::vector<int64_t>;
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Problem {
  int64_t m, n, e, dv;
  Vec crow, col;
  std::vector<double> bias, q, k, v;
};

Problem random_problem(int64_t m, int64_t n, int64_t e, int64_t dv, double density,
                       std::mt19937_64& rng) {
  Problem p{m, n, e, dv, Vec(m + 1, 0), {}, {}, {}, {}, {}};
  std::uniform_real_distribution<double> u(0, 1), x(-1, 1);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j)
      if (i != 1 && u(rng) < density) {  // row 1 stays empty
        p.col.push_back(j);
        p.bias.push_back(x(rng));
      }
    p.crow[i + 1] = (int64_t)p.col.size();
  }
  for (auto* t : {&p.q, &p.k, &p.v}) {
    const int64_t rows = t == &p.q ? m : n, cols = t == &p.v ? dv : e;
    for (int64_t a = 0; a < rows * cols; ++a) t->push_back(x(rng));
  }
  return p;
}

// The naive computation: scores, max, sum of exps, weighted sum.
void reference(const Problem& p, double scale, std::vector<double>& out,
               std::vector<double>& lse) {
  out.assign(p.m * p.dv, 0.0);
  lse.assign(p.m, -kInf);
  for (int64_t i = 0; i < p.m; ++i) {
    std::vector<double> s;
    double top = -kInf;
    bool nan = false;
    for (int64_t a = p.crow[i]; a < p.crow[i + 1]; ++a) {
      double d = 0;
      for (int64_t t = 0; t < p.e; ++t) d += p.q[i * p.e + t] * p.k[p.col[a] * p.e + t];
      s.push_back(scale * d + p.bias[a]);
      nan |= std::isnan(s.back()) || s.back() == kInf;
      top = std::max(top, s.back());
    }
    if (nan) {
      for (int64_t t = 0; t < p.dv; ++t) out[i * p.dv + t] = NAN;
      lse[i] = NAN;
      continue;
    }
    if (top == -kInf) continue;  // weights 0
    double total = 0;
    for (double x : s) total += std::exp(x - top);
    for (int64_t a = p.crow[i]; a < p.crow[i + 1]; ++a) {
      const double w = std::exp(s[a - p.crow[i]] - top) / total;
      for (int64_t t = 0; t < p.dv; ++t) out[i * p.dv + t] += w * p.v[p.col[a] * p.dv + t];
    }
    lse[i] = top + std::log(total);
  }
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t a = 0; a < got.size(); ++a) {
    if (std::isnan(want[a])) {
      EXPECT_TRUE(std::isnan(got[a])) << "at " << a;
    } else if (std::isinf(want[a])) {
      EXPECT_EQ(got[a], want[a]) << "at " << a;
    } else {
      EXPECT_NEAR(got[a], want[a], tol * (1 + std::fabs(want[a]))) << "at " << a;
    }
  }
}

sf_status run_f64(const Problem& p, double scale, std::vector<double>& out,
                  std::vector<double>& lse, int64_t r0, int64_t r1, bool bias = true) {
  return sf_csr_attention_f64(out.data(), p.dv, lse.data(), p.crow.data(), p.col.data(),
                              bias ? p.bias.data() : nullptr, p.m, p.n,
                              (int64_t)p.col.size(), p.q.data(), p.e, p.k.data(), p.e,
                              p.v.data(), p.dv, p.e, p.dv, scale, r0, r1);
}

TEST(Attention, MatchesTheNaiveReferenceInRowRanges) {
  std::mt19937_64 rng(7);
  Problem p = random_problem(9, 13, 5, 3, 0.4, rng);
  std::vector<double> want_out, want_lse;
  reference(p, 0.7, want_out, want_lse);
  std::vector<double> out(p.m * p.dv, -9), lse(p.m, -9);
  ASSERT_EQ(run_f64(p, 0.7, out, lse, 0, 4), SF_OK);
  ASSERT_EQ(run_f64(p, 0.7, out, lse, 4, p.m), SF_OK);
  expect_close(out, want_out, 1e-12);
  expect_close(lse, want_lse, 1e-12);
  EXPECT_EQ(lse[1], -kInf);  // the empty row
  for (int64_t t = 0; t < p.dv; ++t) EXPECT_EQ(out[p.dv + t], 0.0);
}

TEST(Attention, WithoutBias) {
  std::mt19937_64 rng(8);
  Problem p = random_problem(6, 7, 4, 2, 0.5, rng);
  std::vector<double> out(p.m * p.dv), lse(p.m);
  ASSERT_EQ(run_f64(p, 1.0, out, lse, 0, p.m, false), SF_OK);
  std::fill(p.bias.begin(), p.bias.end(), 0.0);
  std::vector<double> want_out, want_lse;
  reference(p, 1.0, want_out, want_lse);
  expect_close(out, want_out, 1e-12);
  expect_close(lse, want_lse, 1e-12);
}

TEST(Attention, NonFiniteScores) {
  std::mt19937_64 rng(9);
  Problem p = random_problem(6, 8, 3, 2, 0.6, rng);
  // Row 0: only -inf (weights 0); row 2: one -inf among finite scores;
  // row 3: a nan; row 4: a +inf (exp(inf - inf) makes the dense row nan).
  for (int64_t a = p.crow[0]; a < p.crow[1]; ++a) p.bias[a] = -kInf;
  ASSERT_GT(p.crow[3] - p.crow[2], 1);
  ASSERT_GT(p.crow[5] - p.crow[4], 1);
  p.bias[p.crow[2]] = -kInf;
  p.bias[p.crow[3]] = NAN;
  p.bias[p.crow[4] + 1] = kInf;
  std::vector<double> want_out, want_lse;
  reference(p, 0.5, want_out, want_lse);
  std::vector<double> out(p.m * p.dv), lse(p.m);
  ASSERT_EQ(run_f64(p, 0.5, out, lse, 0, p.m), SF_OK);
  expect_close(out, want_out, 1e-12);
  expect_close(lse, want_lse, 1e-12);
  EXPECT_EQ(lse[0], -kInf);
  EXPECT_TRUE(std::isnan(out[3 * p.dv]) && std::isnan(out[4 * p.dv]));
}

TEST(Attention, Float) {
  std::mt19937_64 rng(10);
  Problem p = random_problem(7, 9, 6, 4, 0.4, rng);
  std::vector<double> want_out, want_lse;
  reference(p, 0.3, want_out, want_lse);
  auto f = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
  std::vector<float> q = f(p.q), k = f(p.k), v = f(p.v), bias = f(p.bias);
  std::vector<float> out(p.m * p.dv), lse(p.m);
  ASSERT_EQ(sf_csr_attention_f32(out.data(), p.dv, lse.data(), p.crow.data(), p.col.data(),
                                 bias.data(), p.m, p.n, (int64_t)p.col.size(), q.data(), p.e,
                                 k.data(), p.e, v.data(), p.dv, p.e, p.dv, 0.3f, 0, p.m),
            SF_OK);
  expect_close(std::vector<double>(out.begin(), out.end()), want_out, 1e-5);
  expect_close(std::vector<double>(lse.begin(), lse.end()), want_lse, 1e-5);
}

TEST(Attention, MalformedInputIsRefused) {
  std::mt19937_64 rng(11);
  Problem p = random_problem(4, 5, 2, 2, 0.6, rng);
  std::vector<double> out(p.m * p.dv), lse(p.m);
  Problem bad = p;
  bad.col[0] = p.n;  // a column outside [0, n)
  EXPECT_EQ(run_f64(bad, 1.0, out, lse, 0, p.m), SF_ERR_INDEX_OUT_OF_RANGE);
  bad = p;
  bad.crow[2] = bad.crow[1] - 1;  // decreasing row pointers
  EXPECT_EQ(run_f64(bad, 1.0, out, lse, 0, p.m), SF_ERR_CROW_DECREASING);
  EXPECT_EQ(run_f64(p, 1.0, out, lse, 2, 1), SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_csr_attention_f64(out.data(), p.dv, nullptr, p.crow.data(), p.col.data(), nullptr,
                                 p.m, p.n, (int64_t)p.col.size(), p.q.data(), p.e, p.k.data(),
                                 p.e, p.v.data(), p.dv, p.e, p.dv, 1.0, 0, p.m),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_csr_attention_f64(out.data(), 1, lse.data(), p.crow.data(), p.col.data(), nullptr,
                                 p.m, p.n, (int64_t)p.col.size(), p.q.data(), p.e, p.k.data(),
                                 p.e, p.v.data(), p.dv, p.e, p.dv, 1.0, 0, p.m),
            SF_ERR_INVALID_ARGUMENT);  // ldo < dv
}

}  // namespace
