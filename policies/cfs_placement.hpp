// cfs_placement.hpp: where a new or woken fiber goes, as the Linux CFS
// scheduler (v5.10 kernel/sched/fair.c) decides it, written as pure functions
// over a placement_request snapshot.
//
//   spawn:  select_task_rq -> find_idlest_cpu -> find_idlest_group
//                                             -> find_idlest_group_cpu
//   wake:   select_task_rq -> wake_affine (WA_IDLE, WA_WEIGHT, WA_BIAS)
//                          -> select_idle_sibling (idle core, idle worker, idle SMT sibling)
//   both:   a fiber with a preferred NUMA node that would land elsewhere
//           -> task_numa_find_cpu on its preferred node (seeds/002)
//   tick:   (numa_v4_19) task_numa_migrate -> task_numa_find_cpu for the
//           running fiber, on the numa_migrate_retry cadence
//
// Everything here reads only the request (per-worker snapshots, the domain
// tree, the fiber's signals) and the cfs_features; nothing locks, reads a
// clock or touches a fiber (DESIGN.md, seam 1). Names follow the kernel so
// that fair.c and the seed threads read across.
//
// Conventions shared by every function below:
// * A worker is "idle" when its snapshot says it runs nothing and has nothing
//   queued (idle && nr_running == 0): the kernel's available_idle_cpu().
// * Worker indices outside [0, req.cpus.size()) count as "none".
// * req.domains must describe as many workers as req.cpus holds; functions
//   that need the tree and do not get a usable one fall back to the most
//   local valid worker (documented per function).
#pragma once

#include "cfs_balance.hpp"
#include "cfs_features.hpp"
#include "policy.hpp"

namespace usched::cfs {

// The NUMA score of a fiber on its preferred node. The kernel's task_weight()
// is 1000 x the task's share of NUMA hinting faults on a node; a fiber that
// names a preferred node is taken to fault there only, so it scores the whole
// 1000 there and 0 on any other node.
inline constexpr long numa_score_preferred = 1000;

// The kernel's SMALLIMP: a swap that improves the NUMA score by less than this
// (or beats the best candidate by no more than half of it) is not worth the
// migrations and ping-pong it causes.
inline constexpr long small_numa_improvement = 30;

// select_task_rq() is select_task_rq_fair(): the worker that should run the
// fiber of `req`. Always returns a valid worker index of req.cpus (0 when the
// request has no usable worker at all). Without a usable domain tree it
// places locally: prev (else origin) for a wake, origin (else prev) for a
// spawn.
//
// spawn: the kernel's fork balance, find_idlest_cpu() from the widest domain
//   of req.origin. A spawn from outside the runtime (origin < 0) starts from
//   worker 0's widest domain, which spans every worker, with no local group:
//   the kernel's "local group skipped because of affinity" case, so each level
//   simply returns its idlest group. Placing an outside spawn next to worker 0
//   would invent a locality the spawner does not have.
// wake: want_affine is always true. The kernel turns it off through
//   wake_wide(), which needs per-task wakee-flip counters the sched_entity
//   has no room for (docs/policies/cfs.md), so every wake-up is treated as
//   the 1:1 producer/consumer case. When origin and prev differ and share a
//   domain, wake_affine() on the narrowest such domain picks the target;
//   then select_idle_sibling(prev, target). A wake with prev < 0 is treated
//   as if the fiber last ran on origin (or worker 0).
// NUMA: when the fiber has a preferred_node and the worker chosen above is on
//   another node (and not f.numa_v4_19, whose NUMA placement runs from the
//   tick: task_numa_migrate()), task_numa_find_cpu() runs on the preferred
//   node; a *move*
//   it finds replaces the choice. A swap it finds is not used: a placement
//   returns one worker and cannot send the other fiber back, and stacking the
//   fiber on a busy worker whose fiber wants to leave is the opposite of what
//   the swap was judged on.
int select_task_rq(const placement_request& req, const cfs_features& f);

// select_idle_sibling() returns an idle worker near `target` (the kernel's
// function of the same name, v5.9/v5.10), else target. In order: target if
// idle; prev if idle and sharing target's last-level cache; the fiber's
// recent_used_cpu if idle, sharing target's cache and neither of those (the
// fiber then remembers prev instead, req.effects); the first fully idle core
// of target's LLC, while the LLC's has_idle_cores hint is set
// (select_idle_core: every SMT sibling idle, scanning from target and
// wrapping; a scan that finds none clears the hint); the first idle worker
// of the LLC (select_idle_cpu, same scan, bounded by SIS_PROP); an idle SMT
// sibling of target (select_idle_smt). Never returns a worker outside
// target's LLC; with no LLC domain above target (a cache of its own) the
// answer is target. Not modelled: the per-CPU kthread shortcut (no
// kthreads). Requires a valid target; prev may be -1.
//
// Under f.recent_used_cpu_prev (v5.16) a wake-up that gets past target and
// prev leaves prev as the fiber's recent_used_cpu whatever it finds. Under
// f.sis_merged_scan (v5.12, v5.16) the searches after recent_used_cpu are:
// with no idle core hoped for, an idle SMT sibling of prev when prev shares
// target's cache; then select_idle_cpu_v6(). f.sis_util alone bounds
// v5.10's idle-worker scan by nr_idle_scan() instead of SIS_PROP.
int select_idle_sibling(const placement_request& req, int prev, int target,
                        const cfs_features& f = cfs_features{});

// nr_idle_scan() is v6.0's SIS_UTIL scan depth for `llc`
// (update_idle_cpu_scan()): with x the LLC's util per worker (the sum of
// its workers' util_avg over its weight) and pct its imbalance_pct,
// llc_weight x (1024 - min(1024, x^2 x pct^2 / (10000 x 1024))) / 1024,
// each division truncating: the whole LLC at no util, 0 from x = 1024 x
// 100 / pct (875 at 117) on. The kernel refreshes it at the LLC level's
// periodic balance and the wake-up reads that value; here it is computed
// from the wake-up's own snapshot of the LLC.
int nr_idle_scan(const placement_request& req, const sched_domain& llc);

// select_idle_cpu_v6() is select_idle_cpu() since "Merge
// select_idle_core/cpu()" (v5.12) with SIS_UTIL (v6.0, when f.sis_util):
// no scan at all when nr_idle_scan() is 0; otherwise the LLC from target +
// 1, wrapping. With has_idle_core, each SMT core once (through the first
// of its workers met), returning the first wholly idle one, remembering the
// first idle worker of the first core that has one, unbounded; a scan that
// finds no idle core clears the hint (req.effects->clear_idle_cores) and
// returns what it remembered. Without, the first idle worker among at most
// nr_idle_scan() examined. -1: none.
int select_idle_cpu_v6(const placement_request& req, const sched_domain& llc, int target, bool has_idle_core,
                       const cfs_features& f);

// select_idle_cpu() is the scan for an idle worker of `llc` from target
// (wrapping), with SIS_PROP: when the waker is a worker (req.origin), at most
// max(4, span x (its avg_idle / 512) / (its avg_scan_cost + 1)) - 1 workers
// are examined; a scan that ends uncut reports how many it examined
// (req.effects->scanned) for the waker's scan-cost average. -1: none found.
int select_idle_cpu(const placement_request& req, const sched_domain& llc, int target);

// wake_affine() is the kernel's wake_affine(): whether the fiber woken by
// `this_cpu` (the waker) should run near the waker instead of near
// `prev_cpu`, judged within `sd`, a domain of this_cpu's chain that contains
// both. Returns this_cpu or prev_cpu.
//   WA_IDLE: an idle waker sharing prev's cache -> prev if prev is idle, else
//     the waker (the wake-up came from an idle worker, e.g. a timer, so
//     either cache is as warm). Sync wake-ups do not exist here, so the
//     kernel's "sync and the waker runs alone" rule never fires.
//   WA_WEIGHT with WA_BIAS: the waker side wins when
//     (load(this) + load(fiber)) * 100 * capacity(prev)
//       < load(prev) * (100 + (pct - 100) / 2) * capacity(this)
//     with pct = f.imbalance_pct(sd). Worker load is runnable_load (queued
//     and running fibers only), not the kernel's cpu_load() (load_avg, which
//     includes blocked load): the kernel subtracts the wakee's load from
//     cpu_load(prev) because its sleeping contribution still sits there;
//     runnable_load never held it, so nothing is subtracted and blocked load
//     of other sleeping fibers does not pose as demand (seeds/003).
// Requires valid this_cpu and prev_cpu.
int wake_affine(const placement_request& req, const sched_domain& sd, int this_cpu, int prev_cpu,
                const cfs_features& f);

// update_sg_wakeup_stats() gathers the statistics of group g of sd as the
// spawn path sees them, into the balancer's sg_lb_stats as the kernel does: a
// new fiber contributes nothing anywhere yet, so there is nothing "without p"
// to remove. group_load sums load_avg (blocked load included, the kernel's
// cpu_load()), whatever the features; group_util, group_runnable,
// group_capacity, sum_nr_running, idle_cpus and group_weight are filled in
// and the group is classified (group_classify with f.imbalance_pct(sd)):
// overloaded, fully_busy or has_spare, since misfit, imbalanced and
// asym_packing do not arise on the spawn path (symmetric capacities, no
// pinning). avg_load (group_load * 1024 / capacity) is set for fully_busy
// and overloaded groups only; the other fields stay 0.
sg_lb_stats update_sg_wakeup_stats(const placement_request& req, const sched_domain& sd,
                                   const sched_group& g, const cfs_features& f);

// update_pick_idlest() is true when `candidate` should replace the current
// `idlest` (the kernel's function, v5.10). A lower group type wins; within a
// type: overloaded/fully_busy -> strictly lower avg_load; has_spare -> more
// idle workers, and with f.idlest_util_tiebreak (seeds/004) equal idle
// workers and strictly lower group_util; without it, equal idle workers keep
// the first found.
bool update_pick_idlest(const sg_lb_stats& idlest, const sg_lb_stats& candidate, const cfs_features& f);

// find_idlest_group() returns the group of `sd` a new fiber should go to, or
// nullptr to stay in the local group (the one holding this_cpu) and look at
// the next lower level. this_cpu < 0 (or outside sd) means no local group:
// the idlest group is returned as is. Groups are visited in the kernel's ring
// order, starting at the local group and wrapping, which decides ties.
// The local group is kept when it is idler by type, or of the same type and:
//   overloaded/fully_busy: on SD_NUMA the idlest's avg_load + imbalance is
//     at least local's; or the idlest is not lighter by more than imbalance
//     (imbalance = 1024 * (pct - 100) / 100, 174 at 117); or
//     100 * local.avg_load <= pct * idlest.avg_load.
//   has_spare: on SD_NUMA the fiber prefers this_cpu's node, or (unless the
//     idlest group's first worker is on the preferred node) local has an idle
//     worker; then local has at least as many idle workers as the idlest.
const sched_group* find_idlest_group(const placement_request& req, const sched_domain& sd,
                                     int this_cpu, const cfs_features& f);

// find_idlest_group_cpu() returns the worker of g that gets the fiber, as
// the kernel's function of the same name does (v5.9/v5.10): among the idle
// workers, the one in the shallowest idle state (the smallest
// idle_exit_latency_ns: a spinning worker before a parked one), and among
// equally deep ones the most recently idled (the latest idle_stamp_ns; the
// first in index order of equal stamps); with none idle, the least loaded by
// load_avg (the first of equals). A one-worker group is that worker.
// Requires a non-empty g.
// Every idle worker reports a state (its backend's set_idle_state()): the
// kernel's idle CPU outside any cpuidle state (no idle_get_state()), which
// is compared by stamp alone, has no counterpart. Nor has sched_idle_cpu(),
// which takes a CPU running only SCHED_IDLE tasks at once: fibers have no
// such class.
int find_idlest_group_cpu(const placement_request& req, const sched_group& g, int this_cpu);

// find_idlest_cpu() is the kernel's slow path: from this_cpu's widest domain
// (worker 0's when this_cpu < 0, see select_task_rq) pick the idlest group,
// its idlest worker, and continue in that worker's domains narrower than the
// level just decided; when a level keeps the local group, continue one level
// down. Returns the worker chosen last, this_cpu when nothing better was
// found, and 0 for this_cpu < 0 on a runtime without domains.
int find_idlest_cpu(const placement_request& req, int this_cpu, const cfs_features& f);

// load_too_imbalanced() is the kernel's NUMA check: would moving load from
// the source node to the destination node make the capacity-scaled
// imbalance |dst * src_capacity - src * dst_capacity| larger than it was
// before (with orig_src_load and orig_dst_load)? True = refuse the move.
bool load_too_imbalanced(long src_load, long dst_load, long src_capacity, long dst_capacity,
                         long orig_src_load, long orig_dst_load) noexcept;

// adjust_numa_imbalance() is the balancer's (cfs_balance.hpp).

// The outcome of a NUMA placement search. cpu < 0: nothing found. swap:
// cpu runs a fiber that would go to the source node in exchange.
struct numa_choice {
  int cpu = -1;
  bool swap = false;
  long imp = 0;  // the improvement score of the choice
};

// task_numa_find_cpu() searches the workers of dst_node for the fiber of
// `req`, which would otherwise run on src_node. The kernel's version
// (task_numa_find_cpu + task_numa_compare, as seeds/002 left it) with these
// mappings:
// * Improvement. The kernel scores a node by the task's share of NUMA hinting
//   faults there (task_weight, 0..1000). Fibers have no fault statistics; a
//   fiber's score is numa_score_preferred on its preferred node and 0
//   elsewhere. So moving the fiber to its preferred node is worth 1000, and
//   a swap with the fiber running on a dst worker (curr_preferred_node) adds
//   that fiber's own gain: +1000 if it prefers src_node, -1000 if it prefers
//   dst_node, 0 otherwise.
// * Loads. A node's load is the sum of its workers' runnable_load, its
//   capacity the sum of their capacity. The fiber's load (req.fiber.load_avg)
//   is counted on src_node, where it would otherwise be enqueued: a woken or
//   new fiber is in no runnable_load yet. maymove = !load_too_imbalanced
//   after moving that load to dst_node, computed once per search.
// * Walk. dst_node's workers in index order:
//   - idle worker: numa_rule mel takes it if maymove; srikar if maymove and
//     the move's improvement is at least the best swap found so far. Taking
//     it STOPS the search (seeds/002 patch 3: any idle worker is as good as
//     another, and scanning further only to find a swap disturbs two
//     fibers).
//   - worker running a fiber: if a plain move is allowed and beats both the
//     swap and the best so far, the fiber moves (to the node's first idle
//     worker if any, else to select_idle_sibling around this worker) and the
//     search stops, as in the kernel. Otherwise the swap is a candidate
//     when its improvement is at least small_numa_improvement, beats the best
//     by more than half of that, and the exchange of the two loads keeps the
//     nodes balanced.
//   - worker with queued fibers but none running: skipped (neither an idle
//     destination nor a swap partner).
// Returns {-1} when dst_node has no worker, equals src_node, or nothing
// qualifies.
//
// fiber_on_src: the fiber runs on src_node (task_numa_migrate() from the
// tick), so its load is in src_node's runnable_load already and is not
// added again; false for a woken or new fiber.
numa_choice task_numa_find_cpu(const placement_request& req, int src_node, int dst_node,
                               const cfs_features& f, bool fiber_on_src = false);

// task_numa_migrate() is v4.19's task_numa_migrate() for a fiber running on
// worker req.prev (its load counted there): when that worker is off the
// fiber's preferred node, task_numa_find_cpu() on the preferred node, a
// move or a swap as it finds. {-1}: no preferred node, already on it, or
// nothing qualifies. The policy's numa_migrate(); the engine asks it from
// the tick (policy_traits::numa_migrate_on_tick).
numa_migration task_numa_migrate(const placement_request& req, const cfs_features& f);

}  // namespace usched::cfs
