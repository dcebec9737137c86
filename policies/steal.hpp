// steal.hpp: the work-stealing policy class, shared by `steal` (steal.cpp,
// FIFO local queues) and `steal-lifo` (steal_lifo.cpp, LIFO local queues).
// One class, two named members, as the CFS family is one class with many.
#pragma once

#include <memory>
#include <string_view>

#include "policy.hpp"

namespace usched {

class steal_policy final : public policy {
 public:
  // A stealing policy called `name` whose workers order their queues by
  // `discipline` (fifo or lifo; the fair discipline is the CFS family's).
  steal_policy(std::string_view name, queue_discipline discipline) noexcept;

  std::string_view name() const noexcept override { return name_; }

  // A spawned or woken fiber stays with the worker that spawned or woke it;
  // from outside the runtime, a woken fiber returns to its last worker and a
  // new one goes to a random worker.
  int select_cpu(const placement_request& req) const override;

  // Half (rounded up) of the movable queue of the first worker of req.sd
  // with one, scanning from a random worker and wrapping.
  balance_decision find_busiest(const balance_request& req) const override;

 private:
  std::string_view name_;
};

// Factories of the two named members.
std::unique_ptr<policy> make_steal();
std::unique_ptr<policy> make_steal_lifo();

}  // namespace usched
