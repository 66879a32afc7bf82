// Per-row selection of the k best stored values (sparsefill_core.h,
// sf_lane_topk_*): against a stable sort of each row in torch's order
// (descending: NaN first; ascending: NaN last; ties by position), on random
// rows full of ties, NaN, +-inf and -0.0, split into row ranges; bad input
// gives a status, never a write outside the output.
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

// Whether a comes before b in torch's order (NaN first descending, last
// ascending), by value only.
bool before(double x, double y, bool desc) {
  const bool xn = std::isnan(x), yn = std::isnan(y);
  if (xn || yn) return xn && !yn ? desc : (!xn && yn ? !desc : false);
  return desc ? x > y : x < y;
}

Vec reference(const Vec& crow, const std::vector<double>& v, int64_t k, bool desc) {
  const int64_t nrows = (int64_t)crow.size() - 1;
  Vec out(nrows * k, -1);
  for (int64_t r = 0; r < nrows; ++r) {
    Vec idx;
    for (int64_t p = crow[r]; p < crow[r + 1]; ++p) idx.push_back(p);
    std::stable_sort(idx.begin(), idx.end(),
                     [&](int64_t a, int64_t b) { return before(v[a], v[b], desc); });
    idx.resize(std::min<int64_t>(k, idx.size()));
    std::sort(idx.begin(), idx.end());
    std::copy(idx.begin(), idx.end(), out.begin() + r * k);
  }
  return out;
}

TEST(LaneTopk, MatchesStableSort) {
  std::mt19937_64 rng(7);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const double pool[] = {0.0, -0.0, 1.0, -1.0, 2.5, nan, inf, -inf, 1.0, 3.0};
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t nrows = 1 + rng() % 6;
    Vec crow{0};
    for (int64_t r = 0; r < nrows; ++r) crow.push_back(crow.back() + rng() % 12);
    const int64_t nse = crow.back();
    std::vector<double> v(nse);
    for (auto& x : v) x = pool[rng() % 10];
    std::vector<float> vf(v.begin(), v.end());
    const int64_t k = rng() % 8;
    for (int desc = 0; desc < 2; ++desc) {
      const Vec want = reference(crow, v, k, desc);
      Vec got(nrows * k, -7), got_f(nrows * k, -7);
      const int64_t cut = rng() % (nrows + 1);  // two row ranges
      ASSERT_EQ(sf_lane_topk_f64(got.data(), crow.data(), v.data(), nrows, nse, k, desc, 0, cut),
                SF_OK);
      ASSERT_EQ(sf_lane_topk_f64(got.data(), crow.data(), v.data(), nrows, nse, k, desc, cut,
                                 nrows),
                SF_OK);
      ASSERT_EQ(sf_lane_topk_f32(got_f.data(), crow.data(), vf.data(), nrows, nse, k, desc, 0,
                                 nrows),
                SF_OK);
      EXPECT_EQ(got, want) << "trial " << trial << " desc " << desc << " k " << k;
      EXPECT_EQ(got_f, want) << "trial " << trial << " desc " << desc << " k " << k;
    }
  }
}

TEST(LaneTopk, IntegersTiesByPosition) {
  Vec crow{0, 6}, v{3, 5, 5, -2, 5, 3}, out(3);
  ASSERT_EQ(sf_lane_topk_i64(out.data(), crow.data(), v.data(), 1, 6, 3, 1, 0, 1), SF_OK);
  EXPECT_EQ(out, (Vec{1, 2, 4}));
  ASSERT_EQ(sf_lane_topk_i64(out.data(), crow.data(), v.data(), 1, 6, 3, 0, 0, 1), SF_OK);
  EXPECT_EQ(out, (Vec{0, 3, 5}));
  Vec two(2);
  ASSERT_EQ(sf_lane_topk_i64(two.data(), crow.data(), v.data(), 1, 6, 2, 1, 0, 1), SF_OK);
  EXPECT_EQ(two, (Vec{1, 2}));  // the first two 5s, not the third
}

TEST(LaneTopk, BadInput) {
  Vec crow{0, 2, 1}, v{1, 2}, out(4);
  EXPECT_EQ(sf_lane_topk_i64(out.data(), crow.data(), v.data(), 2, 2, 2, 1, 0, 2),
            SF_ERR_CROW_DECREASING);
  Vec far{0, 3};
  EXPECT_EQ(sf_lane_topk_i64(out.data(), far.data(), v.data(), 1, 2, 2, 1, 0, 1),
            SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(sf_lane_topk_i64(out.data(), far.data(), v.data(), 1, 2, -1, 1, 0, 1),
            SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_lane_topk_i64(out.data(), far.data(), v.data(), 1, 2, 2, 1, 0, 2),
            SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_lane_topk_i64(out.data(), nullptr, v.data(), 1, 2, 2, 1, 0, 1),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_lane_topk_i64(nullptr, crow.data(), nullptr, 0, 0, 0, 1, 0, 0), SF_OK);
}

}  // namespace
