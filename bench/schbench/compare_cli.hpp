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

// Default run length and warm-up. With -c 1000000 every worker gives about
// one sample a second, so a run holds about (R - W) samples per worker; ten
// runs (nine policies and the kernel) of 20 s keep the whole comparison near
// three and a half minutes on a 2-core machine.
inline constexpr std::uint64_t compare_runtime_s = 20;
inline constexpr std::uint64_t compare_warmup_s = 2;
// The seeds' workload: workers think a full second, message threads sleep
// 1 ms between rounds (seeds/000: schbench -t <cpus/2> -c 1000000 -s 1000).
inline constexpr std::uint64_t compare_worker_think_us = 1'000'000;
inline constexpr std::uint64_t compare_sleep_us = 1000;
inline constexpr unsigned compare_message_threads = 2;
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
