// registry.cpp: the table of named policies.
#include <array>
#include <string>

#include <usched/error.hpp>

#include "policy.hpp"

namespace usched {

std::unique_ptr<policy> make_none_policy();
std::unique_ptr<policy> make_steal_policy();

namespace {

constexpr std::array policies{
    policy_info{"none", "no balancing: a fiber runs where it was spawned and returns to its last worker",
                &make_none_policy},
    policy_info{"steal", "randomized work stealing: an idle worker takes half of a victim's queue (Go, Tokio)",
                &make_steal_policy},
};

}  // namespace

std::span<const policy_info> registered_policies() noexcept { return policies; }

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
