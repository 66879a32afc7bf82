// index_select along a sparse dim of coalesced COO indices, in chunks
// (sparsefill_core.h, sf_select_*): against a reference that expands every
// element into its copies and sorts the result's columns; every number of
// chunks gives the same output, cuts never split a group, the index map and
// the checks report bad input with its site.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "sparsefill_core.h"

namespace {

using Vec = std::vector<int64_t>;
using Column = std::vector<int64_t>;

struct Select {
  sf_status status = SF_OK;
  sf_site site{-1, -1, -1};
  Vec indices, src;
  int64_t nse = 0;
};

// The protocol the torch kernel runs, on `parts` chunks.
Select chunked(const Vec& ind, int64_t sd, int64_t nse, const Vec& sizes, int64_t dim,
               const Vec& index, int64_t parts, bool use_hits = true) {
  Select s;
  Vec first(sizes[dim] + 1, -7), positions(index.size(), -7);
  s.status = sf_select_positions(first.data(), positions.data(), &s.site, index.data(),
                                 (int64_t)index.size(), sizes[dim]);
  if (s.status != SF_OK) return s;
  Vec cut(parts + 1, -7);
  EXPECT_EQ(sf_select_cuts(cut.data(), parts, ind.data(), sd, nse, dim), SF_OK);
  Vec begin(parts + 1, 0);
  std::vector<Vec> hits(parts);
  Vec hit_count(parts, -1);
  for (int64_t c = 0; c < parts; ++c) {
    EXPECT_LE(cut[c], cut[c + 1]);
    // a cut is a group start: its element differs from the one before it
    // in a coordinate before dim
    if (cut[c] > 0 && cut[c] < nse) {
      bool differs = false;
      for (int64_t d = 0; d < dim; ++d) {
        differs |= ind[d * nse + cut[c]] != ind[d * nse + cut[c] - 1];
      }
      EXPECT_TRUE(differs) << "cut " << c << " at " << cut[c];
    }
    int64_t count = -1;
    hits[c].assign(cut[c + 1] - cut[c] + 1, -7);  // + 1: a store past the end would show
    s.status = sf_select_count_range(&count, use_hits ? hits[c].data() : nullptr,
                                     use_hits ? &hit_count[c] : nullptr, &s.site, ind.data(), sd,
                                     nse, sizes.data(), dim, first.data(), cut[c], cut[c + 1]);
    if (s.status != SF_OK) return s;
    if (use_hits) EXPECT_EQ(hits[c].back(), -7);
    begin[c + 1] = begin[c] + count;
  }
  s.nse = begin[parts];
  s.indices.assign(sd * s.nse, -7);
  s.src.assign(s.nse, -7);
  for (int64_t c = parts - 1; c >= 0; --c) {  // any order
    EXPECT_EQ(sf_select_write_range(s.indices.data(), s.src.data(), s.nse, begin[c],
                                    begin[c + 1], ind.data(),
                                    sd, nse, dim, first.data(), positions.data(),
                                    (int64_t)index.size(), use_hits ? hits[c].data() : nullptr,
                                    hit_count[c], cut[c], cut[c + 1]),
              SF_OK);
  }
  return s;
}

// Every element once per position of its coordinate in the index, sorted.
std::vector<std::pair<Column, int64_t>> reference(const Vec& ind, int64_t sd, int64_t nse,
                                                  int64_t dim, const Vec& index) {
  std::vector<std::pair<Column, int64_t>> out;
  for (int64_t e = 0; e < nse; ++e) {
    for (size_t p = 0; p < index.size(); ++p) {
      if (index[p] != ind[dim * nse + e]) continue;
      Column col(sd);
      for (int64_t d = 0; d < sd; ++d) col[d] = ind[d * nse + e];
      col[dim] = (int64_t)p;
      out.emplace_back(col, e);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Random coalesced indices of sizes with about `density` of the positions.
Vec random_indices(const Vec& sizes, double density, std::mt19937_64& rng, int64_t* nse) {
  int64_t total = 1;
  for (auto s : sizes) total *= s;
  std::bernoulli_distribution keep(density);
  std::vector<Column> cols;
  for (int64_t l = 0; l < total; ++l) {
    if (!keep(rng)) continue;
    Column col(sizes.size());
    int64_t r = l;
    for (int64_t d = (int64_t)sizes.size() - 1; d >= 0; --d) {
      col[d] = r % sizes[d];
      r /= sizes[d];
    }
    cols.push_back(col);
  }
  *nse = (int64_t)cols.size();
  Vec out(sizes.size() * cols.size());
  for (size_t k = 0; k < cols.size(); ++k) {
    for (size_t d = 0; d < sizes.size(); ++d) out[d * cols.size() + k] = cols[k][d];
  }
  return out;
}

TEST(Select, MatchesReferenceForAnyChunks) {
  std::mt19937_64 rng(7);
  const std::vector<Vec> shapes = {{9}, {6, 7}, {40, 30}, {4, 5, 6}, {3, 4, 2, 5}};
  for (const auto& sizes : shapes) {
    const int64_t sd = (int64_t)sizes.size();
    for (double density : {0.0, 0.1, 0.5, 1.0}) {
      int64_t nse = 0;
      Vec ind = random_indices(sizes, density, rng, &nse);
      for (int64_t dim = 0; dim < sd; ++dim) {
        std::uniform_int_distribution<int64_t> coord(0, sizes[dim] - 1);
        std::vector<Vec> indexes = {{}, {0}, {sizes[dim] - 1, 0, 0}};
        for (int trial = 0; trial < 3; ++trial) {
          Vec random(1 + trial * 20);  // long enough for the heap sort (> 24 pairs a group)
          for (auto& x : random) x = coord(rng);
          indexes.push_back(random);
        }
        Vec ascending(sizes[dim]);
        for (int64_t c = 0; c < sizes[dim]; ++c) ascending[c] = c;
        indexes.push_back(ascending);
        for (const auto& index : indexes) {
          auto expected = reference(ind, sd, nse, dim, index);
          Select one = chunked(ind, sd, nse, sizes, dim, index, 1);
          ASSERT_EQ(one.status, SF_OK);
          ASSERT_EQ(one.nse, (int64_t)expected.size());
          for (int64_t o = 0; o < one.nse; ++o) {
            for (int64_t d = 0; d < sd; ++d) {
              ASSERT_EQ(one.indices[d * one.nse + o], expected[o].first[d]);
            }
            ASSERT_EQ(one.src[o], expected[o].second);
          }
          for (int64_t parts : {1, 2, 3, 8, 50}) {
            for (bool use_hits : {true, false}) {
              if (parts == 1 && use_hits) continue;  // `one`
              Select many = chunked(ind, sd, nse, sizes, dim, index, parts, use_hits);
              ASSERT_EQ(many.status, SF_OK);
              EXPECT_EQ(many.indices, one.indices) << "parts " << parts << " hits " << use_hits;
              EXPECT_EQ(many.src, one.src) << "parts " << parts << " hits " << use_hits;
            }
          }
        }
      }
    }
  }
}

TEST(Select, PositionsOfEachValue) {
  const Vec index = {3, 0, 3, 1, 3};
  Vec first(5, -7), positions(5, -7);
  ASSERT_EQ(sf_select_positions(first.data(), positions.data(), nullptr, index.data(), 5, 4),
            SF_OK);
  EXPECT_EQ(first, (Vec{0, 1, 2, 2, 5}));
  EXPECT_EQ(positions, (Vec{1, 3, 0, 2, 4}));
  Vec empty_first(3, -7);
  ASSERT_EQ(sf_select_positions(empty_first.data(), nullptr, nullptr, nullptr, 0, 2), SF_OK);
  EXPECT_EQ(empty_first, (Vec{0, 0, 0}));
}

TEST(Select, BadIndexNamesItsPosition) {
  Vec first(4), positions(3);
  sf_site site{-1, -1, -1};
  const Vec negative = {1, -1, 2};
  EXPECT_EQ(sf_select_positions(first.data(), positions.data(), &site, negative.data(), 3, 3),
            SF_ERR_INDEX_NEGATIVE);
  EXPECT_EQ(site.position, 1);
  EXPECT_EQ(site.value, -1);
  const Vec high = {1, 2, 3};
  EXPECT_EQ(sf_select_positions(first.data(), positions.data(), &site, high.data(), 3, 3),
            SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(site.position, 2);
  EXPECT_EQ(site.value, 3);
}

TEST(Select, CountChecksIndices) {
  const Vec sizes = {3, 4};
  const Vec index = {1, 2};
  Vec first(5), positions(2);
  ASSERT_EQ(sf_select_positions(first.data(), positions.data(), nullptr, index.data(), 2, 4),
            SF_OK);
  int64_t count = -1;
  sf_site site{-1, -1, -1};
  const Vec unsorted = {0, 0, 1, 2, 1, 3};  // (0,2) (0,1) (1,3)
  EXPECT_EQ(sf_select_count_range(&count, nullptr, nullptr, &site, unsorted.data(), 2, 3,
                                  sizes.data(), 1, first.data(), 0, 3),
            SF_ERR_NOT_COALESCED);
  EXPECT_EQ(site.position, 1);
  const Vec duplicate = {0, 0, 1, 1};  // (0,1) (0,1)
  EXPECT_EQ(sf_select_count_range(&count, nullptr, nullptr, &site, duplicate.data(), 2, 2,
                                  sizes.data(), 1, first.data(), 0, 2),
            SF_ERR_NOT_COALESCED);
  const Vec out_of_range = {0, 3, 1, 1};  // (0,1) (3,1)
  EXPECT_EQ(sf_select_count_range(&count, nullptr, nullptr, &site, out_of_range.data(), 2, 2,
                                  sizes.data(), 1, first.data(), 0, 2),
            SF_ERR_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(site.position, 1);
  EXPECT_EQ(site.dim, 0);
  const Vec ok = {0, 0, 2, 1, 2, 2};  // (0,1) (0,2) (2,2)
  ASSERT_EQ(sf_select_count_range(&count, nullptr, nullptr, &site, ok.data(), 2, 3,
                                  sizes.data(), 1, first.data(), 0, 3),
            SF_OK);
  EXPECT_EQ(count, 3);
}

TEST(Select, BadArguments) {
  const Vec ind = {0, 1};
  const Vec sizes = {2};
  Vec first = {0, 1, 1}, positions = {0}, cut(3), out(2), src(2);
  int64_t count = 0;
  EXPECT_EQ(sf_select_positions(nullptr, positions.data(), nullptr, ind.data(), 1, 2),
            SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_select_positions(first.data(), positions.data(), nullptr, ind.data(), -1, 2),
            SF_ERR_NEGATIVE_SIZE);
  EXPECT_EQ(sf_select_cuts(cut.data(), 0, ind.data(), 1, 2, 0), SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_select_cuts(cut.data(), 2, ind.data(), 1, 2, 1), SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_select_cuts(cut.data(), 2, nullptr, 1, 2, 0), SF_ERR_NULL_POINTER);
  EXPECT_EQ(sf_select_count_range(&count, nullptr, nullptr, nullptr, ind.data(), 1, 2,
                                  sizes.data(), 0, first.data(), 1, 0),
            SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_select_count_range(&count, nullptr, nullptr, nullptr, ind.data(), 1, 2,
                                  sizes.data(), 0, first.data(), 0, 3),
            SF_ERR_INVALID_ARGUMENT);
  // An output too small for the chunk is refused, not overrun.
  EXPECT_EQ(sf_select_write_range(out.data(), src.data(), 0, 0, 0, ind.data(), 1, 2, 0,
                                  first.data(), positions.data(), 1, nullptr, 0, 0, 2),
            SF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sf_select_write_range(out.data(), src.data(), 2, 0, 2, ind.data(), 1, 2, 0,
                                  first.data(), positions.data(), 1, nullptr, 0, 0, 2),
            SF_ERR_INVALID_ARGUMENT);  // one column, not two
  EXPECT_EQ(sf_select_write_range(out.data(), src.data(), 2, 0, 1, ind.data(), 1, 2, 0,
                                  first.data(), positions.data(), 1, nullptr, 0, 0, 2),
            SF_OK);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(src[0], 0);
  // The same on a matrix's columns (its own loop): rows {0, 1}, cols {0, 0}.
  const Vec matrix = {0, 1, 0, 0};
  Vec mfirst = {0, 2, 2}, mpositions = {0, 1}, mout(8, -7), msrc(4, -7);
  EXPECT_EQ(sf_select_write_range(mout.data(), msrc.data(), 4, 0, 3, matrix.data(), 2, 2, 1,
                                  mfirst.data(), mpositions.data(), 2, nullptr, 0, 0, 2),
            SF_ERR_INVALID_ARGUMENT);  // four columns do not fit in three
  EXPECT_EQ(sf_select_write_range(mout.data(), msrc.data(), 4, 0, 4, matrix.data(), 2, 2, 1,
                                  mfirst.data(), mpositions.data(), 2, nullptr, 0, 0, 2),
            SF_OK);
  EXPECT_EQ(mout, (Vec{0, 0, 1, 1, 0, 1, 0, 1}));
  EXPECT_EQ(msrc, (Vec{0, 0, 1, 1}));
}

}  // namespace
