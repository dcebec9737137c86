// cfs_no_idlest_util.cpp: `cfs-no-idlest-util`, `cfs` with one rule reverted:
// the utilization tie-break of update_pick_idlest() (seeds/004).
//
// Commit 3edecfef0285 ("sched/fair: update_pick_idlest() Select group with
// lowest group_util when idle_cpus are equal", Peter Puhov, in v5.9) made
// find_idlest_group() prefer, among candidate groups with the same number of
// idle CPUs, the one with the least utilization. New tasks then spread over
// lightly used CPUs. Mel Gorman's grid found fork_test 16% faster and
// gitsource faster with it reverted on v5.9: without the tie-break the first
// group found stays the idlest, which packs forked work onto fewer CPUs at a
// higher utilization each, and that plays better with cpufreq governors other
// than schedutil. This policy is that revert, so the thread's comparison is
// one switch: `cfs` against `cfs-no-idlest-util`.
#include "cfs_family.hpp"

namespace usched {

std::unique_ptr<policy> make_cfs_no_idlest_util() {
  return std::make_unique<cfs_policy>("cfs-no-idlest-util",
                                      cfs_features{.idlest_util_tiebreak = false});
}

}  // namespace usched
