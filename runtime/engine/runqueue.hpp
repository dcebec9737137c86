// runqueue.hpp: a worker's runqueue (the kernel's struct rq with its
// cfs_rq folded in), the balancing state of each level of its chain, and
// the counters runtime::stats() reports. Plain data: the engine's functions
// are the only writers, under the locks each field names.
#pragma once

#include <atomic>
#include <cstdint>

#include <usched/detail/spinlock.hpp>
#include <usched/runtime.hpp>
#include <usched/wake_reason.hpp>

#include "pelt.hpp"
#include "policy.hpp"
#include "sched_entity.hpp"
#include "timeline.hpp"

namespace usched::detail {

// Balancing state of one level of one worker's chain.
struct sd_balance_state {
  unsigned nr_balance_failed = 0;
  std::int64_t balance_interval_ns = 0;  // doubles after a balanced or failed pass, up to max
  std::int64_t last_balance = 0;
  // The longest newly-idle pass at this level (sd->max_newidle_lb_cost),
  // decayed by 253/256 once a second from the tick.
  std::int64_t max_newidle_lb_cost = 0;
  std::int64_t next_decay = 0;
};

// A statistics counter with a single writer. Relaxed load+store instead of a
// locked RMW: only its owner writes it, and readers (runtime::stats()) only
// need some recent value, never a synchronized one.
class stat_counter {
 public:
  void add(std::uint64_t n = 1) noexcept {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::uint64_t get() const noexcept { return v_.load(std::memory_order_relaxed); }
  operator std::uint64_t() const noexcept { return get(); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

// The wake-to-run delays of one wake reason on one worker
// (usched::latency_histogram's buckets; the count is their sum). Written
// only by that worker's thread, as it picks a woken fiber (under its
// runqueue's lock).
struct latency_counters {
  stat_counter buckets[latency_histogram::bucket_count];
  stat_counter sum_ns;
  stat_counter max_ns;
  void record(std::uint64_t ns) noexcept {
    buckets[latency_histogram::bucket_of(ns)].add();
    sum_ns.add(ns);
    if (ns > max_ns.get()) max_ns.add(ns - max_ns.get());
  }
};

// Balancing counters of one domain level of one worker, written by that worker.
struct level_counters {
  stat_counter attempts;  // load_balance passes at this level
  stat_counter balanced;  // passes that found nothing to do
  stat_counter successes; // passes that moved at least one fiber
  stat_counter failures;  // passes that found an imbalance but moved nothing
  stat_counter moved[4];  // fibers moved, by migration_type
  stat_counter odd_picks; // busiest group without a stacked worker over one with (seeds/003)
};

// Counters of one worker, written by the thread that holds its runqueue
// lock or runs it.
struct cpu_counters {
  stat_counter newidle_attempts;  // newly-idle balance passes
  stat_counter newidle_pulls;     // passes that moved at least one fiber
  stat_counter newidle_skipped;   // times it went idle too briefly on average to balance (avg_idle)
  stat_counter fibers_pulled;     // fibers moved onto this worker by balancing
  stat_counter wake_prev;         // wake-ups placed on the fiber's previous worker
  stat_counter wake_idle_sibling; // ... on another idle worker sharing its LLC
  stat_counter wake_other;        // ... anywhere else
  stat_counter wakeup_preemptions;// wake-ups that asked the running fiber to yield
  stat_counter tick_preemptions;  // ticks that ended the running fiber's slice
  stat_counter active_pushes;     // fibers it moved to another worker for an active balance
  stat_counter active_abandoned;  // active balances asked of it that found no fiber runnable to hand over
  stat_counter handoffs;          // join hand-offs made: a joinee or a joiner made this worker's next pick
  // Fibers made runnable on this worker, by reason (the wake-up events'
  // `why`). Written by the waker, whichever thread it is, under this
  // worker's runqueue lock, which it holds for the enqueue anyway: the lock
  // orders the wakers' load+store, so one counter never loses a count.
  stat_counter wakeups[wake_reason_count];
  // Wake-to-run delays of the fibers this worker picked, by the reason of
  // the wake-up that queued them (engine::note_run); on lines of their own,
  // apart from the counters above that wakers write.
  alignas(64) latency_counters wake_latency[wake_reason_count];
};

// A worker's runqueue.
//
// Layout: the first cache line holds everything an enqueue and a pick touch
// under the FIFO and LIFO disciplines (the lock, the list, the counts, the
// flags a waker and a spinning worker read), so a wake-up from another
// worker moves one runqueue line to the waker and back, not four. The fair
// discipline's tree, the PELT signals and what snapshots read follow.
struct alignas(64) runqueue {
  spinlock lock;
  // Read without the lock (snapshots, idle checks): relaxed is enough for
  // snapshots, because a stale value only makes a decision less precise.
  std::atomic<bool> idle{true};
  std::atomic<bool> need_resched{false};  // the running fiber should yield at its next preempt point
  // Who set need_resched (a stop_reason: preempt_wakeup, preempt_tick or
  // preempt_balance), stored before it; read only by a trace's switch.
  std::atomic<std::uint8_t> resched_cause{0};
  unsigned nr_running = 0;                // queued + curr (under the lock)
  // The queue order and the running fiber, under the lock.
  sched_entity* head = nullptr;
  sched_entity* tail = nullptr;
  sched_entity* curr = nullptr;  // running, not in the queue
  // FIFO discipline: the fiber most recently spawned by this worker's own
  // running fiber, kept at the head of the queue so it runs next (Go's
  // runnext): fork-join code then runs depth-first and keeps few fibers
  // alive. One slot only: the next local spawn moves it to the tail, so
  // spawning cannot starve the queue. Balancing takes it last.
  sched_entity* runnext = nullptr;
  // nr_queued is written seq_cst: the park protocol pairs it with the
  // worker's park word (worker.cpp).
  std::atomic<unsigned> nr_queued{0};
  std::atomic<unsigned> nr_pinned{0};
  // Active balance: a worker whose balancing kept failing asks this one to
  // give it a fiber at its next switch (-1: no request).
  // A NUMA migration of the running fiber (engine::numa_migrate) asks
  // with numa_push_tag + the destination, in one store: the switch then
  // pushes that fiber, requeued, and no other; if it blocked or exited
  // instead, nothing moves.
  std::atomic<int> active_balance_dst{-1};
  static constexpr int numa_push_tag = 1 << 24;
  unsigned long load_weight = 0;  // summed weight of queued + curr (under the lock)

  // The fair discipline and load tracking, under the lock. The queued
  // fibers in vruntime order (timeline.hpp).
  alignas(64) detail::timeline<sched_entity> timeline;
  static_assert(sizeof(detail::timeline<sched_entity>) + sizeof(sched_entity*) <= 64,
                "the timeline and the hand-off share the fair discipline's first line");
  // The fair discipline's join hand-off (engine_config::join_handoff): the
  // queued fiber the running one hands this worker to as it blocks on it
  // or exits to it, picked before the leftmost. Consumed by the next pick,
  // cleared (timeline_erase) if the fiber leaves the queue first (a balancer took it). FIFO
  // and LIFO need no slot: the fiber moves to the head, which they pick.
  sched_entity* handoff = nullptr;
  std::uint64_t min_vruntime = 0;
  std::int64_t slice_ns = 0;     // the slice curr was given when picked
  // What slice_ns was computed from (engine::set_slice): the count and
  // weight of the runqueue and the weight of the fiber.
  unsigned slice_nr = 0;
  unsigned slice_weight = 0;
  unsigned long slice_total = 0;
  rq_pelt pelt;
  // The summed estimates of the fibers queued or running here
  // (cfs_rq->avg.util_est.enqueued); a worker's util is the larger of this
  // and its util_avg (cpu_util()).
  unsigned long util_est = 0;

  // The EEVDF discipline (eevdf.cpp), under the lock. The queued fibers
  // by virtual deadline, delayed ones included; curr is not in it. The
  // queue's average vruntime V is kept as sums relative to zero_vruntime,
  // which follows V at each insert and erase (v6.18.y's zero_vruntime):
  // ev_avg_vruntime = sum of (vruntime - zero_vruntime) x weight and
  // ev_avg_load = sum of weight over the tree; the running fiber is
  // added when V is read (avg_vruntime()).
  eevdf_tree<sched_entity> ev_tree;
  std::int64_t ev_avg_vruntime = 0;
  unsigned long ev_avg_load = 0;
  std::uint64_t zero_vruntime = 0;
  unsigned ev_nr = 0;             // fibers in the tree
  std::int64_t ev_picked_at = 0;  // when curr was picked: its run's start, for PELT

  // Published for snapshots (relaxed; see above).
  alignas(64) std::atomic<std::uint64_t> min_vruntime_pub{0};
  std::atomic<unsigned long> load_avg_pub{0};
  std::atomic<unsigned long> runnable_load_pub{0};
  std::atomic<unsigned long> util_avg_pub{0};
  std::atomic<unsigned long> util_est_pub{0};
  std::atomic<unsigned long> runnable_avg_pub{0};
  std::atomic<std::int64_t> pelt_update_pub{0};
  std::atomic<int> curr_preferred_node{-1};
  std::atomic<unsigned long> curr_load{0};
  // Of nr_running, the fibers that prefer a node, and those on the node
  // they prefer (rq->nr_numa_running, nr_preferred_running; account_numa),
  // kept only for policies with policy_traits::counts_numa_fibers. Written
  // under the lock, read by snapshots.
  std::atomic<unsigned> nr_numa_running{0};
  std::atomic<unsigned> nr_preferred_running{0};
  // Contributions of blocked fibers that woke up on another worker, to be
  // subtracted at this runqueue's next update (the kernel's cfs_rq->removed).
  std::atomic<unsigned long> removed_load{0};
  std::atomic<unsigned long> removed_util{0};
  std::atomic<unsigned long> removed_runnable{0};

  // Off the paths of an enqueue and a pick, on a line of their own: what
  // only an idle worker, a waker's placement or an active balance's reply
  // touch.
  // Newly-idle rationing (the kernel's rq->idle_stamp, avg_idle and
  // max_idle_balance_cost): when the worker last went idle (0: it is not
  // idle since, or it pulled), the average of its idle periods, and the
  // longest newly-idle pass of its whole chain. The owner sets the stamp
  // and the costs; a wake-up onto the runqueue (under the lock) closes the
  // idle period.
  alignas(64) std::atomic<std::int64_t> idle_stamp{0};
  std::atomic<std::int64_t> avg_idle{0};
  std::atomic<std::int64_t> max_idle_balance_cost{0};
  // The average cost of this worker's wake-up scans of its LLC
  // (sd_llc->avg_scan_cost, SIS_PROP); only this worker's thread writes it.
  std::atomic<std::int64_t> avg_scan_cost{0};
  // The idle state the backend last reported for this worker
  // (engine::set_idle_state()): the exit latency of the state it is in and
  // when its idle period began, read by the spawn placement's choice
  // between idle workers. Only this worker's thread writes them.
  std::atomic<std::int64_t> idle_exit_latency{0};
  std::atomic<std::int64_t> idle_since{0};
  // Set by the worker that served an active balance this one asked for:
  // 1 + the lowest level of this worker's domains that spans both, whose
  // failure count this worker resets at its next pass (0: none).
  std::atomic<int> active_balance_done{0};
  // When the tick next tries the running fiber's NUMA migration (the
  // kernel's p->numa_migrate_retry, kept here per worker; engine::numa_migrate).
  // Only this worker's thread reads and writes it.
  std::int64_t numa_migrate_retry = 0;

  // v4.11's per-CPU load history (rq->cpu_load[], last_load_update_tick),
  // kept only for a policy that asks (policy_traits::cpu_load_signal). Only
  // this worker's thread writes them, at its tick and as it enters and
  // leaves idle (engine::cpu_load_tick and its neighbours); snapshots read
  // cpu_load relaxed, as the kernel's balancer read remote rq->cpu_load[].
  alignas(64) std::atomic<unsigned long> cpu_load[cpu_snapshot::cpu_load_indices];
  std::int64_t last_load_update_tick = 0;  // in ticks of engine_config::tick_ns (jiffies)
  // Idle since its entry into idle recorded cpu_load[0] (the kernel's
  // stopped tick, NO_HZ): the ticks it misses until it runs again are
  // caught up in one step (cpu_load_update_nohz()).
  bool tick_stopped = false;
};

}  // namespace usched::detail
