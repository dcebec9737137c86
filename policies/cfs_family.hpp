// cfs_family.hpp: the CFS-family policy. One class, many named members: each
// file policies/cfs*.cpp registers a name with its cfs_features, the way the
// kernel's SCHED_FEAT switches variants of one scheduler. The decisions are
// the pure functions of cfs_balance.hpp (balancing) and cfs_placement.hpp
// (wake-up and spawn placement).
#pragma once

#include <memory>
#include <string_view>

#include "cfs_features.hpp"
#include "policy.hpp"

namespace usched {

// cfs_traits() are the fixed facts of every CFS-family policy (the fair
// discipline, newly-idle and periodic balancing, wake-ups that read only the
// LLCs involved) with those that differ between kernel versions taken from
// `features`: busy_factor, the SMT cache-hot exemption, the shortened busy
// interval, v4.19's NUMA cadence and counts, util_est, and the load history
// the balance passes read (load_idx, whose load is blocked_load's).
policy_traits cfs_traits(const cfs_features& features) noexcept;

class cfs_policy final : public policy {
 public:
  cfs_policy(std::string_view name, cfs_features features)
      : policy(cfs_traits(features)), name_(name), features_(features) {}
  // A member whose fixed facts differ from cfs_traits(features) beyond the
  // balancer, e.g. its queue discipline.
  cfs_policy(std::string_view name, cfs_features features, policy_traits traits)
      : policy(traits), name_(name), features_(features) {}

  std::string_view name() const noexcept override { return name_; }

  int select_cpu(const placement_request& req) const override;
  balance_decision find_busiest(const balance_request& req) const override;
  detach_verdict can_detach(const fiber_view& f, const detach_env& env) const override;
  numa_migration numa_migrate(const placement_request& req) const override;

 private:
  std::string_view name_;
  cfs_features features_;
};

// Factories of the named members, each make_<registered name> in the file
// policies/<registered name>.cpp (with '-' and '.' spelled '_').
std::unique_ptr<policy> make_cfs();
std::unique_ptr<policy> make_cfs_v5_9();
std::unique_ptr<policy> make_cfs_v5_9_weight1();
std::unique_ptr<policy> make_cfs_v5_9_idle();
std::unique_ptr<policy> make_cfs_v5_9_failshift();
std::unique_ptr<policy> make_cfs_blocked_load();
std::unique_ptr<policy> make_cfs_runnable_load();
std::unique_ptr<policy> make_cfs_no_idlest_util();
std::unique_ptr<policy> make_cfs_numa_mel();
std::unique_ptr<policy> make_cfs_numa_v4_19_rc1();
std::unique_ptr<policy> make_eevdf();

// The v5.9 feature set the seed-000 candidates start from.
cfs_features cfs_v5_9_features() noexcept;

// v4.11's balancing pass on the v5.9 feature set, which the seed-003 pair
// (cfs-blocked-load, cfs-runnable-load) starts from.
cfs_features cfs_v4_11_features() noexcept;

// The v6.18 feature set (`eevdf`): v5.10's with every v6.x switch on.
cfs_features cfs_v6_features() noexcept;

// with(): `base` with one switch set: a variant that differs from a
// kernel version's feature set by one switch is that version, with it.
template <class T>
constexpr cfs_features with(cfs_features base, T cfs_features::*feature, T value) noexcept {
  base.*feature = value;
  return base;
}

}  // namespace usched
