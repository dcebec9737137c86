// cfs_family.cpp: the CFS-family policy class, delegating to the pure
// balancer and placement functions.
#include "cfs_family.hpp"

#include "cfs_balance.hpp"
#include "cfs_placement.hpp"

namespace usched {

int cfs_policy::select_cpu(const placement_request& req) const { return cfs::select_task_rq(req, features_); }

balance_decision cfs_policy::find_busiest(const balance_request& req) const {
  return cfs::find_busiest_group(req, features_);
}

detach_verdict cfs_policy::can_detach(const fiber_view& f, const detach_env& env) const {
  return cfs::can_detach(f, env, features_);
}

cfs_features cfs_v59_features() noexcept {
  cfs_features f;
  f.llc_migrate_task = false;
  f.v59_load_detach = true;
  f.wide_imbalance_pct = 125;
  f.busy_factor = 32;
  f.smt_ignores_cache_hot = false;
  f.shortens_busy_interval = false;
  return f;
}

}  // namespace usched
