// The per-row order of CSR rows with a fill (sparsefill_core.h), against the
// stable sort of each dense row in torch's order (descending: NaN first;
// ascending: NaN last; ties by position; the fill at the unspecified
// columns), on random rows full of ties, NaN, +-inf and -0.0, split into row
// ranges; bad input gives a status, never a write outside the output.
// sf_lane_topk_fill_*: the first k slots, small k (the sorted array) and
// large (the heap); sf_lane_sort_fill_*: every stored value's slot and the
// whole row's indices, short rows (insertion) and long (the heapsort).
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

// The first k slots of the stable sort of each dense row (fill f[r] at the
// columns the row does not store): src (element number, -1 for the fill) and
// positions.
void reference_fill(const Vec& crow, const Vec& col, const std::vector<double>& v,
                    const std::vector<double>& fill, int64_t n, int64_t k, bool desc, Vec& src,
                    Vec& pos) {
  const int64_t nrows = (int64_t)crow.size() - 1;
  src.assign(nrows * k, 0);
  pos.assign(nrows * k, 0);
  for (int64_t r = 0; r < nrows; ++r) {
    std::vector<double> dense(n, fill.size() == 1 ? fill[0] : fill[r]);
    Vec elem(n, -1), idx(n);
    for (int64_t p = crow[r]; p < crow[r + 1]; ++p) {
      dense[col[p]] = v[p];
      elem[col[p]] = p;
    }
    for (int64_t j = 0; j < n; ++j) idx[j] = j;
    std::stable_sort(idx.begin(), idx.end(),
                     [&](int64_t a, int64_t b) { return before(dense[a], dense[b], desc); });
    for (int64_t t = 0; t < k; ++t) {
      src[r * k + t] = elem[idx[t]];
      pos[r * k + t] = idx[t];
    }
  }
}

TEST(LaneTopkFill, MatchesStableSortOfTheDenseRow) {
  std::mt19937_64 rng(11);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const double pool[] = {0.0, -0.0, 1.0, -1.0, 2.5, nan, inf, -inf, 1.0, 3.0};
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t nrows = 1 + rng() % 5;
    const int64_t n = trial % 4 == 0 ? 40 + rng() % 60 : rng() % 14;  // k > 32: the heap
    Vec crow{0}, col;
    for (int64_t r = 0; r < nrows; ++r) {
      const int64_t density = rng() % 4;  // empty, sparse, half, full rows
      for (int64_t j = 0; j < n; ++j)
        if (density == 3 || (density && (int64_t)(rng() % 3) < density)) col.push_back(j);
      crow.push_back((int64_t)col.size());
    }
    const int64_t nse = crow.back();
    std::vector<double> v(nse), fill(trial % 2 ? nrows : 1);
    for (auto& x : v) x = pool[rng() % 10];
    for (auto& x : fill) x = pool[rng() % 10];
    std::vector<float> vf(v.begin(), v.end()), ff(fill.begin(), fill.end());
    const int64_t k = n ? (int64_t)(rng() % (n + 1)) : 0;
    const int64_t stride = fill.size() == 1 ? 0 : 1;
    for (int desc = 0; desc < 2; ++desc) {
      Vec want_src, want_pos;
      reference_fill(crow, col, v, fill, n, k, desc, want_src, want_pos);
      Vec src(nrows * k, -7), pos(nrows * k, -7), src_f(nrows * k, -7), pos_f(nrows * k, -7);
      const int64_t cut = rng() % (nrows + 1);  // two row ranges
      ASSERT_EQ(sf_lane_topk_fill_f64(src.data(), pos.data(), crow.data(), col.data(), v.data(),
                                      fill.data(), stride, nrows, n, nse, k, desc, 0, cut),
                SF_OK);
      ASSERT_EQ(sf_lane_topk_fill_f64(src.data(), pos.data(), crow.data(), col.data(), v.data(),
                                      fill.data(), stride, nrows, n, nse, k, desc, cut, nrows),
                SF_OK);
      ASSERT_EQ(sf_lane_topk_fill_f32(src_f.data(), pos_f.data(), crow.data(), col.data(),
                                      vf.data(), ff.data(), stride, nrows, n, nse, k, desc, 0,
                                      nrows),
                SF_OK);
      EXPECT_EQ(src, want_src) << "trial " << trial << " desc " << desc << " k " << k;
      EXPECT_EQ(pos, want_pos) << "trial " << trial << " desc " << desc << " k " << k;
      EXPECT_EQ(src_f, want_src) << "trial " << trial << " desc " << desc << " k " << k;
      EXPECT_EQ(pos_f, want_pos) << "trial " << trial << " desc " << desc << " k " << k;
    }
  }
}

TEST(LaneTopkFill, IntegersInterleaveWithTheFillByPosition) {
  // dense row: 5 4 5 4 4 5 (columns 1, 3, 5 store 4, 4, 5; fill 5 elsewhere)
  Vec crow{0, 3}, col{1, 3, 5}, v{4, 4, 5}, fill{5}, src(4), pos(4);
  ASSERT_EQ(sf_lane_topk_fill_i64(src.data(), pos.data(), crow.data(), col.data(), v.data(),
                                  fill.data(), 0, 1, 6, 3, 4, 1, 0, 1),
            SF_OK);
  EXPECT_EQ(src, (Vec{-1, -1, -1, 2}));  // the 5s by position, the stored one last
  EXPECT_EQ(pos, (Vec{0, 2, 4, 5}));
  ASSERT_EQ(sf_lane_topk_fill_i64(src.data(), pos.data(), crow.data(), col.data(), v.data(),
                                  fill.data(), 0, 1, 6, 3, 4, 0, 0, 1),
            SF_OK);
  EXPECT_EQ(src, (Vec{0, 1, -1, -1}));
  EXPECT_EQ(pos, (Vec{1, 3, 0, 2}));
}

TEST(LaneTopkFill, BadInput) {
  Vec crow{0, 2}, col{0, 3}, v{1, 2}, fill{0}, src(4), pos(4);
  auto call = [&](const Vec& c, const Vec& cl, int64_t n, int64_t k, int64_t stride) {
    return sf_lane_topk_fill_i64(src.data(), pos.data(), c.data(), cl.data(), v.data(),
                                 fill.data(), stride, (int64_t)c.size() - 1, n, 2, k, 1, 0,
                                 (int64_t)c.size() - 1);
  };
  EXPECT_EQ(call(crow, col, 4, 2, 0), SF_OK);
  EXPECT_EQ(call(crow, col, 4, 5, 0), SF_ERR_INVALID_ARGUMENT);  // k > n
  EXPECT_EQ(call(crow, col, 4, 2, 2), SF_ERR_INVALID_ARGUMENT);  // fill_stride
  EXPECT_EQ(call(crow, col, 3, 2, 0), SF_ERR_INDEX_OUT_OF_RANGE);  // column 3 >= n
  EXPECT_EQ(call(crow, Vec{-1, 2}, 4, 2, 0), SF_ERR_INDEX_NEGATIVE);
  EXPECT_EQ(call(crow, Vec{2, 2}, 4, 2, 0), SF_ERR_COL_UNSORTED);
  EXPECT_EQ(call(Vec{0, 2, 1}, col, 4, 1, 0), SF_ERR_CROW_DECREASING);
  EXPECT_EQ(call(Vec{0, 3}, col, 4, 2, 0), SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(call(crow, col, -1, 0, 0), SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_lane_topk_fill_i64(src.data(), pos.data(), crow.data(), col.data(), v.data(),
                                  nullptr, 0, 1, 4, 2, 2, 1, 0, 1),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_lane_topk_fill_i64(nullptr, nullptr, crow.data(), col.data(), v.data(),
                                  fill.data(), 0, 1, 4, 2, 0, 1, 0, 1),
            SF_OK);
  // no rows: a per-row fill of none has no pointer, and none is read
  Vec no_rows{0};
  EXPECT_EQ(sf_lane_topk_fill_i64(nullptr, nullptr, no_rows.data(), nullptr, nullptr, nullptr, 1,
                                  0, 4, 0, 2, 1, 0, 0),
            SF_OK);
}

// The stable sort of each dense row: perm (stored elements by slot), slot,
// and the row's sort indices.
void reference_sort(const Vec& crow, const Vec& col, const std::vector<double>& v,
                    const std::vector<double>& fill, int64_t n, bool desc, Vec& perm, Vec& slot,
                    Vec& indices) {
  const int64_t nrows = (int64_t)crow.size() - 1;
  Vec src, pos;
  reference_fill(crow, col, v, fill, n, n, desc, src, pos);
  indices = pos;
  perm.clear();
  slot.clear();
  for (int64_t r = 0; r < nrows; ++r)
    for (int64_t t = 0; t < n; ++t)
      if (src[r * n + t] >= 0) {
        perm.push_back(src[r * n + t]);
        slot.push_back(t);
      }
}

TEST(LaneSortFill, MatchesStableSortOfTheDenseRow) {
  std::mt19937_64 rng(13);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const double pool[] = {0.0, -0.0, 1.0, -1.0, 2.5, nan, inf, -inf, 1.0, 3.0};
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t nrows = 1 + rng() % 5;
    const int64_t n = trial % 4 == 0 ? 40 + rng() % 60 : rng() % 14;  // rows > 32: heapsort
    Vec crow{0}, col;
    for (int64_t r = 0; r < nrows; ++r) {
      const int64_t density = rng() % 4;  // empty, sparse, half, full rows
      for (int64_t j = 0; j < n; ++j)
        if (density == 3 || (density && (int64_t)(rng() % 3) < density)) col.push_back(j);
      crow.push_back((int64_t)col.size());
    }
    const int64_t nse = crow.back();
    std::vector<double> v(nse), fill(trial % 2 ? nrows : 1);
    for (auto& x : v) x = pool[rng() % 10];
    for (auto& x : fill) x = pool[rng() % 10];
    std::vector<float> vf(v.begin(), v.end()), ff(fill.begin(), fill.end());
    const int64_t stride = fill.size() == 1 ? 0 : 1;
    for (int desc = 0; desc < 2; ++desc) {
      Vec want_perm, want_slot, want_idx;
      reference_sort(crow, col, v, fill, n, desc, want_perm, want_slot, want_idx);
      Vec perm(nse, -7), slot(nse, -7), idx(nrows * n, -7), perm_f(nse, -7), slot_f(nse, -7);
      const int64_t cut = rng() % (nrows + 1);  // two row ranges
      ASSERT_EQ(sf_lane_sort_fill_f64(perm.data(), slot.data(), idx.data(), crow.data(),
                                      col.data(), v.data(), fill.data(), stride, nrows, n, nse,
                                      desc, 0, cut),
                SF_OK);
      ASSERT_EQ(sf_lane_sort_fill_f64(perm.data(), slot.data(), idx.data(), crow.data(),
                                      col.data(), v.data(), fill.data(), stride, nrows, n, nse,
                                      desc, cut, nrows),
                SF_OK);
      // no indices asked for: the same perm and slot
      ASSERT_EQ(sf_lane_sort_fill_f32(perm_f.data(), slot_f.data(), nullptr, crow.data(),
                                      col.data(), vf.data(), ff.data(), stride, nrows, n, nse,
                                      desc, 0, nrows),
                SF_OK);
      EXPECT_EQ(perm, want_perm) << "trial " << trial << " desc " << desc;
      EXPECT_EQ(slot, want_slot) << "trial " << trial << " desc " << desc;
      EXPECT_EQ(idx, want_idx) << "trial " << trial << " desc " << desc;
      EXPECT_EQ(perm_f, want_perm) << "trial " << trial << " desc " << desc;
      EXPECT_EQ(slot_f, want_slot) << "trial " << trial << " desc " << desc;
    }
  }
}

TEST(LaneSortFill, IntegersInterleaveWithTheFillByPosition) {
  // dense row: 5 4 5 4 4 5 (columns 1, 3, 5 store 4, 4, 5; fill 5 elsewhere)
  Vec crow{0, 3}, col{1, 3, 5}, v{4, 4, 5}, fill{5}, perm(3), slot(3), idx(6);
  ASSERT_EQ(sf_lane_sort_fill_i64(perm.data(), slot.data(), idx.data(), crow.data(), col.data(),
                                  v.data(), fill.data(), 0, 1, 6, 3, 1, 0, 1),
            SF_OK);
  EXPECT_EQ(perm, (Vec{2, 0, 1}));  // the 5s by position, the stored one last of them
  EXPECT_EQ(slot, (Vec{3, 4, 5}));
  EXPECT_EQ(idx, (Vec{0, 2, 4, 5, 1, 3}));
  ASSERT_EQ(sf_lane_sort_fill_i64(perm.data(), slot.data(), idx.data(), crow.data(), col.data(),
                                  v.data(), fill.data(), 0, 1, 6, 3, 0, 0, 1),
            SF_OK);
  EXPECT_EQ(perm, (Vec{0, 1, 2}));
  EXPECT_EQ(slot, (Vec{0, 1, 5}));
  EXPECT_EQ(idx, (Vec{1, 3, 0, 2, 4, 5}));
}

TEST(LaneSortFill, BadInput) {
  Vec crow{0, 2}, col{0, 3}, v{1, 2}, fill{0}, perm(2), slot(2), idx(8);
  auto call = [&](const Vec& c, const Vec& cl, int64_t n, int64_t stride) {
    return sf_lane_sort_fill_i64(perm.data(), slot.data(), idx.data(), c.data(), cl.data(),
                                 v.data(), fill.data(), stride, (int64_t)c.size() - 1, n, 2, 1,
                                 0, (int64_t)c.size() - 1);
  };
  EXPECT_EQ(call(crow, col, 4, 0), SF_OK);
  EXPECT_EQ(call(crow, col, 4, 2), SF_ERR_INVALID_ARGUMENT);  // fill_stride
  EXPECT_EQ(call(crow, col, 3, 0), SF_ERR_INDEX_OUT_OF_RANGE);  // column 3 >= n
  EXPECT_EQ(call(crow, Vec{-1, 2}, 4, 0), SF_ERR_INDEX_NEGATIVE);
  EXPECT_EQ(call(crow, Vec{2, 2}, 4, 0), SF_ERR_COL_UNSORTED);
  EXPECT_EQ(call(Vec{0, 2, 1}, col, 4, 0), SF_ERR_CROW_DECREASING);
  EXPECT_EQ(call(Vec{0, 3}, col, 4, 0), SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(call(crow, col, -1, 0), SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_lane_sort_fill_i64(perm.data(), slot.data(), idx.data(), crow.data(), col.data(),
                                  v.data(), nullptr, 0, 1, 4, 2, 1, 0, 1),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_lane_sort_fill_i64(perm.data(), slot.data(), idx.data(), crow.data(), col.data(),
                                  v.data(), fill.data(), 0, 1, 4, 2, 1, 0, 2),
            SF_ERR_INVALID_ARGUMENT);  // row range past nrows
  EXPECT_EQ(sf_lane_sort_fill_i64(nullptr, nullptr, nullptr, crow.data(), col.data(), v.data(),
                                  fill.data(), 0, 1, 4, 2, 1, 0, 1),
            SF_ERR_NULL_POINTER);
}

}  // namespace
