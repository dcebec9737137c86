// cfs_blocked_load.cpp: `cfs-blocked-load`, the busiest-group metric argued
// over in seeds/003_92598cbec1a4bed9.txt ("sched/fair: Always propagate
// runnable_load_avg", Tejun Heo and Vincent Guittot, April 2017).
//
// cfs counts a group's load as the load of its runnable fibers only (the
// kernel's runnable_load_avg of that era). This variant counts load_avg,
// which also holds the decaying load of fibers that blocked there. A group
// whose workers recently ran heavy fibers that are now asleep then looks
// busier than a group with a worker running two fibers, and the balancer
// pulls from the wrong one: the thread's dbg_odd_cnt counted those picks
// (577 in the root cgroup, 1708 inside one) and saw the tail latency grow
// with them. runtime::stats() counts the same thing per domain level
// (odd_picks) for every CFS-family policy.
//
// The balancing pass is v4.11's (cfs_features::v4_11_balance): with its
// three group types every busy core below an SMT level is "overloaded"
// while the local group has capacity, so the load metric decides between
// them, which is what made it matter in the thread; the imbalance is then
// counted in load, and a pick of a group whose workers run one fiber each
// finds nothing to detach. `cfs-runnable-load` (cfs_runnable_load.cpp) is
// the same pass over runnable load only: the pair is the thread's
// comparison. (With v5.10's six group types the load metric decides only
// between two overloaded groups, and an overloaded group always has a
// stacked worker.)
#include "cfs_family.hpp"

namespace usched {

std::unique_ptr<policy> make_cfs_blocked_load() {
  return std::make_unique<cfs_policy>("cfs-blocked-load",
                                      with(cfs_v4_11_features(), &cfs_features::blocked_load, true));
}

}  // namespace usched
