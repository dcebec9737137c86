// compare_cli.hpp: usched_schbench_compare's command line: its own flags
// (--policies, --plot) and the schbench workload flags it passes through to
// every run, checked in full before the first run starts.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"

namespace usched::schbench {

// The hardware comparison's workload: the seeds' shape (two message
// threads, -t <workers/2>, 1 ms sleeps) with 10 ms thinks for the workers
// and the message threads instead of the thread's full second and
// schbench's 30 ms. A round is then about 21 ms, so a 16 s run with 2 s of
// warm-up holds about 550 samples per fiber row on 2 workers (the kernel's
// row about twice that): enough for a p99 of its own (with 1 s thinks a row
// held about 36 samples, and its p99, p99.9 and max were one sample). Eleven
// rows (ten policies and the kernel) take about three minutes on 2 cores.
// The thread's own shape, 1 s thinks on its 40-CPU box, is the simulated
// experiment that follows the table (compare_sim_*).
inline constexpr std::uint64_t compare_runtime_s = 16;
inline constexpr std::uint64_t compare_warmup_s = 2;
inline constexpr std::uint64_t compare_worker_think_us = 10'000;
inline constexpr std::uint64_t compare_message_think_us = 10'000;
inline constexpr std::uint64_t compare_sleep_us = 1000;
inline constexpr unsigned compare_message_threads = 2;
// The seed-000 experiment in the simulator, after the hardware table: the
// thread's command line on the thread's VM (20 cores of 2 threads, one
// LLC), each policy a row, beside the thread's own numbers (seeds/000,
// Chris Mason's first mail: v5.2 and v5.9, 1290 s and 1440 s runs).
inline constexpr const char* compare_sim_topology = "pack:1 core:20 pu:2";
inline constexpr const char* compare_sim_args = "-m 2 -t 20 -r 30 -c 1000000 -s 1000";

// Where the percentile curves go when --plot is not given.
inline constexpr const char* compare_default_plot = "schbench-policies.png";

// compare_options is one parsed compare command line.
struct compare_options {
  std::vector<std::string> policies;  // every registered policy unless --policies
  std::string plot = compare_default_plot;
  bool plot_given = false;            // --plot was on the command line
  std::vector<std::string> extra;     // workload flags, passed to every run as given
  bool help = false;                  // -h / --help: print compare_usage_text() and stop
};

// parse_compare() parses the arguments after the program name. Throws
// usage_error, whose one line names the flag and what compare accepts: a
// policy that is not registered, a flag compare does not take (among them
// the per-run --policy, --threads and --json), a workload flag's bad value
// (parse_cli's message) and -r 0, which would never end a run. `-h`/`--help`
// stops parsing and sets help. Touches no file: see check_output_file() for
// --plot.
compare_options parse_compare(std::span<const std::string> args);

// compare_defaults() is the workload every run gets unless the extra flags
// say otherwise; worker_threads stays 0, as compare derives -t from the
// runtime's worker count.
cli_options compare_defaults();

// compare_usage_text() is compare's --help text, naming exactly the flags
// parse_compare() accepts, ending in a newline.
std::string compare_usage_text(std::string_view program = "usched_schbench_compare");

}  // namespace usched::schbench
