// Edge cases of the C core's CSR check, rows <-> crow conversions, sorted
// union and gather with fill (sparsefill_core.h) against naive references:
// every status code at its site, empty rows everywhere, extreme keys, every
// row width of a gather. test_core_edges.cpp holds the COO side.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sparsefill_core.h"
#include "edge_testing.h"

namespace {

// CSR check by the rules, in the order the contract lists them.
Outcome ref_csr_check(const Vec& crow, const Vec& col, int64_t ncols) {
  const int64_t nrows = crow.size() - 1, nse = col.size();
  Outcome out{SF_OK, {-7, -7, -7}, 0};
  if (crow[0] != 0) return {SF_ERR_CROW_FIRST, {0, -1, crow[0]}, 0};
  for (int64_t i = 0; i < nrows; ++i) {
    if (crow[i + 1] < crow[i]) return {SF_ERR_CROW_DECREASING, {i, -1, crow[i + 1]}, 0};
  }
  if (crow[nrows] != nse) return {SF_ERR_CROW_LAST, {nrows, -1, crow[nrows]}, 0};
  for (int64_t i = 0; i < nrows; ++i) {
    for (int64_t k = crow[i]; k < crow[i + 1]; ++k) {
      if (col[k] < 0) return {SF_ERR_INDEX_NEGATIVE, {k, 1, col[k]}, 0};
      if (col[k] >= ncols) return {SF_ERR_INDEX_OUT_OF_RANGE, {k, 1, col[k]}, 0};
      if (k > crow[i] && col[k] <= col[k - 1]) return {SF_ERR_COL_UNSORTED, {k, 1, col[k]}, 0};
    }
  }
  return out;
}

// ---- CSR check ----------------------------------------------------------------------

TEST(CsrCheckEdge, crow_first_site) {
  Vec crow{-1, 0};
  sf_site site = fresh_site();
  EXPECT_EQ(sf_csr_check(&site, crow.data(), nullptr, 1, 3, 0), SF_ERR_CROW_FIRST);
  expect_site(site, 0, -1, -1);
  Vec zero_rows{2};
  EXPECT_EQ(sf_csr_check(&site, zero_rows.data(), nullptr, 0, 3, 0), SF_ERR_CROW_FIRST);
  expect_site(site, 0, -1, 2);
}

TEST(CsrCheckEdge, crow_decreasing_site) {
  Vec crow{0, 1, 3, 2, 4};
  Vec col{0, 0, 1, 2};
  sf_site site = fresh_site();
  EXPECT_EQ(sf_csr_check(&site, crow.data(), col.data(), 4, 3, 4), SF_ERR_CROW_DECREASING);
  expect_site(site, 2, -1, 2);
  Vec negative_middle{0, -5, 0};
  EXPECT_EQ(sf_csr_check(&site, negative_middle.data(), nullptr, 2, 3, 0),
            SF_ERR_CROW_DECREASING);
  expect_site(site, 0, -1, -5);
}

TEST(CsrCheckEdge, crow_last_site) {
  Vec crow{0, 1, 1};
  Vec col{0, 1};
  sf_site site = fresh_site();
  EXPECT_EQ(sf_csr_check(&site, crow.data(), col.data(), 2, 3, 2), SF_ERR_CROW_LAST);
  expect_site(site, 2, -1, 1);
  Vec too_big{0, 2, kMax};  // must not read col through kMax
  EXPECT_EQ(sf_csr_check(&site, too_big.data(), col.data(), 2, 3, 2), SF_ERR_CROW_LAST);
  expect_site(site, 2, -1, kMax);
  Vec no_rows{0};
  EXPECT_EQ(sf_csr_check(&site, no_rows.data(), col.data(), 0, 3, 1), SF_ERR_CROW_LAST);
  expect_site(site, 0, -1, 0);
}

TEST(CsrCheckEdge, col_sites) {
  Vec crow{0, 2, 4};
  sf_site site = fresh_site();
  Vec at_ncols{0, 1, 0, 3};
  EXPECT_EQ(sf_csr_check(&site, crow.data(), at_ncols.data(), 2, 3, 4),
            SF_ERR_INDEX_OUT_OF_RANGE);
  expect_site(site, 3, 1, 3);
  Vec negative{0, 1, -2, 0};
  EXPECT_EQ(sf_csr_check(&site, crow.data(), negative.data(), 2, 3, 4), SF_ERR_INDEX_NEGATIVE);
  expect_site(site, 2, 1, -2);
  Vec unsorted{0, 1, 2, 1};
  EXPECT_EQ(sf_csr_check(&site, crow.data(), unsorted.data(), 2, 3, 4), SF_ERR_COL_UNSORTED);
  expect_site(site, 3, 1, 1);
  Vec duplicate{1, 1, 0, 2};
  EXPECT_EQ(sf_csr_check(&site, crow.data(), duplicate.data(), 2, 3, 4), SF_ERR_COL_UNSORTED);
  expect_site(site, 1, 1, 1);
  // a decrease across a row boundary is fine
  Vec across{1, 2, 0, 1};
  EXPECT_EQ(sf_csr_check(&site, crow.data(), across.data(), 2, 3, 4), SF_OK);
}

TEST(CsrCheckEdge, empty) {
  Vec crow{0};
  EXPECT_EQ(sf_csr_check(nullptr, crow.data(), nullptr, 0, 0, 0), SF_OK);
  Vec empty_rows{0, 0, 0, 0};
  EXPECT_EQ(sf_csr_check(nullptr, empty_rows.data(), nullptr, 3, 0, 0), SF_OK);
  Vec col{0};
  Vec one{0, 1};
  EXPECT_EQ(sf_csr_check(nullptr, one.data(), col.data(), 1, 0, 1), SF_ERR_INDEX_OUT_OF_RANGE);
}

TEST(CsrCheckEdge, null_and_negative_arguments) {
  Vec crow{0, 1};
  Vec col{0};
  EXPECT_EQ(sf_csr_check(nullptr, nullptr, col.data(), 1, 1, 1), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_csr_check(nullptr, nullptr, nullptr, 0, 0, 0), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_csr_check(nullptr, crow.data(), nullptr, 1, 1, 1), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_csr_check(nullptr, crow.data(), col.data(), -1, 1, 1), SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_csr_check(nullptr, crow.data(), col.data(), 1, -1, 1), SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_csr_check(nullptr, crow.data(), col.data(), 1, 1, -1), SF_ERR_NEGATIVE_SIZE);
}

TEST(CsrCheckEdge, random_against_reference) {
  std::mt19937_64 rng(18);
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t nrows = rng() % 6, ncols = rng() % 5;
    // a valid CSR, then (most of the time) one mutation
    Vec crow{0}, col;
    for (int64_t i = 0; i < nrows; ++i) {
      for (int64_t c = 0; c < ncols; ++c) {
        if (rng() % 2) col.push_back(c);
      }
      crow.push_back(col.size());
    }
    switch (rng() % 6) {
      case 0: break;
      case 1: crow[rng() % crow.size()] += (int64_t)(rng() % 5) - 2; break;
      case 2:
        if (!col.empty()) col[rng() % col.size()] += (int64_t)(rng() % 5) - 2;
        break;
      case 3:
        if (!col.empty()) col[rng() % col.size()] = -1;
        break;
      case 4:
        if (col.size() > 1) std::swap(col[0], col[1]);
        break;
      default: crow[rng() % crow.size()] = (int64_t)(rng() % 20) - 5; break;
    }
    const Outcome ref = ref_csr_check(crow, col, ncols);
    sf_site site = fresh_site();
    const sf_status st =
        sf_csr_check(&site, crow.data(), col.data(), nrows, ncols, (int64_t)col.size());
    ASSERT_EQ(st, ref.status) << "trial " << trial;
    if (st != SF_OK) expect_site(site, ref.site.position, ref.site.dim, ref.site.value);
  }
}

// ---- rows <-> crow --------------------------------------------------------------------

void expect_rows_crow_round_trip(const Vec& rows, int64_t nrows) {
  Vec crow(nrows + 1, -9);
  ASSERT_EQ(sf_crow_from_rows(crow.data(), rows.data(), rows.size(), nrows), SF_OK);
  Vec ref_crow(nrows + 1, 0);
  for (int64_t r : rows) ref_crow[r + 1]++;
  std::partial_sum(ref_crow.begin(), ref_crow.end(), ref_crow.begin());
  EXPECT_EQ(crow, ref_crow);
  Vec back(rows.size(), -9);
  ASSERT_EQ(sf_csr_rows_from_crow(back.data(), crow.data(), nrows), SF_OK);
  EXPECT_EQ(back, rows);
}

TEST(CrowEdge, round_trip_empty_rows_everywhere) {
  expect_rows_crow_round_trip(Vec{}, 0);
  expect_rows_crow_round_trip(Vec{}, 5);            // all rows empty
  expect_rows_crow_round_trip(Vec{0, 0, 0}, 1);     // one full row
  expect_rows_crow_round_trip(Vec{3, 3}, 4);        // leading empty rows
  expect_rows_crow_round_trip(Vec{0, 0}, 4);        // trailing empty rows
  expect_rows_crow_round_trip(Vec{1, 1, 4, 6}, 8);  // empty rows between
}

TEST(CrowEdge, random_round_trip) {
  std::mt19937_64 rng(19);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t nrows = rng() % 30;
    Vec rows(nrows == 0 ? 0 : rng() % 50);
    for (auto& r : rows) r = rng() % nrows;
    std::sort(rows.begin(), rows.end());
    SCOPED_TRACE(trial);
    expect_rows_crow_round_trip(rows, nrows);
  }
}

TEST(CrowEdge, rows_from_crow_errors) {
  Vec rows(4);
  Vec first{1, 2};
  EXPECT_EQ(sf_csr_rows_from_crow(rows.data(), first.data(), 1), SF_ERR_CROW_FIRST);
  Vec decreasing{0, 3, 2, 4};
  EXPECT_EQ(sf_csr_rows_from_crow(rows.data(), decreasing.data(), 3), SF_ERR_CROW_DECREASING);
  Vec ok{0, 1};
  EXPECT_EQ(sf_csr_rows_from_crow(rows.data(), nullptr, 1), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_csr_rows_from_crow(nullptr, ok.data(), 1), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_csr_rows_from_crow(rows.data(), ok.data(), -1), SF_ERR_NEGATIVE_SIZE);
  Vec empty{0, 0, 0};
  EXPECT_EQ(sf_csr_rows_from_crow(nullptr, empty.data(), 2), SF_OK);  // nse 0: no rows buffer
}

TEST(CrowEdge, crow_from_rows_errors) {
  Vec crow(3);
  Vec at_nrows{0, 2};
  EXPECT_EQ(sf_crow_from_rows(crow.data(), at_nrows.data(), 2, 2), SF_ERR_INDEX_OUT_OF_RANGE);
  Vec one{0};
  EXPECT_EQ(sf_crow_from_rows(crow.data(), one.data(), 1, 0), SF_ERR_INDEX_OUT_OF_RANGE);
  Vec negative_later{0, 1, -1};
  EXPECT_EQ(sf_crow_from_rows(crow.data(), negative_later.data(), 3, 2), SF_ERR_INDEX_NEGATIVE);
  Vec decreasing{1, 1, 0};
  EXPECT_EQ(sf_crow_from_rows(crow.data(), decreasing.data(), 3, 2), SF_ERR_NOT_COALESCED);
  EXPECT_EQ(sf_crow_from_rows(nullptr, one.data(), 1, 2), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_crow_from_rows(crow.data(), nullptr, 1, 2), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_crow_from_rows(crow.data(), one.data(), -1, 2), SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_crow_from_rows(crow.data(), one.data(), 1, -1), SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_crow_from_rows(crow.data(), nullptr, 0, 2), SF_OK);
  EXPECT_EQ(crow, (Vec{0, 0, 0}));
}

// ---- union ------------------------------------------------------------------------------

void expect_union(const Vec& a, const Vec& b) {
  Vec ref;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(ref));
  int64_t count = -1;
  ASSERT_EQ(sf_union_count(&count, a.data(), a.size(), b.data(), b.size()), SF_OK);
  EXPECT_EQ(count, (int64_t)ref.size());
  const size_t bound = a.size() + b.size();
  Vec out(bound, -9), src_a(bound, -9), src_b(bound, -9);
  int64_t n = -1;
  ASSERT_EQ(sf_union_plan(&n, out.data(), src_a.data(), src_b.data(), a.data(), a.size(),
                          b.data(), b.size()),
            SF_OK);
  ASSERT_EQ(n, (int64_t)ref.size());
  for (int64_t k = 0; k < n; ++k) {
    EXPECT_EQ(out[k], ref[k]);
    const auto ia = std::lower_bound(a.begin(), a.end(), ref[k]);
    const auto ib = std::lower_bound(b.begin(), b.end(), ref[k]);
    EXPECT_EQ(src_a[k], ia != a.end() && *ia == ref[k] ? ia - a.begin() : -1);
    EXPECT_EQ(src_b[k], ib != b.end() && *ib == ref[k] ? ib - b.begin() : -1);
  }
}

TEST(UnionEdge, disjoint) {
  expect_union({0, 1, 2}, {10, 11});
  expect_union({10, 11}, {0, 1, 2});
}
TEST(UnionEdge, identical) { expect_union({0, 4, 8, kMax}, {0, 4, 8, kMax}); }
TEST(UnionEdge, one_empty) {
  expect_union({}, {1, 2, 3});
  expect_union({1, 2, 3}, {});
}
TEST(UnionEdge, both_empty) {
  expect_union({}, {});
  int64_t n = -1;
  EXPECT_EQ(sf_union_count(&n, nullptr, 0, nullptr, 0), SF_OK);
  EXPECT_EQ(n, 0);
  n = -1;
  EXPECT_EQ(sf_union_plan(&n, nullptr, nullptr, nullptr, nullptr, 0, nullptr, 0), SF_OK);
  EXPECT_EQ(n, 0);
}
TEST(UnionEdge, interleaved) { expect_union({0, 2, 4, 6, 8}, {1, 3, 5, 7, 9, 11, 13}); }
TEST(UnionEdge, negative_and_extreme_keys) {
  expect_union({std::numeric_limits<int64_t>::min(), -1, kMax}, {-1, 0, kMax});
}

TEST(UnionEdge, random_against_set_union) {
  std::mt19937_64 rng(20);
  for (int trial = 0; trial < 300; ++trial) {
    std::set<int64_t> sa, sb;
    const int64_t range = 1 + rng() % 200;
    const int na = rng() % 60, nb = rng() % 60;
    for (int i = 0; i < na; ++i) sa.insert((int64_t)(rng() % range));
    for (int i = 0; i < nb; ++i) sb.insert((int64_t)(rng() % range));
    SCOPED_TRACE(trial);
    expect_union(Vec(sa.begin(), sa.end()), Vec(sb.begin(), sb.end()));
  }
}

TEST(UnionEdge, errors) {
  Vec a{1, 2}, dup{2, 2}, unsorted{3, 1};
  Vec out(4), sa(4), sb(4);
  int64_t n = -1;
  EXPECT_EQ(sf_union_count(nullptr, a.data(), 2, a.data(), 2), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_union_count(&n, nullptr, 2, a.data(), 2), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_union_count(&n, a.data(), 2, nullptr, 2), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_union_count(&n, a.data(), -1, a.data(), 2), SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_union_count(&n, a.data(), 2, a.data(), -1), SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_union_count(&n, dup.data(), 2, a.data(), 2), SF_ERR_NOT_COALESCED);
  EXPECT_EQ(sf_union_count(&n, a.data(), 2, unsorted.data(), 2), SF_ERR_NOT_COALESCED);
  EXPECT_EQ(sf_union_plan(&n, nullptr, sa.data(), sb.data(), a.data(), 2, a.data(), 2),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_union_plan(&n, out.data(), nullptr, sb.data(), a.data(), 2, a.data(), 2),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_union_plan(&n, out.data(), sa.data(), nullptr, a.data(), 2, a.data(), 2),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_union_plan(&n, out.data(), sa.data(), sb.data(), nullptr, 2, a.data(), 2),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_union_plan(&n, out.data(), sa.data(), sb.data(), a.data(), -2, a.data(), 2),
            SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_union_plan(&n, out.data(), sa.data(), sb.data(), a.data(), 2, dup.data(), 2),
            SF_ERR_NOT_COALESCED);
  // lengths whose sum overflows: the NULL checks must not form the sum
  EXPECT_EQ(sf_union_plan(&n, nullptr, nullptr, nullptr, a.data(), kMax, a.data(), kMax),
            SF_ERR_NULL_POINTER);
}

// ---- gather with fill --------------------------------------------------------------------

void expect_gather(size_t row_bytes, const Vec& src, int64_t nse_values, std::mt19937_64& rng) {
  std::vector<unsigned char> values(nse_values * row_bytes), fill(row_bytes),
      out(src.size() * row_bytes + 1, 0xEE);
  for (auto& v : values) v = (unsigned char)rng();
  for (auto& f : fill) f = (unsigned char)rng();
  ASSERT_EQ(sf_gather_rows_with_fill(out.data(), nse_values ? values.data() : nullptr, nse_values,
                                     fill.data(), src.data(), src.size(), row_bytes),
            SF_OK);
  for (size_t k = 0; k < src.size(); ++k) {
    const unsigned char* expect =
        src[k] < 0 ? fill.data() : values.data() + (size_t)src[k] * row_bytes;
    ASSERT_EQ(std::memcmp(out.data() + k * row_bytes, expect, row_bytes), 0)
        << "row_bytes " << row_bytes << " row " << k;
  }
  EXPECT_EQ(out.back(), 0xEE);  // nothing written past n rows
}

TEST(GatherEdge, every_row_width_with_fill_sources) {
  std::mt19937_64 rng(21);
  for (size_t row_bytes : {1, 2, 3, 4, 8, 12, 16, 24, 100}) {
    for (int trial = 0; trial < 20; ++trial) {
      const int64_t nse_values = rng() % 10, n = rng() % 40;
      Vec src(n);
      for (auto& s : src) {
        const int64_t r = (int64_t)(rng() % (nse_values + 3));
        s = r < nse_values ? r : (r == nse_values ? -1 : -(int64_t)(rng() % 1000) - 1);
      }
      expect_gather(row_bytes, src, nse_values, rng);
    }
  }
}

TEST(GatherEdge, all_fill) {
  std::mt19937_64 rng(22);
  for (size_t row_bytes : {1, 2, 4, 8, 12, 16}) {
    expect_gather(row_bytes, Vec(7, -1), 0, rng);  // values NULL: never read
  }
}

TEST(GatherEdge, no_fill) {
  std::mt19937_64 rng(23);
  for (size_t row_bytes : {1, 2, 4, 8, 12, 16}) expect_gather(row_bytes, Vec{2, 0, 1, 2}, 3, rng);
}

TEST(GatherEdge, empty) {
  EXPECT_EQ(sf_gather_rows_with_fill(nullptr, nullptr, 0, nullptr, nullptr, 0, 4), SF_OK);
  double values[2] = {1, 2};
  EXPECT_EQ(sf_gather_rows_with_fill(nullptr, values, 2, nullptr, nullptr, 0, 8), SF_OK);
}

TEST(GatherEdge, zero_row_bytes) {
  Vec src{0, -1};
  EXPECT_EQ(sf_gather_rows_with_fill(nullptr, nullptr, 1, nullptr, src.data(), 2, 0), SF_OK);
  Vec bad{1};
  EXPECT_EQ(sf_gather_rows_with_fill(nullptr, nullptr, 1, nullptr, bad.data(), 1, 0),
            SF_ERR_INDEX_OUT_OF_RANGE);
}

TEST(GatherEdge, errors) {
  int32_t values[3] = {1, 2, 3}, fill = 0, out[3] = {0, 0, 0};
  Vec at_nse{0, 3};
  EXPECT_EQ(sf_gather_rows_with_fill(out, values, 3, &fill, at_nse.data(), 2, 4),
            SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(out[0], 0);  // validated before anything is written
  Vec big{kMax};
  EXPECT_EQ(sf_gather_rows_with_fill(out, values, 3, &fill, big.data(), 1, 4),
            SF_ERR_INDEX_OUT_OF_RANGE);
  Vec ok{0, -1};
  EXPECT_EQ(sf_gather_rows_with_fill(nullptr, values, 3, &fill, ok.data(), 2, 4),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_gather_rows_with_fill(out, nullptr, 3, &fill, ok.data(), 2, 4),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_gather_rows_with_fill(out, values, 3, nullptr, ok.data(), 2, 4),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_gather_rows_with_fill(out, values, 3, &fill, nullptr, 2, 4), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_gather_rows_with_fill(out, values, 3, &fill, ok.data(), -1, 4),
            SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_gather_rows_with_fill(out, values, -3, &fill, ok.data(), 2, 4),
            SF_ERR_NEGATIVE_SIZE);
  Vec src_any{-1};  // with no values, only fills are possible
  EXPECT_EQ(sf_gather_rows_with_fill(out, nullptr, 0, &fill, src_any.data(), 1, 4), SF_OK);
  Vec src_zero{0};
  EXPECT_EQ(sf_gather_rows_with_fill(out, nullptr, 0, &fill, src_zero.data(), 1, 4),
            SF_ERR_INDEX_OUT_OF_RANGE);
}

}  // namespace
