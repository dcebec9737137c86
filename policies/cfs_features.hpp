// cfs_features.hpp: the switches that distinguish the members of the CFS
// family, in the spirit of the kernel's SCHED_FEAT. Each named policy
// (policies/cfs*.cpp) is one set of these; the shared machinery
// (cfs_balance.cpp, cfs_placement.cpp) reads them and nothing else.
#pragma once

#include "sched_domain.hpp"

namespace usched {

// Mel Gorman's and Srikar Dronamraju's versions of the idle-destination check
// in task_numa_compare() (seeds/002).
enum class numa_idle_rule : unsigned char {
  v4_19_rc1,  // v4.19-rc1 (commit 305c1fac3225): move whenever balance allows or the move beats the best so far (maymove || imp > best_imp)
  mel,        // move to an idle worker whenever the move keeps the nodes balanced (maymove)
  srikar,     // ... and only if that beats the best swap found so far (maymove && moveimp >= best_imp)
};

struct cfs_features {
  // seeds/000, the fix that landed (v5.10): when the local group has spare
  // capacity and the busiest is overloaded, domains whose groups share a
  // cache (SD_SHARE_PKG_RESOURCES) balance by number of fibers; only wider
  // domains count utilization (migrate_util). Off: v5.9, migrate_util at
  // every level.
  bool llc_migrate_task = true;

  // seeds/000, candidate A (Vincent Guittot), `cfs-v5.9-weight1`: a busiest
  // group of weight 1 (a single worker) is spread by nr_running;
  // migrate_util is used only when it has more than one worker.
  bool weight1_spread = false;

  // seeds/000, candidate B, `cfs-v5.9-failshift`: detach compares a fiber's
  // util shifted right by the level's nr_balance_failed, so repeated failures
  // let bigger fibers go.
  bool failshift_util = false;

  // seeds/000, candidate C (Rik van Riel), `cfs-v5.9-idle`: detach skips the
  // util check when the destination is idle (env->idle != CPU_NOT_IDLE).
  bool idle_skips_util_check = false;

  // seeds/003, `cfs-blocked-load`: the fibers are tasks of one cgroup, so
  // the load of a busy worker, as the root's runnable_load_avg saw it, is
  // the group entity's: the group's load_avg, with the decaying load of its
  // blocked fibers; an idle worker's group entity is dequeued and counts
  // nothing (cfs::cpu_load()). Off: the root cgroup, runnable load only
  // (`cfs-runnable-load`).
  bool blocked_load = false;

  // seeds/003: the balance passes read v4.11's per-CPU load indices
  // (rq->cpu_load[], kept by the engine at each tick with the catch-up of
  // ticks missed while idle): each level's busy_idx, idle_idx and
  // newidle_idx (sd_init(): 2, 0, 0 at the LLC, 2, 1, 0 above it without
  // NUMA, 3, 2, 0 across NUMA nodes, 0 at SMT), the load of a worker of the
  // local group being the higher of its indexed and its current load
  // (target_load()), of a remote one the lower (source_load(): LB_BIAS).
  // Off: every pass reads the current load, as since v4.19.
  bool load_idx = false;

  // util_est (v4.17): a fiber's and a worker's util include the estimate
  // kept at each sleep. Off: util_avg alone, as in v4.11.
  bool util_est = true;

  // seeds/003: the balancing pass is v4.11's, the kernel of the thread.
  // The busiest group is ranked as its update_sd_pick_busiest() ranked it:
  // by the three v4.11 group types (other < imbalanced < overloaded, where
  // "overloaded" is more fibers than workers with util above capacity, or,
  // below an SD_PREFER_SIBLING child, any group running two while the local
  // group has capacity), then by strictly higher avg_load among groups of
  // one type, so the load metric decides between every pair of groups of a
  // type. find_busiest_group()'s checks, calculate_imbalance() and
  // fix_small_imbalance() then count the imbalance in load (there were no
  // migration types before v5.5), and detach_tasks() skips a fiber whose
  // half load exceeds what is left, however often the pass failed. Off:
  // v5.10's pass (six group types; load only between overloaded groups).
  bool v4_11_balance = false;

  // seeds/004: among idlest-group candidates with equal idle workers, the
  // one with the lowest utilization wins (commit 3edecfef0285, "sched/fair:
  // update_pick_idlest() Select group with lowest group_util when idle_cpus
  // are equal", merged for v5.9, kept in v5.10). Off: the first found stays,
  // as before it and as the revert the thread argues for
  // (`cfs-no-idlest-util`).
  bool idlest_util_tiebreak = true;

  // v5.9's detach rule for migrate_load (load/2 > imbalance is skipped while
  // nr_balance_failed <= cache_nice_tries) instead of v5.10's
  // (load >> nr_balance_failed) > imbalance.
  bool v5_9_load_detach = false;

  // imbalance_pct of levels without a topology flag (PKG, NUMA, SYS): 117
  // since v5.10, 125 in v5.9. SMT (110) and LLC (117) are the same in both.
  unsigned wide_imbalance_pct = 117;

  // Multiplier of the balance interval while the worker is busy: 16 since
  // v5.10, 32 in v5.9.
  unsigned busy_factor = 16;

  // task_hot() returns "not hot" between SMT siblings (commit ec73240b1627,
  // "sched/fair: Ignore cache hotness for SMT migration", v5.10). v5.9
  // tests hotness at the SMT level like any other.
  bool smt_ignores_cache_hot = true;

  // get_sd_balance_interval() takes one jiffy off a busy CPU's interval
  // (v5.10); v5.9 does not.
  bool shortens_busy_interval = true;

  // seeds/002: the idle-destination rule of NUMA placement.
  numa_idle_rule numa_rule = numa_idle_rule::srikar;

  // The NUMA search stops once the fiber is to move (Mel Gorman's "Stop an
  // exhaustive search if an idle CPU is found", posted in the seeds/002
  // series and merged for v5.7 as "...if a reasonable swap candidate or idle
  // CPU is found"). Off: the whole preferred node is scanned, as in v4.19.
  bool numa_stop_on_move = true;

  // v4.19's NUMA balancing cadence and balancer (seeds/002). On:
  // * task_numa_migrate() never runs at a wake-up; it runs from the tick of
  //   the worker running a fiber that prefers another node, once per
  //   numa_migrate_retry interval (task_numa_fault() ->
  //   numa_migrate_preferred()), and moves the running fiber
  //   (migrate_task_to(), migrate_swap()).
  // * find_busiest_queue() skips, on SD_NUMA levels, runqueues whose
  //   fbq_classify_rq() is above the busiest group's fbq_classify_group()
  //   (regular < remote < all): fibers well placed stay while others can go.
  // * can_migrate_task() asks migrate_degrades_locality() before
  //   task_hot(): pulling a fiber off its preferred node is refused like a
  //   cache-hot one, pulling it onto that node is allowed even when hot.
  // Off: v5.10's wake-up placement by preferred node and its balancer.
  bool numa_v4_19 = false;

  // adjust_numa_imbalance(): tolerate an imbalance between NUMA nodes while
  // the busier node runs at most this many fibers (v5.7+: 2). 0 disables.
  unsigned numa_imbalance_min = 2;

  // imbalance_pct() is the level's imbalance_pct under these features.
  unsigned imbalance_pct(const sched_domain& sd) const noexcept {
    if (sd.has_flag(SD_SHARE_CPUCAPACITY) || sd.has_flag(SD_SHARE_PKG_RESOURCES)) {
      return sd.imbalance_pct;
    }
    return wide_imbalance_pct;
  }
};

}  // namespace usched
