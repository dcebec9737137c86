// netbench_cli.hpp: usched_netbench's command line. Every flag is checked
// here, before the first server starts, so that a bad value is one line
// naming the flag rather than a failure in every row minutes later.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "common/cli_main.hpp"

namespace bench::netbench {

inline constexpr unsigned max_rounds = 100;
inline constexpr unsigned default_rounds = 5;
// wrk's -d, seconds: the default, the --quick one and the longest taken.
inline constexpr unsigned default_seconds = 5;
inline constexpr unsigned quick_seconds = 1;
inline constexpr unsigned max_seconds = 3600;
// wrk's -c: the default, and the most taken (each connection is a
// descriptor in wrk and in the server).
inline constexpr unsigned default_connections = 100;
inline constexpr unsigned max_connections = 10'000;

// The kinds of server rows, the values of --servers: the C floor, Go's
// net/http, usched_http_server on one worker per (I/O backend, policy), and
// usched_http_server on two workers.
inline constexpr const char* server_kinds[] = {"floor", "go", "usched", "usched-2w"};
// usched_http_server's I/O backends (USCHED_IO), the values of --io.
inline constexpr const char* io_backends[] = {"io_uring", "epoll"};
// The policies of the usched rows when --policies is not given.
inline constexpr const char* default_policies[] = {"cfs", "steal", "none"};

// options is one parsed command line.
struct options {
  unsigned rounds = default_rounds;
  unsigned seconds = default_seconds;
  std::vector<unsigned> connections{default_connections};
  bool quick = false;
  std::vector<std::string> servers;   // kinds to run, in server_kinds order
  std::vector<std::string> policies;  // registered usched policies, as given
  std::vector<std::string> io;        // I/O backends, as given
  std::string plot;                   // empty: no plot
  unsigned server_cpu = 0;            // CPUs this process may run on (checked)
  unsigned client_cpu = 0;
  std::string usched_server;  // empty: examples/net/usched_http_server in this build
  bool help = false;

  // runs() says whether `kind` (one of server_kinds) is among the servers.
  bool runs(const std::string& kind) const;
};

// usage_error is a bad command line; what() is one line naming the flag.
using usage_error = bench::usage_error;

// parse_options() parses the arguments after the program name, for a
// process that may run on `cpus` (its affinity mask, ascending, not empty).
// Throws usage_error. --server-cpu and --client-cpu default to the first
// and the second of `cpus` (both the first when there is one) and must be
// among them; --policies must name registered usched policies; --quick is
// -r 1 -d 1 unless -r or -d is given. `-h`/`--help` stops parsing and sets
// help. Touches no file: --plot and --usched-server are checked when the
// run starts.
options parse_options(std::span<const std::string> args, const std::vector<unsigned>& cpus);

// usage_text() is the --help text for a process on `cpus`, ending in a
// newline.
std::string usage_text(const std::vector<unsigned>& cpus);

}  // namespace bench::netbench
