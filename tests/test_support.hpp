// test_support.hpp: shared helpers for the runtime tests.
#pragma once

#include <string>
#include <vector>

#include <usched/usched.hpp>

namespace usched::test {

// A synthetic machine with SMT, LLC, package and machine levels and 8 PUs,
// so that 1, 2, 4 and 8 workers all fit on any host (unpinned when the host
// is smaller).
inline constexpr const char* eight_pu_topology = "pack:2 l3:1 core:2 pu:2";

inline options make_options(const std::string& policy, unsigned workers) {
  options o;
  o.policy = policy;
  o.workers = workers;
  o.topology = eight_pu_topology;
  o.spin = std::chrono::microseconds(20);
  return o;
}

}  // namespace usched::test
