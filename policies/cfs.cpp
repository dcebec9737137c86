// cfs.cpp: `cfs`, the default policy: the kernel's CFS load balancer as of
// v5.10, with the fix from seeds/000_26cf78064701bb6b.txt.
//
// The thread ("fix scheduler regression from 'sched/fair: Rework
// load_balance()'", Chris Mason, Rik van Riel, Vincent Guittot, Oct-Nov 2020):
// after the v5.5 rework, when a worker went idle next to an overloaded one in
// the same LLC, the balancer counted the imbalance in utilization
// (migrate_util: the idle side's spare capacity) and skipped any queued
// fiber whose util exceeded it. A worker that had just gone idle still
// carried most of its util, so a CPU-bound fiber never fit: fibers stayed
// stacked behind a busy worker and schbench's p99 wake-up latency went from
// ~250 us to ~12 ms. The fix (commit 16b0a7a1a0af): inside domains whose
// groups share a cache (SD_SHARE_PKG_RESOURCES: SMT and LLC) the balancer
// spreads the number of fibers (migrate_task), as select_idle_sibling()
// already does for wake-ups; only wider domains balance utilization.
//
// Also v5.10: the idlest-group tie-break by utilization (seeds/004),
// imbalance_pct 117 above the LLC, busy_factor 16, the
// (load >> nr_balance_failed) detach rule, and Srikar's NUMA idle rule
// (seeds/002). Busiest-group choice counts runnable load only (seeds/003).
#include "cfs_family.hpp"

namespace usched {

std::unique_ptr<policy> make_cfs() {
  return std::make_unique<cfs_policy>("cfs", cfs_features{});
}

}  // namespace usched
