// engine.cpp: runqueue bookkeeping and the execution of policy decisions.
#include "engine.hpp"

#include <cassert>

namespace usched::detail {

void runqueue::push_back(sched_entity* se) noexcept {
  se->rq_next = nullptr;
  se->rq_prev = tail;
  if (tail) {
    tail->rq_next = se;
  } else {
    head = se;
  }
  tail = se;
  // seq_cst: this store and the pusher's later read of the worker's park
  // word pair with the parker's write of its park word and read of this
  // count (worker.cpp, idle_wait), so one side always sees the other.
  nr_queued.store(nr_queued.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
  if (se->pinned >= 0) {
    nr_pinned.store(nr_pinned.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
}

void runqueue::remove(sched_entity* se) noexcept {
  if (se->rq_prev) {
    se->rq_prev->rq_next = se->rq_next;
  } else {
    head = se->rq_next;
  }
  if (se->rq_next) {
    se->rq_next->rq_prev = se->rq_prev;
  } else {
    tail = se->rq_prev;
  }
  se->rq_next = se->rq_prev = nullptr;
  nr_queued.store(nr_queued.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  if (se->pinned >= 0) {
    nr_pinned.store(nr_pinned.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }
}

sched_entity* runqueue::pop_front() noexcept {
  sched_entity* se = head;
  if (se) remove(se);
  return se;
}

engine::engine(domain_tree domains, std::unique_ptr<usched::policy> pol)
    : domains_(std::move(domains)),
      policy_(std::move(pol)),
      rqs_(std::make_unique<runqueue[]>(domains_.nr_cpus())),
      counters_(std::make_unique<balance_counters[]>(domains_.nr_cpus())) {}

void engine::snapshot(std::vector<cpu_snapshot>& out) const {
  const std::size_t n = nr_cpus();
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const runqueue& q = rqs_[i];
    cpu_snapshot& s = out[i];
    s.nr_queued = q.nr_queued.load(std::memory_order_relaxed);
    s.nr_pinned = q.nr_pinned.load(std::memory_order_relaxed);
    s.idle = q.idle.load(std::memory_order_relaxed);
    s.nr_running = s.nr_queued + (s.idle ? 0u : 1u);
    s.capacity = domains_.cpu_capacity.empty() ? capacity_scale : domains_.cpu_capacity[i];
  }
}

int engine::select_cpu(placement_kind kind, const sched_entity& se, int origin,
                       std::uint64_t random, std::vector<cpu_snapshot>& scratch) const {
  if (se.pinned >= 0) return se.pinned;
  if (nr_cpus() == 1) return 0;
  snapshot(scratch);
  placement_request req;
  req.kind = kind;
  req.origin = origin;
  req.prev = kind == placement_kind::wake ? se.cpu : -1;
  req.cpus = scratch;
  req.domains = &domains_;
  req.random = random;
  const int cpu = policy_->select_cpu(req);
  assert(cpu >= 0 && static_cast<std::size_t>(cpu) < nr_cpus());
  return cpu;
}

unsigned engine::enqueue(int cpu, sched_entity* se, std::int64_t /*now*/) {
  runqueue& q = rq(cpu);
  q.lock.lock();
  se->cpu = cpu;
  q.push_back(se);
  const unsigned queued = q.nr_queued.load(std::memory_order_relaxed);
  q.lock.unlock();
  return queued;
}

sched_entity* engine::pick_next(int cpu, std::int64_t /*now*/) {
  runqueue& q = rq(cpu);
  if (q.nr_queued.load(std::memory_order_relaxed) == 0) return nullptr;
  q.lock.lock();
  sched_entity* se = q.pop_front();
  q.lock.unlock();
  return se;
}

sched_entity* engine::yield_swap(int cpu, sched_entity* prev, std::int64_t /*now*/) {
  runqueue& q = rq(cpu);
  if (q.nr_queued.load(std::memory_order_relaxed) == 0) return nullptr;
  q.lock.lock();
  sched_entity* next = q.pop_front();
  if (next) {
    prev->cpu = cpu;
    q.push_back(prev);
  }
  q.lock.unlock();
  return next;
}

unsigned engine::detach_fibers(int dst, const balance_decision& decision, sched_entity** out,
                               unsigned max) {
  unsigned limit = max;
  if (decision.imbalance < static_cast<long>(limit)) limit = static_cast<unsigned>(decision.imbalance);
  runqueue& src = rq(decision.busiest);
  unsigned n = 0;
  src.lock.lock();
  // Walk from the head: the fibers that have waited longest. Only
  // migrate_task exists until load tracking does; it counts fibers.
  for (sched_entity* se = src.head; se && n < limit;) {
    sched_entity* next = se->rq_next;
    if (se->pinned < 0 || se->pinned == dst) {
      src.remove(se);
      out[n++] = se;
    }
    se = next;
  }
  src.lock.unlock();
  return n;
}

void engine::attach_fibers(int dst, sched_entity* const* list, unsigned n, std::int64_t /*now*/) {
  if (n == 0) return;
  runqueue& q = rq(dst);
  q.lock.lock();
  for (unsigned i = 0; i < n; ++i) {
    list[i]->cpu = dst;
    q.push_back(list[i]);
  }
  q.lock.unlock();
}

unsigned engine::newidle_balance(int this_cpu, std::int64_t now, std::uint64_t random,
                                 std::vector<cpu_snapshot>& scratch) {
  const auto& chain = domains_.per_cpu[static_cast<std::size_t>(this_cpu)];
  if (chain.empty()) return 0;
  balance_counters& c = counters_[static_cast<std::size_t>(this_cpu)];
  c.newidle_attempts.add();
  snapshot(scratch);
  for (const sched_domain& sd : chain) {
    balance_request req;
    req.this_cpu = this_cpu;
    req.idle = cpu_idle_type::newly_idle;
    req.sd = &sd;
    req.cpus = scratch;
    req.random = random;
    const balance_decision d = policy_->find_busiest(req);
    if (!d || d.busiest == this_cpu) continue;
    sched_entity* moved[max_migrate_per_pass];
    const unsigned n = detach_fibers(this_cpu, d, moved, max_migrate_per_pass);
    if (n == 0) continue;
    attach_fibers(this_cpu, moved, n, now);
    c.newidle_pulls.add();
    c.fibers_pulled.add(n);
    return n;
  }
  return 0;
}

}  // namespace usched::detail
