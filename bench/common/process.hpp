// process.hpp: the child processes of the benchmark drivers
// (usched_micro_compare runs usched_micro once per configuration and round,
// usched_schbench_compare the clone once per policy, usched_netbench each
// HTTP server and wrk, pinned to their CPUs, and gnuplot): starting one
// with its output in a log, waiting for it while a stop signal may come,
// saying how it ended, and showing its command line.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/types.h>

#include "common/shell_join.hpp"
#include "common/stop_signals.hpp"

namespace bench {

// self_dir(): the folder of the running program (/proc/self/exe), where a
// driver finds the programs built beside it. Throws std::runtime_error.
std::filesystem::path self_dir();
// on_path(): whether `name` is an executable file in a folder of $PATH.
bool on_path(const std::string& name);

// child_process is one program started with posix_spawn: stdin from
// /dev/null, stdout and stderr both into `log` (created, or truncated), and
// no signal blocked, whatever the driver blocks for itself (stop_signals),
// so that a stop signal passed on still reaches it. With `search_path`,
// `exe` is looked up on PATH as a shell would. The constructor throws
// std::runtime_error ("cannot start EXE: why") when the spawn fails. A
// child still running when the object goes is killed (SIGKILL) and reaped,
// so none outlives the scope that started it.
class child_process {
 public:
  child_process(const std::string& exe, const std::vector<std::string>& args, const std::string& log,
                bool search_path = false);

  // launch is what a driver may set on a child beyond its command line.
  struct launch {
    // The CPUs the child may run on, set with sched_setaffinity() in the
    // child before exec, so that the program starts on them and every
    // thread it makes inherits them; empty: the driver's own mask.
    std::vector<unsigned> cpus;
    // NAME, VALUE pairs set in the child's environment (replacing the
    // driver's value of NAME, if any); the rest is inherited.
    std::vector<std::pair<std::string, std::string>> env;
  };
  // The same, started with fork() and exec (posix_spawn cannot set an
  // affinity) with `how` applied in the child. A failure to pin or to exec
  // is reported back through a pipe and thrown here as std::runtime_error
  // ("cannot pin EXE to CPUs 0,1: why", "cannot start EXE: why"), with the
  // child already reaped.
  child_process(const std::string& exe, const std::vector<std::string>& args, const std::string& log,
                bool search_path, const launch& how);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  // poll() reaps the child if it has exited: its wait status, or nothing
  // while it runs. Never blocks.
  std::optional<int> poll();

  // wait() blocks until the child has exited and returns its wait status.
  int wait();

  // signal() sends `sig` to the child, unless it has been reaped.
  void signal(int sig) const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// wait_for_child() waits for `c` to exit and returns its wait status. The
// first stop signal `sig` catches meanwhile, unless `stopped` is already
// set, sets `stopped` and is passed on to the child as `forward_as`; the
// child is still waited for, so it can end in order (the clone prints its
// final report). With a non-zero `tick_every`, tick() is called before the
// first wait and after every `tick_every` of it (a progress line); with
// zero the driver sleeps until the child exits or a signal comes, so that
// it takes no CPU from the child's measurements. The caller must hold
// `sig` (SIGINT and SIGTERM blocked in this thread) and have no other
// child that could exit meanwhile.
int wait_for_child(child_process& c, const stop_signals& sig, int forward_as, bool& stopped,
                   std::chrono::nanoseconds tick_every = {}, const std::function<void()>& tick = {});

// wait_for_child_until() waits for `c` to exit, up to `deadline`: its wait
// status, or nothing if it still runs then. A stop signal `sig` catches
// meanwhile sets `stopped` and is not passed on (the caller is already
// ending the child: a server told to stop, given a bound to do it in).
// The caller must hold `sig` and have no other child that could exit
// meanwhile.
std::optional<int> wait_for_child_until(child_process& c, const stop_signals& sig, bool& stopped,
                                        std::chrono::steady_clock::time_point deadline);

// describe_status() words a wait status: "<exited> N" for an exit with
// status N ("exit status" unless the driver says otherwise), "killed by
// <signal's description>", or "ended oddly".
std::string describe_status(int wait_status, std::string_view exited = "exit status");

// read_text() is the whole file at `path`, or "" when it cannot be read.
std::string read_text(const std::string& path);

// temp_dir is a fresh folder under $TMPDIR (else /tmp), named
// <prefix>-XXXXXX, for a driver's logs and JSON; removed with everything in
// it when the object goes. The constructor throws std::runtime_error when
// the folder cannot be made.
class temp_dir {
 public:
  explicit temp_dir(std::string_view prefix);
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace bench
