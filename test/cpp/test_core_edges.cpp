// Edge cases and randomized comparisons of the C core (sparsefill_core.h)
// against naive references written here: every status code at its site,
// NULL pointers, negative lengths, int64 limits, empty inputs, every radix
// pass pattern of the coalescing plan and in-place calls.
// test_csr_union_edges.cpp holds CSR, union and gather; test_core.cpp the
// basic behaviour.
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

// ---- naive references ------------------------------------------------------------

// COO check, element by element (then dimension by dimension).
Outcome ref_coo_check(const Vec& indices, const Vec& sizes, int64_t nse) {
  const int64_t sd = sizes.size();
  Outcome out{SF_OK, {-7, -7, -7}, 1};
  Vec linear(nse, 0);
  for (int64_t k = 0; k < nse; ++k) {
    for (int64_t d = 0; d < sd; ++d) {
      const int64_t i = indices[d * nse + k];
      if (i < 0 || i >= sizes[d]) {
        out.status = i < 0 ? SF_ERR_INDEX_NEGATIVE : SF_ERR_INDEX_OUT_OF_RANGE;
        out.site = {k, d, i};
        return out;
      }
      linear[k] = linear[k] * sizes[d] + i;
    }
  }
  for (int64_t k = 1; k < nse; ++k) {
    if (linear[k] <= linear[k - 1]) out.coalesced = 0;
  }
  return out;
}


// Coalescing plan through std::sort + std::unique + binary search.
void ref_plan(const Vec& linear, Vec* unique, Vec* segment) {
  *unique = linear;
  std::sort(unique->begin(), unique->end());
  unique->erase(std::unique(unique->begin(), unique->end()), unique->end());
  segment->resize(linear.size());
  for (size_t k = 0; k < linear.size(); ++k) {
    (*segment)[k] = std::lower_bound(unique->begin(), unique->end(), linear[k]) - unique->begin();
  }
}

void expect_plan_matches_reference(const Vec& linear) {
  const int64_t nse = linear.size();
  Vec unique(nse, -9), segment(nse, -9), ref_unique, ref_segment;
  int64_t n_out = -1;
  ASSERT_EQ(sf_coalesce_plan(unique.data(), segment.data(), &n_out, linear.data(), nse), SF_OK);
  ref_plan(linear, &ref_unique, &ref_segment);
  ASSERT_EQ(n_out, (int64_t)ref_unique.size());
  unique.resize(n_out);
  EXPECT_EQ(unique, ref_unique);
  EXPECT_EQ(segment, ref_segment);
}

// ---- status and sizes ---------------------------------------------------------------

TEST(StatusEdge, NamesAreDistinctAndStatic) {
  std::set<std::string> names;
  for (int s = 0; s >= -12; --s) {
    const char* a = sf_status_string(static_cast<sf_status>(s));
    EXPECT_EQ(a, sf_status_string(static_cast<sf_status>(s)));  // static storage
    EXPECT_GT(std::strlen(a), 0u);
    names.insert(a);
  }
  EXPECT_EQ(names.size(), 13u);
  EXPECT_STREQ(sf_status_string(static_cast<sf_status>(1)), "unknown status");
  EXPECT_STREQ(sf_status_string(static_cast<sf_status>(-13)), "unknown status");
  EXPECT_STREQ(sf_status_string(SF_ERR_INDEX_OUT_OF_RANGE), "an index is out of range");
}

TEST(SizesEdge, numel_ndim0_is_one_with_null_sizes) {
  int64_t n = -1;
  EXPECT_EQ(sf_sizes_numel(&n, nullptr, 0), SF_OK);
  EXPECT_EQ(n, 1);
}

TEST(SizesEdge, numel_overflow_boundary) {
  int64_t n = -1;
  Vec max1{kMax, 1};
  EXPECT_EQ(sf_sizes_numel(&n, max1.data(), 2), SF_OK);
  EXPECT_EQ(n, kMax);
  Vec just_fits{3037000499, 3037000499};  // floor(sqrt(2^63 - 1))
  EXPECT_EQ(sf_sizes_numel(&n, just_fits.data(), 2), SF_OK);
  EXPECT_EQ(n, int64_t(3037000499) * 3037000499);
  Vec just_over{3037000500, 3037000500};
  EXPECT_EQ(sf_sizes_numel(&n, just_over.data(), 2), SF_ERR_OVERFLOW);
  Vec pow63{int64_t(1) << 62, 2};
  EXPECT_EQ(sf_sizes_numel(&n, pow63.data(), 2), SF_ERR_OVERFLOW);
  Vec many_twos(63, 2);  // 2^63
  EXPECT_EQ(sf_sizes_numel(&n, many_twos.data(), 63), SF_ERR_OVERFLOW);
  EXPECT_EQ(sf_sizes_numel(&n, many_twos.data(), 62), SF_OK);
  EXPECT_EQ(n, int64_t(1) << 62);
}

TEST(SizesEdge, numel_zero_size_and_negative_size) {
  int64_t n = -1;
  Vec zero_first{0, kMax};
  EXPECT_EQ(sf_sizes_numel(&n, zero_first.data(), 2), SF_OK);
  EXPECT_EQ(n, 0);
  Vec zero_and_negative{0, -1};
  EXPECT_EQ(sf_sizes_numel(&n, zero_and_negative.data(), 2), SF_ERR_NEGATIVE_SIZE);
  Vec min{std::numeric_limits<int64_t>::min()};
  EXPECT_EQ(sf_sizes_numel(&n, min.data(), 1), SF_ERR_NEGATIVE_SIZE);
}

// ---- COO check ----------------------------------------------------------------------

TEST(CooCheckEdge, out_of_range_at_exact_size_boundary) {
  Vec sizes{3, 4, 5};
  Vec indices{2, 2, /* d1 */ 3, 3, /* d2 */ 4, 5};
  sf_site site = fresh_site();
  EXPECT_EQ(sf_coo_check(&site, nullptr, indices.data(), 3, 2, sizes.data()),
            SF_ERR_INDEX_OUT_OF_RANGE);
  expect_site(site, 1, 2, 5);
}

TEST(CooCheckEdge, first_bad_element_wins) {
  Vec sizes{3, 4};
  // element 1 has a bad dim 1; element 2 a bad dim 0: element 1 is reported.
  Vec indices{0, 1, 9, /* d1 */ 0, -3, 0};
  sf_site site = fresh_site();
  EXPECT_EQ(sf_coo_check(&site, nullptr, indices.data(), 2, 3, sizes.data()),
            SF_ERR_INDEX_NEGATIVE);
  expect_site(site, 1, 1, -3);
  // within one element, the lower dimension is reported.
  Vec both{5, /* d1 */ -1};
  EXPECT_EQ(sf_coo_check(&site, nullptr, both.data(), 2, 1, sizes.data()),
            SF_ERR_INDEX_OUT_OF_RANGE);
  expect_site(site, 0, 0, 5);
}

TEST(CooCheckEdge, null_site_and_flag_are_allowed) {
  Vec sizes{3};
  Vec bad{7};
  EXPECT_EQ(sf_coo_check(nullptr, nullptr, bad.data(), 1, 1, sizes.data()),
            SF_ERR_INDEX_OUT_OF_RANGE);
  Vec good{1};
  EXPECT_EQ(sf_coo_check(nullptr, nullptr, good.data(), 1, 1, sizes.data()), SF_OK);
}

TEST(CooCheckEdge, sparse_dim0) {
  int coalesced = -1;
  EXPECT_EQ(sf_coo_check(nullptr, &coalesced, nullptr, 0, 0, nullptr), SF_OK);
  EXPECT_EQ(coalesced, 1);
  EXPECT_EQ(sf_coo_check(nullptr, &coalesced, nullptr, 0, 1, nullptr), SF_OK);
  EXPECT_EQ(coalesced, 1);
  // nse > 1 with no sparse dims: duplicates of the one position.
  EXPECT_EQ(sf_coo_check(nullptr, &coalesced, nullptr, 0, 3, nullptr), SF_OK);
  EXPECT_EQ(coalesced, 0);
}

TEST(CooCheckEdge, zero_size_dim) {
  Vec sizes{4, 0};
  int coalesced = -1;
  EXPECT_EQ(sf_coo_check(nullptr, &coalesced, nullptr, 2, 0, sizes.data()), SF_OK);
  EXPECT_EQ(coalesced, 1);
  Vec indices{1, 0};
  sf_site site = fresh_site();
  EXPECT_EQ(sf_coo_check(&site, &coalesced, indices.data(), 2, 1, sizes.data()),
            SF_ERR_INDEX_OUT_OF_RANGE);
  expect_site(site, 0, 1, 0);
}

TEST(CooCheckEdge, negative_lengths_and_sizes) {
  Vec sizes{3, -2};
  Vec indices{0, 0};
  EXPECT_EQ(sf_coo_check(nullptr, nullptr, indices.data(), -1, 0, sizes.data()),
            SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_coo_check(nullptr, nullptr, indices.data(), 1, -1, sizes.data()),
            SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_coo_check(nullptr, nullptr, indices.data(), 2, 1, sizes.data()),
            SF_ERR_NEGATIVE_SIZE);
}

TEST(CooCheckEdge, null_pointers_with_huge_lengths_do_not_overflow) {
  // sparse_dim * nse overflows int64: the NULL check must not form it.
  const int64_t big = int64_t(1) << 40;
  EXPECT_EQ(sf_coo_check(nullptr, nullptr, nullptr, big, big, nullptr), SF_ERR_NULL_POINTER);
  Vec linear(1);
  EXPECT_EQ(sf_coo_linearize(linear.data(), nullptr, big, big, nullptr), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_coo_delinearize(nullptr, linear.data(), big, big, nullptr), SF_ERR_NULL_POINTER);
}

TEST(CooCheckEdge, null_indices_ok_when_no_elements) {
  Vec sizes{2, 2};
  EXPECT_EQ(sf_coo_check(nullptr, nullptr, nullptr, 2, 0, sizes.data()), SF_OK);
  EXPECT_EQ(sf_coo_check(nullptr, nullptr, nullptr, 2, 1, sizes.data()), SF_ERR_NULL_POINTER);
}

TEST(CooCheckEdge, random_against_reference) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 500; ++trial) {
    const int64_t sd = 1 + rng() % 3, nse = rng() % 12;
    Vec sizes(sd);
    for (auto& s : sizes) s = rng() % 4;  // zeros included
    Vec indices(sd * nse);
    for (auto& i : indices) i = (int64_t)(rng() % 7) - 1;  // -1 .. 5
    if (trial % 2 == 0) {  // mostly valid half the time
      for (int64_t d = 0; d < sd; ++d) {
        for (int64_t k = 0; k < nse; ++k) {
          if (sizes[d] > 0) indices[d * nse + k] = rng() % sizes[d];
        }
      }
    }
    const Outcome ref = ref_coo_check(indices, sizes, nse);
    sf_site site = fresh_site();
    int coalesced = -1;
    const sf_status st = sf_coo_check(&site, &coalesced, indices.data(), sd, nse, sizes.data());
    ASSERT_EQ(st, ref.status) << "trial " << trial;
    if (st == SF_OK) {
      EXPECT_EQ(coalesced, ref.coalesced);
    } else {
      expect_site(site, ref.site.position, ref.site.dim, ref.site.value);
    }
  }
}

TEST(CooCheckEdge, coalesced_flag_all_fill) {  // a tensor of fills: no stored element
  Vec sizes{kMax};
  int coalesced = 0;
  EXPECT_EQ(sf_coo_check(nullptr, &coalesced, nullptr, 1, 0, sizes.data()), SF_OK);
  EXPECT_EQ(coalesced, 1);
}

// ---- linearize / delinearize ---------------------------------------------------------

TEST(LinearizeEdge, empty) {
  Vec sizes{3, 4};
  EXPECT_EQ(sf_coo_linearize(nullptr, nullptr, 2, 0, sizes.data()), SF_OK);
  EXPECT_EQ(sf_coo_delinearize(nullptr, nullptr, 2, 0, sizes.data()), SF_OK);
  Vec zero{3, 0};
  EXPECT_EQ(sf_coo_linearize(nullptr, nullptr, 2, 0, zero.data()), SF_OK);
  EXPECT_EQ(sf_coo_delinearize(nullptr, nullptr, 2, 0, zero.data()), SF_OK);
}

TEST(LinearizeEdge, errors) {
  Vec sizes{3, 4};
  Vec indices{0, 0};
  Vec linear(1);
  EXPECT_EQ(sf_coo_linearize(nullptr, indices.data(), 2, 1, sizes.data()), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_coo_linearize(linear.data(), nullptr, 2, 1, sizes.data()), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_coo_linearize(linear.data(), indices.data(), 2, 1, nullptr), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_coo_linearize(linear.data(), indices.data(), 2, -1, sizes.data()),
            SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_coo_linearize(linear.data(), indices.data(), -2, 1, sizes.data()),
            SF_ERR_NEGATIVE_SIZE);
  Vec negative{3, -4};
  EXPECT_EQ(sf_coo_linearize(linear.data(), indices.data(), 2, 1, negative.data()),
            SF_ERR_NEGATIVE_SIZE);
  Vec huge{int64_t(1) << 32, int64_t(1) << 32};
  EXPECT_EQ(sf_coo_linearize(linear.data(), indices.data(), 2, 1, huge.data()), SF_ERR_OVERFLOW);
  EXPECT_EQ(sf_coo_delinearize(indices.data(), linear.data(), 2, 1, huge.data()),
            SF_ERR_OVERFLOW);
  Vec zero{3, 0};  // no index is valid in a dimension of size 0
  EXPECT_EQ(sf_coo_linearize(linear.data(), indices.data(), 2, 1, zero.data()),
            SF_ERR_INDEX_OUT_OF_RANGE);
  linear[0] = 0;
  EXPECT_EQ(sf_coo_delinearize(indices.data(), linear.data(), 2, 1, zero.data()),
            SF_ERR_INDEX_OUT_OF_RANGE);
}

TEST(LinearizeEdge, out_of_range_in_later_dim_is_caught) {
  Vec sizes{4, 4, 4};
  // (0, 0, 4) would alias (0, 1, 0) if unchecked.
  Vec indices{0, 0, /* d1 */ 0, 0, /* d2 */ 3, 4};
  Vec linear(2);
  EXPECT_EQ(sf_coo_linearize(linear.data(), indices.data(), 3, 2, sizes.data()),
            SF_ERR_INDEX_OUT_OF_RANGE);
}

TEST(LinearizeEdge, round_trip_near_int64_limits) {
  std::mt19937_64 rng(12);
  const std::vector<Vec> all_sizes{
      Vec{kMax}, Vec{int64_t(1) << 31, int64_t(1) << 31}, Vec{3037000499, 3037000499},
      Vec{2097151, 2097151, 2097151}, Vec{1, kMax / 2, 2}};
  for (const Vec& sizes : all_sizes) {
    const int64_t sd = sizes.size(), nse = 64;
    Vec indices(sd * nse);
    for (int64_t d = 0; d < sd; ++d) {
      for (int64_t k = 0; k < nse; ++k) {
        indices[d * nse + k] = k == 0 ? sizes[d] - 1 : k == 1 ? 0 : (int64_t)(rng() % sizes[d]);
      }
    }
    Vec linear(nse, -1);
    ASSERT_EQ(sf_coo_linearize(linear.data(), indices.data(), sd, nse, sizes.data()), SF_OK);
    int64_t numel = 0;
    ASSERT_EQ(sf_sizes_numel(&numel, sizes.data(), sd), SF_OK);
    EXPECT_EQ(linear[0], numel - 1);
    EXPECT_EQ(linear[1], 0);
    Vec back(sd * nse, -1);
    ASSERT_EQ(sf_coo_delinearize(back.data(), linear.data(), sd, nse, sizes.data()), SF_OK);
    EXPECT_EQ(back, indices);
  }
}

TEST(LinearizeEdge, random_round_trip_1_to_3_dims) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t sd = 1 + trial % 3, nse = rng() % 40;
    Vec sizes(sd);
    for (auto& s : sizes) s = 1 + rng() % 1000;
    Vec indices(sd * nse);
    for (int64_t d = 0; d < sd; ++d) {
      for (int64_t k = 0; k < nse; ++k) indices[d * nse + k] = rng() % sizes[d];
    }
    Vec linear(nse);
    ASSERT_EQ(sf_coo_linearize(linear.data(), indices.data(), sd, nse, sizes.data()), SF_OK);
    for (int64_t k = 0; k < nse; ++k) {
      int64_t l = 0;
      for (int64_t d = 0; d < sd; ++d) l = l * sizes[d] + indices[d * nse + k];
      ASSERT_EQ(linear[k], l);
    }
    Vec back(sd * nse);
    ASSERT_EQ(sf_coo_delinearize(back.data(), linear.data(), sd, nse, sizes.data()), SF_OK);
    ASSERT_EQ(back, indices);
  }
}

TEST(DelinearizeEdge, sparse_dim0_and_bounds) {
  Vec zeros{0, 0};
  EXPECT_EQ(sf_coo_delinearize(nullptr, zeros.data(), 0, 2, nullptr), SF_OK);
  Vec one{1};
  EXPECT_EQ(sf_coo_delinearize(nullptr, one.data(), 0, 1, nullptr), SF_ERR_INDEX_OUT_OF_RANGE);
  Vec sizes{2, 3};
  Vec last{5}, out(2, -1);
  EXPECT_EQ(sf_coo_delinearize(out.data(), last.data(), 2, 1, sizes.data()), SF_OK);
  EXPECT_EQ(out, (Vec{1, 2}));
  Vec min{std::numeric_limits<int64_t>::min()};
  EXPECT_EQ(sf_coo_delinearize(out.data(), min.data(), 2, 1, sizes.data()),
            SF_ERR_INDEX_NEGATIVE);
}

TEST(DelinearizeEdge, in_place_into_first_row) {
  Vec sizes{5, 7};
  Vec buffer{34, 0, 8, /* row 1 */ -1, -1, -1};  // row 0 holds the linear indices
  ASSERT_EQ(sf_coo_delinearize(buffer.data(), buffer.data(), 2, 3, sizes.data()), SF_OK);
  EXPECT_EQ(buffer, (Vec{4, 0, 1, /* row 1 */ 6, 0, 1}));
}

// ---- coalescing plan ------------------------------------------------------------------

TEST(CoalescePlanEdge, empty) {
  int64_t n = -1;
  EXPECT_EQ(sf_coalesce_plan(nullptr, nullptr, &n, nullptr, 0), SF_OK);
  EXPECT_EQ(n, 0);
}

TEST(CoalescePlanEdge, single_element) {
  Vec linear{kMax};
  Vec u(1), s(1);
  int64_t n = -1;
  ASSERT_EQ(sf_coalesce_plan(u.data(), s.data(), &n, linear.data(), 1), SF_OK);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(u[0], kMax);
  EXPECT_EQ(s[0], 0);
}

TEST(CoalescePlanEdge, all_duplicates) {
  expect_plan_matches_reference(Vec(1000, 77));
  expect_plan_matches_reference(Vec(5, 0));
}

TEST(CoalescePlanEdge, sorted_with_duplicates) {
  expect_plan_matches_reference(Vec{0, 0, 1, 5, 5, 5, 9});
}

TEST(CoalescePlanEdge, reverse_sorted) {
  Vec linear(3000);
  for (size_t k = 0; k < linear.size(); ++k) linear[k] = 3 * (int64_t)(linear.size() - k);
  expect_plan_matches_reference(linear);
}

TEST(CoalescePlanEdge, already_sorted_is_identity) {
  Vec linear(1000);
  for (size_t k = 0; k < linear.size(); ++k) linear[k] = (int64_t)(k * k);
  Vec u(linear.size()), s(linear.size());
  int64_t n = -1;
  ASSERT_EQ(sf_coalesce_plan(u.data(), s.data(), &n, linear.data(), linear.size()), SF_OK);
  EXPECT_EQ(n, (int64_t)linear.size());
  EXPECT_EQ(u, linear);
  Vec iota(linear.size());
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(s, iota);
}

// Keys whose differing bits lie in chosen digits: every pattern of active and
// skipped radix passes (odd and even counts, the first pass skipped or not).
TEST(CoalescePlanEdge, every_radix_pass_pattern) {
  std::mt19937_64 rng(14);
  for (int mask = 1; mask < 64; ++mask) {  // bit p: digit p (11 bits) varies
    Vec linear(257);
    for (auto& x : linear) {
      uint64_t key = 0;
      for (int p = 0; p < 6; ++p) {
        if (mask >> p & 1) key |= (rng() & 0x7ff) << (11 * p);
      }
      key |= uint64_t(1) << 62;  // a constant high bit: a shared digit
      x = (int64_t)(key & (uint64_t)kMax);
    }
    linear[100] = linear[3];  // and a duplicate
    SCOPED_TRACE(mask);
    expect_plan_matches_reference(linear);
  }
}

TEST(CoalescePlanEdge, random_against_sort_unique) {
  std::mt19937_64 rng(15);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t nse = rng() % 600;
    const int64_t range = int64_t(1) << (rng() % 63);
    Vec linear(nse);
    for (auto& x : linear) x = (int64_t)(rng() % (uint64_t)range);
    SCOPED_TRACE(trial);
    expect_plan_matches_reference(linear);
  }
}

TEST(CoalescePlanEdge, large_random_against_sort_unique) {
  std::mt19937_64 rng(16);
  Vec linear(1 << 20);
  for (auto& x : linear) x = (int64_t)(rng() % 3000000);  // many duplicates
  expect_plan_matches_reference(linear);
  for (auto& x : linear) x = (int64_t)(rng() >> 1);  // full-width keys
  expect_plan_matches_reference(linear);
}

TEST(CoalescePlanEdge, stable_segments_for_equal_keys) {
  Vec linear{5, 2, 5, 2, 9, 5};
  Vec u(6), s(6);
  int64_t n = -1;
  ASSERT_EQ(sf_coalesce_plan(u.data(), s.data(), &n, linear.data(), 6), SF_OK);
  ASSERT_EQ(n, 3);
  u.resize(3);
  EXPECT_EQ(u, (Vec{2, 5, 9}));
  EXPECT_EQ(s, (Vec{1, 0, 1, 0, 2, 1}));
}

// unique_linear (or segment) may be the input buffer itself.
TEST(CoalescePlanEdge, in_place_outputs) {
  const std::vector<Vec> inputs{
      Vec{1, 2, 3},                                   // sorted
      Vec{1, 1, 2, 2, 2, 7},                          // sorted with duplicates
      Vec{9, 3, 3, 1},                                // one radix pass
      Vec{5000, 3, 5000, 1 << 12, 7, 3},              // two radix passes
      Vec{int64_t(1) << 40, 1, int64_t(1) << 23, 1},  // three passes
  };
  for (const Vec& original : inputs) {
    Vec ref_u, ref_s;
    ref_plan(original, &ref_u, &ref_s);
    const int64_t nse = original.size();
    {
      Vec buf = original, s(nse);
      int64_t n = -1;
      ASSERT_EQ(sf_coalesce_plan(buf.data(), s.data(), &n, buf.data(), nse), SF_OK);
      buf.resize(n);
      EXPECT_EQ(buf, ref_u);
      EXPECT_EQ(s, ref_s);
    }
    {
      Vec buf = original, u(nse);
      int64_t n = -1;
      ASSERT_EQ(sf_coalesce_plan(u.data(), buf.data(), &n, buf.data(), nse), SF_OK);
      u.resize(n);
      EXPECT_EQ(u, ref_u);
      EXPECT_EQ(buf, ref_s);
    }
  }
}

TEST(CoalescePlanEdge, errors) {
  Vec linear{3, 1};
  Vec u(2), s(2);
  int64_t n = -1;
  EXPECT_EQ(sf_coalesce_plan(u.data(), s.data(), &n, linear.data(), -1), SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_coalesce_plan(u.data(), nullptr, &n, linear.data(), 2), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_coalesce_plan(u.data(), s.data(), &n, nullptr, 2), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_coalesce_plan(u.data(), s.data(), nullptr, nullptr, 0), SF_ERR_NULL_POINTER);
  Vec negative{3, std::numeric_limits<int64_t>::min()};
  EXPECT_EQ(sf_coalesce_plan(u.data(), s.data(), &n, negative.data(), 2), SF_ERR_INDEX_NEGATIVE);
}

}  // namespace
