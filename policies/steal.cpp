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
// `steal-lifo` (steal_lifo.cpp) is the same policy over LIFO local queues.
#include "steal.hpp"

namespace usched {

namespace {

// Placement reads no worker's snapshot; an idle worker steals, nothing
// balances from the tick.
constexpr policy_traits steal_traits(queue_discipline discipline) noexcept {
  return {.discipline = discipline, .pulls_when_idle = true, .places_without_snapshot = true};
}

}  // namespace

steal_policy::steal_policy(std::string_view name, queue_discipline discipline) noexcept
    : policy(steal_traits(discipline)), name_(name) {}

int steal_policy::select_cpu(const placement_request& req) const {
  if (req.origin >= 0) return req.origin;
  if (req.kind == placement_kind::wake && req.prev >= 0) return req.prev;
  return static_cast<int>(req.random % static_cast<std::uint64_t>(req.cpus.size()));
}

balance_decision steal_policy::find_busiest(const balance_request& req) const {
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

std::unique_ptr<policy> make_steal() {
  return std::make_unique<steal_policy>("steal", queue_discipline::fifo);
}

}  // namespace usched
