// policy.hpp: the seam between the engine and a load-balancing policy.
//
// A policy is a set of pure decisions. It reads a snapshot the engine built
// (per-worker statistics and load signals, the domain it is asked about, a
// random number) and returns a decision: a worker for a waking or new fiber,
// which worker to pull from, how (migration type) and how much, and whether a
// given queued fiber may be taken. A policy never takes a lock, reads a clock,
// touches a thread or a fiber context; that is what lets unit tests drive it
// with hand-built snapshots (the numbers of the seed threads) and the
// simulator run it unchanged (DESIGN.md, seam 1). Executing a decision
// (detaching fibers from one runqueue and attaching them to another) is the
// engine's job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "sched_domain.hpp"

namespace usched {

// What the engine knows about one worker when it asks a policy (the kernel's
// per-rq inputs to update_sg_lb_stats). Values are read without locks, so
// they are a consistent-enough picture, not an exact one; the kernel's
// balancer reads remote runqueues the same way. Load signals are PELT
// averages, 1024-scaled (runtime/engine/pelt.hpp).
struct cpu_snapshot {
  unsigned nr_running = 0;  // queued + the one running (rq->nr_running)
  unsigned nr_queued = 0;   // waiting in the runqueue, not running
  unsigned nr_pinned = 0;   // of the queued, those pinned to this worker (never movable)
  bool idle = true;         // running nothing (in its idle loop, spinning or parked)
  unsigned long capacity = capacity_scale;  // capacity_of()
  // Weighted load of the fibers queued or running here plus, decaying, of the
  // fibers that blocked here: the kernel's cfs_rq->avg.load_avg (cpu_load()).
  unsigned long load_avg = 0;
  // Weighted load of the queued and running fibers only: the pre-5.7
  // kernel's runnable_load_avg. load_avg - runnable_load is the blocked part.
  unsigned long runnable_load = 0;
  // Running time, including the decaying share of blocked fibers, capped at
  // capacity: cpu_util().
  unsigned long util_avg = 0;
  // 1024 x the average number of runnable fibers: cpu_runnable().
  unsigned long runnable_avg = 0;
  // v4.11's per-CPU load history (rq->cpu_load[], kept by the engine for a
  // policy whose traits ask for it, policy_traits::cpu_load_signal; all 0
  // otherwise): [0] the load at the worker's last update (its last tick, or
  // its entry into idle), [i] a decaying average of the tick's loads that
  // keeps 1 - 1/2^i of the old value at each tick. A balance pass at load
  // index k > 0 reads [k - 1] (source_load(), target_load()).
  static constexpr std::size_t cpu_load_indices = 5;  // CPU_LOAD_IDX_MAX
  unsigned long cpu_load[cpu_load_indices] = {};
  // Load of a fiber too big for this worker's capacity (0 on symmetric machines).
  unsigned long misfit_task_load = 0;
  int numa_node = 0;
  // The running fiber, for NUMA swap candidates: its preferred node (-1 =
  // none or nothing running) and its load_avg.
  int curr_preferred_node = -1;
  unsigned long curr_load = 0;
  // Of nr_running, the fibers that prefer a node (rq->nr_numa_running) and
  // those running or queued on the node they prefer
  // (rq->nr_preferred_running): what v4.19's fbq_classify_rq() reads.
  // Filled only for policies with policy_traits::counts_numa_fibers; 0
  // otherwise.
  unsigned nr_numa_running = 0;
  unsigned nr_preferred_running = 0;
  // Wake-up placement (select_idle_sibling()): whether this worker's LLC
  // may hold a wholly idle core (sd_llc_shared->has_idle_cores; true when
  // unknown), and, for the placing worker only (0 for the others), its
  // average idle period (rq->avg_idle) and the average cost of its wake-up
  // scans (sd_llc->avg_scan_cost), for SIS_PROP.
  bool llc_has_idle_cores = true;
  std::int64_t avg_idle_ns = 0;
  std::int64_t avg_scan_cost_ns = 0;
  // Spawn placement (find_idlest_group_cpu()), read only while the worker
  // is idle: the exit latency of the idle state it is in, in ns (the
  // kernel's idle_get_state(rq)->exit_latency; 0 while it spins, as the
  // kernel's polling state), and when its idle period began, in the
  // engine's time (rq->idle_stamp). Its backend reports both
  // (engine::set_idle_state()); 0 and 0 make every idle worker equal, and
  // the first one in index order is taken.
  std::int64_t idle_exit_latency_ns = 0;
  std::int64_t idle_stamp_ns = 0;
};

// What a policy may know about one fiber: its PELT signals and its wishes.
struct fiber_view {
  unsigned long load_avg = 0;  // weight x fraction of time runnable
  unsigned long util_avg = 0;  // fraction of time running, 1024-scaled (util_est where it applies)
  unsigned weight = 1024;
  int preferred_node = -1;     // spawn_options::numa_node, -1 = none
  bool cache_hot = false;      // ran on its worker less than the migration cost ago
  int recent_used_cpu = -1;    // p->recent_used_cpu: a worker it was recently woken towards
  // Blocked but still queued until its lag is spent (se->sched_delayed, the
  // EEVDF discipline's DELAY_DEQUEUE, v6.12). The engine keeps delayed
  // fibers out of the list a balance pass walks, so it never offers one:
  // false in every view it makes; policies' rules for it are the kernel's.
  bool sched_delayed = false;
};

// Why a worker is placing a fiber.
enum class placement_kind : std::uint8_t {
  spawn,  // a new fiber (the kernel's fork balance, find_idlest_group)
  wake,   // a blocked fiber became runnable (select_idle_sibling)
};

// What a placement decided besides the worker, for the engine to apply
// (the kernel's select_task_rq_fair() writes these as it goes).
struct placement_effects {
  // The fiber's recent_used_cpu from now on; keep_recent: unchanged.
  static constexpr int keep_recent = -2;
  int fiber_recent_used_cpu = keep_recent;
  // The waker's running fiber: its recent_used_cpu becomes the waker's
  // worker (want_affine in the fast path).
  bool waker_recent_used_cpu = false;
  // A full scan for an idle core found none: clear has_idle_cores of this
  // worker's LLC (-1: nothing to clear).
  int clear_idle_cores = -1;
  // select_idle_cpu() scanned this many workers of the waker's LLC to the
  // end (not cut short by SIS_PROP): its scan cost joins the average (-1:
  // no such scan).
  int scanned = -1;
};

struct placement_request {
  placement_kind kind = placement_kind::wake;
  int origin = -1;  // worker doing the spawn or wake-up; -1 for a thread outside the runtime
  int prev = -1;    // worker the fiber last ran on; -1 for a new fiber
  fiber_view fiber;
  std::span<const cpu_snapshot> cpus;
  const domain_tree* domains = nullptr;
  std::uint64_t random = 0;  // fresh random bits for randomized choices
  placement_effects* effects = nullptr;  // where to report them; null: not asked
};

// The kernel's enum cpu_idle_type: the state of the worker that balances.
enum class cpu_idle_type : std::uint8_t {
  idle,        // CPU_IDLE: periodic balance on an idle worker
  newly_idle,  // CPU_NEWLY_IDLE: the worker just ran out of fibers
  not_idle,    // CPU_NOT_IDLE: periodic balance on a busy worker
};

// The kernel's enum migration_type: what the imbalance is counted in.
enum class migration_type : std::uint8_t {
  migrate_load,    // sum of load_avg of the fibers moved
  migrate_util,    // sum of util_avg of the fibers moved
  migrate_task,    // number of fibers moved
  migrate_misfit,  // one fiber too big for its worker's capacity
};

// The kernel's enum group_type, ordered so that `>` means "busier, needs help
// more": a group of a higher type is always preferred as the busiest.
enum class group_type : std::uint8_t {
  has_spare,     // fewer fibers than workers, or util/runnable below capacity
  fully_busy,    // no spare capacity, but not overloaded
  misfit_task,   // runs a fiber too big for its capacity
  asym_packing,  // (reserved: asymmetric packing, not modelled)
  imbalanced,    // a child level could not balance because of pinning
  overloaded,    // more fibers than workers and util or runnable above capacity
};

struct balance_request {
  int this_cpu = 0;  // the worker that balances (the destination of any pull)
  cpu_idle_type idle = cpu_idle_type::newly_idle;
  const sched_domain* sd = nullptr;  // the level being balanced, from this_cpu's chain
  // The level below sd exists and spreads to siblings (the kernel's
  // SD_PREFER_SIBLING on the child: true above SMT, false at the lowest
  // level and above NUMA levels).
  bool prefer_sibling = false;
  std::span<const cpu_snapshot> cpus;
  unsigned nr_balance_failed = 0;  // consecutive failed attempts at this level
  std::uint64_t random = 0;
};

// What to pull: `imbalance` units of `type` from worker `busiest`, onto
// this_cpu. A decision with busiest < 0 means "balanced, do nothing". The
// group types are reported for statistics.
struct balance_decision {
  int busiest = -1;
  migration_type type = migration_type::migrate_task;
  long imbalance = 0;
  group_type busiest_type = group_type::has_spare;
  group_type local_type = group_type::has_spare;
  // The busiest group picked has no stacked worker (nr_running >= 2) while
  // another group has one: seeds/003's dbg_odd_cnt, set for every pass that
  // picked a group, whatever came of it. The engine counts it per level.
  bool odd_pick = false;

  explicit operator bool() const noexcept { return busiest >= 0 && imbalance > 0; }
};

// The state of one detach pass, for can_detach().
struct detach_env {
  migration_type type = migration_type::migrate_task;
  long imbalance = 0;  // what is still to move, in `type` units
  cpu_idle_type idle = cpu_idle_type::newly_idle;
  unsigned nr_balance_failed = 0;
  unsigned cache_nice_tries = 0;
  unsigned long src_capacity = capacity_scale;
  // For v4.19's migrate_degrades_locality(): whether the level spans NUMA
  // nodes (SD_NUMA), the nodes of the source and the destination, and the
  // source's nr_running and nr_preferred_running as they are when the
  // fiber is considered. The counts are 0 unless the policy has
  // policy_traits::counts_numa_fibers.
  bool numa_level = false;
  int src_node = 0;
  int dst_node = 0;
  unsigned src_nr_running = 0;
  unsigned src_nr_preferred_running = 0;
};

// can_detach()'s answer: skip this fiber, or take it and count `amount`
// against the imbalance.
struct detach_verdict {
  bool take = false;
  long amount = 0;
};

// fits_capacity() is the kernel's: `util` fits `capacity` with a 20% margin
// (util * 1280 < capacity * 1024), so a fiber that would keep its worker
// busier than 80% does not fit (it is "misfit" there).
inline constexpr bool fits_capacity(unsigned long util, unsigned long capacity) noexcept {
  constexpr unsigned long margin = 1280;  // capacity_scale plus 25%: 80% of capacity
  return util * margin < capacity * capacity_scale;
}

// kernel_detach_rule() is the kernel's detach_tasks() switch on the
// migration type (v5.10), without cache-hotness: task counts one; util skips
// a fiber whose util exceeds what is left; load skips one whose load,
// halved for each failed attempt, exceeds it; misfit takes one that does
// not fit its worker. Policies that vary one case call it for the others.
detach_verdict kernel_detach_rule(const fiber_view& f, const detach_env& env) noexcept;

// How a policy's worker orders its runqueue.
enum class queue_discipline : std::uint8_t {
  fifo,  // first in, first out, with the fixed slice and no load tracking
  // A worker runs its newest fiber first (spawned and woken fibers go to the
  // front of its queue; yields and preemptions to the back) and balancing
  // takes the oldest: the work-stealing deque of Cilk, TBB and Rayon. Fixed
  // slice, no load tracking.
  lifo,
  // Ordered by vruntime with CFS slices and wake-up preemption, with PELT
  // load tracking.
  fair,
  // EEVDF (the kernel's fair class since v6.6): the earliest virtual
  // deadline among the fibers with non-negative lag, slices requested per
  // fiber, lag kept across sleep; PELT load tracking as under `fair`.
  eevdf,
};

// Which load the engine keeps v4.11's per-CPU load history of
// (cpu_snapshot::cpu_load, updated at each tick by cpu_load_update_active()):
// the kernel's weighted_cpuload(), the root cfs_rq's runnable_load_avg, which
// is one of two things depending on where the tasks ran (seeds/003).
enum class weighted_load : std::uint8_t {
  none,  // no history (every policy since the kernel dropped it, v5.x)
  // The fibers are tasks of the root cgroup: the load of the queued and
  // running ones (runnable_load).
  runnable,
  // The fibers are tasks of one cgroup: the root sees the group's entity,
  // queued while any fiber is runnable here and then weighing the group's
  // whole load_avg, blocked part included (update_tg_cfs_load()); dequeued,
  // and counting nothing, once none is.
  group_entity,
};

// The fixed facts about a policy, as data (sched_ext's ops.flags): the
// engine copies them once when it is built, so nothing on its hot paths asks
// the policy a virtual question. The policy's decisions are its virtual
// functions (class policy below). The defaults describe a FIFO policy that
// never balances.
struct policy_traits {
  // The runqueue discipline of every worker.
  queue_discipline discipline = queue_discipline::fifo;

  // True when the policy pulls work on an idle worker. The runtime then wakes a
  // parked worker when work queues up behind a busy one, so it can pull; for a
  // policy that never pulls, that wake-up would be wasted.
  bool pulls_when_idle = false;

  // True when the policy also balances periodically from each worker's tick
  // (the CFS family); false for pull-only-when-idle policies.
  bool balances_periodically = false;

  // Whether the newly-idle balance is rationed as the kernel's is
  // (newidle_balance(), v5.9/v5.10): run once as the worker goes idle, not
  // at all when its average idle period is shorter than the migration cost,
  // and up the chain only while the passes so far cost less than that
  // period; an idle worker then balances from its tick. False: it retries
  // while it spins (work stealing).
  bool rations_newidle = false;

  // How the rationing above judges a worker's idle period (v5.16, commits
  // 9d783c8dd112 and e60b56e46b38): a worker does not balance when its
  // average idle period is shorter than its narrowest level's longest pass
  // (sd->max_newidle_lb_cost), instead of the migration cost; and a level's
  // longest pass decays (by 253/256) only a second after it last grew,
  // checked at each pass as well as at the tick. False: v5.10's.
  bool newidle_gate_by_domain_cost = false;

  // True when select_cpu() reads nothing of req.cpus but its size (it
  // places by origin, previous worker or chance). The engine then skips the
  // snapshot of every worker it otherwise takes for each spawn and wake-up,
  // and req.cpus holds unspecified values.
  bool places_without_snapshot = false;

  // True when select_cpu(), for a wake-up of a fiber without a preferred
  // node, reads req.cpus only at the workers that share a last-level cache
  // with req.origin or req.prev (each of them included): the kernel's
  // wake_affine() compares the waker's worker with prev, and
  // select_idle_sibling() looks for an idle worker in the target's LLC. The
  // engine then snapshots those LLCs alone, and the other entries of
  // req.cpus hold unspecified values: a wake-up costs O(LLC), not
  // O(workers). A spawn, and a wake-up of a fiber that prefers a node
  // (task_numa_find_cpu() reads every worker of two nodes), still get every
  // worker.
  bool wake_reads_only_llcs = false;

  // Multiplier of the periodic balance interval while the worker is busy
  // (sd->busy_factor).
  unsigned busy_factor = 16;

  // Whether balancing between SMT siblings ignores cache hotness: they share
  // every cache, so nothing is hot between them (task_hot()'s
  // SD_SHARE_CPUCAPACITY test, commit ec73240b1627, v5.10). The fair
  // discipline only: the others never test hotness.
  bool smt_ignores_cache_hot = true;

  // Whether a busy worker's periodic interval is one tick shorter than
  // balance_interval x busy_factor (get_sd_balance_interval(), v5.10), so
  // that the levels do not balance in step.
  bool shortens_busy_interval = true;

  // Whether NUMA placement runs on v4.19's cadence instead of at every
  // wake-up: from the tick of the worker running a fiber that prefers a
  // node, once per numa_migrate_retry interval, the engine asks
  // numa_migrate() and moves the running fiber (and, for a swap, the other
  // worker's) as the kernel's migrate_task_to()/migrate_swap() do
  // (engine::tick). select_cpu() then leaves the preferred node out.
  bool numa_migrate_on_tick = false;

  // Whether the engine keeps each runqueue's counts of fibers that prefer
  // a node and of those on it (cpu_snapshot::nr_numa_running,
  // nr_preferred_running; detach_env's), for v4.19's fbq_type and
  // migrate_degrades_locality().
  bool counts_numa_fibers = false;

  // Whether fibers carry util estimates (util_est, v4.17): a fiber's util as
  // balancing and placement read it is the larger of its util_avg and its
  // estimate, and a worker's the larger of its util_avg and its queued
  // fibers' estimates (cpu_util()). False: util_avg alone, as before v4.17.
  bool util_est = true;

  // The per-CPU load history the engine keeps for the policy's balance
  // passes (none: cpu_snapshot::cpu_load stays 0).
  weighted_load cpu_load_signal = weighted_load::none;
};

// The outcome of a NUMA migration search (task_numa_migrate()): cpu < 0,
// stay; otherwise move the fiber there, or, with swap, exchange it with the
// fiber running on cpu (migrate_swap()).
struct numa_migration {
  int cpu = -1;
  bool swap = false;
};

class policy {
 public:
  // A policy is built with its traits, which never change afterwards.
  explicit policy(policy_traits t) noexcept : traits_(t) {}
  virtual ~policy() = default;

  // The fixed facts about this policy; the engine reads them once.
  const policy_traits& traits() const noexcept { return traits_; }

  // The registered name, as USCHED_POLICY spells it.
  virtual std::string_view name() const noexcept = 0;

  // select_cpu() returns the worker that should run a new or woken fiber. It is
  // not asked about pinned fibers. The result must be a valid worker index.
  // With traits().places_without_snapshot or wake_reads_only_llcs it reads
  // no more of req.cpus than those promise.
  virtual int select_cpu(const placement_request& req) const = 0;

  // find_busiest() decides whether, from where and how much this_cpu should
  // pull within req.sd. Called for each level of this_cpu's chain, narrowest
  // first.
  virtual balance_decision find_busiest(const balance_request& req) const = 0;

  // can_detach() decides, during a pull, whether one queued fiber may go and
  // how much of the imbalance it covers. The default interprets the
  // migration type as the kernel's detach_tasks() does (v5.10): task counts
  // one; util skips a fiber whose util exceeds what is left; load skips one
  // whose load, halved for each failed attempt, exceeds it; misfit takes one.
  virtual detach_verdict can_detach(const fiber_view& f, const detach_env& env) const;

  // numa_migrate() is task_numa_migrate() for the running fiber of worker
  // req.prev (req.fiber; its load is in that worker's runnable_load), asked
  // by the tick where traits().numa_migrate_on_tick: where it should go to
  // be on or nearer its preferred node. The default stays.
  virtual numa_migration numa_migrate(const placement_request& req) const;

 private:
  policy_traits traits_;
};

// One entry of the registry.
struct policy_info {
  std::string_view name;
  std::string_view summary;  // one line for listings and --help
  std::unique_ptr<policy> (*make)();
};

// Every policy, in listing order. The registry is a constant table: tests,
// benchmarks and error messages iterate over it.
std::span<const policy_info> registered_policies() noexcept;

// make_policy() builds the policy called `name`. Throws usched::config_error
// naming the value and listing the registered names when there is none.
std::unique_ptr<policy> make_policy(std::string_view name);

// "none, steal, ...": the registered names, comma separated.
std::string policy_names_joined();

}  // namespace usched
