// micro_compare_cli.hpp: usched_micro_compare's command line. Every flag is
// checked here, before the first usched_micro run, so that a bad value is
// one line naming the flag rather than a failure in every row minutes later.
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cli_main.hpp"

namespace bench::micro_compare {

inline constexpr unsigned max_rounds = 100;
// usched_micro's own limit on --workers.
inline constexpr unsigned max_workers = 1024;
// usched_micro's workload sizes: its defaults, and the --quick ones (CI).
inline constexpr long full_samples = 100'000;
inline constexpr long full_fibers = 1'000'000;
inline constexpr long quick_samples = 20'000;
inline constexpr long quick_fibers = 100'000;
inline constexpr long full_fanout_tasks = 262'144;
inline constexpr long quick_fanout_tasks = 16'384;
// The task API's benchmarks (future hand-offs, semaphore pairs, shared
// mutex operations, barrier phases): usched_micro's --ops.
inline constexpr long full_ops = 200'000;
inline constexpr long quick_ops = 20'000;

// options is one parsed command line.
struct options {
  unsigned rounds = 3;
  unsigned workers = 0;  // 0 until parsed: default_workers(), or every CPU with --scaling
  std::string policy = "cfs";
  std::string against;  // a second usched policy as a peer of the usched rows; empty: none
  bool quick = false;
  bool scaling = false;
  std::string markdown;  // empty: no Markdown file
  std::string micro;     // empty: usched_micro next to this executable
  bool help = false;

  long samples() const { return quick ? quick_samples : full_samples; }
  long fibers() const { return quick ? quick_fibers : full_fibers; }
  long fanout_tasks() const { return quick ? quick_fanout_tasks : full_fanout_tasks; }
  long ops() const { return quick ? quick_ops : full_ops; }
};

// usage_error is a bad command line; what() is one line naming the flag.
// It is the one type every benchmark program's parser throws
// (common/cli_main.hpp).
using usage_error = bench::usage_error;

// default_workers() is -w when not given, on a process that may run on
// `cpus` CPUs: two where there are two, as the cross-worker benchmarks
// (wake_*, chan_cross) need them and more would only add noise on a small
// machine; else one.
unsigned default_workers(unsigned cpus) noexcept;

// max_workers_for() is the largest -w on `cpus` CPUs: one worker per CPU.
// usched pins a worker to each PU and Boost.Fiber runs a thread per worker;
// with more workers than CPUs they would take turns on them, and the rows
// would measure the sharing, not the runtimes (the scaling rows most of all).
unsigned max_workers_for(unsigned cpus) noexcept;

// parse_options() parses the arguments after the program name, on a process
// that may run on `cpus` CPUs (bench::affinity_cpus()). Throws usage_error.
// A --policy must be a registered usched policy. `-h`/`--help` stops parsing
// and sets help. Touches no file: --markdown and --micro are checked when
// the run starts.
options parse_options(std::span<const std::string> args, unsigned cpus);

// usage_text() is the --help text for a process on `cpus` CPUs, ending in a
// newline.
std::string usage_text(unsigned cpus);

}  // namespace bench::micro_compare
