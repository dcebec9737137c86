// servers.hpp: the servers usched_netbench measures and one measured run
// of one of them: start it pinned, wait until its port accepts, warm it up
// with wrk, measure with wrk, stop it with SIGTERM and check how it ended.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/stop_signals.hpp"
#include "wrk.hpp"

namespace bench::netbench {

// How long a server may take to accept its first connection, and to exit
// after SIGTERM; how long wrk may run past its -d before it is killed.
inline constexpr std::chrono::seconds listen_bound{10};
inline constexpr std::chrono::seconds stop_bound{5};
inline constexpr std::chrono::seconds wrk_grace{10};
// The warm-up before each measured run: wrk with the same connections, its
// numbers dropped. It fills caches, grows the server's buffers and lets a
// runtime settle its workers before the clock starts.
inline constexpr unsigned warmup_seconds = 1;

// server is one row's server: how to start it and where it runs.
struct server {
  std::string kind;   // a server_kinds entry (netbench_cli.hpp)
  std::string label;  // the row's name in the table and the plot
  std::string exe;
  std::string port_flag;  // "--port" or "-port", followed by the port
  std::vector<unsigned> cpus;
  std::vector<std::pair<std::string, std::string>> env;  // USCHED_* for usched_http_server
};

// run_setup is what every run of one connection count shares.
struct run_setup {
  unsigned connections = 0;
  unsigned seconds = 0;
  std::string wrk_script;  // a file holding report_script
  unsigned client_cpu = 0;
  std::filesystem::path dir;  // for the runs' logs
};

// run_outcome is one measured run.
struct run_outcome {
  std::optional<wrk_result> result;  // none: no measurement (see errors)
  std::vector<std::string> errors;   // what marks the row; empty: a clean run
};

// port_picker hands out a free 127.0.0.1 port per run, each different from
// the last, so no run waits on the previous server's sockets. Ports come
// from below Linux's default ephemeral range (32768..60999), which wrk's
// own connections draw from.
class port_picker {
 public:
  // next() is a port nothing listens on now; throws std::runtime_error
  // when every port of the range is taken.
  unsigned next();

 private:
  static constexpr unsigned first_ = 20000;
  static constexpr unsigned count_ = 10000;
  unsigned at_ = 0;
};

// measure() runs `s` once under wrk with `setup`, listening on `port`;
// `index` names its log files. A stop signal that comes meanwhile sets
// `stopped` (then the run ends early, its result is dropped, and the
// server is still stopped and reaped). Every process it starts has been
// reaped when it returns.
run_outcome measure(const server& s, const run_setup& setup, unsigned port, std::size_t index,
                    const stop_signals& sig, bool& stopped);

}  // namespace bench::netbench
