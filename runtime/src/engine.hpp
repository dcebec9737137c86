// engine.hpp: the backend-neutral half of the scheduler.
//
// The engine owns the runqueues and executes what a policy decides: where a
// new or woken fiber is queued, and which queued fibers move when a worker
// balances. It creates no threads, switches no contexts and reads no clock;
// every entry point that a time-dependent rule may need takes `now` from the
// caller. The real backend (worker.cpp) drives it with the steady clock; a
// simulated backend can drive the same code with virtual time (DESIGN.md,
// seam 2).
//
// Locking: each runqueue has its own spinlock. No function here ever holds two
// runqueue locks at once: migration is two-phase, detach under the source's
// lock, then attach under the destination's.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "domains.hpp"
#include "policy.hpp"
#include <usched/detail/spinlock.hpp>

namespace usched::detail {

// The part of a fiber the engine sees (the kernel's struct sched_entity).
struct sched_entity {
  sched_entity* rq_next = nullptr;
  sched_entity* rq_prev = nullptr;
  int cpu = -1;     // the runqueue it is on, or the worker it last ran on
  int pinned = -1;  // the only worker it may run on, or -1
};

// A worker's queue of runnable fibers, FIFO.
struct alignas(64) runqueue {
  spinlock lock;
  sched_entity* head = nullptr;
  sched_entity* tail = nullptr;
  // Fibers waiting in the queue (not the running one). Written under `lock`,
  // read without it for snapshots and idle checks: relaxed is enough for
  // snapshots, because a stale value only makes a balance decision less
  // precise; the park protocol reads it seq_cst (see worker.cpp).
  std::atomic<unsigned> nr_queued{0};
  // Of those, the ones pinned to this worker (never movable). Same rules.
  std::atomic<unsigned> nr_pinned{0};
  // True while the owning worker runs nothing. Written by the owner only.
  std::atomic<bool> idle{true};

  // The queue operations below require `lock` held.
  void push_back(sched_entity* se) noexcept;
  sched_entity* pop_front() noexcept;
  void remove(sched_entity* se) noexcept;
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

// Balancing counters of one worker, written by that worker only.
struct balance_counters {
  stat_counter newidle_attempts;  // newly-idle balance passes
  stat_counter newidle_pulls;     // passes that moved at least one fiber
  stat_counter fibers_pulled;     // fibers moved onto this worker
};

class engine {
 public:
  // Upper bound on fibers moved by one balance pass (the kernel's
  // sysctl_sched_nr_migrate default, which ghOSt's userspace CFS also uses):
  // it bounds the time a source queue's lock is held.
  static constexpr unsigned max_migrate_per_pass = 32;

  engine(domain_tree domains, std::unique_ptr<usched::policy> pol);

  std::size_t nr_cpus() const noexcept { return domains_.nr_cpus(); }
  const domain_tree& domains() const noexcept { return domains_; }
  const usched::policy& policy() const noexcept { return *policy_; }
  runqueue& rq(int cpu) noexcept { return rqs_[static_cast<std::size_t>(cpu)]; }
  const runqueue& rq(int cpu) const noexcept { return rqs_[static_cast<std::size_t>(cpu)]; }

  // snapshot() fills `out` with a lock-free reading of every worker.
  void snapshot(std::vector<cpu_snapshot>& out) const;

  // select_cpu() chooses the worker for a new (kind == spawn) or woken fiber:
  // its pinned worker if it has one, else the policy's choice. `origin` is the
  // worker asking, -1 for a thread outside the runtime. `scratch` is reused
  // for the snapshot. Takes no lock.
  int select_cpu(placement_kind kind, const sched_entity& se, int origin, std::uint64_t random,
                 std::vector<cpu_snapshot>& scratch) const;

  // enqueue() appends `se` to `cpu`'s runqueue and records it there. Locks
  // that runqueue. Returns the number queued after the push.
  unsigned enqueue(int cpu, sched_entity* se, std::int64_t now);

  // pick_next() pops the next fiber of `cpu`'s runqueue, or null.
  sched_entity* pick_next(int cpu, std::int64_t now);

  // yield_swap() is a yield in one critical section: if `cpu` has a queued
  // fiber, `prev` goes to the tail and the head is returned; otherwise null
  // and nothing changes.
  sched_entity* yield_swap(int cpu, sched_entity* prev, std::int64_t now);

  // newidle_balance() runs when `this_cpu` has nothing to run: for each level
  // of its chain, narrowest first, ask the policy and execute its decision;
  // stop at the first level that moved something. Returns the number of
  // fibers moved onto this_cpu's runqueue.
  unsigned newidle_balance(int this_cpu, std::int64_t now, std::uint64_t random,
                           std::vector<cpu_snapshot>& scratch);

  // detach_fibers() removes up to min(decision.imbalance, max) fibers that may
  // run on `dst` from the front of `decision.busiest`'s runqueue into `out`,
  // under that queue's lock only. Pinned fibers are skipped; the running fiber
  // is never in the queue, so it cannot be taken. Returns how many.
  unsigned detach_fibers(int dst, const balance_decision& decision, sched_entity** out, unsigned max);

  // attach_fibers() appends `n` detached fibers to `dst`'s runqueue, under its lock.
  void attach_fibers(int dst, sched_entity* const* list, unsigned n, std::int64_t now);

  const balance_counters& counters(int cpu) const noexcept {
    return counters_[static_cast<std::size_t>(cpu)];
  }

 private:
  domain_tree domains_;
  std::unique_ptr<usched::policy> policy_;
  std::unique_ptr<runqueue[]> rqs_;
  std::unique_ptr<balance_counters[]> counters_;
};

}  // namespace usched::detail
