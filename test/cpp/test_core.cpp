// GoogleTest suite of the C core (sparsefill_core.h), each function against a
// naive reference written here. Runs under ASan/UBSan with
// -DSPARSEFILL_SANITIZE=ON.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "sparsefill_core.h"

namespace {

using Vec = std::vector<int64_t>;

// Row-major [sparse_dim x nse] indices of random elements (duplicates allowed).
Vec random_indices(const Vec& sizes, int64_t nse, std::mt19937_64& rng) {
  Vec indices(sizes.size() * nse);
  for (size_t d = 0; d < sizes.size(); ++d) {
    std::uniform_int_distribution<int64_t> pick(0, sizes[d] - 1);
    for (int64_t k = 0; k < nse; ++k) indices[d * nse + k] = pick(rng);
  }
  return indices;
}

int64_t naive_linear(const Vec& indices, const Vec& sizes, int64_t nse, int64_t k) {
  int64_t l = 0;
  for (size_t d = 0; d < sizes.size(); ++d) l = l * sizes[d] + indices[d * nse + k];
  return l;
}

Vec sorted_unique(Vec x) {
  std::sort(x.begin(), x.end());
  x.erase(std::unique(x.begin(), x.end()), x.end());
  return x;
}

// ---- status and sizes ---------------------------------------------------------

TEST(Status, EveryCodeHasAName) {
  for (int s = 0; s >= -12; --s) {
    const char* name = sf_status_string(static_cast<sf_status>(s));
    ASSERT_NE(name, nullptr);
    EXPECT_STRNE(name, "unknown status") << s;
  }
  EXPECT_STREQ(sf_status_string(static_cast<sf_status>(-99)), "unknown status");
}

TEST(Sizes, Numel) {
  int64_t n = -1;
  Vec sizes{3, 4, 5};
  EXPECT_EQ(sf_sizes_numel(&n, sizes.data(), 3), SF_OK);
  EXPECT_EQ(n, 60);
  EXPECT_EQ(sf_sizes_numel(&n, nullptr, 0), SF_OK);
  EXPECT_EQ(n, 1);
}

TEST(Sizes, NumelZeroSize) {
  int64_t n = -1;
  Vec sizes{3, 0, 5};
  EXPECT_EQ(sf_sizes_numel(&n, sizes.data(), 3), SF_OK);
  EXPECT_EQ(n, 0);
}

TEST(Sizes, Errors) {
  int64_t n = 0;
  Vec negative{3, -1};
  EXPECT_EQ(sf_sizes_numel(&n, negative.data(), 2), SF_ERR_NEGATIVE_SIZE);
  Vec huge{int64_t(1) << 40, int64_t(1) << 40};
  EXPECT_EQ(sf_sizes_numel(&n, huge.data(), 2), SF_ERR_OVERFLOW);
  Vec huge_with_zero{0, int64_t(1) << 40, int64_t(1) << 40};
  EXPECT_EQ(sf_sizes_numel(&n, huge_with_zero.data(), 3), SF_ERR_OVERFLOW);
  EXPECT_EQ(sf_sizes_numel(nullptr, negative.data(), 1), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_sizes_numel(&n, nullptr, 2), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_sizes_numel(&n, negative.data(), -1), SF_ERR_NEGATIVE_SIZE);
}

// ---- COO validation -------------------------------------------------------------

TEST(CooCheck, ValidAndCoalescedFlag) {
  Vec sizes{3, 4};
  Vec sorted{0, 1, 2, /* cols */ 3, 0, 1};
  int coalesced = -1;
  sf_site site{-1, -1, -1};
  EXPECT_EQ(sf_coo_check(&site, &coalesced, sorted.data(), 2, 3, sizes.data()), SF_OK);
  EXPECT_EQ(coalesced, 1);
  Vec duplicate{1, 1, 2, 2};
  EXPECT_EQ(sf_coo_check(&site, &coalesced, duplicate.data(), 2, 2, sizes.data()), SF_OK);
  EXPECT_EQ(coalesced, 0);
  Vec unsorted{2, 0, 0, 0};
  EXPECT_EQ(sf_coo_check(&site, &coalesced, unsorted.data(), 2, 2, sizes.data()), SF_OK);
  EXPECT_EQ(coalesced, 0);
}

TEST(CooCheck, EmptyIsCoalesced) {
  Vec sizes{3, 4};
  int coalesced = -1;
  EXPECT_EQ(sf_coo_check(nullptr, &coalesced, nullptr, 2, 0, sizes.data()), SF_OK);
  EXPECT_EQ(coalesced, 1);
}

TEST(CooCheck, OutOfRangeReportsSite) {
  Vec sizes{3, 4};
  Vec indices{0, 1, 2, /* cols */ 3, 4, 1};
  sf_site site{-1, -1, -1};
  EXPECT_EQ(sf_coo_check(&site, nullptr, indices.data(), 2, 3, sizes.data()),
            SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(site.position, 1);
  EXPECT_EQ(site.dim, 1);
  EXPECT_EQ(site.value, 4);
}

TEST(CooCheck, NegativeReportsSite) {
  Vec sizes{3, 4};
  Vec indices{0, -2, /* cols */ 0, 0};
  sf_site site{-1, -1, -1};
  EXPECT_EQ(sf_coo_check(&site, nullptr, indices.data(), 2, 2, sizes.data()),
            SF_ERR_INDEX_NEGATIVE);
  EXPECT_EQ(site.position, 1);
  EXPECT_EQ(site.dim, 0);
  EXPECT_EQ(site.value, -2);
}

TEST(CooCheck, BadArguments) {
  Vec sizes{3};
  Vec indices{0};
  EXPECT_EQ(sf_coo_check(nullptr, nullptr, nullptr, 1, 1, sizes.data()), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_coo_check(nullptr, nullptr, indices.data(), 1, 1, nullptr), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_coo_check(nullptr, nullptr, indices.data(), 1, -1, sizes.data()),
            SF_ERR_NEGATIVE_SIZE);
  Vec huge{int64_t(1) << 40, int64_t(1) << 40};
  Vec two{0, 0};
  EXPECT_EQ(sf_coo_check(nullptr, nullptr, two.data(), 2, 1, huge.data()), SF_ERR_OVERFLOW);
}

// ---- linearisation ----------------------------------------------------------------

TEST(Linearize, RoundTripRandom) {
  std::mt19937_64 rng(1);
  for (const Vec& sizes : {Vec{7}, Vec{5, 9}, Vec{3, 4, 6}, Vec{1, 1, 1}}) {
    const int64_t nse = 50;
    Vec indices = random_indices(sizes, nse, rng);
    Vec linear(nse);
    ASSERT_EQ(sf_coo_linearize(linear.data(), indices.data(), sizes.size(), nse, sizes.data()),
              SF_OK);
    for (int64_t k = 0; k < nse; ++k) EXPECT_EQ(linear[k], naive_linear(indices, sizes, nse, k));
    Vec back(indices.size(), -1);
    ASSERT_EQ(sf_coo_delinearize(back.data(), linear.data(), sizes.size(), nse, sizes.data()),
              SF_OK);
    EXPECT_EQ(back, indices);
  }
}

TEST(Linearize, ZeroSparseDims) {
  Vec linear(2, -1);
  EXPECT_EQ(sf_coo_linearize(linear.data(), nullptr, 0, 2, nullptr), SF_OK);
  EXPECT_EQ(linear, (Vec{0, 0}));
}

TEST(Linearize, RejectsOutOfRange) {
  Vec sizes{2, 3};
  Vec indices{0, 1, /* cols */ 2, 3};  // (1, 3) would alias element (2, 0)
  Vec linear(2);
  EXPECT_EQ(sf_coo_linearize(linear.data(), indices.data(), 2, 2, sizes.data()),
            SF_ERR_INDEX_OUT_OF_RANGE);
  indices[0] = -1;
  EXPECT_EQ(sf_coo_linearize(linear.data(), indices.data(), 2, 2, sizes.data()),
            SF_ERR_INDEX_NEGATIVE);
}

TEST(Delinearize, RejectsOutOfRange) {
  Vec sizes{2, 3};
  Vec linear{6};
  Vec out(2);
  EXPECT_EQ(sf_coo_delinearize(out.data(), linear.data(), 2, 1, sizes.data()),
            SF_ERR_INDEX_OUT_OF_RANGE);
  linear[0] = -1;
  EXPECT_EQ(sf_coo_delinearize(out.data(), linear.data(), 2, 1, sizes.data()),
            SF_ERR_INDEX_NEGATIVE);
}

// ---- coalescing plan --------------------------------------------------------------

void check_plan(const Vec& linear) {
  const int64_t nse = linear.size();
  Vec unique(nse), segment(nse);
  int64_t n_out = -1;
  ASSERT_EQ(sf_coalesce_plan(unique.data(), segment.data(), &n_out, linear.data(), nse), SF_OK);
  Vec expected = sorted_unique(linear);
  ASSERT_EQ(n_out, (int64_t)expected.size());
  unique.resize(n_out);
  EXPECT_EQ(unique, expected);
  for (int64_t k = 0; k < nse; ++k) {
    ASSERT_GE(segment[k], 0);
    ASSERT_LT(segment[k], n_out);
    EXPECT_EQ(unique[segment[k]], linear[k]);
  }
}

TEST(CoalescePlan, RandomWithDuplicates) {
  std::mt19937_64 rng(2);
  std::uniform_int_distribution<int64_t> pick(0, 40);
  Vec linear(200);
  for (auto& x : linear) x = pick(rng);
  check_plan(linear);
}

TEST(CoalescePlan, LargeKeysUseEveryRadixPass) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> pick(0, (int64_t(1) << 62) - 1);
  Vec linear(5000);
  for (auto& x : linear) x = pick(rng);
  linear[10] = linear[20];
  check_plan(linear);
}

TEST(CoalescePlan, AlreadySortedIsIdentity) {
  Vec linear{1, 4, 9, 16};
  Vec unique(4), segment(4);
  int64_t n_out = 0;
  ASSERT_EQ(sf_coalesce_plan(unique.data(), segment.data(), &n_out, linear.data(), 4), SF_OK);
  EXPECT_EQ(n_out, 4);
  EXPECT_EQ(segment, (Vec{0, 1, 2, 3}));
}

TEST(CoalescePlan, ReverseSortedAndSingleAndEmpty) {
  check_plan(Vec{9, 7, 5, 3, 1});
  check_plan(Vec{42});
  check_plan(Vec{});
  check_plan(Vec{3, 3, 3, 3});
}

TEST(CoalescePlan, Errors) {
  int64_t n = 0;
  Vec bad{1, -1};
  Vec u(2), s(2);
  EXPECT_EQ(sf_coalesce_plan(u.data(), s.data(), &n, bad.data(), 2), SF_ERR_INDEX_NEGATIVE);
  EXPECT_EQ(sf_coalesce_plan(u.data(), s.data(), nullptr, bad.data(), 2), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_coalesce_plan(nullptr, s.data(), &n, bad.data(), 2), SF_ERR_NULL_POINTER);
}

// ---- CSR ----------------------------------------------------------------------------

TEST(CsrCheck, Valid) {
  Vec crow{0, 2, 2, 3};
  Vec col{0, 3, 1};
  EXPECT_EQ(sf_csr_check(nullptr, crow.data(), col.data(), 3, 4, 3), SF_OK);
}

TEST(CsrCheck, EmptyRowsAndNoRows) {
  Vec crow{0, 0, 0};
  EXPECT_EQ(sf_csr_check(nullptr, crow.data(), nullptr, 2, 5, 0), SF_OK);
  Vec zero{0};
  EXPECT_EQ(sf_csr_check(nullptr, zero.data(), nullptr, 0, 0, 0), SF_OK);
}

TEST(CsrCheck, EachRuleWithItsSite) {
  sf_site site{-1, -1, -1};
  Vec col{0, 1};
  Vec first{1, 1, 2};
  EXPECT_EQ(sf_csr_check(&site, first.data(), col.data(), 2, 2, 2), SF_ERR_CROW_FIRST);
  EXPECT_EQ(site.value, 1);
  Vec decreasing{0, 2, 1};
  EXPECT_EQ(sf_csr_check(&site, decreasing.data(), col.data(), 2, 2, 2), SF_ERR_CROW_DECREASING);
  EXPECT_EQ(site.position, 1);
  Vec last{0, 1, 1};
  EXPECT_EQ(sf_csr_check(&site, last.data(), col.data(), 2, 2, 2), SF_ERR_CROW_LAST);
  Vec beyond{0, 5, 2};  // crow past nse must be caught before col is read through it
  EXPECT_EQ(sf_csr_check(&site, beyond.data(), col.data(), 2, 2, 2), SF_ERR_CROW_DECREASING);
  EXPECT_EQ(site.position, 1);
  EXPECT_EQ(site.value, 2);
  Vec beyond_last{0, 5, 5};
  EXPECT_EQ(sf_csr_check(&site, beyond_last.data(), col.data(), 2, 2, 2), SF_ERR_CROW_LAST);
  EXPECT_EQ(site.position, 2);
  EXPECT_EQ(site.value, 5);
  Vec ok{0, 1, 2};
  Vec col_out{0, 7};
  EXPECT_EQ(sf_csr_check(&site, ok.data(), col_out.data(), 2, 2, 2), SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(site.position, 1);
  EXPECT_EQ(site.value, 7);
  Vec col_negative{-1, 0};
  EXPECT_EQ(sf_csr_check(&site, ok.data(), col_negative.data(), 2, 2, 2), SF_ERR_INDEX_NEGATIVE);
  Vec one_row{0, 2};
  Vec unsorted{1, 0};
  EXPECT_EQ(sf_csr_check(&site, one_row.data(), unsorted.data(), 1, 2, 2), SF_ERR_COL_UNSORTED);
  Vec duplicate{1, 1};
  EXPECT_EQ(sf_csr_check(&site, one_row.data(), duplicate.data(), 1, 2, 2), SF_ERR_COL_UNSORTED);
  EXPECT_EQ(site.position, 1);
}

TEST(CsrCheck, BadArguments) {
  Vec crow{0, 1};
  EXPECT_EQ(sf_csr_check(nullptr, nullptr, nullptr, 1, 1, 0), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_csr_check(nullptr, crow.data(), nullptr, 1, 1, 1), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_csr_check(nullptr, crow.data(), nullptr, -1, 1, 0), SF_ERR_NEGATIVE_SIZE);
}

TEST(Crow, RoundTripWithEmptyRows) {
  std::mt19937_64 rng(4);
  std::uniform_int_distribution<int64_t> pick(0, 9);
  Vec rows(60);
  for (auto& r : rows) r = pick(rng);
  std::sort(rows.begin(), rows.end());
  const int64_t nrows = 12;  // rows 10 and 11 stay empty
  Vec crow(nrows + 1, -1);
  ASSERT_EQ(sf_crow_from_rows(crow.data(), rows.data(), rows.size(), nrows), SF_OK);
  EXPECT_EQ(crow.front(), 0);
  EXPECT_EQ(crow.back(), (int64_t)rows.size());
  for (int64_t i = 0; i < nrows; ++i) {
    EXPECT_EQ(crow[i + 1] - crow[i], std::count(rows.begin(), rows.end(), i));
  }
  Vec back(rows.size(), -1);
  ASSERT_EQ(sf_csr_rows_from_crow(back.data(), crow.data(), nrows), SF_OK);
  EXPECT_EQ(back, rows);
}

TEST(Crow, ZeroRows) {
  Vec crow(1, -1);
  EXPECT_EQ(sf_crow_from_rows(crow.data(), nullptr, 0, 0), SF_OK);
  EXPECT_EQ(crow[0], 0);
  EXPECT_EQ(sf_csr_rows_from_crow(nullptr, crow.data(), 0), SF_OK);
}

TEST(Crow, BadRows) {
  Vec crow(3);
  Vec out_of_range{0, 2};
  EXPECT_EQ(sf_crow_from_rows(crow.data(), out_of_range.data(), 2, 2), SF_ERR_INDEX_OUT_OF_RANGE);
  Vec negative{-1, 0};
  EXPECT_EQ(sf_crow_from_rows(crow.data(), negative.data(), 2, 2), SF_ERR_INDEX_NEGATIVE);
  Vec decreasing{1, 0};
  EXPECT_EQ(sf_crow_from_rows(crow.data(), decreasing.data(), 2, 2), SF_ERR_NOT_COALESCED);
  Vec bad_crow{0, 2, 1};
  Vec rows(2);
  EXPECT_EQ(sf_csr_rows_from_crow(rows.data(), bad_crow.data(), 2), SF_ERR_CROW_DECREASING);
}

TEST(CsrFind, EveryPositionAgainstTheRowsScan) {
  // rows: {1, 3}, {}, {0, 2, 3}; every (row, col) of the 3 x 4 matrix asked
  Vec crow{0, 2, 2, 5}, col{1, 3, 0, 2, 3}, qrow, qcol;
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 4; ++c) {
      qrow.push_back(r);
      qcol.push_back(c);
    }
  }
  Vec slot(qrow.size(), -7);
  ASSERT_EQ(sf_csr_find(slot.data(), crow.data(), col.data(), 3, 4, qrow.data(), qcol.data(),
                        qrow.size()), SF_OK);
  for (size_t i = 0; i < qrow.size(); ++i) {
    int64_t want = -1;
    for (int64_t k = crow[qrow[i]]; k < crow[qrow[i] + 1]; ++k) {
      if (col[k] == qcol[i]) want = k;
    }
    EXPECT_EQ(slot[i], want) << "row " << qrow[i] << " col " << qcol[i];
  }
}

TEST(CsrFind, GroupsOfRowsOfEveryLengthAgainstTheRowsScan) {
  // rows of 0 to 70 stored columns (spans of every halving depth), asked in
  // a random order: more queries than a group, and a last group cut short
  std::mt19937_64 rng(7);
  const int64_t nrows = 71, ncols = 200;
  Vec crow{0}, col;
  for (int64_t r = 0; r < nrows; ++r) {
    Vec cols;
    for (int64_t c = 0; c < ncols; ++c) cols.push_back(c);
    std::shuffle(cols.begin(), cols.end(), rng);
    cols.resize(r);
    std::sort(cols.begin(), cols.end());
    col.insert(col.end(), cols.begin(), cols.end());
    crow.push_back(col.size());
  }
  Vec qrow, qcol;
  for (int i = 0; i < 5003; ++i) {
    qrow.push_back(rng() % nrows);
    qcol.push_back(rng() % ncols);
  }
  Vec slot(qrow.size(), -7);
  ASSERT_EQ(sf_csr_find(slot.data(), crow.data(), col.data(), nrows, ncols, qrow.data(),
                        qcol.data(), qrow.size()), SF_OK);
  int64_t found = 0;
  for (size_t i = 0; i < qrow.size(); ++i) {
    int64_t want = -1;
    for (int64_t k = crow[qrow[i]]; k < crow[qrow[i] + 1]; ++k) {
      if (col[k] == qcol[i]) want = k;
    }
    found += want >= 0;
    EXPECT_EQ(slot[i], want) << "query " << i << ": row " << qrow[i] << " col " << qcol[i];
  }
  EXPECT_GT(found, 500);  // both outcomes exercised
}

TEST(CsrFind, RowSpansCheckedBeforeTheyAreRead) {
  // crow edited in place: a queried row past nse or decreasing reads nothing
  Vec col{0, 1}, slot(1), zero{0}, one{1};
  Vec past{0, 5, 2}, decreasing{0, 2, 1, 2}, negative{-1, 2};
  EXPECT_EQ(sf_csr_find(slot.data(), past.data(), col.data(), 2, 2, zero.data(), zero.data(), 1),
            SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_csr_find(slot.data(), decreasing.data(), col.data(), 3, 2, one.data(),
                        zero.data(), 1), SF_ERR_CROW_DECREASING);
  EXPECT_EQ(sf_csr_find(slot.data(), negative.data(), col.data(), 1, 2, zero.data(),
                        zero.data(), 1), SF_ERR_INVALID_ARGUMENT);
}

TEST(CsrFind, QueriesOutOfRange) {
  Vec crow{0, 1}, col{0}, slot(1), zero{0}, neg{-1}, two{2};
  EXPECT_EQ(sf_csr_find(slot.data(), crow.data(), col.data(), 1, 2, two.data(), zero.data(), 1),
            SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(sf_csr_find(slot.data(), crow.data(), col.data(), 1, 2, zero.data(), two.data(), 1),
            SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(sf_csr_find(slot.data(), crow.data(), col.data(), 1, 2, zero.data(), neg.data(), 1),
            SF_ERR_INDEX_NEGATIVE);
  EXPECT_EQ(sf_csr_find(nullptr, crow.data(), col.data(), 1, 2, nullptr, nullptr, 0), SF_OK);
}

// ---- union merge --------------------------------------------------------------------

void check_union(const Vec& a, const Vec& b) {
  int64_t n = -1;
  ASSERT_EQ(sf_union_count(&n, a.data(), a.size(), b.data(), b.size()), SF_OK);
  Vec expected;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(expected));
  ASSERT_EQ(n, (int64_t)expected.size());
  const size_t bound = a.size() + b.size();
  Vec out(bound), src_a(bound), src_b(bound);
  int64_t written = -1;
  ASSERT_EQ(sf_union_plan(&written, out.data(), src_a.data(), src_b.data(), a.data(), a.size(),
                          b.data(), b.size()),
            SF_OK);
  ASSERT_EQ(written, n);
  out.resize(n);
  EXPECT_EQ(out, expected);
  for (int64_t k = 0; k < n; ++k) {
    auto ia = std::find(a.begin(), a.end(), out[k]);
    auto ib = std::find(b.begin(), b.end(), out[k]);
    EXPECT_EQ(src_a[k], ia == a.end() ? -1 : ia - a.begin());
    EXPECT_EQ(src_b[k], ib == b.end() ? -1 : ib - b.begin());
  }
}

TEST(Union, Cases) {
  check_union({1, 3, 5}, {0, 2, 4, 6});      // interleaved
  check_union({1, 2, 3}, {1, 2, 3});         // identical
  check_union({1, 2}, {7, 8, 9});            // disjoint
  check_union({}, {4, 5});                   // one empty
  check_union({}, {});                       // both empty
  check_union({0, 5, 9, 10}, {5, 10, 11});   // overlapping
}

TEST(Union, Random) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int64_t> pick(0, 300);
  std::set<int64_t> sa, sb;
  for (int i = 0; i < 100; ++i) {
    sa.insert(pick(rng));
    sb.insert(pick(rng));
  }
  check_union(Vec(sa.begin(), sa.end()), Vec(sb.begin(), sb.end()));
}

TEST(Union, RejectsUncoalesced) {
  Vec a{3, 1};
  Vec b{2};
  int64_t n = 0;
  EXPECT_EQ(sf_union_count(&n, a.data(), 2, b.data(), 1), SF_ERR_NOT_COALESCED);
  Vec out(3), sa(3), sb(3);
  EXPECT_EQ(sf_union_plan(&n, out.data(), sa.data(), sb.data(), a.data(), 2, b.data(), 1),
            SF_ERR_NOT_COALESCED);
  EXPECT_EQ(sf_union_plan(nullptr, out.data(), sa.data(), sb.data(), b.data(), 1, b.data(), 1),
            SF_ERR_NULL_POINTER);
  Vec dup{2, 2};
  EXPECT_EQ(sf_union_count(&n, b.data(), 1, dup.data(), 2), SF_ERR_NOT_COALESCED);
}

// ---- gather with fill --------------------------------------------------------------

void check_gather(size_t row_bytes) {
  const int64_t nse = 5, n = 9;
  std::vector<unsigned char> values(nse * row_bytes), fill(row_bytes), out(n * row_bytes);
  for (size_t i = 0; i < values.size(); ++i) values[i] = (unsigned char)(i * 7 + 1);
  for (size_t i = 0; i < fill.size(); ++i) fill[i] = (unsigned char)(200 + i);
  Vec src{4, -1, 0, 2, -1, -1, 1, 3, 4};
  ASSERT_EQ(sf_gather_rows_with_fill(out.data(), values.data(), nse, fill.data(), src.data(), n,
                                     row_bytes),
            SF_OK);
  for (int64_t k = 0; k < n; ++k) {
    const unsigned char* expect = src[k] < 0 ? fill.data() : values.data() + src[k] * row_bytes;
    EXPECT_EQ(std::memcmp(out.data() + k * row_bytes, expect, row_bytes), 0) << k;
  }
}

TEST(Gather, RowWidths) {
  for (size_t bytes : {1, 2, 4, 8, 12, 16, 24}) check_gather(bytes);
}

TEST(Gather, AllFill) {
  double fill = 2.5;
  Vec src{-1, -1, -1};
  std::vector<double> out(3);
  ASSERT_EQ(sf_gather_rows_with_fill(out.data(), nullptr, 0, &fill, src.data(), 3, sizeof fill),
            SF_OK);
  EXPECT_EQ(out, (std::vector<double>{2.5, 2.5, 2.5}));
}

TEST(Gather, Empty) {
  EXPECT_EQ(sf_gather_rows_with_fill(nullptr, nullptr, 0, nullptr, nullptr, 0, 8), SF_OK);
}

TEST(Gather, RejectsOutOfRangeSource) {
  double values[2] = {1, 2}, fill = 0, out[2];
  Vec src{0, 2};
  EXPECT_EQ(sf_gather_rows_with_fill(out, values, 2, &fill, src.data(), 2, sizeof(double)),
            SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(sf_gather_rows_with_fill(out, values, 2, nullptr, src.data(), 1, sizeof(double)),
            SF_ERR_NULL_POINTER);
}

}  // namespace
