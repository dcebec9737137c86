// test_support.hpp: shared helpers for the runtime tests.
#pragma once

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include <usched/usched.hpp>

namespace usched::test {

// A synthetic machine with SMT, LLC, package and machine levels and 8 PUs,
// so that 1, 2, 4 and 8 workers all fit on any host (unpinned when the host
// is smaller).
inline constexpr const char* eight_pu_topology = "pack:2 l3:1 core:2 pu:2";

// ThreadSanitizer makes every context switch and atomic access an order of
// magnitude slower; the volume tests divide their counts by this under TSan so
// that the instrumented suite checks the same interleavings in minutes, not
// hours. Every other build runs the full counts.
#if defined(__SANITIZE_THREAD__)
inline constexpr unsigned volume_divisor = 10;
#else
inline constexpr unsigned volume_divisor = 1;
#endif

// Every registered policy with 1, 2, 4 and 8 workers: the configurations
// the conformance suite and the task API's tests run each case under
// (GENERATE(from_range(usched::test::all_configs()))).
struct config {
  std::string policy;
  unsigned workers;
};
inline std::vector<config> all_configs() {
  std::vector<config> out;
  for (const std::string& p : policy_names()) {
    for (unsigned w : {1u, 2u, 4u, 8u}) out.push_back({p, w});
  }
  return out;
}
// Every policy at 1 and 2 workers: the configurations of the cases that
// check a behaviour on one worker and across two, where more workers add
// run time and nothing else to check.
inline std::vector<config> one_and_two_worker_configs() {
  std::vector<config> out;
  for (const std::string& p : policy_names()) {
    for (unsigned w : {1u, 2u}) out.push_back({p, w});
  }
  return out;
}
inline std::string label(const config& c) {
  return "policy=" + c.policy + " workers=" + std::to_string(c.workers);
}

// yield_until() yields until `done()` or `limit` has passed, and returns
// done(): it bounds a wait for something another fiber does, so that a bug
// fails a check instead of hanging the suite. It orders nothing.
template <class Done>
bool yield_until(Done done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    this_fiber::yield();
  }
  return true;
}

inline options make_options(const std::string& policy, unsigned workers) {
  options o;
  o.policy = policy;
  o.workers = workers;
  o.topology = eight_pu_topology;
  o.spin = std::chrono::microseconds(20);
  return o;
}

// The whitespace-separated words of `line`: a command line for the parsers
// of the bundled programs.
inline std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace usched::test
