// servers.cpp: one measured run of one server (servers.hpp).
#include "servers.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/process.hpp"

namespace bench::netbench {

namespace {

using steady = std::chrono::steady_clock;

// How often a starting server's port is tried.
constexpr std::chrono::milliseconds listen_poll{5};
// How often the wait for wrk looks at the clock, to enforce wrk_grace.
constexpr std::chrono::seconds wrk_tick{1};

sockaddr_in loopback(unsigned port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// accepts() says whether a connection to 127.0.0.1:port succeeds now.
bool accepts(unsigned port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const sockaddr_in a = loopback(port);
  const bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

// last_line() is the last line of the file at `path` with anything on it,
// or "" (the one line of a failure report that says most).
std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string last;
  for (std::string l; std::getline(in, l);) {
    if (l.find_first_not_of(" \t\r") != std::string::npos) last = l;
  }
  return last;
}

std::string said(const std::string& log) {
  const std::string l = last_line(log);
  return l.empty() ? "" : ": " + l;
}

// await_listen() waits until `srv` accepts on `port`; false, with the
// reason in `out`, when it exits first, takes longer than listen_bound,
// or a stop signal comes (`stopped`).
bool await_listen(child_process& srv, unsigned port, const std::string& log, run_outcome& out,
                  const stop_signals& sig, bool& stopped) {
  const auto deadline = steady::now() + listen_bound;
  for (;;) {
    if (accepts(port)) return true;
    if (const auto st = srv.poll()) {
      out.errors.push_back("exited before accepting connections (" + describe_status(*st) + ")" + said(log));
      return false;
    }
    if (steady::now() >= deadline) {
      out.errors.push_back("did not accept on 127.0.0.1:" + std::to_string(port) + " within " +
                           std::to_string(listen_bound.count()) + " s" + said(log));
      return false;
    }
    if (sig.wait_for(listen_poll) != 0) {
      stopped = true;
      return false;
    }
  }
}

// run_wrk() runs wrk once on the client CPU and returns its output, or
// nothing with the reason in `out`. wrk gets -d plus wrk_grace before it
// is killed; a stop signal is passed on to it (it stops and reports).
std::optional<std::string> run_wrk(const run_setup& setup, unsigned seconds, unsigned port,
                                   const std::string& log, run_outcome& out, const stop_signals& sig,
                                   bool& stopped) {
  child_process::launch on_client;
  on_client.cpus = {setup.client_cpu};
  child_process wrk("wrk", wrk_args(setup.connections, seconds, setup.wrk_script, port), log, true, on_client);
  const auto deadline = steady::now() + std::chrono::seconds(seconds) + wrk_grace;
  bool killed = false;
  const int st = wait_for_child(wrk, sig, SIGINT, stopped, wrk_tick, [&] {
    if (!killed && steady::now() > deadline) {
      killed = true;
      wrk.signal(SIGKILL);
    }
  });
  if (killed) {
    out.errors.push_back("wrk ran " + std::to_string(wrk_grace.count()) + " s past its -d and was killed");
    return std::nullopt;
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    out.errors.push_back("wrk ended with " + describe_status(st) + said(log));
    return std::nullopt;
  }
  return read_text(log);
}

// stop() sends SIGTERM to `srv` and, when `judged`, checks it exits 0
// within stop_bound; anything else goes into `out`. A server still running
// then is killed and reaped by its destructor. A server that never
// listened is not judged: its failure is reported already.
void stop(child_process& srv, const std::string& log, run_outcome& out, const stop_signals& sig,
          bool& stopped, bool judged = true) {
  srv.signal(SIGTERM);
  const auto st = wait_for_child_until(srv, sig, stopped, steady::now() + stop_bound);
  if (!judged) return;
  if (!st) {
    out.errors.push_back("did not exit within " + std::to_string(stop_bound.count()) +
                         " s of SIGTERM; killed");
  } else if (!WIFEXITED(*st) || WEXITSTATUS(*st) != 0) {
    out.errors.push_back("ended with " + describe_status(*st) + " after SIGTERM, not exit status 0" + said(log));
  }
}

}  // namespace

unsigned port_picker::next() {
  for (unsigned tries = 0; tries < count_; ++tries) {
    const unsigned port = first_ + at_;
    at_ = (at_ + 1) % count_;
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error(std::string("cannot make a socket: ") + std::strerror(errno));
    // As the servers bind: a port whose last connections linger in
    // TIME_WAIT is free to listen on.
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    const sockaddr_in a = loopback(port);
    const bool free = bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    if (free) return port;
  }
  throw std::runtime_error("no free port on 127.0.0.1 in " + std::to_string(first_) + ".." +
                           std::to_string(first_ + count_ - 1));
}

run_outcome measure(const server& s, const run_setup& setup, unsigned port, std::size_t index,
                    const stop_signals& sig, bool& stopped) {
  run_outcome out;
  const std::string tag = std::to_string(index);
  const std::string server_log = (setup.dir / ("server" + tag + ".log")).string();
  const std::string warm_log = (setup.dir / ("warmup" + tag + ".log")).string();
  const std::string wrk_log = (setup.dir / ("wrk" + tag + ".log")).string();

  child_process::launch on_server;
  on_server.cpus = s.cpus;
  on_server.env = s.env;
  // A server that cannot be started (a binary that cannot run, a CPU that
  // cannot be set) fails its run, not the whole benchmark.
  std::optional<child_process> started;
  try {
    started.emplace(s.exe, std::vector<std::string>{s.port_flag, std::to_string(port)}, server_log, false,
                    on_server);
  } catch (const std::runtime_error& e) {
    out.errors.emplace_back(e.what());
    return out;
  }
  child_process& srv = *started;
  if (!await_listen(srv, port, server_log, out, sig, stopped)) {
    // One that exited has been reaped and reported; one that is slow to
    // listen (or a stop signal came) is still told to stop.
    if (!srv.poll()) stop(srv, server_log, out, sig, stopped, false);
    return out;
  }

  std::optional<std::string> report;
  if (run_wrk(setup, warmup_seconds, port, warm_log, out, sig, stopped) && !stopped) {
    report = run_wrk(setup, setup.seconds, port, wrk_log, out, sig, stopped);
  }
  if (report && !stopped) {
    out.result = parse_report(*report);
    if (!out.result) {
      out.errors.push_back("wrk printed no report line" + said(wrk_log));
    } else {
      for (std::string& e : errors_of(*out.result)) out.errors.push_back("wrk saw " + e);
    }
  }
  // How the server ends counts whatever wrk saw: a crash at SIGTERM marks
  // the row as much as a bad response does.
  stop(srv, server_log, out, sig, stopped);
  if (stopped) out.result.reset();
  return out;
}

}  // namespace bench::netbench
