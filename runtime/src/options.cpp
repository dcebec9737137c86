// options.cpp: reading the USCHED_* environment into options.
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>

#include <usched/error.hpp>
#include <usched/options.hpp>

#include "policy.hpp"

namespace usched {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// parse_positive() reads a whole decimal number in [lo, hi] or throws a
// config_error that names the variable, the value and the accepted range.
unsigned long long parse_number(const char* name, const char* value, unsigned long long lo,
                                unsigned long long hi, const char* accepted) {
  const std::string s(value);
  bool ok = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  unsigned long long v = 0;
  if (ok) {
    errno = 0;
    v = std::strtoull(s.c_str(), nullptr, 10);
    ok = errno == 0 && v >= lo && v <= hi;
  }
  if (!ok) {
    throw config_error(std::string(name) + "='" + s + "' is not valid: expected " + accepted);
  }
  return v;
}

}  // namespace

options options::from_env() {
  options o;
  if (const char* v = env("USCHED_POLICY")) {
    // Validate now so the message names the variable before anything starts.
    make_policy(v);
    o.policy = v;
  }
  if (const char* v = env("USCHED_WORKERS")) {
    const std::string s(v);
    if (s == "pus") {
      o.workers = 0;
      o.unit = worker_unit::pu;
    } else if (s == "cores") {
      o.workers = 0;
      o.unit = worker_unit::core;
    } else {
      o.workers = static_cast<unsigned>(parse_number(
          "USCHED_WORKERS", v, 1, std::numeric_limits<unsigned>::max(),
          "a positive number of workers, 'pus' (one per PU) or 'cores' (one per core)"));
    }
  }
  if (const char* v = env("USCHED_TOPOLOGY")) o.topology = v;
  if (const char* v = env("USCHED_SLICE_US")) {
    o.slice = std::chrono::microseconds(
        parse_number("USCHED_SLICE_US", v, 1, 10'000'000, "a slice in microseconds, 1..10000000"));
  }
  if (const char* v = env("USCHED_STACK_KB")) {
    o.stack_size = static_cast<std::size_t>(
        parse_number("USCHED_STACK_KB", v, 16, 1024 * 1024, "a stack size in KiB, 16..1048576"));
    o.stack_size *= 1024;
  }
  if (const char* v = env("USCHED_SPIN_US")) {
    o.spin = std::chrono::microseconds(
        parse_number("USCHED_SPIN_US", v, 0, 1'000'000, "a spin time in microseconds, 0..1000000"));
  }
  if (const char* v = env("USCHED_LOAD_TRACKING")) {
    o.load_tracking = parse_number("USCHED_LOAD_TRACKING", v, 0, 1, "0 (off) or 1 (on)") == 1;
  }
  if (const char* v = env("USCHED_PIN")) {
    o.pin = parse_number("USCHED_PIN", v, 0, 1, "0 (do not pin workers) or 1 (pin)") == 1;
  }
  if (const char* v = env("USCHED_LOG")) o.log_level = v;
  if (const char* v = env("USCHED_STATS")) {
    const std::string s(v);
    if (s == "0") {
      o.stats = options::stats_output::none;
    } else if (s == "1") {
      o.stats = options::stats_output::table;
    } else if (s == "json") {
      o.stats = options::stats_output::json;
    } else {
      throw config_error("USCHED_STATS='" + s + "' is not valid: expected 0, 1 (a table) or json");
    }
  }
  if (const char* v = env("USCHED_CFS_LATENCY_US")) {
    o.cfs_latency = std::chrono::microseconds(parse_number(
        "USCHED_CFS_LATENCY_US", v, 100, 10'000'000, "a period in microseconds, 100..10000000"));
  }
  if (const char* v = env("USCHED_CFS_MIN_GRANULARITY_US")) {
    o.cfs_min_granularity = std::chrono::microseconds(parse_number(
        "USCHED_CFS_MIN_GRANULARITY_US", v, 10, 10'000'000, "a time in microseconds, 10..10000000"));
  }
  if (const char* v = env("USCHED_CFS_WAKEUP_GRANULARITY_US")) {
    o.cfs_wakeup_granularity = std::chrono::microseconds(parse_number(
        "USCHED_CFS_WAKEUP_GRANULARITY_US", v, 0, 10'000'000, "a time in microseconds, 0..10000000"));
  }
  return o;
}

std::vector<std::string> policy_names() {
  std::vector<std::string> names;
  for (const auto& p : registered_policies()) names.emplace_back(p.name);
  return names;
}

}  // namespace usched
