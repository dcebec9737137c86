// cfs_blocked_load.cpp: `cfs-blocked-load`, the busiest-group metric argued
// over in seeds/003_92598cbec1a4bed9.txt ("sched/fair: Always propagate
// runnable_load_avg", Tejun Heo and Vincent Guittot, April 2017).
//
// v4.11's balancer read a CPU's load as the root cfs_rq's runnable_load_avg
// (weighted_cpuload()). With the tasks in the root cgroup that is the load
// of the runnable ones (`cfs-runnable-load`). With them in one cgroup, the
// root sees the group's entity, queued while a task of the group is
// runnable on the CPU, whose load Vincent's patch set from the group's
// load_avg, which also holds the decaying load of the tasks that blocked
// there (update_tg_cfs_load()); on a CPU running none the entity is
// dequeued and the root's runnable load is nothing, or a rounding. This
// variant reads that: load_avg on a busy worker, the runnable load on an
// idle one. A group whose busy workers recently ran fibers that are now
// asleep then looks busier than a group with a worker running two fibers,
// and the balancer pulls from the wrong one: the thread's dbg_odd_cnt
// counted those picks (577 in the root cgroup, 1708 inside one) and saw
// the tail latency grow with them. runtime::stats() counts the same thing
// per domain level (odd_picks) for every CFS-family policy.
//
// The balancing pass is v4.11's (cfs_features::v4_11_balance): with its
// three group types every busy core below an SMT level is "overloaded"
// while the local group has capacity, so the load metric decides between
// them, which is what made it matter in the thread; the imbalance is then
// counted in load, and a pick of a group whose workers run one fiber each
// finds nothing to detach. `cfs-runnable-load` (cfs_runnable_load.cpp) is
// the same pass over runnable load only: the pair is the thread's
// comparison. The passes read v4.11's load indices (cfs_features::load_idx:
// the engine keeps each worker's cpu_load[] at its tick, catching up the
// ticks a parked worker missed; busy passes read index 2 at the LLC, with
// LB_BIAS), and util_est, which arrived in v4.17, is off. (With v5.10's
// six group types the load metric decides only between two overloaded
// groups, and an overloaded group always has a stacked worker.)
#include "cfs_family.hpp"

namespace usched {

std::unique_ptr<policy> make_cfs_blocked_load() {
  return std::make_unique<cfs_policy>("cfs-blocked-load",
                                      with(cfs_v4_11_features(), &cfs_features::blocked_load, true));
}

}  // namespace usched
