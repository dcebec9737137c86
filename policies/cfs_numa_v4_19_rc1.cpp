// cfs_numa_v4_19_rc1.cpp: `cfs-numa-v4.19-rc1`, cfs with the NUMA placement
// rule of v4.19-rc1, before the fixes of seeds/002_0e79b110ac36ba9f.txt
// ("Follow-up fixes for v4.19-rc1 NUMA balancing", Mel Gorman, September
// 2018).
//
// Commit 305c1fac3225 ("sched/numa: Evaluate move once per node") decided
// once per search whether moving the task to the preferred node keeps the
// nodes balanced (maymove), but task_numa_compare() still took an idle
// destination CPU when `maymove || imp > env->best_imp`, and an idle CPU
// always shows an improvement: on a lightly loaded machine tasks moved to
// their preferred node even when that overloaded it, the load balancer moved
// them back, and the two fought. Mel Gorman measured NAS class D on two
// sockets: 38,918 CPU migrations and 11,197 NUMA moves before his patch 4
// (`if (maymove)`), 147 and 26 after. v4.19 also scans the whole preferred
// node; the search that stops at the first idle CPU is Mel's patch 3, merged
// for v5.7. This policy has neither: it is the "before" of the thread's pair,
// `cfs-numa-mel` the "after".
//
// Both run the search as 4.19 did (numa_v4_19): never at a wake-up, but
// from task_numa_fault() -> numa_migrate_preferred() every
// numa_migrate_retry interval, here the tick of the worker running the
// fiber every 62 ms (the scan period held at its 1000 ms start), moving the
// running fiber (migrate_task_to()) or swapping it with the other worker's
// (migrate_swap()) through the engine's push of a running fiber; and their
// balancer has 4.19's fbq_type and migrate_degrades_locality().
#include "cfs_family.hpp"

namespace usched {

std::unique_ptr<policy> make_cfs_numa_v4_19_rc1() {
  return std::make_unique<cfs_policy>("cfs-numa-v4.19-rc1",
                                      cfs_features{.numa_rule = numa_idle_rule::v4_19_rc1, .numa_stop_on_move = false, .numa_v4_19 = true});
}

}  // namespace usched
