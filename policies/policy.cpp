// policy.cpp: names of the policy enums, and the default detach rule.
#include "policy.hpp"

namespace usched {

const char* to_string(migration_type type) noexcept {
  switch (type) {
    case migration_type::migrate_load: return "migrate_load";
    case migration_type::migrate_util: return "migrate_util";
    case migration_type::migrate_task: return "migrate_task";
    case migration_type::migrate_misfit: return "migrate_misfit";
  }
  return "?";
}

const char* to_string(group_type type) noexcept {
  switch (type) {
    case group_type::has_spare: return "has_spare";
    case group_type::fully_busy: return "fully_busy";
    case group_type::misfit_task: return "misfit_task";
    case group_type::asym_packing: return "asym_packing";
    case group_type::imbalanced: return "imbalanced";
    case group_type::overloaded: return "overloaded";
  }
  return "?";
}

const char* to_string(cpu_idle_type type) noexcept {
  switch (type) {
    case cpu_idle_type::idle: return "idle";
    case cpu_idle_type::newly_idle: return "newly_idle";
    case cpu_idle_type::not_idle: return "not_idle";
  }
  return "?";
}

namespace {

// fits_capacity() of the kernel: `util` fits `capacity` with 20% headroom.
bool fits_capacity(unsigned long util, unsigned long capacity) noexcept {
  return util * 1280 < capacity * 1024;
}

}  // namespace


detach_verdict policy::can_detach(const fiber_view& f, const detach_env& env) const {
  return kernel_detach_rule(f, env);
}

detach_verdict kernel_detach_rule(const fiber_view& f, const detach_env& env) noexcept {
  switch (env.type) {
    case migration_type::migrate_load: {
      const long load = f.load_avg > 0 ? static_cast<long>(f.load_avg) : 1;
      // A fiber heavier than what is left is skipped, but each failed
      // attempt at this level halves its apparent load, so a persistent
      // imbalance eventually moves even a big fiber.
      const unsigned shift = env.nr_balance_failed < 63 ? env.nr_balance_failed : 63;
      if ((load >> shift) > env.imbalance) return {};
      return {true, load};
    }
    case migration_type::migrate_util: {
      const long util = static_cast<long>(f.util_avg);
      if (util > env.imbalance) return {};
      return {true, util};
    }
    case migration_type::migrate_task:
      return {true, 1};
    case migration_type::migrate_misfit:
      if (fits_capacity(f.util_avg, env.src_capacity)) return {};
      return {true, env.imbalance};
  }
  return {};
}

}  // namespace usched
