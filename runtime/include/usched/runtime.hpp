// usched/runtime.hpp: the runtime, an RAII owner of workers and fibers.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
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

// latency_histogram: durations in ns, in log-linear buckets (HdrHistogram's
// layout with two significant bits): below 256 ns, eight buckets of 32 ns;
// above, every power of two cut into four equal buckets, so a bucket is at
// most a quarter of the values it holds wide, up to the last bucket,
// [1.88 s, 2.15 s), which also takes anything longer. Count, sum and the
// exact maximum are kept beside the buckets; percentiles come from the
// buckets. The wake-to-run delays of runtime::stats() are kept in these
// (worker_stats::wake_latency()), the way Go reports /sched/latencies and
// Tokio its scheduled-time histogram.
struct latency_histogram {
  static constexpr unsigned unit_shift = 5;  // the narrowest bucket: 32 ns
  static constexpr unsigned sub_bits = 2;    // 4 buckets per power of two
  static constexpr std::size_t linear_buckets = std::size_t{2} << sub_bits;
  static constexpr std::size_t bucket_count = 100;

  // bucket_of() is the bucket of a duration; anything past the last
  // bucket's lower bound lands in it.
  static constexpr std::size_t bucket_of(std::uint64_t ns) noexcept {
    const std::uint64_t w = ns >> unit_shift;
    if (w < linear_buckets) return static_cast<std::size_t>(w);
    const auto m = static_cast<unsigned>(std::bit_width(w)) - 1;
    const std::size_t i = (static_cast<std::size_t>(m - sub_bits + 1) << sub_bits) |
                          static_cast<std::size_t>((w >> (m - sub_bits)) & ((1u << sub_bits) - 1));
    return i < bucket_count ? i : bucket_count - 1;
  }
  // bucket_lower() is the smallest duration bucket i holds; bucket_width()
  // how many ns it spans (the last one holds everything above its lower
  // bound as well).
  static constexpr std::uint64_t bucket_lower(std::size_t i) noexcept {
    if (i < linear_buckets) return std::uint64_t{i} << unit_shift;
    const std::size_t g = i >> sub_bits;
    const std::uint64_t sub = i & ((std::size_t{1} << sub_bits) - 1);
    return (((std::uint64_t{1} << sub_bits) + sub) << (g - 1)) << unit_shift;
  }
  static constexpr std::uint64_t bucket_width(std::size_t i) noexcept {
    if (i < linear_buckets) return std::uint64_t{1} << unit_shift;
    return (std::uint64_t{1} << ((i >> sub_bits) - 1)) << unit_shift;
  }

  std::array<std::uint64_t, bucket_count> buckets{};
  std::uint64_t count = 0;   // durations recorded
  std::uint64_t sum_ns = 0;  // their sum
  std::uint64_t max_ns = 0;  // the longest, exactly

  // record() adds one duration.
  void record(std::uint64_t ns) noexcept {
    ++buckets[bucket_of(ns)];
    ++count;
    sum_ns += ns;
    if (ns > max_ns) max_ns = ns;
  }
  // merge() adds another histogram's durations to this one's.
  void merge(const latency_histogram& o) noexcept {
    for (std::size_t i = 0; i < bucket_count; ++i) buckets[i] += o.buckets[i];
    count += o.count;
    sum_ns += o.sum_ns;
    if (o.max_ns > max_ns) max_ns = o.max_ns;
  }
  // percentile() is the p-th percentile (p in (0, 100]) as the buckets give
  // it: the midpoint of the first bucket at which the running count reaches
  // p% of the count (at least one sample), never above max_ns; 0 when
  // empty. Within half a bucket of the exact value.
  std::uint64_t percentile(double p) const noexcept;
  // mean_ns() is sum_ns / count, 0 when empty.
  std::uint64_t mean_ns() const noexcept { return count ? sum_ns / count : 0; }
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
  // Wake-to-run delays of the fibers that started running on this worker,
  // by why they were made runnable: from the wake-up or spawn that queued
  // them (wherever it queued them; a fiber moved by balancing counts where
  // it runs) to the switch into them. A fiber whose wake-up found it still
  // on its way to block counts from that wake-up to when it next runs. The
  // engine's clock (the time-stamp counter; virtual time in the simulator).
  std::array<latency_histogram, wake_reason_count> wake_latencies;

  // wake_latency(why) is one reason's histogram; wake_latency() all of
  // them merged.
  const latency_histogram& wake_latency(wake_reason why) const noexcept {
    return wake_latencies[static_cast<std::size_t>(why)];
  }
  latency_histogram wake_latency() const noexcept {
    latency_histogram h;
    for (const latency_histogram& r : wake_latencies) h.merge(r);
    return h;
  }
};

// Everything runtime::stats() reports.
struct runtime_stats {
  std::string policy;
  std::vector<worker_stats> workers;

  // wake_latency(why) / wake_latency(): worker_stats' histograms merged
  // over every worker.
  latency_histogram wake_latency(wake_reason why) const noexcept {
    latency_histogram h;
    for (const worker_stats& w : workers) h.merge(w.wake_latency(why));
    return h;
  }
  latency_histogram wake_latency() const noexcept {
    latency_histogram h;
    for (const worker_stats& w : workers) h.merge(w.wake_latency());
    return h;
  }

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
  // dump_trace() writes what the trace recorder holds now to `path`, in
  // the format its name says (`.json`: Chrome's Trace Event Format; any
  // other name: ftrace text; docs/tracing.md): a flight recorder's last
  // events of each worker (options::trace_flight), or a whole run's so
  // far. Callable from any thread, a fiber included, while fibers run.
  // Throws usched::config_error when the runtime records no trace
  // (options::trace and trace_flight both unset), std::runtime_error
  // naming the path when it cannot be written.
  void dump_trace(const std::string& path) const;

 private:
  std::unique_ptr<detail::runtime_impl> impl_;
};

}  // namespace usched
