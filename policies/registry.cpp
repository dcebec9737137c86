// registry.cpp: the table of named policies.
#include <array>
#include <string>

#include <usched/error.hpp>
#include <usched/options.hpp>

#include "cfs_family.hpp"
#include "policy.hpp"
#include "steal.hpp"

namespace usched {

std::unique_ptr<policy> make_none();  // none.cpp

namespace {

constexpr std::array policies{
    policy_info{"cfs", "CFS as of v5.10 with the LLC spread fix (seeds/000); the default",
                &make_cfs},
    policy_info{"cfs-v5.9", "CFS v5.9: migrate_util at every level, fibers stay stacked (seeds/000)",
                &make_cfs_v5_9},
    policy_info{"cfs-v5.9-weight1",
                "v5.9 + candidate A: migrate_util only when the busiest group has >1 worker (seeds/000)",
                &make_cfs_v5_9_weight1},
    policy_info{"cfs-v5.9-idle",
                "v5.9 + candidate C: no util check when the puller is idle (seeds/000)",
                &make_cfs_v5_9_idle},
    policy_info{"cfs-v5.9-failshift",
                "v5.9 + candidate B: util >> nr_balance_failed in detach (seeds/000)",
                &make_cfs_v5_9_failshift},
    policy_info{"cfs-blocked-load",
                "v4.11's balancing pass over load including blocked load (seeds/003)",
                &make_cfs_blocked_load},
    policy_info{"cfs-runnable-load", "v4.11's balancing pass over runnable load only (seeds/003)",
                &make_cfs_runnable_load},
    policy_info{"cfs-no-idlest-util",
                "cfs without the idlest-group util tie-break of v5.9: forks pack onto fewer workers (seeds/004)",
                &make_cfs_no_idlest_util},
    policy_info{"cfs-numa-mel", "cfs with Mel Gorman's NUMA idle-worker rule, maymove only (seeds/002)",
                &make_cfs_numa_mel},
    policy_info{"cfs-numa-v4.19-rc1",
                "cfs with v4.19-rc1's NUMA rule: an idle worker of the preferred node taken even if unbalancing (seeds/002)",
                &make_cfs_numa_v4_19_rc1},
    policy_info{"none", "no balancing: a fiber runs where it was spawned and returns to its last worker",
                &make_none},
    policy_info{"steal", "randomized work stealing: an idle worker takes half of a victim's queue (Go, Tokio)",
                &make_steal},
    policy_info{"steal-lifo",
                "work stealing with a LIFO local queue: newest first, thieves take the oldest (Cilk, Rayon)",
                &make_steal_lifo},
    policy_info{"eevdf",
                "the v6.18 fair class: the EEVDF discipline inside v6.18's balancer and wake-up placement",
                &make_eevdf},
};

}  // namespace

std::span<const policy_info> registered_policies() noexcept { return policies; }

// Declared with the options (usched/options.hpp): the names USCHED_POLICY takes.
std::vector<std::string> policy_names() {
  std::vector<std::string> names;
  for (const auto& p : policies) names.emplace_back(p.name);
  return names;
}

std::string policy_names_joined() {
  std::string out;
  for (const auto& p : policies) {
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out;
}

std::unique_ptr<policy> make_policy(std::string_view name) {
  for (const auto& p : policies) {
    if (p.name == name) return p.make();
  }
  throw config_error("USCHED_POLICY='" + std::string(name) +
                     "' is not a registered policy; choose one of: " + policy_names_joined());
}

}  // namespace usched
