// GoogleTest for the segmented reductions and softmax of sf_reduce.c, each
// against a naive reference that expands the slice densely (stored values
// followed by u copies of the fill; order does not matter for these ops).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "sparsefill_core.h"

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Dense slice s of a one-column segmentation.
std::vector<double> dense_slice(const std::vector<double>& values, const std::vector<int64_t>& ptr,
                                int64_t s, double fill, int64_t n) {
  std::vector<double> out(values.begin() + ptr[s], values.begin() + ptr[s + 1]);
  while ((int64_t)out.size() < n) out.push_back(fill);
  return out;
}

void expect_same(double a, double b) {
  if (std::isnan(b)) {
    EXPECT_TRUE(std::isnan(a)) << a;
  } else if (std::isinf(b)) {
    EXPECT_EQ(a, b);
  } else {
    EXPECT_NEAR(a, b, 1e-12 * (1 + std::fabs(b)));
  }
}

TEST(SegmentSort, StableCountingSort) {
  const std::vector<int64_t> seg = {2, 0, 2, 1, 0};
  std::vector<int64_t> perm(5), ptr(5);
  ASSERT_EQ(sf_segment_sort(perm.data(), ptr.data(), seg.data(), 5, 4), SF_OK);
  EXPECT_EQ(perm, (std::vector<int64_t>{1, 4, 3, 0, 2}));
  EXPECT_EQ(ptr, (std::vector<int64_t>{0, 2, 3, 5, 5}));
}

TEST(SegmentSort, RejectsOutOfRangeIds) {
  const std::vector<int64_t> seg = {0, 3};
  std::vector<int64_t> perm(2), ptr(4);
  EXPECT_EQ(sf_segment_sort(perm.data(), ptr.data(), seg.data(), 2, 3), SF_ERR_INDEX_OUT_OF_RANGE);
  const std::vector<int64_t> neg = {-1};
  EXPECT_EQ(sf_segment_sort(perm.data(), ptr.data(), neg.data(), 1, 3), SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(sf_segment_sort(perm.data(), ptr.data(), nullptr, 0, 3), SF_OK);  // empty
  EXPECT_EQ(ptr[3], 0);
}

TEST(SegSum, CountsTheFillForUnspecifiedElements) {
  // segments: {1, 2}, {}, {5, 6, 7} (full), n = 3, fill 10
  const std::vector<double> v = {1, 2, 5, 6, 7};
  const std::vector<int64_t> ptr = {0, 2, 2, 5};
  const double fill = 10;
  std::vector<double> out(3);
  ASSERT_EQ(sf_seg_sum_f64(out.data(), v.data(), &fill, 0, ptr.data(), 0, 3, 1, 3), SF_OK);
  EXPECT_EQ(out, (std::vector<double>{13, 30, 18}));
}

TEST(SegSum, FullSliceNeverSeesAnInfiniteFill) {
  const std::vector<double> v = {1, 2};
  const std::vector<int64_t> ptr = {0, 2};
  const double fill = kInf;
  double out = 0;
  ASSERT_EQ(sf_seg_sum_f64(&out, v.data(), &fill, 0, ptr.data(), 0, 1, 1, 2), SF_OK);
  EXPECT_EQ(out, 3);
  ASSERT_EQ(sf_seg_sum_f64(&out, v.data(), &fill, 0, ptr.data(), 0, 1, 1, 3), SF_OK);
  EXPECT_EQ(out, kInf);
}

TEST(SegSum, HybridColumnsAndPerSegmentFills) {
  // w = 2; two segments with fills (1, 2) and (3, 4); n = 2
  const std::vector<double> v = {10, 20, 30, 40};  // one row per segment
  const std::vector<int64_t> ptr = {0, 1, 2};
  const std::vector<double> fill = {1, 2, 3, 4};
  std::vector<double> out(4);
  ASSERT_EQ(sf_seg_sum_f64(out.data(), v.data(), fill.data(), 2, ptr.data(), 0, 2, 2, 2), SF_OK);
  EXPECT_EQ(out, (std::vector<double>{11, 22, 33, 44}));
  std::vector<int64_t> vi = {10, 20, 30, 40}, fi = {1, 2, 3, 4}, oi(4);
  ASSERT_EQ(sf_seg_sum_i64(oi.data(), vi.data(), fi.data(), 2, ptr.data(), 0, 2, 2, 2), SF_OK);
  EXPECT_EQ(oi, (std::vector<int64_t>{11, 22, 33, 44}));
}

TEST(SegSum, RangeWritesOnlyItsSegments) {
  const std::vector<double> v = {1, 2, 3};
  const std::vector<int64_t> ptr = {0, 1, 2, 3};
  const double fill = 0;
  std::vector<double> out(3, -7);
  ASSERT_EQ(sf_seg_sum_f64(out.data(), v.data(), &fill, 0, ptr.data(), 1, 2, 1, 1), SF_OK);
  EXPECT_EQ(out, (std::vector<double>{-7, 2, -7}));
}

TEST(SegArgs, Errors) {
  const std::vector<double> v = {1, 2, 3};
  const double fill = 0;
  double out[2];
  const std::vector<int64_t> too_many = {0, 3};
  EXPECT_EQ(sf_seg_sum_f64(out, v.data(), &fill, 0, too_many.data(), 0, 1, 1, 2),
            SF_ERR_INVALID_ARGUMENT);
  const std::vector<int64_t> decreasing = {0, 2, 1};
  EXPECT_EQ(sf_seg_sum_f64(out, v.data(), &fill, 0, decreasing.data(), 0, 2, 1, 5),
            SF_ERR_NOT_COALESCED);
  EXPECT_EQ(sf_seg_sum_f64(out, v.data(), &fill, 0, nullptr, 0, 1, 1, 2), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_seg_sum_f64(out, v.data(), &fill, 0, too_many.data(), 0, 1, 1, -1),
            SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_seg_softmax_f64(out, out, v.data(), &fill, 0, too_many.data(), 0, 1, 1, 2, 0),
            SF_ERR_INVALID_ARGUMENT);
}

TEST(SegProd, FillToThePowerOfTheUnspecifiedCount) {
  const std::vector<double> v = {2, 3, 5};
  const std::vector<int64_t> ptr = {0, 2, 3, 3};
  const double fill = 1.5;
  std::vector<double> out(3);
  ASSERT_EQ(sf_seg_prod_f64(out.data(), v.data(), &fill, 0, ptr.data(), 0, 3, 1, 3), SF_OK);
  expect_same(out[0], 6 * 1.5);
  expect_same(out[1], 5 * 1.5 * 1.5);
  expect_same(out[2], 1.5 * 1.5 * 1.5);
}

// Naive softmax of a dense slice.
std::vector<double> naive_softmax(const std::vector<double>& x, bool log) {
  double m = -kInf;
  for (double v : x) {
    if (v > m || std::isnan(v)) m = v;
  }
  double z = 0;
  for (double v : x) z += std::exp(v - m);
  std::vector<double> out;
  for (double v : x) out.push_back(log ? v - m - std::log(z) : std::exp(v - m) / z);
  return out;
}

class SegSoftmax : public ::testing::TestWithParam<double> {};

TEST_P(SegSoftmax, MatchesTheDenseSlice) {
  const double fill = GetParam();
  // segments: 2 stored of 5, empty, full (n = 5), all-equal values
  const std::vector<double> v = {0.5, -1.25, 3, 1, -2, 0.25, 4, 0.7, 0.7, 0.7};
  const std::vector<int64_t> ptr = {0, 2, 2, 7, 10};
  const int64_t n = 5, nseg = 4;
  for (int log = 0; log < 2; ++log) {
    std::vector<double> out(v.size()), out_fill(nseg);
    ASSERT_EQ(sf_seg_softmax_f64(out.data(), out_fill.data(), v.data(), &fill, 0, ptr.data(), 0,
                                 nseg, 1, n, log),
              SF_OK);
    for (int64_t s = 0; s < nseg; ++s) {
      auto ref = naive_softmax(dense_slice(v, ptr, s, fill, n), log);
      const int64_t cnt = ptr[s + 1] - ptr[s];
      for (int64_t k = 0; k < cnt; ++k) expect_same(out[ptr[s] + k], ref[k]);
      if (cnt < n) {
        expect_same(out_fill[s], ref[cnt]);
      } else {
        EXPECT_EQ(out_fill[s], 0);  // covers nothing
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fills, SegSoftmax, ::testing::Values(0.0, -1.0, 2.5, -kInf, kInf, kNaN));

TEST(SegSoftmax, MinusInfinityFillIsMaskedSoftmax) {
  const std::vector<double> v = {1, 2};
  const std::vector<int64_t> ptr = {0, 2};
  const double fill = -kInf;
  std::vector<double> out(2);
  double out_fill = -1;
  ASSERT_EQ(sf_seg_softmax_f64(out.data(), &out_fill, v.data(), &fill, 0, ptr.data(), 0, 1, 1,
                               10, 0),
            SF_OK);
  expect_same(out[0], 1 / (1 + std::exp(1.0)));
  EXPECT_EQ(out_fill, 0);
}

TEST(SegSoftmax, FloatMatchesDouble) {
  const std::vector<float> v = {0.5f, -1.25f, 3.f};
  const std::vector<int64_t> ptr = {0, 3};
  const float fill = 0.75f;
  std::vector<float> out(3);
  float out_fill = 0;
  ASSERT_EQ(sf_seg_softmax_f32(out.data(), &out_fill, v.data(), &fill, 0, ptr.data(), 0, 1, 1, 6,
                               0),
            SF_OK);
  auto ref = naive_softmax({0.5, -1.25, 3, 0.75, 0.75, 0.75}, false);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(out[k], ref[k], 1e-6);
  EXPECT_NEAR(out_fill, ref[3], 1e-6);
}

// Backward against the dense Jacobian-vector product, with the fill's output
// gradient spread over the unspecified elements in unequal parts (only the
// sum may matter).
TEST(SegSoftmaxBackward, MatchesTheDenseSlice) {
  const std::vector<double> v = {0.5, -1.25, 3, 1, -2};
  const std::vector<int64_t> ptr = {0, 2, 5};
  const double fill = 0.3;
  const int64_t n = 5, nseg = 2;
  const std::vector<double> gv = {0.1, -0.7, 0.4, 1.1, -0.2};
  const std::vector<double> gf = {0.9, 123.0};  // segment 1 is full: its g_fill is ignored
  for (int log = 0; log < 2; ++log) {
    std::vector<double> y(5), yf(2), grad(5), grad_fill(2);
    ASSERT_EQ(sf_seg_softmax_f64(y.data(), yf.data(), v.data(), &fill, 0, ptr.data(), 0, nseg, 1,
                                 n, log),
              SF_OK);
    ASSERT_EQ(sf_seg_softmax_backward_f64(grad.data(), grad_fill.data(), y.data(), yf.data(),
                                          gv.data(), gf.data(), ptr.data(), 0, nseg, 1, n, log),
              SF_OK);
    for (int64_t s = 0; s < nseg; ++s) {
      const int64_t cnt = ptr[s + 1] - ptr[s], u = n - cnt;
      auto x = dense_slice(v, ptr, s, fill, n);
      auto yd = naive_softmax(x, log);
      std::vector<double> g(n);
      for (int64_t k = 0; k < cnt; ++k) g[k] = gv[ptr[s] + k];
      for (int64_t k = cnt; k < n; ++k) g[k] = gf[s] * (k == cnt ? 0.75 : 0.25 / (u - 1));
      std::vector<double> gx(n);
      double acc = 0;
      for (int64_t j = 0; j < n; ++j) acc += log ? g[j] : g[j] * yd[j];
      for (int64_t i = 0; i < n; ++i) {
        gx[i] = log ? g[i] - std::exp(yd[i]) * acc : yd[i] * (g[i] - acc);
      }
      for (int64_t k = 0; k < cnt; ++k) expect_same(grad[ptr[s] + k], gx[k]);
      double fill_sum = 0;
      for (int64_t k = cnt; k < n; ++k) fill_sum += gx[k];
      expect_same(grad_fill[s], fill_sum);
    }
  }
}

TEST(SegMax, FirstOccurrenceIncludesUnspecifiedPositions) {
  // n = 4. seg 0: coords {1, 3} values {5, 2}, fill 5: tie, gap 0 comes first.
  // seg 1: coords {0, 1} values {7, 1}: 7 wins at 0. seg 2: empty: fill at 0.
  const std::vector<double> v = {5, 2, 7, 1};
  const std::vector<int64_t> coord = {1, 3, 0, 1};
  const std::vector<int64_t> ptr = {0, 2, 4, 4};
  const double fill = 5;
  std::vector<double> out(3);
  std::vector<int64_t> win(3), idx(3);
  ASSERT_EQ(sf_seg_max_f64(out.data(), win.data(), idx.data(), v.data(), &fill, 0, coord.data(),
                           ptr.data(), 0, 3, 1, 4, 0),
            SF_OK);
  EXPECT_EQ(out, (std::vector<double>{5, 7, 5}));
  EXPECT_EQ(win, (std::vector<int64_t>{-1, 2, -1}));
  EXPECT_EQ(idx, (std::vector<int64_t>{0, 0, 0}));
  // min: seg 0 -> 2 at coord 3; seg 1 -> 1 at coord 1; seg 2 -> fill at 0
  ASSERT_EQ(sf_seg_max_f64(out.data(), win.data(), idx.data(), v.data(), &fill, 0, coord.data(),
                           ptr.data(), 0, 3, 1, 4, 1),
            SF_OK);
  EXPECT_EQ(out, (std::vector<double>{2, 1, 5}));
  EXPECT_EQ(win, (std::vector<int64_t>{1, 3, -1}));
  EXPECT_EQ(idx, (std::vector<int64_t>{3, 1, 0}));
}

TEST(SegMax, StoredTieBeforeTheFirstGapWins) {
  // coords {0, 2}, values {5, 1}, fill 5, n = 3: stored 5 at 0 precedes gap 1.
  const std::vector<double> v = {5, 1};
  const std::vector<int64_t> coord = {0, 2};
  const std::vector<int64_t> ptr = {0, 2};
  const double fill = 5;
  double out;
  int64_t win, idx;
  ASSERT_EQ(sf_seg_max_f64(&out, &win, &idx, v.data(), &fill, 0, coord.data(), ptr.data(), 0, 1,
                           1, 3, 0),
            SF_OK);
  EXPECT_EQ(win, 0);
  EXPECT_EQ(idx, 0);
}

TEST(SegMax, NaNPropagates) {
  const std::vector<double> v = {1, kNaN, 3};
  const std::vector<int64_t> coord = {0, 1, 2};
  const std::vector<int64_t> ptr = {0, 3};
  const double fill = 9;
  double out;
  int64_t win, idx;
  ASSERT_EQ(sf_seg_max_f64(&out, &win, &idx, v.data(), &fill, 0, coord.data(), ptr.data(), 0, 1,
                           1, 4, 0),
            SF_OK);
  EXPECT_TRUE(std::isnan(out));
  EXPECT_EQ(idx, 1);
  const double nan_fill = kNaN;
  const std::vector<double> w = {1, 2};
  const std::vector<int64_t> c2 = {1, 2};
  const std::vector<int64_t> p2 = {0, 2};
  ASSERT_EQ(sf_seg_max_f64(&out, &win, &idx, w.data(), &nan_fill, 0, c2.data(), p2.data(), 0, 1,
                           1, 3, 1),
            SF_OK);
  EXPECT_TRUE(std::isnan(out));
  EXPECT_EQ(win, -1);
  EXPECT_EQ(idx, 0);
}

TEST(SegMax, IntegersWithoutCoordinates) {
  const std::vector<int64_t> v = {3, -4, 8};
  const std::vector<int64_t> ptr = {0, 3};
  const int64_t fill = 5;
  int64_t out, win;
  ASSERT_EQ(sf_seg_max_i64(&out, &win, nullptr, v.data(), &fill, 0, nullptr, ptr.data(), 0, 1, 1,
                           3, 0),
            SF_OK);  // full slice: the fill does not count
  EXPECT_EQ(out, 8);
  EXPECT_EQ(win, 2);
  ASSERT_EQ(sf_seg_max_i64(&out, &win, nullptr, v.data(), &fill, 0, nullptr, ptr.data(), 0, 1, 1,
                           4, 1),
            SF_OK);
  EXPECT_EQ(out, -4);
  EXPECT_EQ(win, 1);
}

// ---- reductions by output slot ---------------------------------------------------

// The dense reference of one slot: its stored values (in stored order) and
// n - count copies of the fill, reduced by op.
double naive_slot(const std::vector<double>& v, const std::vector<int64_t>& slot, int64_t s,
                  double fill, int64_t n, int op) {
  std::vector<double> x;
  for (size_t k = 0; k < v.size(); ++k) {
    if (slot[k] == s) x.push_back(v[k]);
  }
  while ((int64_t)x.size() < n) x.push_back(fill);
  double a = op == SF_SLOT_SUM ? 0 : op == SF_SLOT_PROD ? 1 : op == SF_SLOT_MAX ? -kInf : kInf;
  for (double e : x) {
    if (op == SF_SLOT_SUM) a += e;
    else if (op == SF_SLOT_PROD) a *= e;
    else if (std::isnan(e) || (op == SF_SLOT_MAX ? e > a : e < a)) a = e;
  }
  return a;
}

// Partials of [0, 3) and [3, 7), folded; slot 2 full, slot 3 empty.
void run_slots(double fill, int op, int64_t nparts) {
  const std::vector<double> v = {1, -2, 3, 4, 0.5, -6, 7};
  const std::vector<int64_t> slot = {2, 0, 2, 1, 2, 0, 1};
  const int64_t nslots = 4, n = 3;
  std::vector<double> acc(nparts * nslots * 2), out(nslots);
  std::vector<int64_t> total(nslots);
  for (int64_t p = 0; p < nparts; ++p) {
    ASSERT_EQ(sf_slot_partial_f64(acc.data() + p * nslots * 2, v.data(), slot.data(),
                                  7 * p / nparts, 7 * (p + 1) / nparts, nslots, 1, op),
              SF_OK);
  }
  ASSERT_EQ(sf_slot_finish_f64(out.data(), total.data(), acc.data(), nparts, &fill, 0, nslots,
                               nslots, 1, n, op),
            SF_OK);
  EXPECT_EQ(total, (std::vector<int64_t>{2, 2, 3, 0}));
  for (int64_t s = 0; s < nslots; ++s) expect_same(out[s], naive_slot(v, slot, s, fill, n, op));
}

class SlotReduce : public ::testing::TestWithParam<double> {};

TEST_P(SlotReduce, MatchesTheDenseSlices) {
  for (int op : {SF_SLOT_SUM, SF_SLOT_PROD, SF_SLOT_MAX, SF_SLOT_MIN}) {
    for (int64_t nparts : {1, 2}) {
      SCOPED_TRACE(op);
      run_slots(GetParam(), op, nparts);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fills, SlotReduce, ::testing::Values(0.0, 0.5, kInf, -kInf, kNaN));

TEST(SlotReduce, RunsOfEqualSlotsSumInAnyLength) {
  // sorted slots, runs of 1 .. 9 rows: the blocks of four and their tails
  std::vector<double> v;
  std::vector<int64_t> slot;
  for (int64_t s = 0; s < 9; ++s) {
    for (int64_t j = 0; j <= s; ++j) {
      v.push_back(double(s * 10 + j));
      slot.push_back(s);
    }
  }
  std::vector<double> acc(9 * 2), out(9);
  std::vector<int64_t> total(9);
  const double fill = -1;
  ASSERT_EQ(sf_slot_partial_f64(acc.data(), v.data(), slot.data(), 0, (int64_t)v.size(), 9, 1,
                                SF_SLOT_SUM),
            SF_OK);
  ASSERT_EQ(sf_slot_finish_f64(out.data(), total.data(), acc.data(), 1, &fill, 0, 9, 9, 1, 10,
                               SF_SLOT_SUM),
            SF_OK);
  for (int64_t s = 0; s < 9; ++s) {
    EXPECT_EQ(total[s], s + 1);
    expect_same(out[s], naive_slot(v, slot, s, fill, 10, SF_SLOT_SUM));
  }
}

TEST(SlotReduce, FullSliceNeverSeesAnInfiniteFill) {
  const std::vector<double> v = {1, 2};
  const std::vector<int64_t> slot = {0, 0};
  const double fill = kInf;
  double acc[2], out;
  int64_t total;
  ASSERT_EQ(sf_slot_partial_f64(acc, v.data(), slot.data(), 0, 2, 1, 1, SF_SLOT_SUM), SF_OK);
  ASSERT_EQ(sf_slot_finish_f64(&out, &total, acc, 1, &fill, 0, 1, 1, 1, 2, SF_SLOT_SUM), SF_OK);
  EXPECT_EQ(out, 3);
  EXPECT_EQ(total, 2);
}

TEST(SlotReduce, HybridColumnsFloatAndIntegers) {
  // two columns per stored row, float in, double accumulators
  const std::vector<float> v = {1, 10, 2, 20, 3, 30};
  const std::vector<int64_t> slot = {1, 0, 1};
  const std::vector<float> fill = {0.5f, -1};
  std::vector<double> acc(2 * 3);
  std::vector<int64_t> total(2);
  std::vector<float> out(4);
  ASSERT_EQ(sf_slot_partial_f32(acc.data(), v.data(), slot.data(), 0, 3, 2, 2, SF_SLOT_SUM),
            SF_OK);
  ASSERT_EQ(sf_slot_finish_f32(out.data(), total.data(), acc.data(), 1, fill.data(), 0, 2, 2, 2,
                               3, SF_SLOT_SUM),
            SF_OK);
  EXPECT_EQ(out, (std::vector<float>{2 + 2 * 0.5f, 20 - 2, 4 + 0.5f, 40 - 1}));
  EXPECT_EQ(total, (std::vector<int64_t>{1, 2}));
  const std::vector<int64_t> iv = {3, -4, 8};
  const int64_t ifill = 5;
  std::vector<int64_t> iacc(2 * 2), iout(2);
  ASSERT_EQ(sf_slot_partial_i64(iacc.data(), iv.data(), slot.data(), 0, 3, 2, 1, SF_SLOT_MAX),
            SF_OK);
  ASSERT_EQ(sf_slot_finish_i64(iout.data(), total.data(), iacc.data(), 1, &ifill, 0, 2, 2, 1, 3,
                               SF_SLOT_MAX),
            SF_OK);
  EXPECT_EQ(iout, (std::vector<int64_t>{5, 8}));
}

TEST(SlotReduce, Errors) {
  const std::vector<double> v = {1, 2, 3};
  const std::vector<int64_t> slot = {0, 2, 0};
  const double fill = 0;
  double acc[4], out[2];
  int64_t total[2];
  EXPECT_EQ(sf_slot_partial_f64(acc, v.data(), slot.data(), 0, 3, 2, 1, SF_SLOT_SUM),
            SF_ERR_INDEX_OUT_OF_RANGE);
  const std::vector<int64_t> neg = {-1};
  EXPECT_EQ(sf_slot_partial_f64(acc, v.data(), neg.data(), 0, 1, 2, 1, SF_SLOT_MAX),
            SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(sf_slot_partial_f64(acc, v.data(), slot.data(), 0, 1, 2, 1, 7),
            SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_slot_partial_f64(acc, v.data(), slot.data(), 2, 1, 2, 1, SF_SLOT_SUM),
            SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_slot_partial_f64(acc, nullptr, slot.data(), 0, 1, 2, 1, SF_SLOT_SUM),
            SF_ERR_NULL_POINTER);
  const std::vector<int64_t> ivals = {1};
  int64_t iacc[4];
  EXPECT_EQ(sf_slot_partial_i64(iacc, ivals.data(), slot.data(), 0, 1, 2, 1, SF_SLOT_PROD),
            SF_ERR_INVALID_ARGUMENT);  // no integer prod
  // two rows in a slot of one element: duplicates
  const std::vector<int64_t> dup = {0, 0};
  ASSERT_EQ(sf_slot_partial_f64(acc, v.data(), dup.data(), 0, 2, 2, 1, SF_SLOT_SUM), SF_OK);
  EXPECT_EQ(sf_slot_finish_f64(out, total, acc, 1, &fill, 0, 2, 2, 1, 1, SF_SLOT_SUM),
            SF_ERR_NOT_COALESCED);
  EXPECT_EQ(sf_slot_finish_f64(out, total, acc, 1, &fill, 0, 3, 2, 1, 5, SF_SLOT_SUM),
            SF_ERR_INVALID_ARGUMENT);  // slots past nslots
  EXPECT_EQ(sf_slot_finish_f64(out, total, acc, -1, &fill, 0, 2, 2, 1, 5, SF_SLOT_SUM),
            SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_slot_finish_f64(out, total, nullptr, 1, &fill, 0, 2, 2, 1, 5, SF_SLOT_SUM),
            SF_ERR_NULL_POINTER);
}

// ---- sorted slots in one pass (sf_slot_runs_*) -------------------------------------

// Sorted slots with empty slots before, between and after the runs, runs of
// 1 .. 9 rows (the blocks of four and their tails), one full slot, a NaN and
// an infinity among the values.
struct SortedSlots {
  std::vector<double> v;
  std::vector<int64_t> slot;
  int64_t nslots = 14, n = 9;
  SortedSlots() {
    for (int64_t s = 1; s < 12; s += 1) {
      if (s == 4 || s == 7) continue;  // empty slots between runs
      const int64_t len = s == 11 ? 9 : s % 9 + 1;  // slot 11 stored in full
      for (int64_t j = 0; j < len; ++j) {
        v.push_back(0.25 * double(s * 10 + j) - 3);
        slot.push_back(s);
      }
    }
    v[17] = kNaN;  // in slot 6's run (a NaN wins max and min)
    v[30] = kInf;  // the last row of slot 8's run
  }
};

// Every cut into two or three ranges gives the dense slices, bit for bit the
// same as the uncut pass.
TEST(SlotRuns, AnyCutGivesTheDenseSlices) {
  const SortedSlots d;
  const int64_t nse = (int64_t)d.v.size();
  for (double fill : {0.0, 0.5, kInf, -kInf, kNaN}) {
    for (int op : {SF_SLOT_SUM, SF_SLOT_PROD, SF_SLOT_MAX, SF_SLOT_MIN}) {
      SCOPED_TRACE(op);
      std::vector<double> whole(d.nslots, 123);
      std::vector<int64_t> whole_total(d.nslots, -7);
      ASSERT_EQ(sf_slot_runs_f64(whole.data(), whole_total.data(), d.v.data(), d.slot.data(),
                                 &fill, nse, 0, nse, d.nslots, 1, d.n, op),
                SF_OK);
      for (int64_t s = 0; s < d.nslots; ++s) {
        expect_same(whole[s], naive_slot(d.v, d.slot, s, fill, d.n, op));
        int64_t count = 0;
        for (int64_t k : d.slot) count += k == s;
        EXPECT_EQ(whole_total[s], count);
      }
      for (int64_t a = 0; a <= nse; a += 3) {
        for (int64_t b = a; b <= nse; b += 5) {
          std::vector<double> out(d.nslots, 123);
          std::vector<int64_t> total(d.nslots, -7);
          for (auto r : {std::pair<int64_t, int64_t>{0, a}, {a, b}, {b, nse}}) {
            ASSERT_EQ(sf_slot_runs_f64(out.data(), total.data(), d.v.data(), d.slot.data(),
                                       &fill, nse, r.first, r.second, d.nslots, 1, d.n, op),
                      SF_OK);
          }
          for (int64_t s = 0; s < d.nslots; ++s) {
            EXPECT_EQ(std::memcmp(&out[s], &whole[s], sizeof(double)), 0) << a << " " << b;
          }
          EXPECT_EQ(total, whole_total);
        }
      }
    }
  }
}

TEST(SlotRuns, HybridRowsAndNothingStored) {
  const std::vector<float> v = {1, 10, 2, 20, 3, 30};
  const std::vector<int64_t> slot = {0, 0, 2};
  const std::vector<float> fill = {0.5f, -1};
  std::vector<float> out(6);
  std::vector<int64_t> total(3);
  ASSERT_EQ(sf_slot_runs_f32(out.data(), total.data(), v.data(), slot.data(), fill.data(), 3, 0,
                             3, 3, 2, 3, SF_SLOT_SUM),
            SF_OK);
  EXPECT_EQ(out, (std::vector<float>{3 + 0.5f, 30 - 1, 3 * 0.5f, -3, 3 + 1, 30 - 2}));
  EXPECT_EQ(total, (std::vector<int64_t>{2, 0, 1}));
  // nothing stored: every slot is n fills (an integer max here)
  const int64_t ifill = -5;
  std::vector<int64_t> iout(2, 0);
  ASSERT_EQ(sf_slot_runs_i64(iout.data(), total.data(), nullptr, nullptr, &ifill, 0, 0, 0, 2, 1,
                             4, SF_SLOT_MAX),
            SF_OK);
  EXPECT_EQ(iout, (std::vector<int64_t>{-5, -5}));
  EXPECT_EQ(total[0], 0);
  EXPECT_EQ(total[1], 0);
}

TEST(SlotRuns, RefusesWhatTheTwoPhasesMustTake) {
  const std::vector<double> v = {1, 2, 3, 4};
  const double fill = 0;
  double out[3];
  int64_t total[3];
  auto runs = [&](const std::vector<int64_t>& slot, int64_t k_begin, int64_t k_end, int64_t n) {
    return sf_slot_runs_f64(out, total, v.data(), slot.data(), &fill, (int64_t)slot.size(),
                            k_begin, k_end, 3, 1, n, SF_SLOT_SUM);
  };
  EXPECT_EQ(runs({0, 2, 1, 2}, 0, 4, 4), SF_ERR_NOT_COALESCED);  // not sorted
  EXPECT_EQ(runs({0, 2, 1, 2}, 2, 4, 4), SF_ERR_NOT_COALESCED);  // found by the range holding it
  EXPECT_EQ(runs({0, 1, 1, 1}, 0, 4, 2), SF_ERR_NOT_COALESCED);  // 3 rows in a slot of 2
  EXPECT_EQ(runs({0, 1, 3, 3}, 0, 4, 4), SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(runs({-1, 0, 1, 2}, 0, 4, 4), SF_ERR_INDEX_NEGATIVE);
  EXPECT_EQ(runs({0, 1, 1, 2}, 0, 5, 4), SF_ERR_INVALID_ARGUMENT);  // past nse
  EXPECT_EQ(runs({0, 1, 1, 2}, 3, 2, 4), SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_slot_runs_f64(out, total, v.data(), nullptr, &fill, 4, 0, 4, 3, 1, 4,
                             SF_SLOT_SUM),
            SF_ERR_NULL_POINTER);
  const std::vector<int64_t> ivals = {1};
  const int64_t izero = 0, one_slot = 0;
  int64_t iout;
  EXPECT_EQ(sf_slot_runs_i64(&iout, total, ivals.data(), &one_slot, &izero, 1, 0, 1, 1, 1, 1,
                             SF_SLOT_PROD),
            SF_ERR_INVALID_ARGUMENT);  // no integer prod
  // a range inside one run does nothing (the run is its first range's)
  total[0] = -7;
  EXPECT_EQ(runs({1, 1, 1, 1}, 1, 3, 4), SF_OK);
  EXPECT_EQ(total[0], -7);
}


TEST(SlotRuns, WideDensePartMatchesThePartials) {
  // 40 columns (two column blocks), runs of 1 .. 5 rows, NaN and infinities
  // stored, a NaN fill in some columns: the sorted pass gives the bits of the
  // two-phase partials (each column folded over the rows in row order)
  const int64_t w = 40, nslots = 7, n = 6;
  const std::vector<int64_t> slot = {0, 2, 2, 3, 3, 3, 5, 5, 5, 5, 6, 6, 6, 6, 6};
  const int64_t nse = (int64_t)slot.size();
  std::vector<double> v(nse * w), fill(w);
  for (int64_t i = 0; i < nse * w; ++i) v[i] = std::sin(0.7 * (double)i) * 3;
  v[3 * w + 5] = kNaN;
  v[4 * w + 33] = kInf;
  v[11 * w + 39] = -kInf;
  for (int64_t c = 0; c < w; ++c) fill[c] = c % 9 == 4 ? kNaN : 0.1 * (double)c - 1;
  for (int op : {SF_SLOT_SUM, SF_SLOT_PROD, SF_SLOT_MAX, SF_SLOT_MIN}) {
    SCOPED_TRACE(op);
    std::vector<double> runs(nslots * w), parts(nslots * w), acc(nslots * (w + 1));
    std::vector<int64_t> t1(nslots), t2(nslots);
    ASSERT_EQ(sf_slot_runs_f64(runs.data(), t1.data(), v.data(), slot.data(), fill.data(), nse, 0,
                               nse, nslots, w, n, op),
              SF_OK);
    ASSERT_EQ(sf_slot_partial_f64(acc.data(), v.data(), slot.data(), 0, nse, nslots, w, op),
              SF_OK);
    ASSERT_EQ(sf_slot_finish_f64(parts.data(), t2.data(), acc.data(), 1, fill.data(), 0, nslots,
                                 nslots, w, n, op),
              SF_OK);
    EXPECT_EQ(t1, t2);
    for (int64_t i = 0; i < nslots * w; ++i) {
      if (std::isnan(parts[i])) {
        EXPECT_TRUE(std::isnan(runs[i])) << i;
      } else {
        EXPECT_EQ(runs[i], parts[i]) << i;
      }
    }
  }
}

// ---- softmax by slot (sf_slot_softmax_*), against the segment kernels ----------------

// The phases of sf_slot_softmax_* with the rows cut into nparts parts.
struct SlotSoftmax {
  std::vector<double> out, out_fill;
  std::vector<int64_t> count;
};

SlotSoftmax run_slot_softmax(const std::vector<double>& v, const std::vector<int64_t>& slot,
                             const std::vector<double>& fill, int64_t nslots, int64_t w,
                             int64_t n, int log, int64_t nparts) {
  const int64_t nse = (int64_t)slot.size(), fs = (int64_t)fill.size() == w ? 0 : w;
  std::vector<double> acc(nparts * nslots * (w + 1)), zsum(nparts * nslots * w);
  std::vector<double> m(nslots * w), scale(nslots * w);
  SlotSoftmax r{std::vector<double>(nse * w), std::vector<double>(nslots * w),
                std::vector<int64_t>(nslots)};
  for (int64_t p = 0; p < nparts; ++p) {
    EXPECT_EQ(sf_slot_partial_f64(acc.data() + p * nslots * (w + 1), v.data(), slot.data(),
                                  nse * p / nparts, nse * (p + 1) / nparts, nslots, w,
                                  SF_SLOT_MAX),
              SF_OK);
  }
  // slot phases in two ranges, row phases in three: any cut gives the same
  EXPECT_EQ(sf_slot_softmax_max_f64(m.data(), r.count.data(), acc.data(), nparts, fill.data(), fs,
                                    0, nslots / 2, nslots, w, n),
            SF_OK);
  EXPECT_EQ(sf_slot_softmax_max_f64(m.data(), r.count.data(), acc.data(), nparts, fill.data(), fs,
                                    nslots / 2, nslots, nslots, w, n),
            SF_OK);
  for (int64_t p = 0; p < nparts; ++p) {
    EXPECT_EQ(sf_slot_softmax_exp_f64(r.out.data(), zsum.data() + p * nslots * w, v.data(),
                                      slot.data(), m.data(), nse * p / nparts,
                                      nse * (p + 1) / nparts, nslots, w, log),
              SF_OK);
  }
  EXPECT_EQ(sf_slot_softmax_norm_f64(r.out_fill.data(), scale.data(), zsum.data(), nparts,
                                     r.count.data(), m.data(), fill.data(), fs, 0, nslots, nslots,
                                     w, n, log),
            SF_OK);
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_EQ(sf_slot_softmax_write_f64(r.out.data(), v.data(), slot.data(), m.data(),
                                        scale.data(), nse * c / 3, nse * (c + 1) / 3, nslots, w,
                                        log),
              SF_OK);
  }
  return r;
}

// Stored rows of 5 slots (scattered, as the columns of a matrix along dim 0):
// slot 0 full, slot 1 empty, NaN in slot 2, inf in slot 3, a -inf in slot 4.
struct ScatteredSlots {
  std::vector<double> v;
  std::vector<int64_t> slot;
  int64_t nslots = 5, n = 4, w;
  explicit ScatteredSlots(int64_t w_) : w(w_) {
    const std::vector<int64_t> s = {0, 2, 3, 0, 4, 2, 0, 3, 4, 0};
    const std::vector<double> x = {1, kNaN, 2, -1, 0.5, 3, 4, kInf, -kInf, 0.25};
    for (size_t k = 0; k < s.size(); ++k) {
      slot.push_back(s[k]);
      for (int64_t c = 0; c < w; ++c) v.push_back(c == 0 ? x[k] : x[k] * 0.5 - (double)c);
    }
  }
};

// The segment kernels' result for the same rows: sorted by slot, run, put back.
SlotSoftmax by_segments(const ScatteredSlots& t, const std::vector<double>& fill, int log) {
  const int64_t nse = (int64_t)t.slot.size(), w = t.w;
  std::vector<int64_t> perm(nse), ptr(t.nslots + 1);
  EXPECT_EQ(sf_segment_sort(perm.data(), ptr.data(), t.slot.data(), nse, t.nslots), SF_OK);
  std::vector<double> sorted(nse * w), out(nse * w);
  for (int64_t k = 0; k < nse; ++k) {
    for (int64_t c = 0; c < w; ++c) sorted[k * w + c] = t.v[perm[k] * w + c];
  }
  SlotSoftmax r{std::vector<double>(nse * w), std::vector<double>(t.nslots * w), {}};
  EXPECT_EQ(sf_seg_softmax_f64(out.data(), r.out_fill.data(), sorted.data(), fill.data(),
                               (int64_t)fill.size() == w ? 0 : w, ptr.data(), 0, t.nslots, w,
                               t.n, log),
            SF_OK);
  for (int64_t k = 0; k < nse; ++k) {
    for (int64_t c = 0; c < w; ++c) r.out[perm[k] * w + c] = out[k * w + c];
  }
  return r;
}

class SlotSoftmaxFills : public ::testing::TestWithParam<double> {};

TEST_P(SlotSoftmaxFills, MatchesTheSegmentKernels) {
  for (int64_t w : {1, 2}) {
    ScatteredSlots t(w);
    // one fill row for all, then one per slot (the given fill in slot 1 and 3)
    std::vector<double> one(w, GetParam()), per(t.nslots * w);
    for (int64_t i = 0; i < t.nslots * w; ++i) per[i] = (i / w) % 2 ? GetParam() : -0.5 * i;
    for (const auto* fill : {&one, &per}) {
      for (int log : {0, 1}) {
        const SlotSoftmax want = by_segments(t, *fill, log);
        for (int64_t nparts : {1, 2, 3}) {
          SCOPED_TRACE(testing::Message() << "w " << w << " log " << log << " parts " << nparts);
          const SlotSoftmax got = run_slot_softmax(t.v, t.slot, *fill, t.nslots, w, t.n, log,
                                                   nparts);
          for (size_t i = 0; i < want.out.size(); ++i) expect_same(got.out[i], want.out[i]);
          for (size_t i = 0; i < want.out_fill.size(); ++i) {
            expect_same(got.out_fill[i], want.out_fill[i]);
          }
          EXPECT_EQ(got.count, (std::vector<int64_t>{4, 0, 2, 2, 2}));
        }
      }
    }
  }
}

TEST_P(SlotSoftmaxFills, BackwardMatchesTheSegmentKernel) {
  ScatteredSlots t(2);
  for (auto& x : t.v) x = std::isfinite(x) ? x : 1.5;  // finite outputs to differentiate
  const std::vector<double> fill(2, std::isfinite(GetParam()) ? GetParam() : -2.0);
  const int64_t nse = (int64_t)t.slot.size(), w = t.w, nslots = t.nslots;
  std::vector<double> g(nse * w), g_fill(nslots * w);
  for (size_t i = 0; i < g.size(); ++i) g[i] = 0.1 * (double)i - 0.7;
  for (size_t i = 0; i < g_fill.size(); ++i) g_fill[i] = 0.3 - 0.2 * (double)i;
  for (int log : {0, 1}) {
    const SlotSoftmax y = run_slot_softmax(t.v, t.slot, fill, nslots, w, t.n, log, 1);
    // the reference: the segment backward in slot order
    std::vector<int64_t> perm(nse), ptr(nslots + 1);
    ASSERT_EQ(sf_segment_sort(perm.data(), ptr.data(), t.slot.data(), nse, nslots), SF_OK);
    std::vector<double> ys(nse * w), gs(nse * w), gv_seg(nse * w), gf_seg(nslots * w);
    for (int64_t k = 0; k < nse; ++k) {
      for (int64_t c = 0; c < w; ++c) {
        ys[k * w + c] = y.out[perm[k] * w + c];
        gs[k * w + c] = g[perm[k] * w + c];
      }
    }
    ASSERT_EQ(sf_seg_softmax_backward_f64(gv_seg.data(), gf_seg.data(), ys.data(),
                                          y.out_fill.data(), gs.data(), g_fill.data(), ptr.data(),
                                          0, nslots, w, t.n, log),
              SF_OK);
    for (int64_t nparts : {1, 2}) {
      std::vector<double> acc(nparts * nslots * (w + 1)), dot(nslots * w), gv(nse * w),
          gf(nslots * w);
      for (int64_t p = 0; p < nparts; ++p) {
        ASSERT_EQ(sf_slot_softmax_backward_partial_f64(acc.data() + p * nslots * (w + 1),
                                                       y.out.data(), g.data(), t.slot.data(),
                                                       nse * p / nparts, nse * (p + 1) / nparts,
                                                       nslots, w, log),
                  SF_OK);
      }
      ASSERT_EQ(sf_slot_softmax_backward_norm_f64(gf.data(), dot.data(), acc.data(), nparts,
                                                  y.out_fill.data(), g_fill.data(), 0, nslots,
                                                  nslots, w, t.n, log),
                SF_OK);
      ASSERT_EQ(sf_slot_softmax_backward_write_f64(gv.data(), y.out.data(), g.data(),
                                                   t.slot.data(), dot.data(), 0, nse, nslots, w,
                                                   log),
                SF_OK);
      for (int64_t k = 0; k < nse; ++k) {
        for (int64_t c = 0; c < w; ++c) expect_same(gv[perm[k] * w + c], gv_seg[k * w + c]);
      }
      for (int64_t i = 0; i < nslots * w; ++i) expect_same(gf[i], gf_seg[i]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fills, SlotSoftmaxFills,
                         ::testing::Values(0.0, 0.5, kInf, -kInf, kNaN));

TEST(SlotSoftmax, Float32RowsMatchTheSegmentKernel) {
  // one value per row: the blocked exp pass over more than one block
  const int64_t nslots = 7, n = 200, nse = 1100;
  std::vector<float> v(nse), fill = {0.25f}, out(nse), m(nslots), scale(nslots), of(nslots);
  std::vector<int64_t> slot(nse), count(nslots);
  for (int64_t k = 0; k < nse; ++k) {
    slot[k] = (k * 3) % nslots;
    v[k] = (float)std::sin(0.37 * (double)k) * 20;
  }
  std::vector<double> acc(nslots * 2), zsum(nslots);
  ASSERT_EQ(sf_slot_partial_f32(acc.data(), v.data(), slot.data(), 0, nse, nslots, 1, SF_SLOT_MAX),
            SF_OK);
  ASSERT_EQ(sf_slot_softmax_max_f32(m.data(), count.data(), acc.data(), 1, fill.data(), 0, 0,
                                    nslots, nslots, 1, n),
            SF_OK);
  ASSERT_EQ(sf_slot_softmax_exp_f32(out.data(), zsum.data(), v.data(), slot.data(), m.data(), 0,
                                    nse, nslots, 1, 0),
            SF_OK);
  ASSERT_EQ(sf_slot_softmax_norm_f32(of.data(), scale.data(), zsum.data(), 1, count.data(),
                                     m.data(), fill.data(), 0, 0, nslots, nslots, 1, n, 0),
            SF_OK);
  ASSERT_EQ(sf_slot_softmax_write_f32(out.data(), v.data(), slot.data(), m.data(), scale.data(),
                                      0, nse, nslots, 1, 0),
            SF_OK);
  for (int64_t s = 0; s < nslots; ++s) {
    double mx = 0.25, z = 0;
    for (int64_t k = 0; k < nse; ++k) {
      if (slot[k] == s) mx = std::max(mx, (double)v[k]);
    }
    for (int64_t k = 0; k < nse; ++k) {
      if (slot[k] == s) z += std::exp((double)v[k] - mx);
    }
    z += (double)(n - count[s]) * std::exp(0.25 - mx);
    for (int64_t k = 0; k < nse; ++k) {
      if (slot[k] == s) EXPECT_NEAR(out[k], std::exp((double)v[k] - mx) / z, 1e-6);
    }
    EXPECT_NEAR(of[s], std::exp(0.25 - mx) / z, 1e-6);
  }
}

TEST(SlotSoftmax, Errors) {
  const std::vector<double> v = {1, 2, 3}, fill = {0};
  const std::vector<int64_t> slot = {0, 2, 0}, bad = {0, 5, 0};
  double m[3], out[3], zsum[3], scale[3], of[3], acc[9] = {0};
  int64_t count[3] = {2, 1, 0};
  EXPECT_EQ(sf_slot_softmax_exp_f64(out, zsum, v.data(), bad.data(), m, 0, 3, 3, 1, 0),
            SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(sf_slot_softmax_write_f64(out, v.data(), bad.data(), m, scale, 0, 3, 3, 1, 0),
            SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(sf_slot_softmax_exp_f64(out, zsum, v.data(), slot.data(), m, 2, 1, 3, 1, 0),
            SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_slot_softmax_exp_f64(nullptr, zsum, v.data(), slot.data(), m, 0, 3, 3, 1, 0),
            SF_ERR_NULL_POINTER);
  // a slot with more rows than its slice holds: duplicates
  acc[1] = 3;  // slot 0's row count (w = 1: its maximum, then its count)
  EXPECT_EQ(sf_slot_softmax_max_f64(m, count, acc, 1, fill.data(), 0, 0, 3, 3, 1, 2),
            SF_ERR_NOT_COALESCED);
  EXPECT_EQ(sf_slot_softmax_max_f64(m, count, acc, 1, fill.data(), 0, 0, 4, 3, 1, 5),
            SF_ERR_INVALID_ARGUMENT);  // slots past nslots
  EXPECT_EQ(sf_slot_softmax_max_f64(m, count, acc, 1, fill.data(), 2, 0, 3, 3, 1, 5),
            SF_ERR_INVALID_ARGUMENT);  // fill_stride neither 0 nor w
  count[0] = 7;
  EXPECT_EQ(sf_slot_softmax_norm_f64(of, scale, zsum, 1, count, m, fill.data(), 0, 0, 3, 3, 1, 5,
                                     0),
            SF_ERR_NOT_COALESCED);
  EXPECT_EQ(sf_slot_softmax_backward_partial_f64(acc, v.data(), v.data(), bad.data(), 0, 3, 3, 1,
                                                 0),
            SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(sf_slot_softmax_backward_norm_f64(of, m, acc, 1, v.data(), v.data(), 0, 3, 3, 1, 2, 0),
            SF_ERR_NOT_COALESCED);
  EXPECT_EQ(sf_slot_softmax_backward_write_f64(out, v.data(), v.data(), bad.data(), m, 0, 3, 3, 1,
                                               0),
            SF_ERR_INDEX_OUT_OF_RANGE);
}

}  // namespace
