// none.cpp: the baseline without balancing.
//
// A new fiber runs on the worker that spawned it (a random one when spawned
// from outside the runtime) and a woken fiber returns to the worker it last
// ran on. Nothing is ever pulled, so whatever imbalance the program creates
// stays: this is the yardstick the balancing policies are measured against.
#include "policy.hpp"

namespace usched {
namespace {

// Places without reading any worker's snapshot; never pulls, never
// balances; FIFO queues.
constexpr policy_traits none_traits{.places_without_snapshot = true};

class none_policy final : public policy {
 public:
  none_policy() noexcept : policy(none_traits) {}

  std::string_view name() const noexcept override { return "none"; }

  int select_cpu(const placement_request& req) const override {
    const int n = static_cast<int>(req.cpus.size());
    if (req.kind == placement_kind::wake && req.prev >= 0) return req.prev;
    if (req.origin >= 0) return req.origin;
    return static_cast<int>(req.random % static_cast<std::uint64_t>(n));
  }

  balance_decision find_busiest(const balance_request&) const override { return {}; }
};

}  // namespace

std::unique_ptr<policy> make_none() { return std::make_unique<none_policy>(); }

}  // namespace usched
