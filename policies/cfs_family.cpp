// cfs_family.cpp: the CFS-family policy class, delegating to the pure
// balancer and placement functions, and the feature sets the variants start
// from.
#include "cfs_family.hpp"

#include "cfs_balance.hpp"
#include "cfs_placement.hpp"

namespace usched {

policy_traits cfs_traits(const cfs_features& features) noexcept {
  policy_traits t;
  t.discipline = queue_discipline::fair;
  t.pulls_when_idle = true;
  t.balances_periodically = true;
  t.rations_newidle = true;
  t.wake_reads_only_llcs = true;
  t.busy_factor = features.busy_factor;
  t.smt_ignores_cache_hot = features.smt_ignores_cache_hot;
  t.shortens_busy_interval = features.shortens_busy_interval;
  t.numa_migrate_on_tick = features.numa_v4_19;
  t.counts_numa_fibers = features.numa_v4_19;
  t.util_est = features.util_est;
  t.newidle_gate_by_domain_cost = features.newidle_cost_gate;
  if (features.load_idx) {
    t.cpu_load_signal = features.blocked_load ? weighted_load::group_entity : weighted_load::runnable;
  }
  return t;
}

int cfs_policy::select_cpu(const placement_request& req) const { return cfs::select_task_rq(req, features_); }

balance_decision cfs_policy::find_busiest(const balance_request& req) const {
  return cfs::find_busiest_group(req, features_);
}

numa_migration cfs_policy::numa_migrate(const placement_request& req) const {
  return cfs::task_numa_migrate(req, features_);
}

detach_verdict cfs_policy::can_detach(const fiber_view& f, const detach_env& env) const {
  return cfs::can_detach(f, env, features_);
}

cfs_features cfs_v5_9_features() noexcept {
  cfs_features f;
  f.llc_migrate_task = false;
  f.v5_9_load_detach = true;
  f.wide_imbalance_pct = 125;
  f.busy_factor = 32;
  f.smt_ignores_cache_hot = false;
  f.shortens_busy_interval = false;
  return f;
}

// v6.18's balancer and placement: v5.10's (the default features: the LLC
// spread fix, imbalance_pct 117, busy_factor 16, the util tie-break of
// find_idlest_group) with what changed since, up to v6.18.
cfs_features cfs_v6_features() noexcept {
  cfs_features f;
  f.sis_util = true;
  f.sis_merged_scan = true;
  f.recent_used_cpu_prev = true;
  f.imb_numa_nr = true;
  f.sibling_imbalance = true;
  f.group_smt_balance = true;
  f.local_above_domain_avg = true;
  f.runnable_boost = true;
  f.delayed_dequeue = true;
  f.newidle_cost_gate = true;
  return f;
}

// v4.11 as the v5.9 base (imbalance_pct 125 above the LLC, busy_factor 32,
// no SMT cache-hot exemption, the full busy interval) with v4.11's
// balancing pass and load indices, without the idlest-group util tie-break
// of v5.9 and without util_est (v4.17).
cfs_features cfs_v4_11_features() noexcept {
  cfs_features f = cfs_v5_9_features();
  f.v4_11_balance = true;
  f.load_idx = true;
  f.util_est = false;
  f.idlest_util_tiebreak = false;
  return f;
}

}  // namespace usched
