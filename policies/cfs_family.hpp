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

class cfs_policy final : public policy {
 public:
  cfs_policy(std::string_view name, cfs_features features) : name_(name), features_(features) {}

  std::string_view name() const noexcept override { return name_; }
  const cfs_features& features() const noexcept { return features_; }

  int select_cpu(const placement_request& req) const override;
  balance_decision find_busiest(const balance_request& req) const override;
  detach_verdict can_detach(const fiber_view& f, const detach_env& env) const override;
  bool pulls_when_idle() const noexcept override { return true; }
  bool balances_periodically() const noexcept override { return true; }
  bool fair_queue() const noexcept override { return true; }
  unsigned busy_factor() const noexcept override { return features_.busy_factor; }
  bool smt_ignores_cache_hot() const noexcept override { return features_.smt_ignores_cache_hot; }
  bool shortens_busy_interval() const noexcept override { return features_.shortens_busy_interval; }
  bool rations_newidle() const noexcept override { return true; }
  bool wake_reads_only_llcs() const noexcept override { return true; }

 private:
  std::string_view name_;
  cfs_features features_;
};

// Factories of the named members (one per policies/cfs*.cpp file).
std::unique_ptr<policy> make_cfs_policy();
std::unique_ptr<policy> make_cfs_v59_policy();
std::unique_ptr<policy> make_cfs_v59_single_cpu_spread_policy();
std::unique_ptr<policy> make_cfs_v59_idle_skips_util_policy();
std::unique_ptr<policy> make_cfs_v59_util_shift_policy();
std::unique_ptr<policy> make_cfs_blocked_load_policy();
std::unique_ptr<policy> make_cfs_runnable_load_policy();
std::unique_ptr<policy> make_cfs_no_idlest_util_policy();
std::unique_ptr<policy> make_cfs_numa_v4_19_rc1_policy();
std::unique_ptr<policy> make_cfs_numa_mel_policy();

// The v5.9 feature set the seed-000 candidates start from.
cfs_features cfs_v59_features() noexcept;

}  // namespace usched
