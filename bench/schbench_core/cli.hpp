// cli.hpp: the schbench clone's command line, and run_schbench(), which runs
// one (defined in schbench.cpp, so that tests can run it in-process).
//
// The flags are schbench's (late 2020) with its defaults, so the command
// lines quoted in the seeds run unchanged, plus the clone's own: --policy,
// --threads, --json. Parsing is strict: every value is a whole number in a
// stated range, a --policy is a registered name, and anything else is a
// usage_error whose one-line message names the flag and what it accepts.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/cli_main.hpp"
#include "common/shell_join.hpp"

namespace usched {
struct runtime_stats;  // usched/runtime.hpp
}

namespace usched::schbench {

struct run_summary;  // histogram.hpp

// cli_options is one parsed command line. Field defaults are schbench's.
struct cli_options {
  unsigned message_threads = 2;          // -m: message threads
  unsigned worker_threads = 0;           // -t: workers per message thread; 0 = derive
                                         //     (resolve_worker_threads)
  std::uint64_t runtime_s = 30;          // -r: seconds; 0 = until SIGINT/SIGTERM
  std::uint64_t sleep_us = 30000;        // -s: message-thread sleep per round, plus a
                                         //     random jitter below a quarter of it
  std::uint64_t worker_think_us = 30000; // -c: worker think time per round
  std::uint64_t message_think_us = 30000;// -C: message-thread think time per round
  std::uint64_t interval_s = 10;         // -i: print cumulative percentiles this often;
                                         //     0 = only the final report
  std::uint64_t zero_s = 0;              // -z: zero the statistics this often; 0 = never
  std::uint64_t warmup_s = 5;            // -w: zero the statistics once after this
  std::string policy;                    // --policy: overrides USCHED_POLICY
  bool threads = false;                  // --threads: plain pthreads, kernel scheduling
  std::string json_file;                 // --json: also write the report here
  bool help = false;                     // -h / --help: print usage_text() and stop
  std::string command_line;              // argv as given, joined (for the JSON)
};

// usage_error is a bad command line; what() is one line naming the flag.
// It is the one type every benchmark program's parser throws
// (common/cli_main.hpp).
using usage_error = bench::usage_error;

// Smallest -s: the jitter is drawn below s/4, which must leave at least one
// microsecond to draw from (schbench divides by it).
inline constexpr std::uint64_t min_sleep_us = 4;
// Largest microsecond value any flag takes (one hour): a think or sleep time
// beyond it is a typo, and bounding it keeps s + s/4 and every deadline far
// from overflow.
inline constexpr std::uint64_t max_usec_value = 3'600'000'000;
// Largest second value any flag takes (one year), for the same reasons.
inline constexpr std::uint64_t max_sec_value = 366ull * 24 * 3600;
// Most message threads and most workers per message thread: far past any
// host's useful count, small enough that m * t threads can still be created.
inline constexpr unsigned max_message_threads = 1024;
inline constexpr unsigned max_worker_threads = 16384;

// parse_cli() parses the arguments after the program name. `argv0` only
// feeds cli_options::command_line. Throws usage_error. Later occurrences of
// a flag win, as with getopt. `-h`/`--help` stops parsing and sets help.
cli_options parse_cli(std::span<const std::string> args, std::string_view argv0 = "usched_schbench");
cli_options parse_cli(int argc, const char* const* argv);

// usage_text() is the --help text, one flag per line, ending in a newline.
std::string usage_text(std::string_view program = "usched_schbench");

// The workload flags (-m, -t, -r, -s, -c, -C, -i, -z, -w), which the compare
// driver passes through to every run.
// is_workload_flag() is whether `name` ("-t") is one; each takes a value.
bool is_workload_flag(std::string_view name) noexcept;
// workload_flags_accepted() lists them for an error line: "-m N -t N ...".
std::string workload_flags_accepted();
// workload_usage() is their --help lines, one per flag, each ending in a
// newline, with the defaults of `defaults` and, for -t, `t_default`; -r 0
// (until a signal) is offered only where `until_signal`.
std::string workload_usage(const cli_options& defaults, std::string_view t_default,
                           bool until_signal);

// policy_list() is the registered policy names, comma-separated, for
// messages and --help.
std::string policy_list();

// check_output_file() throws a usage_error naming `flag` and `path` unless a
// file can be written at `path`: its folder exists, it is not itself a
// folder, and opening it for writing succeeds. A file it had to create to
// find out is removed again, so a check before a long run leaves nothing
// behind; an existing file is left as it was.
void check_output_file(std::string_view flag, const std::string& path);

// resolve_worker_threads() is -t when given, else `cpus / message_threads`
// and at least 1: one worker per CPU in all, as schbench's `-t <cpus/2>`
// advice with two message threads. `cpus` is the usched worker count (or, in
// --threads mode, the CPUs this process may run on).
unsigned resolve_worker_threads(const cli_options& o, unsigned cpus) noexcept;

// report_schedule is what schbench's reporting loop (sleep_for_runtime)
// does at each one-second tick of a run, shared by the clone and the
// simulator's model so that both zero and print at the same ticks: zero
// once after the warm-up (-w, announced with "warmup done, zeroing stats"),
// print the cumulative block every -i seconds except at that tick, and zero
// every -z seconds. Ask at() once per tick, 1, 2, ..., for the ticks before
// the run's last; the final block is the caller's.
class report_schedule {
 public:
  struct actions {
    bool warmup = false;  // print the warm-up line, then zero
    bool print = false;   // print the cumulative block for this tick
    bool zero = false;    // zero the statistics (after printing, if both)
  };
  explicit report_schedule(const cli_options& o) noexcept : o_(o) {}
  actions at(std::uint64_t tick) noexcept;

 private:
  const cli_options& o_;
  std::uint64_t last_calc_ = 0;  // tick of the last block
  std::uint64_t zero_time_ = 0;  // tick of the last zeroing
  bool warmup_done_ = false;
};

// run_schbench() runs one parsed command line (schbench.cpp): the workload
// as usched fibers or, with --threads, as plain threads; the interim reports
// and the final one go to `out`, the JSON to o.json_file when set. It blocks
// SIGINT and SIGTERM in the calling thread (and so in every thread it
// starts) for its duration; either signal ends the run early, followed by
// the final report. Requires !o.help. Before anything is started it throws
// usage_error if o.json_file cannot be written (check_output_file) and
// usched::config_error for a runtime it cannot build (a policy parse_cli did
// not check, a bad USCHED_* value); std::runtime_error if writing the JSON
// fails after the run.
// With `stats`, a fiber run also leaves there what runtime::stats() said at
// its end (the counters USCHED_STATS prints; usched_sim --validate sets
// them beside the simulator's).
run_summary run_schbench(const cli_options& o, std::ostream& out, usched::runtime_stats* stats = nullptr);

// shell_join() joins arguments into one line a shell would split back the
// same way (single-quoting where needed; common/shell_join.hpp).
using bench::shell_join;

}  // namespace usched::schbench
