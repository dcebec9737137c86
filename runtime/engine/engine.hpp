// engine.hpp: the backend-neutral half of the scheduler.
//
// The engine owns the runqueues and everything that happens to a fiber while
// it is runnable: where a new or woken fiber is queued (placement by the
// policy), in which order a worker runs its fibers (FIFO, or CFS's vruntime
// order with slices and wake-up preemption), load tracking (PELT), and
// balancing (the balance driver asks the policy, then detaches and attaches
// fibers). It creates no threads, switches no contexts and reads no clock:
// every entry point takes `now` (ns) from its caller, as a now_source, and
// returns what the backend must do (the worker to notify, whether to kick an
// idle one, a fiber pushed elsewhere). Every scheduling decision is made here
// (the kernel's core.c to the policies' fair.c); a backend only runs fibers,
// parks and wakes workers, and keeps timers. The real backend (worker.cpp)
// drives it with the time-stamp counter; the simulator (sim/) drives the
// same code with virtual time (DESIGN.md, seam 2).
//
// Locking: each runqueue has its own spinlock, taken inside the engine. No
// function here ever holds two runqueue locks at once: migration is
// two-phase, detach under the source's lock, then attach under the
// destination's.
#pragma once

#include <atomic>
#include <cassert>
#include <boost/intrusive/set.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <usched/detail/spinlock.hpp>
#include <usched/options.hpp>
#include <usched/runtime.hpp>

#include "domains.hpp"
#include "pelt.hpp"
#include "policy.hpp"
#include "timeline.hpp"

namespace usched::detail {

// The part of a fiber the engine sees (the kernel's struct sched_entity).
struct sched_entity {
  // The fields a wake-up from another worker reads and writes come first,
  // 48 bytes that share a cache line with the fiber's wait token (see
  // struct fiber).
  //
  // Queue order, kept by every discipline: under FIFO the head has waited
  // longest, under LIFO the tail has; balancing walks from that end to take
  // the least recently run.
  sched_entity* rq_next = nullptr;
  sched_entity* rq_prev = nullptr;
  // The runqueue it is on, or the worker it last ran on. Written under the
  // lock of the runqueue it joins (relaxed; on_rq's release store follows);
  // atomic because hand_off() reads it under another runqueue's lock while a
  // thief may be attaching the fiber to its own.
  std::atomic<int> cpu{-1};
  int pinned = -1;  // the only worker it may run on, or -1
  int preferred_node = -1;
  unsigned weight = nice_0_weight;
  // Queued or running (the kernel's se->on_rq). Written under the runqueue's
  // lock; read without it by a waker, which only needs to know whether the
  // fiber may still be running on its worker (see engine::wake_running).
  std::atomic<bool> on_rq{false};
  // A wake-up arrived while the fiber was still running on its way to
  // block: its worker must keep it runnable (under the runqueue's lock).
  bool wake_pending = false;
  // The kernel's p->recent_used_cpu: a worker it was recently woken
  // towards, tried by the wake-up placement before it scans the LLC. Set at
  // a spawn to the spawner's worker, and by each wake-up the fiber makes
  // while running; the placement may hand it the fiber's previous worker.
  int recent_used_cpu = -1;
  // util_est (v4.17+, UTIL_EST and UTIL_EST_FASTUP): the util it had when
  // it last went to sleep, and a moving average of those that follows
  // rises at once and falls with weight 1/4. A fiber that sleeps loses its
  // util_avg at PELT's pace; its estimate keeps what it will need when it
  // wakes, and that is what balancing and placement read (task_util_est).
  // 32 bits each, as the kernel's struct util_est: a util is at most 1024.
  // Here, on the first line that an enqueue and a dequeue write anyway,
  // they end it exactly (struct fiber), so that the timeline's fields
  // start the next one.
  std::uint32_t util_est_enqueued = 0;
  std::uint32_t util_est_ewma = 0;

  // The fair discipline's line: the timeline node and the time kept for it.
  // A walk or a rebalancing of the tree reads a node's links and its
  // vruntime, so they share one line: one line of another fiber per node
  // visited, not two.
  // normal_link: the engine unlinks explicitly; no auto-unlink bookkeeping
  // on the switch path.
  boost::intrusive::set_member_hook<boost::intrusive::link_mode<boost::intrusive::normal_link>> timeline_hook;
  std::uint64_t vruntime = 0;     // runtime scaled by nice_0_weight / weight
  std::int64_t exec_start = 0;    // when it last started running or was last accounted
  std::int64_t sum_exec = 0;      // total time run, ns
  std::int64_t prev_sum_exec = 0; // sum_exec when it was last picked
  // Load tracking's line.
  pelt_avg avg;
};

// The estimate a fiber brings to a runqueue (_task_util_est), and its
// util as balancing reads it (task_util_est: the larger of that and util_avg).
inline unsigned long util_est_of(const sched_entity& se) noexcept {
  return se.util_est_ewma > se.util_est_enqueued ? se.util_est_ewma : se.util_est_enqueued;
}
inline unsigned long task_util_est(const sched_entity& se) noexcept {
  const unsigned long est = util_est_of(se);
  return se.avg.util_avg > est ? se.avg.util_avg : est;
}

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
  std::atomic<int> active_balance_dst{-1};
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
  // Set by the worker that served an active balance this one asked for:
  // 1 + the lowest level of this worker's domains that spans both, whose
  // failure count this worker resets at its next pass (0: none).
  std::atomic<int> active_balance_done{0};
};

// now_source is the time of one engine event, as the backend supplies it:
// either a value it already has, or its clock, read on first use and then
// kept, so that an event reads the clock at most once and only when its
// decision depends on the time. The FIFO and LIFO disciplines without load
// tracking keep no time: their yields, blocks and wake-ups read no clock
// (a counter read would be half the cost of a yield). Implicit from a
// value, so tests and the simulator pass their time as it is.
class now_source {
 public:
  using clock_fn = std::int64_t (*)() noexcept;
  constexpr now_source(std::int64_t value) noexcept : value_(value) {}  // NOLINT(google-explicit-constructor)
  constexpr explicit now_source(clock_fn clock) noexcept : clock_(clock) {}
  now_source(const now_source&) = delete;
  now_source& operator=(const now_source&) = delete;

  std::int64_t operator()() const noexcept {
    if (clock_ && !read_) [[unlikely]] {
      value_ = clock_();
      read_ = true;
    }
    return value_;
  }
  // fresh() reads the clock again, for what measures its own cost (the
  // newly-idle pass); a fixed value stays what it is.
  std::int64_t fresh() const noexcept {
    if (clock_) {
      value_ = clock_();
      read_ = true;
    }
    return value_;
  }
  // Whether fresh() can tell elapsed time (a clock, not a fixed value).
  bool measures() const noexcept { return clock_ != nullptr; }

 private:
  mutable std::int64_t value_ = 0;
  clock_fn clock_ = nullptr;
  mutable bool read_ = false;
};

// How the CFS granularities grow with the number of CPUs (the kernel's
// sysctl_sched_tunable_scaling, SCHED_TUNABLESCALING_*).
enum class tunable_scaling : std::uint8_t { none, log, linear };

// tunable_factor() is the kernel's get_update_sysctl_factor(): CPUs beyond
// 8 do not stretch the granularities further.
constexpr unsigned tunable_factor(tunable_scaling s, std::size_t nr_cpus) noexcept {
  const unsigned cpus = nr_cpus < 8 ? static_cast<unsigned>(nr_cpus < 1 ? 1 : nr_cpus) : 8u;
  switch (s) {
    case tunable_scaling::none:
      return 1;
    case tunable_scaling::linear:
      return cpus;
    case tunable_scaling::log:
    default: {
      unsigned log2 = 0;
      while ((2u << log2) <= cpus) ++log2;
      return 1 + log2;
    }
  }
}

// Tunables of the engine (filled from usched::options by the runtime, or by
// the simulator's command line).
struct engine_config {
  // CFS discipline: the kernel's normalized granularities (normalized_
  // sysctl_sched_latency and friends), which the engine multiplies by
  // tunable_factor(scaling, its CPUs) when it is made; config() returns
  // the scaled values. With the default log scaling 8 or more CPUs get the
  // kernel's 24 ms, 3 ms and 4 ms (docs/policies/cfs.md).
  std::int64_t sched_latency_ns = 6'000'000;
  std::int64_t min_granularity_ns = 750'000;
  std::int64_t wakeup_granularity_ns = 1'000'000;
  tunable_scaling scaling = tunable_scaling::log;
  // A fiber that ran less than this ago is cache-hot: balancing leaves it
  // while nr_balance_failed <= cache_nice_tries (sysctl_sched_migration_cost).
  std::int64_t migration_cost_ns = 500'000;
  // Fixed slice of the FIFO discipline (options::slice).
  std::int64_t fifo_slice_ns = 3'000'000;
  // PELT load tracking for the fair discipline (options::load_tracking).
  bool load_tracking = true;
  // What a newly-idle balance pass at a level costs, for the rationing of
  // the policies that ration it (policy::rations_newidle): measured with
  // the event's clock when it has one (the real backend), else this many
  // nanoseconds per worker in the level's span (the simulator's
  // `balance_pass` cost).
  std::int64_t balance_pass_per_cpu_ns = 0;
  // What select_idle_cpu() counts a worker of its scan as costing, for
  // SIS_PROP's scan-cost average (the kernel times the scan; a scan here
  // reads snapshots, and this is what a balance pass spends per worker).
  std::int64_t wake_scan_per_cpu_ns = 30;
  // The scheduler tick: how often a running worker does its periodic work
  // (load tracking of the running fiber, periodic balance), like HZ=1000.
  std::int64_t tick_ns = 1'000'000;
  // The nohz idle-balance kick: a busy worker with fibers queued behind it
  // wakes a parked worker to balance at most this often (the kernel kicks
  // its nohz balancer at most once per jiffy; 4 ms is a jiffy at HZ=250).
  std::int64_t idle_kick_interval_ns = 4'000'000;
  // The join hand-off (options::join_handoff): a fiber that joins one
  // queued on its own worker hands the worker to it, and a fiber that exits
  // hands its worker back to a joiner that last ran there, so fork-join
  // code runs depth-first under every discipline. The kernel has no join;
  // off, a joiner blocks and is woken like any other waiter.
  bool join_handoff = true;
  // Fork balancing (options::fork_balance): a spawn asks the policy where
  // the new fiber goes (the kernel's SD_BALANCE_FORK, find_idlest_cpu()).
  // Off, a spawn from a worker stays on it. On here, for engines made
  // without options (the engine tests); options turn it off by default.
  bool fork_balance = true;
};

// engine_config_of() is the engine's configuration for a runtime's options
// (the real backend and the simulator both start from it); the constants
// that are no option keep their defaults.
inline engine_config engine_config_of(const usched::options& o) {
  using std::chrono::duration_cast;
  using std::chrono::nanoseconds;
  engine_config c;
  c.fifo_slice_ns = duration_cast<nanoseconds>(o.slice).count();
  c.load_tracking = o.load_tracking;
  c.sched_latency_ns = duration_cast<nanoseconds>(o.cfs_latency).count();
  c.min_granularity_ns = duration_cast<nanoseconds>(o.cfs_min_granularity).count();
  c.wakeup_granularity_ns = duration_cast<nanoseconds>(o.cfs_wakeup_granularity).count();
  c.join_handoff = o.join_handoff;
  c.fork_balance = o.fork_balance;
  switch (o.cfs_tunable_scaling) {
    case usched::options::tunable_scaling::none:
      c.scaling = tunable_scaling::none;
      break;
    case usched::options::tunable_scaling::linear:
      c.scaling = tunable_scaling::linear;
      break;
    case usched::options::tunable_scaling::log:
      c.scaling = tunable_scaling::log;
      break;
  }
  return c;
}

// What a wake-up or a spawn asks of the backend (engine::wake_up).
struct wake_result {
  // The worker the fiber was queued on; -1 when the wake-up found it still
  // on its worker, on its way to block, which now keeps it: nothing to do.
  int cpu = -1;
  // cpu's worker may be parked: wake it. False only for a spawn onto the
  // spawner's own running worker.
  bool notify = false;
  // Fibers now wait behind cpu's running one and the policy lets idle
  // workers pull them: get one idle worker to balance (kick_target; a
  // spinning worker finds them by itself, or is told, see pull).
  bool kick = false;
  // The kick stands in for a fork balance: a spawn stayed on its spawner's
  // busy worker because fork balancing is off (engine_config::fork_balance),
  // under a policy whose spinning workers do not pull by themselves.
  // The kick then goes to a spinning worker too, not only to a parked one,
  // and the worker it reaches balances at once, as newly idle, without the
  // avg_idle rationing (find_work(kicked)): the kernel places a fork on an
  // idle CPU unrationed, and with fork balancing off an idle worker is where
  // the spawn would have gone. Without it, under the CFS family, an idle
  // worker whose short idle periods ration its newly-idle pass took almost
  // none of a fork-join batch queued behind the spawner.
  bool pull = false;
};

// What a worker's scheduling decision asks of the backend (pick_next,
// yield, block, exit).
struct pick_result {
  sched_entity* next = nullptr;  // what runs now; null: nothing (idle)
  // An active balance pushed the previous fiber to this worker, which must
  // be woken; -1 for none.
  int pushed_to = -1;
  // exit_to_joiner() only: fibers wait behind the joiner it handed the
  // worker to, and the policy lets idle workers pull them: kick as for a
  // wake-up (wake_result::kick).
  bool kick = false;
};

// What the tick asks of the backend (engine::tick).
struct tick_result {
  unsigned pulled = 0;  // fibers the periodic balance moved onto this worker
  // The nohz kick: fibers are queued behind this busy worker; get one idle
  // worker (kick_target) to balance, as for wake_result::kick.
  bool kick = false;
};

// How a fiber arrives on a runqueue.
enum class enqueue_kind : std::uint8_t {
  spawn,        // a new fiber
  spawn_local,  // a new fiber spawned by the fiber running on the same worker
  wakeup,       // a blocked fiber made runnable
};

// What happens to the running fiber when its worker picks the next one.
enum class prev_action : std::uint8_t {
  requeue,  // it stays runnable (preemption)
  yield,    // it stays runnable but steps aside (this_fiber::yield)
  block,    // it waits for something
  exit,     // it has finished
};


// calc_delta_fair(): runtime scaled to vruntime by the fiber's weight.
inline std::uint64_t calc_delta_fair(std::int64_t delta, unsigned weight) noexcept {
  if (weight == nice_0_weight) return static_cast<std::uint64_t>(delta);
  return static_cast<std::uint64_t>(delta) * nice_0_weight / weight;
}

class engine {
 public:
  // Upper bound on fibers moved by one balance pass (the kernel's
  // sysctl_sched_nr_migrate default, which ghOSt's userspace CFS also uses):
  // it bounds the time a source queue's lock is held.
  static constexpr unsigned max_migrate_per_pass = 32;
  // Above this many runnable fibers the CFS period stretches to
  // nr x min_granularity instead of sched_latency: the kernel's
  // sched_nr_latency, latency / min_granularity rounded up (8 with the
  // default granularities, whatever the scaling).
  unsigned sched_nr_latency() const noexcept { return nr_latency_; }

  engine(domain_tree domains, std::unique_ptr<usched::policy> pol, engine_config cfg = {});

  std::size_t nr_cpus() const noexcept { return domains_.nr_cpus(); }
  const domain_tree& domains() const noexcept { return domains_; }
  const usched::policy& policy() const noexcept { return *policy_; }
  const engine_config& config() const noexcept { return cfg_; }
  bool fair() const noexcept { return fair_; }
  bool lifo() const noexcept { return lifo_; }
  bool tracks_load() const noexcept { return tracks_load_; }
  // keeps_time(): whether a switch away from a running fiber reads the
  // clock (vruntime or load accounting); FIFO and LIFO without load
  // tracking never do.
  bool keeps_time() const noexcept { return fair_ || tracks_load_; }
  // idle_pulls_by_itself(): whether an idle worker balances at every poll
  // of its spin (idle_poll(): the work stealers), and so finds fibers queued
  // elsewhere without being told. The CFS family's idle workers balance
  // only when kicked or at their tick.
  bool idle_pulls_by_itself() const noexcept { return pulls_when_idle_ && !rations_newidle_; }
  runqueue& rq(int cpu) noexcept { return rqs_[static_cast<std::size_t>(cpu)]; }
  const runqueue& rq(int cpu) const noexcept { return rqs_[static_cast<std::size_t>(cpu)]; }

  // snapshot() fills `out` with a lock-free reading of every worker, PELT
  // signals decayed to `now`.
  void snapshot(std::vector<cpu_snapshot>& out, const now_source& now) const;

  // ---- events: what a backend calls -----------------------------------------
  //
  // wake_up() is try_to_wake_up() and wake_up_new_task(): a fiber made
  // runnable by `origin` (the worker the wake-up is from, -1 for a thread
  // outside the runtime; a timer's wake-up is from the worker that armed
  // it; a spawn's is the worker whose running fiber spawns) is placed
  // (select_cpu), queued (enqueue) and the result says whom
  // to wake. A wake-up of a fiber still on its way to block only marks it
  // (wake_running), and cpu is -1. `scratch` is the caller's snapshot space.
  //
  // `by_origin` says whether the calling thread is origin's worker (false
  // for a timer that another worker fires on origin's behalf): only then
  // does the placement write origin's state (its running fiber's
  // recent_used_cpu, its scan average).
  wake_result wake_up(sched_entity* se, placement_kind kind, int origin, std::uint64_t random,
                      std::vector<cpu_snapshot>& scratch, const now_source& now, bool by_origin = true);

  // The join hand-off (engine_config::join_handoff), both halves, each
  // called by worker `cpu` for its running fiber:
  //
  // hand_off() is the joiner's: it is about to block until `target`
  // finishes; if target waits in cpu's queue, that block's pick runs it
  // (true). Locks cpu's runqueue. With the hand-off off, or target running
  // or queued elsewhere, nothing changes (false).
  //
  // wake_joiner() is the exiting fiber's: it wakes `joiner`, which waits
  // for it. A joiner that last ran on cpu (and may run there) is queued
  // there without a placement, and the exit's pick runs it: the fork-join
  // continuation resumes where its children ran. Otherwise, or with the
  // hand-off off, it is wake_up() of a plain wake-up.
  bool hand_off(int cpu, sched_entity* target);
  wake_result wake_joiner(sched_entity* joiner, int cpu, std::uint64_t random, std::vector<cpu_snapshot>& scratch,
                          const now_source& now);

  // The backends take both halves in the switch they end in, one lock hold
  // each instead of two; a differential test holds them to the two-step
  // sequences above.
  //
  // The joiner's: schedule(cpu, prev, block, now, joined), where joined is
  // the fiber prev waits for, is hand_off(cpu, joined) and then the block's
  // pick, under the one lock of that pick (and the same under a block that
  // a wake-up turned into a requeue).
  //
  // The exiting fiber's: hands_back(joiner, cpu) says whether wake_joiner()
  // would hand cpu to the joiner; if so, exit_to_joiner(cpu, prev, joiner,
  // now) is wake_joiner() and then the exit's pick (schedule(cpu, prev,
  // exit)), with the joiner made the running fiber directly: it never
  // enters the queue, so there is no insert and erase of it, no queue
  // count to publish, and the runqueue's signals change once. The overload
  // flag is noted from the state after the exit (the two-step path notes
  // it with the joiner queued, which overloads a worker that will not be).
  // Otherwise the backend wakes the joiner with wake_up() and then
  // schedules the exit.
  bool hands_back(const sched_entity& joiner, int cpu) const noexcept {
    return cfg_.join_handoff && joiner.cpu.load(std::memory_order_relaxed) == cpu &&
           (joiner.pinned < 0 || joiner.pinned == cpu);
  }
  pick_result exit_to_joiner(int cpu, sched_entity* prev, sched_entity* joiner, const now_source& now);

  // schedule() is the running worker's switch decision: prev (its running
  // fiber) stops running as `action` says, and the next fiber comes back
  // (see pick_next). The FIFO disciplines without load tracking take the
  // short paths (yield_fifo, leave_fifo), which read no clock. Inline: it
  // is most of a yield.
  // `joined`: see the join hand-off above (a block only).
  [[gnu::always_inline]] pick_result schedule(int cpu, sched_entity* prev, prev_action action,
                                              const now_source& now, sched_entity* joined = nullptr) {
    pick_result r;
    if (!fair_ && !tracks_load_) {
      if (action == prev_action::yield) {
        r.next = yield_fifo(cpu, prev, now, &r.pushed_to);
        return r;
      }
      if (action == prev_action::block || action == prev_action::exit) {
        r.next = leave_fifo(cpu, prev, action, now, joined);
        return r;
      }
    }
    if (fair_ && action == prev_action::yield) {
      r.next = yield_fair(cpu, prev, now, &r.pushed_to);
      return r;
    }
    r.next = pick_next(cpu, prev, action, now, &r.pushed_to, joined);
    return r;
  }

  // find_work() is the idle worker's schedule(): the first queued fiber;
  // if there is none, a newly-idle balance (idle_balance) and a second
  // look. Null when there is still nothing. `kicked`: the worker was sent
  // by a pull kick (wake_result::pull); its pass is not rationed.
  sched_entity* find_work(int cpu, const now_source& now, std::uint64_t random,
                          std::vector<cpu_snapshot>& scratch, bool kicked = false);

  // idle_balance() is the newly-idle pull of a worker with nothing to run
  // (its idle loop while it spins, and once more before it parks): nothing
  // when the policy does not pull or no worker has a fiber that could be
  // pulled (overloaded(), the kernel's rd->overload test in
  // newidle_balance()), else newidle_balance(). Returns fibers moved here.
  // idle_poll() is what a spinning worker does at each poll, and once more
  // before it parks: idle_balance() again for the policies whose idle
  // workers keep looking (the work stealers' spinning thieves), nothing
  // for those that follow the kernel (the CFS family): an idle CPU there
  // balances again only from its tick (tick(), as CPU_IDLE) or when a busy
  // one kicks it.
  unsigned idle_poll(int cpu, const now_source& now, std::uint64_t random, std::vector<cpu_snapshot>& scratch) {
    return rations_newidle_ ? 0 : idle_balance(cpu, now, random, scratch);
  }

  unsigned idle_balance(int cpu, const now_source& now, std::uint64_t random,
                        std::vector<cpu_snapshot>& scratch, bool kicked = false);

  // overloaded() is the whole machine's "some worker has a fiber queued
  // that another could take" (the kernel's rd->overload): set by every
  // enqueue that leaves a runqueue with two runnable fibers, one of them
  // queued and unpinned; cleared by a balance pass that finds no such
  // runqueue. A set flag with nothing to take costs one balance pass; a
  // clear flag is never stale: the clearer clears, then looks at every
  // runqueue again, and an enqueuer that stored its count before that look
  // is seen, one that stored it after reads the cleared flag and sets it
  // (all seq_cst).
  bool overloaded() const noexcept { return overload_.flag.load(std::memory_order_seq_cst); }

  // kick_target() is the idle worker a kick goes to (wake_result::kick,
  // tick_result::kick): from a random start, the first worker other than
  // `busy_cpu` that `takes(cpu)` accepts (the backend's: parked, or
  // spinning and now told); -1 for none. takes() is asked in that order and
  // not again after the first yes.
  template <class Takes>
  int kick_target(int busy_cpu, std::uint64_t random, Takes&& takes) const {
    const int n = static_cast<int>(nr_cpus());
    const int start = static_cast<int>(random % static_cast<std::uint64_t>(n));
    for (int i = 0; i < n; ++i) {
      const int cpu = (start + i) % n;
      if (cpu != busy_cpu && takes(cpu)) return cpu;
    }
    return -1;
  }

  // select_cpu() chooses the worker for a new (kind == spawn) or woken fiber:
  // its pinned worker if it has one, else the policy's choice. `origin` is the
  // worker asking, -1 for a thread outside the runtime. Counts the wake-up
  // path on `origin` (or the target when origin < 0), and applies what the
  // placement noted (recent_used_cpu, the has_idle_cores hint, the scan
  // average). Takes no lock.
  int select_cpu(placement_kind kind, sched_entity& se, int origin, std::uint64_t random,
                 std::vector<cpu_snapshot>& scratch, const now_source& now, bool by_origin = true);

  // enqueue() makes `se` runnable on `cpu`. Locks that runqueue. Returns the
  // number queued after the push. `handoff`: a joiner woken by the fiber
  // exiting on cpu (wake_joiner): it is cpu's next pick, and the exiting
  // fiber is not asked to yield for it.
  unsigned enqueue(int cpu, sched_entity* se, enqueue_kind kind, const now_source& now, bool handoff = false);

  // wake_running() handles a wake-up of a fiber that has published itself
  // as waiting but may not have left its worker yet: if it is still on its
  // runqueue (running), it is marked so that its block turns into a
  // requeue, and true is returned: nothing else is to be done. False means
  // it is off every runqueue and must be enqueued. Takes that runqueue's lock
  // only when the fiber may still be on it.
  bool wake_running(sched_entity* se);

  // pick_next() is the worker's scheduling decision: `prev` (the running
  // fiber, or null from the idle loop) stops running as `action` says, and
  // the next fiber to run comes back (possibly prev itself after a requeue),
  // or null when there is none. Locks the runqueue once. If an active
  // balance asked for it, a requeued prev is pushed to the requesting worker
  // instead (its lock taken after ours is released); *pushed_to then names
  // that worker, which the caller must wake.
  // `joined`: a fiber queued here that prev, blocking, waits for (the
  // join hand-off, schedule()): it runs next.
  sched_entity* pick_next(int cpu, sched_entity* prev, prev_action action, const now_source& now,
                          int* pushed_to = nullptr, sched_entity* joined = nullptr);

  // yield_fifo() is pick_next(cpu, prev, yield) for the FIFO discipline
  // without load tracking, cut to what a yield needs: under the lock, the
  // head leaves the queue and prev joins its tail (the queue's length does
  // not change, so nothing is published). Returns prev when nothing else is
  // queued. Requires !fair() && !tracks_load(); when an active balance has
  // asked for the running fiber, it takes the full pick_next() path.
  // Inline: it is most of a yield, and the worker's yield path is one
  // function around it and the context switch.
  [[gnu::always_inline]] sched_entity* yield_fifo(int cpu, sched_entity* prev, const now_source& now,
                                                  int* pushed_to) {
    assert(!fair_ && !tracks_load());
    runqueue& q = rq(cpu);
    if (q.active_balance_dst.load(std::memory_order_relaxed) >= 0) [[unlikely]] {
      return pick_next(cpu, prev, prev_action::yield, now, pushed_to);
    }
    if (q.nr_queued.load(std::memory_order_relaxed) == 0) return prev;
    q.lock.lock();
    sched_entity* next = q.head;
    if (!next) [[unlikely]] {
      q.lock.unlock();
      return prev;
    }
    assert(q.curr == prev);
    prev->wake_pending = false;
    // The head comes out, prev goes to the back. The list alone: the count
    // is the same after both (nothing to publish), only the pinned count
    // may change.
    list_unlink(q, next);
    if (next == q.runnext) q.runnext = nullptr;
    list_link(q, prev, false);
    if ((prev->pinned >= 0) != (next->pinned >= 0)) [[unlikely]] {
      const unsigned pinned = q.nr_pinned.load(std::memory_order_relaxed);
      q.nr_pinned.store(prev->pinned >= 0 ? pinned + 1 : pinned - 1, std::memory_order_relaxed);
    }
    q.curr = next;
    if (q.need_resched.load(std::memory_order_relaxed)) q.need_resched.store(false, std::memory_order_relaxed);
    q.lock.unlock();
    return next;
  }

  // yield_fair() is pick_next(cpu, prev, yield) for the fair discipline,
  // cut to what a yield between queued fibers needs. It makes the same decision
  // as the full path (the same accounting, the same next fiber, the same
  // tree afterwards) with less work:
  // - one min_vruntime update after the swap instead of one before and one
  //   after: the leftmost before the swap is the fiber that runs after it,
  //   so both give the same value;
  // - no insert of prev and erase of next when prev can take next's node:
  //   next is the leftmost, so prev fits there whenever it sorts before
  //   next's successor (two fibers yielding to each other always do), and
  //   the tree is rewired in place (no rebalancing, no walk);
  // - nothing at all changes in the tree when prev keeps the CPU (it leads
  //   the leftmost by more than the wake-up granularity).
  // An active balance waiting for this worker and a join's hand-off take
  // pick_next(). Inline, as yield_fifo(): it is most of a yield. Requires
  // fair().
  [[gnu::always_inline]] sched_entity* yield_fair(int cpu, sched_entity* prev, const now_source& now, int* pushed_to) {
    runqueue& q = rq(cpu);
    q.lock.lock();
    if (q.handoff || q.active_balance_dst.load(std::memory_order_relaxed) >= 0) [[unlikely]] {
      q.lock.unlock();
      return pick_next(cpu, prev, prev_action::yield, now, pushed_to);
    }
    assert(q.curr == prev);
    prev->wake_pending = false;
    // update_curr(), less its min_vruntime update (done once, below).
    const std::int64_t t = now();
    if (const std::int64_t delta = t - prev->exec_start; delta > 0) {
      prev->exec_start = t;
      prev->sum_exec += delta;
      prev->vruntime += calc_delta_fair(delta, prev->weight);
    }
    const bool load_changed = tracks_load() && update_load(q, t, false);
    const auto before = timeline<sched_entity>::before;
    sched_entity* const left = q.timeline.leftmost();
    // Alone on the worker, prev runs on (its slice starts again, as after
    // pick_next()'s requeue and pick of it).
    sched_entity* next = left ? left : prev;
    // Where prev would sort after its requeue: ahead of the leftmost only when
    // strictly before it (equal keys queue behind). Ahead, it would be picked
    // itself, and the yield then steps aside for the leftmost unless that one
    // is more than the granularity behind (yield_task_fair's skip buddy).
    if (next != prev && before(*prev, *next)) {
      const auto gran = static_cast<std::int64_t>(calc_delta_fair(cfg_.wakeup_granularity_ns, prev->weight));
      if (static_cast<std::int64_t>(next->vruntime - prev->vruntime) > gran) next = prev;
    }
    if (next != prev) {
      // The list: prev to the tail, next out (pick_next's insert, then remove).
      list_unlink(q, next);
      list_link(q, prev, false);
      if (!q.timeline.replace_leftmost(*next, *prev)) {
        timeline_erase(q, next);
        timeline_insert(q, prev);
      }
      if ((prev->pinned >= 0) != (next->pinned >= 0)) [[unlikely]] {
        const unsigned pinned = q.nr_pinned.load(std::memory_order_relaxed);
        q.nr_pinned.store(prev->pinned >= 0 ? pinned + 1 : pinned - 1, std::memory_order_relaxed);
      }
      q.curr = next;
      next->exec_start = t;
    }
    // Picked (again): its slice starts now.
    next->prev_sum_exec = next->sum_exec;
    set_slice(q, *next);
    update_min_vruntime(q);
    if (q.need_resched.load(std::memory_order_relaxed)) q.need_resched.store(false, std::memory_order_relaxed);
    if (q.idle.load(std::memory_order_relaxed)) [[unlikely]] q.idle.store(false, std::memory_order_relaxed);
    q.min_vruntime_pub.store(q.min_vruntime, std::memory_order_relaxed);
    if (load_changed) publish_load(q);
    q.lock.unlock();
    return next;
  }

  // should_preempt() is the running fiber's question at a preempt point:
  // has someone asked it to yield (a wake-up, the tick, an active
  // balance), or, under FIFO and LIFO, has it used up its fixed slice while
  // others wait? `ran_ns` is how long it has run since its slice began (the
  // backend measures it: the real one with the counter it reads at the
  // preempt point anyway). The fair discipline ends a slice only at the
  // tick, as the kernel's check_preempt_tick() does (tick()): the slice is
  // recomputed there from the runqueue as it is then. No lock. Inline: a
  // think loop asks it at every clock read.
  bool should_preempt(int cpu, std::int64_t ran_ns) const noexcept {
    const runqueue& q = rq(cpu);
    if (q.need_resched.load(std::memory_order_relaxed)) return true;
    if (fair_ || q.nr_queued.load(std::memory_order_relaxed) == 0) return false;
    return ran_ns >= q.slice_ns;
  }

  // tick() is the per-worker periodic work, called by the running worker
  // every config().tick_ns and from its idle loop: PELT update of the
  // running fiber, the periodic balance of every due domain level, and the
  // nohz kick decision (tick_result::kick: fibers are queued behind this
  // busy worker and it last kicked at least idle_kick_interval_ns ago).
  tick_result tick(int cpu, const now_source& now, std::uint64_t random, std::vector<cpu_snapshot>& scratch);

  // newidle_balance() runs when `cpu` has nothing to run: for each level of
  // its chain, narrowest first, balance; stop at the first level that moved
  // something. Returns the number of fibers moved onto cpu's runqueue.
  // Backends call idle_balance(), which rations it.
  unsigned newidle_balance(int cpu, const now_source& now, std::uint64_t random,
                           std::vector<cpu_snapshot>& scratch, bool kicked = false);

  // load_balance() balances one level of `cpu`'s chain (the kernel's
  // load_balance()): ask the policy, detach from the busiest, attach here,
  // and keep nr_balance_failed and the interval. Returns fibers moved.
  unsigned load_balance(int cpu, std::size_t level, cpu_idle_type idle, const now_source& now,
                        std::uint64_t random, std::vector<cpu_snapshot>& scratch);

  // detach_fibers() removes, under the source's lock only, the fibers the
  // decision and the policy's can_detach() allow, from the least recently
  // queued, at most `max`. Pinned fibers and the running one are never taken.
  unsigned detach_fibers(int dst, const balance_decision& decision, cpu_idle_type idle,
                         const sched_domain* sd, unsigned nr_balance_failed, const now_source& now,
                         sched_entity** out, unsigned max);

  // attach_fibers() appends detached fibers to `dst`'s runqueue, under its lock.
  void attach_fibers(int dst, sched_entity* const* list, unsigned n, const now_source& now);

  // should_we_balance() is true when `cpu` is the worker of its group that
  // balances `level` this time: the first idle one, or the first one.
  bool should_we_balance(int cpu, std::size_t level, cpu_idle_type idle) const;

  // balance_interval() is how long a level waits between two periodic
  // passes (get_sd_balance_interval()): `st`'s interval, times the policy's
  // busy_factor while the worker is busy, less one tick there where the
  // policy follows v5.10; clamped to one tick .. 100 ms per worker
  // (max_load_balance_interval).
  std::int64_t balance_interval(const sd_balance_state& st, bool busy) const noexcept;
  sd_balance_state& balance_state(int cpu, std::size_t level) noexcept {
    return sd_state_[static_cast<std::size_t>(cpu)][level];
  }
  const cpu_counters& counters(int cpu) const noexcept {
    return counters_[static_cast<std::size_t>(cpu)];
  }
  const level_counters& counters(int cpu, std::size_t level) const noexcept {
    return level_counters_[static_cast<std::size_t>(cpu)][level];
  }
  // How many active balances have been asked for so far (each sets the
  // busiest worker's need_resched): a backend that does not poll
  // need_resched (the simulator) looks for the asked worker when this
  // changes.
  std::uint64_t active_balance_requests() const noexcept {
    return active_requests_.n.load(std::memory_order_relaxed);
  }
  // add_counters() copies worker `cpu`'s engine counters (placement,
  // balancing, every domain level's) into what runtime::stats() reports;
  // the backend adds its own (switches, parks, idle and busy time).
  void add_counters(int cpu, worker_stats& out) const;

 private:
  // `front`: at the head of the FIFO list (the LIFO discipline's push).
  // `publish`: the insert makes a fiber runnable that its worker may not
  // know about (a wake-up, a spawn, a migration): the count is stored
  // seq_cst for the park protocol. A requeue by the running worker itself
  // needs no such ordering and skips the fence the seq_cst store costs.
  // Inline (the timeline's part is not): every enqueue and pick runs them.
  void queue_insert(runqueue& q, sched_entity* se, bool publish = true, bool front = false) noexcept {
    list_link(q, se, front);
    if (fair_) timeline_insert(q, se);
    if (se->pinned >= 0) {
      q.nr_pinned.store(q.nr_pinned.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    // seq_cst: this store and the pusher's later read of the worker's park
    // word pair with the parker's write of its park word and read of this
    // count (worker.cpp, idle_wait), so one side always sees the other.
    q.nr_queued.store(q.nr_queued.load(std::memory_order_relaxed) + 1,
                      publish ? std::memory_order_seq_cst : std::memory_order_relaxed);
  }
  void queue_remove(runqueue& q, sched_entity* se) noexcept {
    list_unlink(q, se);
    if (se == q.runnext) q.runnext = nullptr;
    if (fair_) timeline_erase(q, se);
    if (se->pinned >= 0) {
      q.nr_pinned.store(q.nr_pinned.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    }
    q.nr_queued.store(q.nr_queued.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }
  // add_runnable() is the end of every enqueue, under q's lock: se counts
  // as runnable on `cpu` and joins the queue. The count is published
  // seq_cst even for a local spawn: the store then precedes the spawner's
  // look at the parked workers (runtime_impl::kick_idle), which a parked
  // worker's announce-then-look pairs with. Under LIFO every spawned or
  // woken fiber goes to the front; under FIFO only a local spawn does, into
  // the runnext slot, and the fiber that held the slot goes to the back like
  // any other queued fiber.
  void add_runnable(int cpu, runqueue& q, sched_entity* se, enqueue_kind kind) noexcept {
    se->cpu.store(cpu, std::memory_order_relaxed);
    // Release: cpu before on_rq, for hand_off() under another lock (a
    // plain store on x86).
    se->on_rq.store(true, std::memory_order_release);
    ++q.nr_running;
    q.load_weight += se->weight;
    const bool run_next = !fair_ && !lifo_ && kind == enqueue_kind::spawn_local;
    if (run_next && q.runnext) {
      list_unlink(q, q.runnext);
      list_link(q, q.runnext, false);
    }
    queue_insert(q, se, true, lifo_ || run_next);
    if (run_next) q.runnext = se;
    note_overload(q);
  }
  // make_next() makes `se`, queued on q, q's next pick (the join hand-off),
  // under q's lock: the head of the FIFO or LIFO list, or the fair
  // discipline's hand-off slot.
  void make_next(int cpu, runqueue& q, sched_entity* se) noexcept {
    if (fair_) {
      q.handoff = se;
    } else if (q.head != se) {
      list_unlink(q, se);
      list_link(q, se, true);
    }
    counters_[static_cast<std::size_t>(cpu)].handoffs.add();
  }
  static void timeline_insert(runqueue& q, sched_entity* se) noexcept;
  static void timeline_erase(runqueue& q, sched_entity* se) noexcept;
  sched_entity* queue_first(runqueue& q) noexcept;
  // The FIFO and LIFO disciplines without load tracking have no clock, no
  // vruntime and nothing to publish but the queue count: enqueue() and
  // pick_next() go straight to these.
  unsigned enqueue_fifo(int cpu, sched_entity* se, enqueue_kind kind, bool handoff) noexcept;
  sched_entity* leave_fifo(int cpu, sched_entity* prev, prev_action action, const now_source& now,
                           sched_entity* joined) noexcept;
  // take_handoff(): under q's lock, hand_off()'s test and effect: `joined`
  // (which prev, blocking, waits for) runs next if it is queued on q.
  void take_handoff(int cpu, runqueue& q, sched_entity* joined) noexcept {
    if (!cfg_.join_handoff) return;
    // on_rq before cpu: see hand_off().
    if (joined->on_rq.load(std::memory_order_acquire) && joined->cpu.load(std::memory_order_relaxed) == cpu &&
        joined != q.curr) {
      make_next(cpu, q, joined);
    }
  }
  // The queue-order list alone (no counts, no timeline); inline, for the
  // yield path.
  static void list_link(runqueue& q, sched_entity* se, bool front) noexcept {
    if (front) {
      se->rq_prev = nullptr;
      se->rq_next = q.head;
      (q.head ? q.head->rq_prev : q.tail) = se;
      q.head = se;
    } else {
      se->rq_next = nullptr;
      se->rq_prev = q.tail;
      (q.tail ? q.tail->rq_next : q.head) = se;
      q.tail = se;
    }
  }
  static void list_unlink(runqueue& q, sched_entity* se) noexcept {
    (se->rq_prev ? se->rq_prev->rq_next : q.head) = se->rq_next;
    (se->rq_next ? se->rq_next->rq_prev : q.tail) = se->rq_prev;
    se->rq_next = se->rq_prev = nullptr;
  }
  void update_curr(runqueue& q, const now_source& now) noexcept;
  // update_load(): PELT of the running fiber and of the runqueue, to `now`.
  // Returns true when the runqueue's averages (or its removed contributions)
  // changed, so that they need publishing. `rq_inputs_change` is false when the
  // caller is about to swap the running fiber for a queued one: the
  // runqueue's weight, count and running state stay the same, so its own
  // accrual can wait for the end of the period (pelt_period_due); the kernel
  // accrues it on every switch, which costs this path a second update per
  // PELT unit for nothing.
  [[gnu::always_inline]] bool update_load(runqueue& q, std::int64_t now, bool rq_inputs_change = true) noexcept {
    bool changed = false;
    // Plain loads first: removals are rare, and three locked exchanges on
    // every switch would cost more than the rest of load tracking.
    if (q.removed_load.load(std::memory_order_relaxed) | q.removed_util.load(std::memory_order_relaxed) |
        q.removed_runnable.load(std::memory_order_relaxed)) {
      const unsigned long rl = q.removed_load.exchange(0, std::memory_order_relaxed);
      const unsigned long ru = q.removed_util.exchange(0, std::memory_order_relaxed);
      const unsigned long rr = q.removed_runnable.exchange(0, std::memory_order_relaxed);
      q.pelt.remove(rl, ru, rr);
      changed = true;
    }
    // The running fiber accrues whole PELT units (1024 ns): under one since
    // its last update, pelt_update_running() would add nothing (a switch
    // between fibers that run for tens of ns, a yield loop, skips it).
    if (sched_entity* c = q.curr; c && static_cast<std::uint64_t>(now - c->avg.last_update) >> pelt_time_shift) {
      // update_curr() has run: sum_exec - prev_sum_exec is the time since the
      // pick.
      pelt_update_running(c->avg, now, now - (c->sum_exec - c->prev_sum_exec), c->weight);
    }
    if (!rq_inputs_change && !changed) {
      return q.pelt.update_unchanged(now, q.load_weight, q.nr_running, q.curr != nullptr);
    }
    return q.pelt.update(now, q.load_weight, q.nr_running, q.curr != nullptr) || changed;
  }
  // update_min_vruntime(): min_vruntime follows the smaller of the running
  // fiber's and the leftmost queued fiber's vruntime, forward only.
  void update_min_vruntime(runqueue& q) noexcept {
    std::uint64_t v = q.min_vruntime;
    bool have = false;
    if (q.curr) {
      v = q.curr->vruntime;
      have = true;
    }
    if (const sched_entity* first = q.timeline.leftmost()) {
      const std::uint64_t left = first->vruntime;
      v = have && static_cast<std::int64_t>(v - left) < 0 ? v : left;
      have = true;
    }
    // Monotonic: min_vruntime only moves forward.
    if (have && static_cast<std::int64_t>(v - q.min_vruntime) > 0) q.min_vruntime = v;
  }
  std::int64_t sched_slice(const runqueue& q, const sched_entity& se) const noexcept;
  // queue_joiner(): wake_joiner() for a joiner hands_back() applies to:
  // queued on cpu as its next pick (nothing, if it had not left yet).
  wake_result queue_joiner(sched_entity* joiner, int cpu, const now_source& now);
  // place_woken(): sleeper credit (place_entity, GENTLE_FAIR_SLEEPERS): a
  // woken fiber may be at most half a latency period behind min_vruntime,
  // so it runs soon but cannot bank unbounded credit by sleeping.
  void place_woken(const runqueue& q, sched_entity& se) const noexcept {
    const std::uint64_t floor = q.min_vruntime - static_cast<std::uint64_t>(cfg_.sched_latency_ns / 2);
    if (static_cast<std::int64_t>(se.vruntime - floor) < 0) se.vruntime = floor;
  }
  // leave_signals(): a fiber that blocks or exits leaves q's runnable
  // signals; a finished fiber's load leaves with it, a blocked one's stays
  // and decays. Nothing without load tracking.
  void leave_signals(runqueue& q, sched_entity& se, prev_action action) noexcept {
    if (!tracks_load()) return;
    q.pelt.dequeue_runnable(se.avg);
    util_est_dequeue(q, se, action == prev_action::block);
    if (action == prev_action::exit) q.pelt.detach(se.avg);
  }
  // set_next_entity(): se, now q.curr, starts running at `t` (the fair
  // discipline's part of the kernel's set_next_entity()): its slice begins
  // and min_vruntime follows.
  void set_next_entity(runqueue& q, sched_entity& se, std::int64_t t) noexcept {
    se.exec_start = t;
    se.prev_sum_exec = se.sum_exec;
    set_slice(q, se);
    update_min_vruntime(q);
  }
  // set_slice(): q.slice_ns = sched_slice(q, se), where se counts on q (the
  // running fiber). The slice changes only with the runqueue's count and
  // weight and the fiber's weight, which a switch between two fibers of
  // the same weight leaves as they were: then the division is skipped.
  void set_slice(runqueue& q, const sched_entity& se) noexcept {
    if (q.slice_nr == q.nr_running && q.slice_total == q.load_weight && q.slice_weight == se.weight) return;
    q.slice_ns = sched_slice(q, se);
    q.slice_nr = q.nr_running;
    q.slice_total = q.load_weight;
    q.slice_weight = se.weight;
  }
  void publish(runqueue& q) noexcept;
  // util_est_enqueue() / util_est_dequeue(): se joins or leaves q's sum;
  // a dequeue because it goes to sleep also updates its estimate from
  // its util now (util_est_update()).
  static void util_est_enqueue(runqueue& q, const sched_entity& se) noexcept { q.util_est += util_est_of(se); }
  static void util_est_dequeue(runqueue& q, sched_entity& se, bool sleep) noexcept;
  void publish_load(runqueue& q) noexcept;
  void check_preempt(int cpu, runqueue& q, const sched_entity& se) noexcept;
  void check_preempt_tick(int cpu, runqueue& q) noexcept;
  sched_entity* active_balance_victim(runqueue& q, int dst) noexcept;
  void note_newidle_cost(runqueue& q, std::int64_t cost) noexcept;
  unsigned llc_busy_cpus(int cpu) const noexcept;
  void update_idle_core(int cpu) noexcept;
  void apply_effects(const placement_effects& fx, sched_entity& se, int origin, bool by_origin) noexcept;
  void close_idle_period(runqueue& q, const now_source& now) noexcept;
  void detach_entity(runqueue& src, sched_entity& se) noexcept;
  fiber_view view_of(const sched_entity& se, const now_source& now, bool hot_check) const noexcept;
  void snapshot_cpu(std::size_t i, cpu_snapshot& s, const now_source& now) const;
  // snapshot_llcs() fills only the entries of the workers that share a
  // last-level cache with a or b (each of them included; -1: none), for a
  // wake-up placement that reads nothing else (policy::wake_reads_only_llcs).
  void snapshot_llcs(std::vector<cpu_snapshot>& out, const now_source& now, int a, int b) const;
  // stays_unbalanced(): a spawn from worker `origin` that stays there
  // because fork balancing is off (engine_config::fork_balance), without
  // asking the policy: neither pinned (it goes to its worker) nor with a
  // node preference (the policy places it). Its pull kick stands in for
  // the fork balance it skipped (wake_result::pull).
  bool stays_unbalanced(placement_kind kind, const sched_entity& se, int origin) const noexcept {
    return kind == placement_kind::spawn && !cfg_.fork_balance && origin >= 0 && se.pinned < 0 &&
           se.preferred_node < 0;
  }
  // Whether q holds a fiber another worker could take: queued, unpinned,
  // and not the only runnable one (an idle worker's single queued fiber is
  // about to run there). Lock-free; the seq_cst load of the count is the
  // clearer's half of the overload hand-shake.
  static bool has_movable(const runqueue& q) noexcept {
    const unsigned queued = q.nr_queued.load(std::memory_order_seq_cst);
    return queued > q.nr_pinned.load(std::memory_order_relaxed) &&
           (queued >= 2 || !q.idle.load(std::memory_order_relaxed));
  }
  // note_overload(): q (locked) just gained a runnable fiber; set the flag
  // if that made it overloaded. Reads before it writes, so the flag's line
  // stays shared while it is set.
  void note_overload(const runqueue& q) noexcept {
    if (q.nr_running >= 2 && q.nr_queued.load(std::memory_order_relaxed) > q.nr_pinned.load(std::memory_order_relaxed) &&
        !overload_.flag.load(std::memory_order_seq_cst)) {
      overload_.flag.store(true, std::memory_order_seq_cst);
    }
  }
  // refresh_overload(): a balance pass found nothing to take; clear the
  // flag unless some runqueue has a movable fiber (the hand-shake above).
  void refresh_overload() noexcept;

  domain_tree domains_;
  std::unique_ptr<usched::policy> policy_;
  engine_config cfg_;
  bool fair_;
  bool lifo_;  // LIFO discipline (policy::lifo_queue()), never with fair_
  bool tracks_load_;
  bool places_without_snapshot_;  // the policy's, asked once
  bool wake_reads_only_llcs_;     // the policy's, asked once
  bool pulls_when_idle_;  // the policy's, asked once
  bool smt_ignores_cache_hot_;  // the policy's, asked once
  bool shortens_busy_interval_;  // the policy's, asked once
  bool rations_newidle_;         // the policy's, asked once
  // has_idle_cores of each LLC (sd_llc_shared), indexed by the LLC's first
  // worker; each worker's LLC level in its chain (sd_llc; -1 for none), and
  // its SMT siblings (empty without SMT). Wake-up placement reads the hint,
  // a worker going idle sets it, a scan that finds no idle core clears it.
  std::unique_ptr<std::atomic<bool>[]> idle_cores_;
  std::vector<int> llc_level_;
  const sched_domain* llc_of(std::size_t cpu) const noexcept {
    const int l = llc_level_[cpu];
    return l < 0 ? nullptr : &domains_.per_cpu[cpu][static_cast<std::size_t>(l)];
  }
  int llc_first(std::size_t cpu) const noexcept {
    const sched_domain* llc = llc_of(cpu);
    return llc ? llc->span.get().front() : -1;
  }
  std::vector<std::vector<int>> smt_siblings_;
  bool smt_present_ = false;
  unsigned nr_latency_ = 8;  // sched_nr_latency()
  // sched_slice() for n runnable fibers of equal weight, n = 1 ..
  // min(sched_nr_latency, max_equal_slice): sched_latency / n.
  static constexpr std::size_t max_equal_slice = 64;
  std::vector<std::int64_t> equal_slice_;
  std::unique_ptr<runqueue[]> rqs_;
  std::vector<std::vector<sd_balance_state>> sd_state_;
  std::unique_ptr<cpu_counters[]> counters_;
  std::vector<std::unique_ptr<level_counters[]>> level_counters_;
  // When each worker last kicked an idle one from its tick.
  std::vector<std::int64_t> last_idle_kick_;
  struct alignas(64) request_count {
    request_count() = default;
    request_count(request_count&& o) noexcept : n(o.n.load(std::memory_order_relaxed)) {}
    std::atomic<std::uint64_t> n{0};
  } active_requests_;
  // On a line of its own: every worker reads it while idle.
  struct alignas(64) overload_flag {
    overload_flag() = default;
    overload_flag(overload_flag&& o) noexcept : flag(o.flag.load(std::memory_order_relaxed)) {}
    std::atomic<bool> flag{false};
  } overload_;
};

}  // namespace usched::detail
