// cfs_v5_9_weight1.cpp: `cfs-v5.9-weight1`, candidate fix A of
// seeds/000 (Vincent Guittot's first patch): v5.9, except that migrate_util
// is used only when the busiest group has more than one worker
// (busiest->group_weight > 1); a busiest group of a single worker is
// spread by nr_running.
//
// In the thread it fixed Vincent's dual quad-core machine (p99 15120 us ->
// 1310 us) but not Chris's machine, whose LLC groups are SMT cores of two
// threads (group_weight 2): p99 stayed at 12656 us. usched shows the same
// split: on topologies without SMT it spreads, with SMT it stays stacked.
#include "cfs_family.hpp"

namespace usched {

std::unique_ptr<policy> make_cfs_v5_9_weight1() {
  return std::make_unique<cfs_policy>("cfs-v5.9-weight1",
                                      with(cfs_v5_9_features(), &cfs_features::weight1_spread, true));
}

}  // namespace usched
