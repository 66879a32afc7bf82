// Shared by the C core's edge-case tests (test_core_edges.cpp,
// test_csr_union_edges.cpp): the status-site expectations and the outcome a
// naive reference returns, so both files check sites by one rule.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "sparsefill_core.h"

namespace {

using Vec = std::vector<int64_t>;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

sf_site fresh_site() { return sf_site{-7, -7, -7}; }

void expect_site(const sf_site& site, int64_t position, int64_t dim, int64_t value) {
  EXPECT_EQ(site.position, position);
  EXPECT_EQ(site.dim, dim);
  EXPECT_EQ(site.value, value);
}

// What a naive reference of a check returns.
struct Outcome {
  sf_status status;
  sf_site site;
  int coalesced;
};

}  // namespace
