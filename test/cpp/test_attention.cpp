// GoogleTest of the fused sparse attention kernels (sf_csr_attention and
// its backward, sf_csr_attention_backward_rows/_cols, in sf_products.c)
// against a naive reference written here: scores on the stored elements, a
// two-pass softmax per row, the weighted sum of V rows; for the backward the
// softmax's gradient element by element. Empty rows, rows of -inf only, nan
// and +inf scores, batches sharing the pattern (with one bias or one per
// batch), row ranges (results identical however split), both dtypes and
// malformed index data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "sparsefill_core.h"

namespace {

using Vec = std::vector<int64_t>;
constexpr double kInf = std::numeric_limits<double>::infinity();

// nb batches sharing the pattern: q holds nb * m rows, k and v nb * n; bias
// holds nse values (bias_stride 0) or nb * nse (bias_stride nse).
struct Problem {
  int64_t m, n, e, dv, nb = 1, bias_stride = 0;
  Vec crow, col;
  std::vector<double> bias, q, k, v;
  int64_t nse() const { return (int64_t)col.size(); }
  double bias_at(int64_t b, int64_t a) const { return bias[b * bias_stride + a]; }
};

Problem random_problem(int64_t m, int64_t n, int64_t e, int64_t dv, double density,
                       std::mt19937_64& rng, int64_t nb = 1, bool bias_per_batch = false) {
  Problem p{m, n, e, dv, nb, 0, Vec(m + 1, 0), {}, {}, {}, {}, {}};
  std::uniform_real_distribution<double> u(0, 1), x(-1, 1);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j)
      if (i != 1 && u(rng) < density) p.col.push_back(j);  // row 1 stays empty
    p.crow[i + 1] = (int64_t)p.col.size();
  }
  p.bias_stride = bias_per_batch ? p.nse() : 0;
  for (int64_t a = 0; a < (bias_per_batch ? nb : 1) * p.nse(); ++a) p.bias.push_back(x(rng));
  for (auto* t : {&p.q, &p.k, &p.v}) {
    const int64_t rows = nb * (t == &p.q ? m : n), cols = t == &p.v ? dv : e;
    for (int64_t a = 0; a < rows * cols; ++a) t->push_back(x(rng));
  }
  return p;
}

// The stored scores of row i of batch b.
std::vector<double> scores(const Problem& p, double scale, int64_t b, int64_t i) {
  std::vector<double> s;
  for (int64_t a = p.crow[i]; a < p.crow[i + 1]; ++a) {
    double d = 0;
    for (int64_t t = 0; t < p.e; ++t)
      d += p.q[(b * p.m + i) * p.e + t] * p.k[(b * p.n + p.col[a]) * p.e + t];
    s.push_back(scale * d + (p.bias.empty() ? 0.0 : p.bias_at(b, a)));
  }
  return s;
}

// Their softmax, two passes: weights 0 when all are -inf (or none), nan
// when one is nan or +inf.
std::vector<double> softmax(const std::vector<double>& s, double* lse) {
  double top = -kInf;
  bool nan = false;
  for (double x : s) {
    nan |= std::isnan(x) || x == kInf;
    top = std::max(top, x);
  }
  std::vector<double> w(s.size(), 0.0);
  if (nan) {
    std::fill(w.begin(), w.end(), NAN);
    *lse = NAN;
    return w;
  }
  *lse = -kInf;
  if (top == -kInf) return w;
  double total = 0;
  for (double x : s) total += std::exp(x - top);
  for (size_t a = 0; a < s.size(); ++a) w[a] = std::exp(s[a] - top) / total;
  *lse = top + std::log(total);
  return w;
}

// The naive computation: scores, max, sum of exps, weighted sum.
void reference(const Problem& p, double scale, std::vector<double>& out,
               std::vector<double>& lse) {
  out.assign(p.nb * p.m * p.dv, 0.0);
  lse.assign(p.nb * p.m, -kInf);
  for (int64_t b = 0; b < p.nb; ++b)
    for (int64_t i = 0; i < p.m; ++i) {
      const int64_t r = b * p.m + i;
      const std::vector<double> w = softmax(scores(p, scale, b, i), &lse[r]);
      for (int64_t a = p.crow[i]; a < p.crow[i + 1]; ++a)
        for (int64_t t = 0; t < p.dv; ++t)
          out[r * p.dv + t] += w[a - p.crow[i]] * p.v[(b * p.n + p.col[a]) * p.dv + t];
      if (std::isnan(lse[r]))
        for (int64_t t = 0; t < p.dv; ++t) out[r * p.dv + t] = NAN;
    }
}

struct Grads {
  std::vector<double> dq, dk, dv, ds;
};

// The gradients of out (given g) and lse (given g_lse, or none), element by
// element: dV += w g, dw = g . V, ds = w (dw - sum w dw + g_lse), dQ +=
// scale ds K, dK += scale ds Q.
Grads reference_backward(const Problem& p, double scale, const std::vector<double>& g,
                         const std::vector<double>* g_lse) {
  Grads r{std::vector<double>(p.nb * p.m * p.e, 0.0), std::vector<double>(p.nb * p.n * p.e, 0.0),
          std::vector<double>(p.nb * p.n * p.dv, 0.0), std::vector<double>(p.nb * p.nse(), 0.0)};
  for (int64_t b = 0; b < p.nb; ++b)
    for (int64_t i = 0; i < p.m; ++i) {
      const int64_t row = b * p.m + i, lo = p.crow[i];
      double lse;
      const std::vector<double> w = softmax(scores(p, scale, b, i), &lse);
      std::vector<double> dw;
      double sum = 0;
      for (int64_t a = lo; a < p.crow[i + 1]; ++a) {
        double d = 0;
        for (int64_t t = 0; t < p.dv; ++t)
          d += g[row * p.dv + t] * p.v[(b * p.n + p.col[a]) * p.dv + t];
        dw.push_back(d);
        sum += w[a - lo] * d;
      }
      for (int64_t a = lo; a < p.crow[i + 1]; ++a) {
        const int64_t c = b * p.n + p.col[a];
        const double wa = w[a - lo];
        const double ds = wa * (dw[a - lo] - sum + (g_lse ? (*g_lse)[row] : 0.0));
        r.ds[b * p.nse() + a] = ds;
        for (int64_t t = 0; t < p.dv; ++t) r.dv[c * p.dv + t] += wa * g[row * p.dv + t];
        for (int64_t t = 0; t < p.e; ++t) {
          r.dq[row * p.e + t] += scale * ds * p.k[c * p.e + t];
          r.dk[c * p.e + t] += scale * ds * p.q[row * p.e + t];
        }
      }
    }
  return r;
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
                              bias ? p.bias.data() : nullptr, p.bias_stride, p.m, p.n, p.nse(),
                              p.nb, p.q.data(), p.e, p.k.data(), p.e, p.v.data(), p.dv, p.e,
                              p.dv, scale, r0, r1);
}

// The backward in the given splits of rows and columns (each a list of
// range bounds over nb * m and nb * n).
template <class T>
sf_status run_backward(const Problem& p, T scale, const std::vector<T>& q, const std::vector<T>& k,
                       const std::vector<T>& v, const std::vector<T>& bias,
                       const std::vector<T>& lse, const std::vector<T>& g,
                       const std::vector<std::common_type_t<T>>* g_lse,  // not deduced: nullptr
                       const Vec& row_split, const Vec& col_split,
                       std::vector<T>& dq, std::vector<T>& dk, std::vector<T>& dv,
                       std::vector<T>& ds) {
  const int64_t nse = p.nse();
  Vec crow_t(p.n + 1), row_t(nse), perm(nse);
  sf_status st = sf_csr_transpose(crow_t.data(), row_t.data(), perm.data(), p.crow.data(),
                                  p.col.data(), p.m, p.n, nse);
  if (st != SF_OK) return st;
  dq.assign(p.nb * p.m * p.e, -7);
  dk.assign(p.nb * p.n * p.e, -7);
  dv.assign(p.nb * p.n * p.dv, -7);
  ds.assign(p.nb * nse, -7);
  std::vector<T> w(p.nb * nse, -7);
  const T* gl = g_lse ? g_lse->data() : nullptr;
  const T* b = bias.empty() ? nullptr : bias.data();
  for (size_t c = 0; c + 1 < row_split.size(); ++c) {
    if constexpr (std::is_same_v<T, double>)
      st = sf_csr_attention_backward_rows_f64(
          dq.data(), p.e, ds.data(), w.data(), p.crow.data(), p.col.data(), b, p.bias_stride,
          p.m, p.n, nse, p.nb, q.data(), p.e, k.data(), p.e, v.data(), p.dv, lse.data(),
          g.data(), p.dv, gl, p.e, p.dv, scale, row_split[c], row_split[c + 1]);
    else
      st = sf_csr_attention_backward_rows_f32(
          dq.data(), p.e, ds.data(), w.data(), p.crow.data(), p.col.data(), b, p.bias_stride,
          p.m, p.n, nse, p.nb, q.data(), p.e, k.data(), p.e, v.data(), p.dv, lse.data(),
          g.data(), p.dv, gl, p.e, p.dv, scale, row_split[c], row_split[c + 1]);
    if (st != SF_OK) return st;
  }
  for (size_t c = 0; c + 1 < col_split.size(); ++c) {
    if constexpr (std::is_same_v<T, double>)
      st = sf_csr_attention_backward_cols_f64(
          dk.data(), p.e, dv.data(), p.dv, crow_t.data(), row_t.data(), perm.data(), p.m, p.n,
          nse, p.nb, ds.data(), w.data(), q.data(), p.e, g.data(), p.dv, p.e, p.dv, scale,
          col_split[c], col_split[c + 1]);
    else
      st = sf_csr_attention_backward_cols_f32(
          dk.data(), p.e, dv.data(), p.dv, crow_t.data(), row_t.data(), perm.data(), p.m, p.n,
          nse, p.nb, ds.data(), w.data(), q.data(), p.e, g.data(), p.dv, p.e, p.dv, scale,
          col_split[c], col_split[c + 1]);
    if (st != SF_OK) return st;
  }
  return SF_OK;
}

std::vector<double> random_vector(int64_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> x(-1, 1);
  std::vector<double> out(n);
  for (auto& a : out) a = x(rng);
  return out;
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
                                 bias.data(), 0, p.m, p.n, p.nse(), 1, q.data(), p.e, k.data(),
                                 p.e, v.data(), p.dv, p.e, p.dv, 0.3f, 0, p.m),
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
                                 0, p.m, p.n, p.nse(), 1, p.q.data(), p.e, p.k.data(), p.e,
                                 p.v.data(), p.dv, p.e, p.dv, 1.0, 0, p.m),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_csr_attention_f64(out.data(), 1, lse.data(), p.crow.data(), p.col.data(), nullptr,
                                 0, p.m, p.n, p.nse(), 1, p.q.data(), p.e, p.k.data(), p.e,
                                 p.v.data(), p.dv, p.e, p.dv, 1.0, 0, p.m),
            SF_ERR_INVALID_ARGUMENT);  // ldo < dv
  EXPECT_EQ(sf_csr_attention_f64(out.data(), p.dv, lse.data(), p.crow.data(), p.col.data(),
                                 p.bias.data(), 1, p.m, p.n, p.nse(), 1, p.q.data(), p.e,
                                 p.k.data(), p.e, p.v.data(), p.dv, p.e, p.dv, 1.0, 0, p.m),
            SF_ERR_INVALID_ARGUMENT);  // a bias stride other than 0 or nse
  EXPECT_EQ(sf_csr_attention_f64(out.data(), p.dv, lse.data(), p.crow.data(), p.col.data(),
                                 nullptr, 0, p.m, p.n, p.nse(), -1, p.q.data(), p.e, p.k.data(),
                                 p.e, p.v.data(), p.dv, p.e, p.dv, 1.0, 0, 0),
            SF_ERR_NEGATIVE_SIZE);
}

// Rows longer than the forward's blocks of 32 scores: a larger max in a
// later block rescales what is summed; a block of -inf only is skipped, but
// a nan in it still makes the row nan.
TEST(Attention, LongRowsAcrossBlocks) {
  std::mt19937_64 rng(14);
  Problem p = random_problem(5, 150, 5, 3, 0.9, rng, 2);
  for (int64_t a = 0; a < p.nse(); ++a) p.bias[a] *= 10 * (double)(a % 7);
  ASSERT_GT(p.crow[3] - p.crow[2], 70);
  for (int64_t a = p.crow[2]; a < p.crow[3]; ++a) p.bias[a] = -kInf;
  p.bias[p.crow[2] + 40] = NAN;  // row 2: -inf everywhere but one nan in block 2
  for (int64_t a = p.crow[3]; a < p.crow[3] + 40; ++a) p.bias[a] = -kInf;  // row 3 starts -inf
  p.bias[p.crow[4] + 65] = kInf;  // row 4: +inf in block 3
  std::vector<double> want_out, want_lse;
  reference(p, 0.9, want_out, want_lse);
  std::vector<double> out(p.nb * p.m * p.dv), lse(p.nb * p.m);
  ASSERT_EQ(run_f64(p, 0.9, out, lse, 0, p.nb * p.m), SF_OK);
  expect_close(out, want_out, 1e-12);
  expect_close(lse, want_lse, 1e-12);
  EXPECT_TRUE(std::isnan(lse[2]) && std::isnan(lse[4]) && std::isfinite(lse[3]));
  const std::vector<double> g = random_vector(p.nb * p.m * p.dv, rng);
  const Grads want = reference_backward(p, 0.9, g, nullptr);
  std::vector<double> dq, dk, dv, ds;
  ASSERT_EQ(run_backward(p, 0.9, p.q, p.k, p.v, p.bias, lse, g, nullptr, {0, 3, p.nb * p.m},
                         {0, 77, p.nb * p.n}, dq, dk, dv, ds),
            SF_OK);
  expect_close(dq, want.dq, 1e-12);
  expect_close(dk, want.dk, 1e-12);
  expect_close(dv, want.dv, 1e-12);
  expect_close(ds, want.ds, 1e-12);
}

TEST(Attention, BatchesShareThePattern) {
  for (bool per_batch : {false, true}) {
    std::mt19937_64 rng(12 + per_batch);
    Problem p = random_problem(6, 7, 5, 3, 0.5, rng, 3, per_batch);
    std::vector<double> want_out, want_lse;
    reference(p, 0.6, want_out, want_lse);
    std::vector<double> out(p.nb * p.m * p.dv, -9), lse(p.nb * p.m, -9);
    // Ranges that cut through batches.
    ASSERT_EQ(run_f64(p, 0.6, out, lse, 0, 4), SF_OK);
    ASSERT_EQ(run_f64(p, 0.6, out, lse, 4, 13), SF_OK);
    ASSERT_EQ(run_f64(p, 0.6, out, lse, 13, p.nb * p.m), SF_OK);
    expect_close(out, want_out, 1e-12);
    expect_close(lse, want_lse, 1e-12);
  }
}

// The backward against the reference, with g_lse and without, in one range
// and in ranges that cut through batches: the split changes no bit.
TEST(AttentionBackward, MatchesTheReferenceWhateverTheSplit) {
  for (bool per_batch : {false, true})
    for (bool with_lse : {false, true}) {
      std::mt19937_64 rng(20 + 2 * per_batch + with_lse);
      Problem p = random_problem(7, 9, 4, 3, 0.4, rng, 2, per_batch);
      const double scale = 0.8;
      std::vector<double> out(p.nb * p.m * p.dv), lse(p.nb * p.m);
      ASSERT_EQ(run_f64(p, scale, out, lse, 0, p.nb * p.m), SF_OK);
      const std::vector<double> g = random_vector(p.nb * p.m * p.dv, rng);
      const std::vector<double> gl = random_vector(p.nb * p.m, rng);
      const std::vector<double>* g_lse = with_lse ? &gl : nullptr;
      const Grads want = reference_backward(p, scale, g, g_lse);
      std::vector<double> dq, dk, dv, ds, dq2, dk2, dv2, ds2;
      ASSERT_EQ(run_backward(p, scale, p.q, p.k, p.v, p.bias, lse, g, g_lse,
                             {0, p.nb * p.m}, {0, p.nb * p.n}, dq, dk, dv, ds),
                SF_OK);
      expect_close(dq, want.dq, 1e-12);
      expect_close(dk, want.dk, 1e-12);
      expect_close(dv, want.dv, 1e-12);
      expect_close(ds, want.ds, 1e-12);
      ASSERT_EQ(run_backward(p, scale, p.q, p.k, p.v, p.bias, lse, g, g_lse,
                             {0, 1, 5, 8, 11, p.nb * p.m}, {0, 4, 10, 11, p.nb * p.n}, dq2, dk2,
                             dv2, ds2),
                SF_OK);
      EXPECT_EQ(dq, dq2);
      EXPECT_EQ(dk, dk2);
      EXPECT_EQ(dv, dv2);
      EXPECT_EQ(ds, ds2);
    }
}

TEST(AttentionBackward, NonFiniteScores) {
  std::mt19937_64 rng(30);
  Problem p = random_problem(6, 8, 3, 2, 0.6, rng);
  // Row 0: only -inf (weights 0, gradients 0); row 2: one -inf among finite
  // scores; row 3: a nan (the row's gradients nan, as the dense softmax's).
  for (int64_t a = p.crow[0]; a < p.crow[1]; ++a) p.bias[a] = -kInf;
  ASSERT_GT(p.crow[3] - p.crow[2], 1);
  p.bias[p.crow[2]] = -kInf;
  p.bias[p.crow[3]] = NAN;
  std::vector<double> out(p.m * p.dv), lse(p.m);
  ASSERT_EQ(run_f64(p, 0.5, out, lse, 0, p.m), SF_OK);
  const std::vector<double> g = random_vector(p.m * p.dv, rng);
  const Grads want = reference_backward(p, 0.5, g, nullptr);
  std::vector<double> dq, dk, dv, ds;
  ASSERT_EQ(run_backward(p, 0.5, p.q, p.k, p.v, p.bias, lse, g, nullptr, {0, p.m}, {0, p.n}, dq,
                         dk, dv, ds),
            SF_OK);
  for (int64_t a = p.crow[0]; a < p.crow[1]; ++a) EXPECT_EQ(ds[a], 0.0);
  for (int64_t t = 0; t < p.e; ++t) EXPECT_EQ(dq[t], 0.0);
  EXPECT_EQ(ds[p.crow[2]], 0.0);
  EXPECT_TRUE(std::isnan(dq[3 * p.e]));
  expect_close(dq, want.dq, 1e-12);
  expect_close(dk, want.dk, 1e-12);
  expect_close(dv, want.dv, 1e-12);
  expect_close(ds, want.ds, 1e-12);
}

TEST(AttentionBackward, Float) {
  std::mt19937_64 rng(31);
  Problem p = random_problem(7, 9, 6, 4, 0.4, rng, 2);
  std::vector<double> out(p.nb * p.m * p.dv), lse(p.nb * p.m);
  ASSERT_EQ(run_f64(p, 0.3, out, lse, 0, p.nb * p.m), SF_OK);
  const std::vector<double> g = random_vector(p.nb * p.m * p.dv, rng);
  const Grads want = reference_backward(p, 0.3, g, nullptr);
  auto f = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
  std::vector<float> dq, dk, dv, ds;
  ASSERT_EQ(run_backward(p, 0.3f, f(p.q), f(p.k), f(p.v), f(p.bias), f(lse), f(g), nullptr,
                         {0, 3, p.nb * p.m}, {0, 5, p.nb * p.n}, dq, dk, dv, ds),
            SF_OK);
  auto d = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  expect_close(d(dq), want.dq, 1e-5);
  expect_close(d(dk), want.dk, 1e-5);
  expect_close(d(dv), want.dv, 1e-5);
  expect_close(d(ds), want.ds, 1e-5);
}

TEST(AttentionBackward, MalformedInputIsRefused) {
  std::mt19937_64 rng(32);
  Problem p = random_problem(4, 5, 2, 2, 0.6, rng);
  std::vector<double> out(p.m * p.dv), lse(p.m);
  ASSERT_EQ(run_f64(p, 1.0, out, lse, 0, p.m), SF_OK);
  const std::vector<double> g = random_vector(p.m * p.dv, rng);
  std::vector<double> dq, dk, dv, ds, w(p.nse());
  Problem bad = p;
  bad.col[0] = p.n;  // a column outside [0, n): the transpose refuses it first
  EXPECT_EQ(run_backward(bad, 1.0, p.q, p.k, p.v, p.bias, lse, g, nullptr, {0, p.m}, {0, p.n},
                         dq, dk, dv, ds),
            SF_ERR_INDEX_OUT_OF_RANGE);
  dq.resize(p.m * p.e);
  ds.resize(p.nse());
  EXPECT_EQ(sf_csr_attention_backward_rows_f64(
                dq.data(), p.e, ds.data(), w.data(), bad.crow.data(), bad.col.data(), nullptr, 0,
                p.m, p.n, p.nse(), 1, p.q.data(), p.e, p.k.data(), p.e, p.v.data(), p.dv,
                lse.data(), g.data(), p.dv, nullptr, p.e, p.dv, 1.0, 0, p.m),
            SF_ERR_INDEX_OUT_OF_RANGE);
  bad = p;
  bad.crow[2] = bad.crow[1] - 1;  // decreasing row pointers
  EXPECT_EQ(sf_csr_attention_backward_rows_f64(
                dq.data(), p.e, ds.data(), w.data(), bad.crow.data(), bad.col.data(), nullptr, 0,
                p.m, p.n, p.nse(), 1, p.q.data(), p.e, p.k.data(), p.e, p.v.data(), p.dv,
                lse.data(), g.data(), p.dv, nullptr, p.e, p.dv, 1.0, 0, p.m),
            SF_ERR_CROW_DECREASING);
  EXPECT_EQ(sf_csr_attention_backward_rows_f64(
                dq.data(), p.e, ds.data(), w.data(), p.crow.data(), p.col.data(), nullptr, 0,
                p.m, p.n, p.nse(), 1, p.q.data(), p.e, p.k.data(), p.e, p.v.data(), p.dv,
                nullptr, g.data(), p.dv, nullptr, p.e, p.dv, 1.0, 0, p.m),
            SF_ERR_NULL_POINTER);  // no lse
  // A transposed pattern whose entries point outside the rows or elements.
  Vec crow_t(p.n + 1), row_t(p.nse()), perm(p.nse());
  ASSERT_EQ(sf_csr_transpose(crow_t.data(), row_t.data(), perm.data(), p.crow.data(),
                             p.col.data(), p.m, p.n, p.nse()),
            SF_OK);
  ASSERT_GT(p.nse(), 0);
  dk.resize(p.n * p.e);
  dv.resize(p.n * p.dv);
  for (int which = 0; which < 2; ++which) {
    Vec rt = row_t, pm = perm;
    (which == 0 ? rt : pm)[0] = which == 0 ? p.m : p.nse();
    EXPECT_EQ(sf_csr_attention_backward_cols_f64(
                  dk.data(), p.e, dv.data(), p.dv, crow_t.data(), rt.data(), pm.data(), p.m, p.n,
                  p.nse(), 1, ds.data(), w.data(), p.q.data(), p.e, g.data(), p.dv, p.e, p.dv,
                  1.0, 0, p.n),
              SF_ERR_INDEX_OUT_OF_RANGE);
  }
  EXPECT_EQ(sf_csr_attention_backward_cols_f64(
                dk.data(), p.e, dv.data(), p.dv, crow_t.data(), row_t.data(), perm.data(), p.m,
                p.n, p.nse(), 1, ds.data(), w.data(), p.q.data(), p.e, g.data(), p.dv, p.e, p.dv,
                1.0, 2, 1),
            SF_ERR_INVALID_ARGUMENT);  // a reversed range
}

}  // namespace
