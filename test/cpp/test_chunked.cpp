// The C core's entry points that the caller's threads run in chunks
// (sparsefill_core.h). The union of two COO patterns (sf_union_cuts,
// sf_union_count_range, sf_union_write_range) against std::set_union on the
// index columns: every number of chunks gives the same output, the cuts never
// split a key, errors in any chunk are found, and the gathered rows carry
// each operand's values or its fill. CSR row pointers from row indices in
// element ranges (sf_crow_from_rows_range) against the one-range call, and row
// indices from row pointers in row ranges (sf_csr_rows_from_crow_range).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <set>
#include <vector>

#include "sparsefill_core.h"

namespace {

using Vec = std::vector<int64_t>;
using Column = std::vector<int64_t>;

// Row-major [sd x n] indices of sorted columns.
Vec to_rows(const std::vector<Column>& cols, int64_t sd) {
  Vec out(sd * cols.size());
  for (size_t k = 0; k < cols.size(); ++k) {
    for (int64_t d = 0; d < sd; ++d) out[d * cols.size() + k] = cols[k][d];
  }
  return out;
}

struct Union {
  sf_status status = SF_OK;
  sf_site site{-1, -1, -1};
  Vec indices, src_a, src_b;
  std::vector<double> va, vb;
};

// The whole chunked protocol on `parts` chunks, as the torch kernels run it.
Union chunked(const Vec& ia, int64_t na, const std::vector<double>& va, const Vec& ib,
              int64_t nb, const std::vector<double>& vb, int64_t sd, const Vec& sizes,
              int64_t parts) {
  Union u;
  const double fill_a = -1.5, fill_b = 9.25;
  Vec cut_a(parts + 1, -7), cut_b(parts + 1, -7);
  EXPECT_EQ(sf_union_cuts(cut_a.data(), cut_b.data(), parts, ia.data(), na, ib.data(), nb, sd),
            SF_OK);
  std::vector<sf_union_side> a(parts), b(parts);
  Vec first(parts + 1, 0);
  for (int64_t c = 0; c < parts; ++c) {
    EXPECT_LE(cut_a[c], cut_a[c + 1]);
    EXPECT_LE(cut_b[c], cut_b[c + 1]);
    a[c] = sf_union_side{ia.data(), na, cut_a[c], cut_a[c + 1], nullptr, nullptr,
                         va.data(), &fill_a, sizeof(double)};
    b[c] = sf_union_side{ib.data(), nb, cut_b[c], cut_b[c + 1], nullptr, nullptr,
                         vb.data(), &fill_b, sizeof(double)};
    int64_t count = -1;
    u.status = sf_union_count_range(&count, &u.site, &a[c], &b[c], sd, sizes.data());
    if (u.status != SF_OK) return u;
    first[c + 1] = first[c] + count;
  }
  const int64_t n = first[parts];
  u.indices.assign(sd * n, -9);
  u.src_a.assign(n, -9);
  u.src_b.assign(n, -9);
  u.va.assign(n, 0.0);
  u.vb.assign(n, 0.0);
  for (int64_t c = 0; c < parts; ++c) {
    a[c].src = u.src_a.data();
    b[c].src = u.src_b.data();
    a[c].values_out = u.va.data();
    b[c].values_out = u.vb.data();
    EXPECT_EQ(sf_union_write_range(u.indices.data(), n, first[c], &a[c], &b[c], sd), SF_OK);
  }
  return u;
}

void expect_union(const std::set<Column>& sa, const std::set<Column>& sb, int64_t sd,
                  const Vec& sizes) {
  std::vector<Column> ca(sa.begin(), sa.end()), cb(sb.begin(), sb.end()), ref;
  std::set_union(ca.begin(), ca.end(), cb.begin(), cb.end(), std::back_inserter(ref));
  const Vec ia = to_rows(ca, sd), ib = to_rows(cb, sd), want = to_rows(ref, sd);
  std::vector<double> va(ca.size()), vb(cb.size());
  for (size_t k = 0; k < va.size(); ++k) va[k] = 0.5 * k;
  for (size_t k = 0; k < vb.size(); ++k) vb[k] = 100.0 + k;
  for (int64_t parts : {1, 2, 3, 5, 16}) {
    SCOPED_TRACE(parts);
    Union u = chunked(ia, ca.size(), va, ib, cb.size(), vb, sd, sizes, parts);
    ASSERT_EQ(u.status, SF_OK);
    EXPECT_EQ(u.indices, want);
    ASSERT_EQ(u.src_a.size(), ref.size());
    for (size_t k = 0; k < ref.size(); ++k) {
      const auto pa = std::lower_bound(ca.begin(), ca.end(), ref[k]);
      const auto pb = std::lower_bound(cb.begin(), cb.end(), ref[k]);
      const int64_t sa_k = pa != ca.end() && *pa == ref[k] ? pa - ca.begin() : -1;
      const int64_t sb_k = pb != cb.end() && *pb == ref[k] ? pb - cb.begin() : -1;
      EXPECT_EQ(u.src_a[k], sa_k);
      EXPECT_EQ(u.src_b[k], sb_k);
      EXPECT_EQ(u.va[k], sa_k >= 0 ? va[sa_k] : -1.5);
      EXPECT_EQ(u.vb[k], sb_k >= 0 ? vb[sb_k] : 9.25);
    }
  }
}

std::set<Column> random_columns(std::mt19937_64& rng, const Vec& sizes, int n) {
  std::set<Column> out;
  for (int i = 0; i < n; ++i) {
    Column c(sizes.size());
    for (size_t d = 0; d < sizes.size(); ++d) c[d] = (int64_t)(rng() % sizes[d]);
    out.insert(c);
  }
  return out;
}

TEST(UnionChunks, random_patterns_any_number_of_chunks) {
  std::mt19937_64 rng(7);
  for (const Vec& sizes : {Vec{50}, Vec{6, 9}, Vec{3, 4, 5}}) {
    for (int trial = 0; trial < 60; ++trial) {
      SCOPED_TRACE(trial);
      expect_union(random_columns(rng, sizes, rng() % 40), random_columns(rng, sizes, rng() % 40),
                   sizes.size(), sizes);
    }
  }
}

TEST(UnionChunks, disjoint_identical_and_empty) {
  const Vec sizes{4, 5};
  std::set<Column> low{{0, 0}, {0, 3}, {1, 1}}, high{{2, 0}, {3, 4}}, none;
  expect_union(low, high, 2, sizes);
  expect_union(high, low, 2, sizes);
  expect_union(low, low, 2, sizes);
  expect_union(none, high, 2, sizes);
  expect_union(low, none, 2, sizes);
  expect_union(none, none, 2, sizes);
}

TEST(UnionChunks, cuts_never_split_a_key) {
  // A and B share every key: a cut between A[k] and B[k] would emit it twice.
  Vec keys(100);
  for (int64_t k = 0; k < 100; ++k) keys[k] = 3 * k;
  for (int64_t parts = 1; parts <= 9; ++parts) {
    Vec cut_a(parts + 1), cut_b(parts + 1);
    ASSERT_EQ(sf_union_cuts(cut_a.data(), cut_b.data(), parts, keys.data(), 100, keys.data(), 100,
                            1),
              SF_OK);
    EXPECT_EQ(cut_a, cut_b);
    EXPECT_EQ(cut_a.front(), 0);
    EXPECT_EQ(cut_a.back(), 100);
  }
}

TEST(UnionChunks, unsorted_input_gives_monotone_cuts_and_an_error) {
  std::mt19937_64 rng(3);
  Vec a(200), b(150);
  for (auto& x : a) x = (int64_t)(rng() % 1000);
  for (auto& x : b) x = (int64_t)(rng() % 1000);
  std::vector<double> va(a.size()), vb(b.size());
  for (int64_t parts : {1, 2, 7}) {
    Union u = chunked(a, a.size(), va, b, b.size(), vb, 1, Vec{1000}, parts);
    EXPECT_EQ(u.status, SF_ERR_NOT_COALESCED);
  }
}

TEST(UnionChunks, errors_in_the_last_chunk_are_found) {
  Vec a(1000), b(1000);
  for (int64_t k = 0; k < 1000; ++k) a[k] = 2 * k, b[k] = 2 * k + 1;
  std::vector<double> v(1000);
  for (int64_t parts : {1, 2, 4}) {
    Vec bad = b;
    std::swap(bad[997], bad[998]);
    Union u = chunked(a, 1000, v, bad, 1000, v, 1, Vec{2000}, parts);
    EXPECT_EQ(u.status, SF_ERR_NOT_COALESCED);
    EXPECT_EQ(u.site.position, 998);
    bad = b;
    bad[999] = 2000;
    u = chunked(a, 1000, v, bad, 1000, v, 1, Vec{2000}, parts);
    EXPECT_EQ(u.status, SF_ERR_INDEX_OUT_OF_RANGE);
    EXPECT_EQ(u.site.position, 999);
    EXPECT_EQ(u.site.value, 2000);
    bad = a;
    bad[0] = -4;
    u = chunked(bad, 1000, v, b, 1000, v, 1, Vec{2000}, parts);
    EXPECT_EQ(u.status, SF_ERR_INDEX_NEGATIVE);
    EXPECT_EQ(u.site.dim, 0);
  }
}

TEST(UnionChunks, argument_errors) {
  Vec a{1, 2}, cut(3);
  sf_union_side s{a.data(), 2, 0, 2, nullptr, nullptr, nullptr, nullptr, 0};
  sf_union_side wide{a.data(), 2, 0, 3, nullptr, nullptr, nullptr, nullptr, 0};
  int64_t n = -1;
  EXPECT_EQ(sf_union_cuts(nullptr, cut.data(), 2, a.data(), 2, a.data(), 2, 1),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_union_cuts(cut.data(), cut.data(), 0, a.data(), 2, a.data(), 2, 1),
            SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_union_cuts(cut.data(), cut.data(), 2, a.data(), -1, a.data(), 2, 1),
            SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_union_cuts(cut.data(), cut.data(), 2, nullptr, 2, a.data(), 2, 1),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_union_count_range(nullptr, nullptr, &s, &s, 1, nullptr), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_union_count_range(&n, nullptr, &wide, &s, 1, nullptr), SF_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(sf_union_count_range(&n, nullptr, &s, &s, 1, nullptr), SF_OK);  // no sizes: no bounds
  EXPECT_EQ(n, 2);
  Vec out(2);
  // The union has 2 columns: an output of 1 is refused, not overrun.
  EXPECT_EQ(sf_union_write_range(out.data(), 1, 0, &s, &s, 1), SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_union_write_range(out.data(), 2, 3, &s, &s, 1), SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_union_write_range(out.data(), 2, 0, &wide, &s, 1), SF_ERR_INVALID_ARGUMENT);
  double row = 0;
  sf_union_side no_fill{a.data(), 2, 0, 2, nullptr, &row, &row, nullptr, sizeof row};
  EXPECT_EQ(sf_union_write_range(out.data(), 2, 0, &no_fill, &s, 1), SF_ERR_NULL_POINTER);
  ASSERT_EQ(sf_union_write_range(out.data(), 2, 0, &s, &s, 1), SF_OK);
  EXPECT_EQ(out, a);
}

// ---- row pointers in element ranges ------------------------------------------------

// crow from every split of [0, nse) into `parts` ranges (ranges run in
// reverse order: no range may rely on another's writes).
sf_status crow_in_parts(Vec& crow, const Vec& rows, int64_t nrows, int64_t parts) {
  const int64_t nse = rows.size();
  crow.assign(nrows + 1, -9);
  for (int64_t c = parts - 1; c >= 0; --c) {
    sf_status st = sf_crow_from_rows_range(crow.data(), rows.data(), nse, nrows, nse * c / parts,
                                           nse * (c + 1) / parts);
    if (st != SF_OK) return st;
  }
  return SF_OK;
}

TEST(CrowRanges, any_split_gives_the_whole_answer) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t nrows = rng() % 12;
    Vec rows(nrows == 0 ? 0 : rng() % 40);
    for (auto& r : rows) r = (int64_t)(rng() % nrows);
    std::sort(rows.begin(), rows.end());
    Vec whole(nrows + 1, -9);
    ASSERT_EQ(sf_crow_from_rows(whole.data(), rows.data(), rows.size(), nrows), SF_OK);
    for (int64_t r = 0; r <= nrows; ++r) {  // the definition: elements in rows before r
      EXPECT_EQ(whole[r], std::lower_bound(rows.begin(), rows.end(), r) - rows.begin());
    }
    for (int64_t parts : {1, 2, 3, 7}) {
      Vec crow;
      ASSERT_EQ(crow_in_parts(crow, rows, nrows, parts), SF_OK);
      EXPECT_EQ(crow, whole);
    }
  }
}

TEST(CrowRanges, errors_in_any_range) {
  for (int64_t parts : {1, 2, 5}) {
    Vec crow;
    Vec rows{0, 0, 1, 2, 2, 3, 3, 3, 4, 4};
    Vec bad = rows;
    bad[7] = 1;  // decreasing
    EXPECT_EQ(crow_in_parts(crow, bad, 5, parts), SF_ERR_NOT_COALESCED);
    bad = rows;
    bad[9] = 5;
    EXPECT_EQ(crow_in_parts(crow, bad, 5, parts), SF_ERR_INDEX_OUT_OF_RANGE);
    bad = rows;
    bad[0] = -1;
    EXPECT_EQ(crow_in_parts(crow, bad, 5, parts), SF_ERR_INDEX_NEGATIVE);
    bad = rows;
    bad[4] = -3;
    EXPECT_EQ(crow_in_parts(crow, bad, 5, parts), SF_ERR_INDEX_NEGATIVE);
  }
  Vec crow(3);
  Vec rows{0, 1};
  EXPECT_EQ(sf_crow_from_rows_range(crow.data(), rows.data(), 2, 2, 1, 3),
            SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_crow_from_rows_range(crow.data(), rows.data(), 2, 2, 2, 1),
            SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_crow_from_rows_range(nullptr, rows.data(), 2, 2, 0, 2), SF_ERR_NULL_POINTER);
}

// ---- row indices in row ranges --------------------------------------------------

TEST(RowsFromCrowRanges, any_split_gives_the_whole_answer) {
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t nrows = rng() % 12;
    Vec rows(nrows == 0 ? 0 : rng() % 40);
    for (auto& r : rows) r = (int64_t)(rng() % nrows);
    std::sort(rows.begin(), rows.end());
    const int64_t nse = rows.size();
    Vec crow(nrows + 1);
    ASSERT_EQ(sf_crow_from_rows(crow.data(), rows.data(), nse, nrows), SF_OK);
    for (int64_t parts : {1, 2, 3, 7}) {
      Vec back(nse, -9);
      for (int64_t c = parts - 1; c >= 0; --c) {  // reverse order: ranges stand alone
        ASSERT_EQ(sf_csr_rows_from_crow_range(back.data(), crow.data(), nrows, nse,
                                              nrows * c / parts, nrows * (c + 1) / parts),
                  SF_OK);
      }
      EXPECT_EQ(back, rows);
    }
  }
}

TEST(RowsFromCrowRanges, errors_write_nothing) {
  Vec rows(4, -9);
  Vec decreasing{0, 3, 2, 4};
  EXPECT_EQ(sf_csr_rows_from_crow_range(rows.data(), decreasing.data(), 3, 4, 0, 3),
            SF_ERR_CROW_DECREASING);
  Vec past{0, 2, 5};  // row 1 ends past nse
  EXPECT_EQ(sf_csr_rows_from_crow_range(rows.data(), past.data(), 2, 4, 0, 2),
            SF_ERR_INVALID_ARGUMENT);
  Vec negative{-1, 2, 4};
  EXPECT_EQ(sf_csr_rows_from_crow_range(rows.data(), negative.data(), 2, 4, 0, 1),
            SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rows, Vec(4, -9));
  Vec ok{0, 2, 4};
  EXPECT_EQ(sf_csr_rows_from_crow_range(rows.data(), ok.data(), 2, 4, 1, 3),
            SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_csr_rows_from_crow_range(rows.data(), ok.data(), 2, 4, 2, 1),
            SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_csr_rows_from_crow_range(rows.data(), ok.data(), -1, 4, 0, 0),
            SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_csr_rows_from_crow_range(rows.data(), nullptr, 2, 4, 0, 2), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_csr_rows_from_crow_range(nullptr, ok.data(), 2, 4, 0, 2), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_csr_rows_from_crow_range(nullptr, nullptr, 2, 4, 1, 1), SF_OK);  // empty range
  ASSERT_EQ(sf_csr_rows_from_crow_range(rows.data(), ok.data(), 2, 4, 1, 2), SF_OK);
  EXPECT_EQ(rows, (Vec{-9, -9, 1, 1}));
}

}  // namespace
