// cfs_v5_9_failshift.cpp: `cfs-v5.9-failshift`, candidate fix B of
// seeds/000 (Vincent Guittot): v5.9, except that detach compares a fiber's
// util shifted right by the level's nr_balance_failed with the imbalance,
// as v5.10 does for migrate_load: each failed periodic attempt halves the
// fiber's apparent size until it fits.
//
// The thread reports a smaller improvement than the final fix and no
// numbers; it needs failed periodic passes first, so the first pulls are
// late.
#include "cfs_family.hpp"

namespace usched {

std::unique_ptr<policy> make_cfs_v5_9_failshift() {
  return std::make_unique<cfs_policy>("cfs-v5.9-failshift",
                                      with(cfs_v5_9_features(), &cfs_features::failshift_util, true));
}

}  // namespace usched
