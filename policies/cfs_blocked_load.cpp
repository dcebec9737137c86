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
// With the v5.x group types the load metric decides only between two
// overloaded groups, and an overloaded group always has a stacked worker, so
// in the seed's exact situation (one group overloaded, the other not) both
// policies pick the stacked group; the 4.11 kernel of the thread typed both
// groups overloaded. The difference shows between overloaded groups whose
// blocked load differs (tests/test_cfs_balance.cpp reproduces the dump both
// ways).
#include "cfs_family.hpp"

namespace usched {

std::unique_ptr<policy> make_cfs_blocked_load_policy() {
  cfs_features f;
  f.group_load_includes_blocked = true;
  return std::make_unique<cfs_policy>("cfs-blocked-load", f);
}

}  // namespace usched
