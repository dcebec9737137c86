// policy.cpp: the default detach rule.
#include "policy.hpp"

namespace usched {

detach_verdict policy::can_detach(const fiber_view& f, const detach_env& env) const {
  return kernel_detach_rule(f, env);
}

numa_migration policy::numa_migrate(const placement_request&) const { return {}; }

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
