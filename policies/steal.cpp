// steal.cpp: randomized work stealing, the discipline of Go's and Tokio's
// schedulers.
//
// Placement is local: a spawned or woken fiber goes on the queue of the worker
// that spawned or woke it (Go's runnext, Tokio's LIFO slot), which keeps
// producer and consumer on one cache and costs no remote wake-up. Balance is
// pull-only and happens when a worker runs dry: it visits the workers of its
// domains narrowest first (SMT sibling, then its LLC, then the machine),
// starting each scan at a random worker so that thieves spread over victims,
// and takes half of the first non-empty queue it finds, rounded up so that a
// single queued fiber can be taken. Go and Tokio scan all workers in random
// order; walking the domains first keeps stolen fibers near their cache when
// there is a choice, and degenerates to the same thing on a flat machine.
//
// steal-lifo is the same policy over a LIFO local queue, the work-stealing
// deque of Cilk, TBB and Rayon: a worker runs the fiber it spawned or woke
// most recently, and thieves take the oldest. Fork-join code then runs depth
// first on each worker (the "work-first" principle) with a live-fiber count
// bounded by depth x fan-out, while steals move the big, old subtrees.
#include "policy.hpp"

namespace usched {
namespace {

class steal_policy final : public policy {
 public:
  explicit steal_policy(bool lifo) : lifo_(lifo) {}

  std::string_view name() const noexcept override { return lifo_ ? "steal-lifo" : "steal"; }
  bool lifo_queue() const noexcept override { return lifo_; }

  int select_cpu(const placement_request& req) const override {
    if (req.origin >= 0) return req.origin;
    if (req.kind == placement_kind::wake && req.prev >= 0) return req.prev;
    return static_cast<int>(req.random % static_cast<std::uint64_t>(req.cpus.size()));
  }

  bool places_without_snapshot() const noexcept override { return true; }

  balance_decision find_busiest(const balance_request& req) const override {
    const auto& span = req.sd->span;
    const std::size_t n = span.size();
    const std::size_t start = static_cast<std::size_t>(req.random % n);
    for (std::size_t i = 0; i < n; ++i) {
      const int cpu = span[(start + i) % n];
      if (cpu == req.this_cpu) continue;
      const cpu_snapshot& s = req.cpus[static_cast<std::size_t>(cpu)];
      const unsigned queued = s.nr_queued > s.nr_pinned ? s.nr_queued - s.nr_pinned : 0;
      if (queued == 0) continue;
      return {cpu, migration_type::migrate_task, static_cast<long>((queued + 1) / 2)};
    }
    return {};
  }

  bool pulls_when_idle() const noexcept override { return true; }

 private:
  bool lifo_;
};

}  // namespace

std::unique_ptr<policy> make_steal_policy() { return std::make_unique<steal_policy>(false); }
std::unique_ptr<policy> make_steal_lifo_policy() { return std::make_unique<steal_policy>(true); }

}  // namespace usched
