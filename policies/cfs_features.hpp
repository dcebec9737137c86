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

  // ---- v6.x: the balancer and wake-up placement of v6.18 (`eevdf`). Each
  // switch is off in every v4/v5 member; cfs_v6_features() turns them on.

  // SIS_UTIL (v6.0, commit 70fb5ccf2ebb; SIS_PROP removed in v6.8): the
  // idle-worker scan of select_idle_cpu() examines at most nr_idle_scan
  // workers of the LLC, llc_weight x (1 - (x x pct / 100)^2) with x the
  // LLC's util per worker over capacity (update_idle_cpu_scan()): the whole
  // LLC when it idles, none once its util reaches 100/pct (85% at 117).
  // Off: SIS_PROP's bound from the waker's avg_idle and scan cost.
  bool sis_util = false;

  // select_idle_sibling() as reworked by "sched/fair: Merge
  // select_idle_core/cpu()" (v5.12, commit 9fe1f127b913) and "Bring back
  // select_idle_smt(), but differently" (v5.16, commit c722f35b513f): one
  // scan of the LLC from target + 1, which, while has_idle_cores holds,
  // looks for a wholly idle core and remembers the first idle worker it
  // passes (taken when no core is idle) and is not bounded; otherwise idle
  // workers only. Before the scan, with no idle core, an idle SMT sibling of
  // prev (not of target) when prev shares target's cache. Off: v5.10's
  // select_idle_core(), then select_idle_cpu() from target, then
  // select_idle_smt() on target.
  bool sis_merged_scan = false;

  // recent_used_cpu (v5.16, commit 89aafd67f28c, "Use prev instead of new
  // target as recent_used_cpu"): a wake-up that gets past the idle target
  // and idle prev checks always leaves prev as the fiber's recent_used_cpu,
  // and the waker's fiber no longer records its worker. Off: v5.10's
  // (prev recorded only when the recent worker is taken; the waker's fiber
  // records its worker at every affine wake-up).
  bool recent_used_cpu_prev = false;

  // imb_numa_nr (v5.18, commit e496132ebedd, "Adjust the allowed NUMA
  // imbalance when SD_NUMA spans multiple LLCs"): between NUMA groups an
  // imbalance of at most 2 (NUMA_IMBALANCE_MIN, before it is halved into
  // fibers) is tolerated while the destination would run at most the
  // level's imb_numa_nr fibers (local.sum_nr_running + 1), in the balancer
  // and, on |local.idle_cpus - idlest.idle_cpus|, in find_idlest_group()'s
  // has_spare case, which no longer keeps a new fiber home merely because
  // the local node has an idle worker. Off: v5.10's, numa_imbalance_min
  // against the busiest group's fibers, after halving.
  bool imb_numa_nr = false;

  // sibling_imbalance() (v6.6, commit 7ff1693236f5, "Implement prefer
  // sibling imbalance calculation between asymmetric groups"): with an
  // SD_PREFER_SIBLING child, fibers are spread in proportion to the
  // groups' SMT cores, rounded, 2 when the local group is empty and the
  // busiest runs more than one; and it counts 0 on a busy destination
  // (!env->idle), which then no longer forces a pass past the has_spare
  // checks. Off: v5.10's plain difference of fiber counts.
  bool sibling_imbalance = false;

  // group_smt_balance (v6.6, commit fee1759e4f04, "Determine active load
  // balance for SMT sched groups"): an SMT core running two fibers or more
  // is, for an idle destination, a group of its own type between
  // misfit_task and asym_packing (busier than any fully_busy group): one
  // fiber moves (migrate_task, 1) so that no two share a core while a
  // core elsewhere idles. Among fully_busy groups of equal avg_load the
  // last one found wins unless the one kept is an SMT core. Off: v5.10.
  bool group_smt_balance = false;

  // calculate_imbalance() (v6.0, "sched/fair: Fix negative imbalance in
  // imbalance calculation"): a fully_busy local group that would become
  // overloaded pulls nothing when its avg_load is already at or above the
  // domain's. Off: v5.10, which then computed a negative difference.
  bool local_above_domain_avg = false;

  // Runnable boosting (v6.5, commit 7d0583cf9ec7): find_busiest_queue()'s
  // migrate_util case ranks workers by cpu_util_cfs_boost(), the larger of
  // util and runnable (capped at capacity), so a worker whose fibers wait
  // counts busier than its util alone says. Off: util alone.
  bool runnable_boost = false;

  // DELAY_DEQUEUE (v6.12, commit 152e11f6df29): a fiber that blocked with
  // negative lag stays queued, "delayed", until it is eligible again;
  // can_migrate_task() moves such a fiber only for migrate_load, where its
  // load is still counted. Off: no fiber is ever delayed.
  bool delayed_dequeue = false;

  // Newly-idle rationing (v5.16, commits 9d783c8dd112 and e60b56e46b38): a
  // worker skips the newly-idle balance while its average idle period is
  // shorter than its narrowest level's longest pass, not the migration
  // cost, and a level's longest pass decays only a second after it last
  // grew (the engine's, policy_traits::newidle_gate_by_domain_cost). Off:
  // v5.10's.
  bool newidle_cost_gate = false;

  // imbalance_pct() is the level's imbalance_pct under these features.
  unsigned imbalance_pct(const sched_domain& sd) const noexcept {
    if (sd.has_flag(SD_SHARE_CPUCAPACITY) || sd.has_flag(SD_SHARE_PKG_RESOURCES)) {
      return sd.imbalance_pct;
    }
    return wide_imbalance_pct;
  }
};

}  // namespace usched
