// wrk.hpp: usched_netbench's side of wrk: its command line, the Lua script
// whose done() prints the summary in one parseable line, reading that line
// back, and what in it marks a run as having errors.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bench::netbench {

// wrk_result is one wrk run's summary, as report_script prints it.
// Latencies are wrk's, in microseconds, from its HdrHistogram-like record
// of every request (wrk corrects none for coordinated omission).
struct wrk_result {
  unsigned long long requests = 0;
  unsigned long long duration_us = 0;
  unsigned long long bytes = 0;  // read from the server, all connections
  // wrk's error counters: connect, read and write are socket errors,
  // status counts responses with a status of 400 or more, timeout the
  // requests unanswered after wrk's 2 s timeout.
  unsigned long long connect_errors = 0;
  unsigned long long read_errors = 0;
  unsigned long long write_errors = 0;
  unsigned long long status_errors = 0;
  unsigned long long timeouts = 0;
  double p50_us = 0;
  double p90_us = 0;
  double p99_us = 0;
  double p999_us = 0;

  // requests_per_s() is requests over wrk's measured duration.
  double requests_per_s() const noexcept;
  // bytes_per_response() is bytes over requests: the reply's size, plus a
  // share of the replies cut off when the run ended (under a byte).
  double bytes_per_response() const noexcept;
};

// report_script is the Lua script given to wrk with -s: it only adds a
// done() that prints one line, "netbench-report key=value ...", so wrk's
// request loop stays its own (no request() or response() hook, which would
// put Lua on every request).
extern const char* const report_script;

// wrk_args() is wrk's command line for one run against 127.0.0.1:port: one
// thread, `connections` connections, `seconds` seconds, latency statistics,
// `script` (a file holding report_script).
std::vector<std::string> wrk_args(unsigned connections, unsigned seconds, const std::string& script,
                                  unsigned port);

// parse_report() finds report_script's line in wrk's output and reads it;
// nothing when the line is missing or malformed.
std::optional<wrk_result> parse_report(std::string_view output);

// errors_of() words what marks `r` as a run with errors, one item each:
// no request answered, responses of status 400 or more, read and write
// errors, timeouts; empty when clean. Connect errors do not mark a run:
// they happen while wrk opens its connections, before any request, and
// come from the host's limits (the listen backlog, descriptors) as much as
// from the server; the driver notes them instead.
std::vector<std::string> errors_of(const wrk_result& r);

}  // namespace bench::netbench
