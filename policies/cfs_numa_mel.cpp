// cfs_numa_mel.cpp: `cfs-numa-mel`, cfs with Mel Gorman's version of the
// idle-destination check in NUMA placement (seeds/002_0e79b110ac36ba9f.txt,
// "Follow-up fixes for v4.19-rc1 NUMA balancing", September 2018).
//
// Both versions search the fiber's preferred node and stop at the first idle
// worker they take (patch 3: the search cost grows with the node, and an
// idle worker is as good as it gets). They differ when a swap with a busy
// worker's fiber was already found: Mel's rule moves the fiber to the idle
// worker whenever the move keeps the nodes balanced (maymove); Srikar
// Dronamraju's, which landed and which cfs uses, does so only if the move
// is at least as good as that swap (maymove && moveimp >= best_imp).
//
// As the thread's kernel did, the search runs from the tick on 4.19's
// numa_migrate_retry cadence and carries out moves and swaps, and the
// balancer has fbq_type and migrate_degrades_locality() (numa_v4_19;
// cfs_numa_v4_19_rc1.cpp). cfs keeps the search at the wake-up.
#include "cfs_family.hpp"

namespace usched {

std::unique_ptr<policy> make_cfs_numa_mel() {
  return std::make_unique<cfs_policy>("cfs-numa-mel",
                                      cfs_features{.numa_rule = numa_idle_rule::mel, .numa_v4_19 = true});
}

}  // namespace usched
