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
#include <usched/wake_reason.hpp>

namespace usched {

// Balancing counters of one domain level of one worker.
struct domain_level_stats {
  std::string level;             // "SMT", "LLC", "NODE", "PKG", "NUMA", "SYS"
  std::uint64_t attempts = 0;    // balance passes at this level (newly-idle and periodic)
  std::uint64_t balanced = 0;    // passes that found nothing to do
  std::uint64_t successes = 0;   // passes that moved at least one fiber
  std::uint64_t failures = 0;    // passes that found an imbalance but moved nothing
  std::uint64_t moved_load = 0;  // fibers moved by migration type
  std::uint64_t moved_util = 0;
  std::uint64_t moved_task = 0;
  std::uint64_t moved_misfit = 0;
  // Busiest group picked without a stacked worker over one with (seeds/003's
  // dbg_odd_cnt); counted by the policies that report it.
  std::uint64_t odd_picks = 0;
};

// Counters of one worker.
struct worker_stats {
  std::uint64_t fibers_run = 0;          // context switches into a fiber
  std::uint64_t parks = 0;               // times the worker parked on its futex
  std::uint64_t idle_ns = 0;             // time in its idle loop (spinning or parked)
  std::uint64_t busy_ns = 0;             // time running fibers
  std::uint64_t newidle_attempts = 0;    // newly-idle balance passes
  std::uint64_t newidle_skipped = 0;     // times it went idle too briefly on average to balance (CFS: avg_idle)
  std::uint64_t newidle_pulls = 0;       // passes that pulled at least one fiber
  std::uint64_t fibers_pulled = 0;       // fibers moved onto this worker by balancing
  std::uint64_t wake_prev = 0;           // wake-ups it placed on the fiber's previous worker
  std::uint64_t wake_idle_sibling = 0;   // ... on another idle worker sharing that LLC
  std::uint64_t wake_other = 0;          // ... anywhere else
  std::uint64_t wakeup_preemptions = 0;  // arrivals that asked its running fiber to yield
  std::uint64_t tick_preemptions = 0;    // ticks that ended its running fiber's slice
  std::uint64_t active_pushes = 0;       // fibers it handed to another worker for an active balance
  std::uint64_t active_abandoned = 0;    // active balances asked of it that found no fiber runnable to hand over
  std::uint64_t handoffs = 0;            // join hand-offs: a joinee or a joiner made its next pick (options::join_handoff)
  // Fibers made runnable on this worker (queued here, or found still
  // running here on their way to block), by why they woke
  // (usched/wake_reason.hpp): wakeups[wake_reason::timer] ...
  wake_counts wakeups;
  std::vector<domain_level_stats> levels;  // its domain chain, narrowest first
};

// Everything runtime::stats() reports.
struct runtime_stats {
  std::string policy;
  std::vector<worker_stats> workers;

  // A readable table (what USCHED_STATS=1 prints) and one JSON document
  // (USCHED_STATS=json).
  std::string to_table() const;
  std::string to_json() const;
};

// runtime owns a set of workers (OS threads, pinned one per PU or core) and
// the fibers spawned on it. Construction starts the workers; destruction waits
// until every fiber ever spawned has returned, then stops them, so nothing
// spawned is lost. Several runtimes may coexist in one process. Every fiber
// starts with the floating-point control state (rounding mode, exception
// masks, flush-to-zero) of the thread that constructed the runtime, and keeps
// whatever it changes to itself.
class runtime {
 public:
  // runtime() configures itself from the environment (options::from_env()).
  // Both constructors throw usched::config_error for a setting they cannot
  // honour, before any thread is started.
  runtime();
  explicit runtime(options opts);
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;
  // ~runtime() waits until every fiber ever spawned has returned, then stops
  // the workers. Its I/O ends first: every usched::io / usched::net call in
  // flight on its workers is cancelled, and every one made after fails, with
  // std::errc::operation_canceled (docs/io.md, Shutdown). A fiber that never returns (blocked on a channel nobody
  // closes) makes it wait forever; after 2 s, and again after 4, 8, 16 s and
  // so on, it logs a warning (shown at the default USCHED_LOG=warn) naming
  // each blocked fiber and what it waits in (channel::recv, mutex::lock, a
  // join, ...) and counting the live fibers that are running or queued.
  // Calling it from one of the runtime's own fibers, which it would wait for
  // forever, ends the process: one line on stderr naming the fiber, then abort().
  ~runtime();

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
  decltype(auto) run(F&& f) {
    return spawn(std::forward<F>(f)).join();
  }

  // current() is the runtime of the calling fiber, or null on a thread
  // that is not running one of a runtime's fibers: library code can spawn
  // (current()->spawn(...)) without being handed the runtime.
  static runtime* current() noexcept;

  // Number of workers.
  unsigned workers() const noexcept;
  // The options in force (after defaults and environment were applied).
  const options& config() const noexcept;
  // Multi-line description: topology, domain tree, policy.
  std::string describe() const;
  // A snapshot of every worker's counters.
  runtime_stats stats() const;

 private:
  std::unique_ptr<detail::runtime_impl> impl_;
};

}  // namespace usched
