// usched/runtime.hpp: the runtime, an RAII owner of workers and fibers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <usched/fiber.hpp>
#include <usched/options.hpp>

namespace usched {

// Counters of one worker, read with runtime::stats().
struct worker_stats {
  std::uint64_t fibers_run = 0;        // context switches into a fiber
  std::uint64_t spawned = 0;           // fibers placed on this worker at spawn
  std::uint64_t woken = 0;             // fibers placed on this worker at wake-up
  std::uint64_t newidle_attempts = 0;  // newly-idle balance passes
  std::uint64_t newidle_pulls = 0;     // passes that pulled at least one fiber
  std::uint64_t fibers_pulled = 0;     // fibers moved onto this worker by balancing
  std::uint64_t parks = 0;             // times the worker parked on its futex
};

// runtime owns a set of workers (OS threads, pinned one per PU or core) and
// the fibers spawned on it. Construction starts the workers; destruction waits
// until every fiber ever spawned has returned, then stops them, so nothing
// spawned is lost. Several runtimes may coexist in one process.
class runtime {
 public:
  // runtime() configures itself from the environment (options::from_env()).
  // Both constructors throw usched::config_error for a setting they cannot
  // honour, before any thread is started.
  runtime();
  explicit runtime(options opts);
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  // spawn() starts f(args...) as a fiber; callable from any thread.
  template <class F, class... Args>
    requires(!std::is_same_v<std::decay_t<F>, spawn_options>)
  auto spawn(F&& f, Args&&... args) {
    return detail_spawn(*impl_, spawn_options{}, std::forward<F>(f), std::forward<Args>(args)...);
  }
  template <class F, class... Args>
  auto spawn(const spawn_options& opts, F&& f, Args&&... args) {
    return detail_spawn(*impl_, opts, std::forward<F>(f), std::forward<Args>(args)...);
  }

  // run() runs f() as a fiber, blocks the calling thread until it returns, and
  // returns its value or rethrows its exception.
  template <class F>
  auto run(F&& f) {
    return spawn(std::forward<F>(f)).join();
  }

  // Number of workers.
  unsigned workers() const noexcept;
  // The options in force (after defaults and environment were applied).
  const options& config() const noexcept;
  // Multi-line description: topology, domain tree, policy.
  std::string describe() const;
  // A snapshot of every worker's counters, indexed by worker.
  std::vector<worker_stats> stats() const;

 private:
  std::unique_ptr<detail::runtime_impl> impl_;
};

}  // namespace usched
