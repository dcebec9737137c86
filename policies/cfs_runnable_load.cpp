// cfs_runnable_load.cpp: `cfs-runnable-load`, the twin of `cfs-blocked-load`
// (cfs_blocked_load.cpp, which tells the thread, seeds/003): the same
// v4.11 balancing pass (with its load indices and without util_est), over
// the load of queued and running fibers only (the kernel's
// runnable_load_avg, which is what weighted_cpuload() read with the tasks
// in the root cgroup). This is what Tejun Heo argued the
// balancer must see ("when picking the busiest group, the only thing which
// matters is the queue's runnable_load_avg") and what the root cgroup of his
// runs saw; `cfs-blocked-load` is what his cgroup saw once blocked load was
// propagated.
#include "cfs_family.hpp"

namespace usched {

std::unique_ptr<policy> make_cfs_runnable_load() {
  return std::make_unique<cfs_policy>("cfs-runnable-load", cfs_v4_11_features());
}

}  // namespace usched
