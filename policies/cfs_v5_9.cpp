// cfs_v5_9.cpp: `cfs-v5.9`, the reworked balancer before the seeds/000 fix
// (commit 0b0695f2b34a "sched/fair: Rework load_balance()", as it stood in
// v5.9).
//
// When the local group has spare capacity and the busiest is overloaded, the
// imbalance is the local group's spare capacity in util (migrate_util) at
// every level, LLC included, and detach skips a fiber whose util exceeds it.
// A worker that just went idle keeps most of its util for tens of
// milliseconds (PELT's 32 ms half-life), so its "spare capacity" is smaller
// than a CPU-bound fiber's util and the fiber is never pulled: fibers stay
// stacked behind busy workers while a neighbour idles. Only the periodic
// balance's failure counter eventually asks the busy worker to give up its
// running fiber (active balance), which is where the thread's 12 ms tails
// come from.
//
// The other v5.9 settings that v5.10 changed are reproduced too:
// imbalance_pct 125 above the LLC, busy_factor 32, and the v5.9
// migrate_load detach rule (load/2 > imbalance while nr_balance_failed <=
// cache_nice_tries). v5.9 already has the utilization tie-break of
// find_idlest_group (seeds/004), so this policy has it too.
#include "cfs_family.hpp"

namespace usched {

std::unique_ptr<policy> make_cfs_v5_9() {
  return std::make_unique<cfs_policy>("cfs-v5.9", cfs_v5_9_features());
}

}  // namespace usched
