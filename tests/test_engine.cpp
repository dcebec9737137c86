// The engine without threads: runqueue order, two-phase migration and the
// newly-idle balance walk, driven with hand-set queues.
#include <catch2/catch.hpp>

#include <vector>

#include "engine.hpp"
#include "topology.hpp"

namespace {

using usched::detail::engine;
using usched::detail::sched_entity;

engine make_engine(const char* synthetic, unsigned workers, const char* policy) {
  const auto topo = usched::detail::topology::load(synthetic);
  return engine(usched::build_domains(topo.place_workers(workers, usched::detail::worker_unit::pu)),
                usched::make_policy(policy));
}

std::vector<int> queue_of(engine& e, int cpu, const std::vector<sched_entity>& all) {
  std::vector<int> out;
  for (sched_entity* se = e.rq(cpu).head; se; se = se->rq_next) {
    out.push_back(static_cast<int>(se - all.data()));
  }
  return out;
}

}  // namespace

TEST_CASE("engine: runqueues are FIFO and yield rotates", "[engine]") {
  engine e = make_engine("pack:1 core:2 pu:1", 2, "steal");
  std::vector<sched_entity> f(3);
  for (auto& se : f) e.enqueue(0, &se, 0);
  CHECK(e.rq(0).nr_queued.load() == 3);
  CHECK(queue_of(e, 0, f) == std::vector<int>{0, 1, 2});
  sched_entity running;
  // yield: the running one goes behind, the head comes out.
  CHECK(e.yield_swap(0, &running, 0) == &f[0]);
  CHECK(e.rq(0).tail == &running);
  CHECK(e.pick_next(0, 0) == &f[1]);
  CHECK(e.pick_next(0, 0) == &f[2]);
  CHECK(e.pick_next(0, 0) == &running);
  CHECK(e.pick_next(0, 0) == nullptr);
  CHECK(e.yield_swap(0, &running, 0) == nullptr);  // nothing queued: keep running
  CHECK(e.rq(0).nr_queued.load() == 0);
}

TEST_CASE("engine: detach skips pinned fibers, honours the amount and the cap", "[engine]") {
  engine e = make_engine("pack:1 core:2 pu:1", 2, "steal");
  std::vector<sched_entity> f(40);
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (i % 4 == 0) f[i].pinned = 0;  // 10 pinned to the source
    e.enqueue(0, &f[i], 0);
  }
  CHECK(e.rq(0).nr_pinned.load() == 10);
  sched_entity* out[engine::max_migrate_per_pass];
  usched::balance_decision d{0, usched::migration_type::migrate_task, 3};
  REQUIRE(e.detach_fibers(1, d, out, engine::max_migrate_per_pass) == 3);
  // The oldest movable ones, in order.
  CHECK(out[0] == &f[1]);
  CHECK(out[1] == &f[2]);
  CHECK(out[2] == &f[3]);
  e.attach_fibers(1, out, 3, 0);
  CHECK(queue_of(e, 1, f) == std::vector<int>{1, 2, 3});
  CHECK(f[1].cpu == 1);
  // A huge imbalance still moves at most max_migrate_per_pass, never a pinned one.
  d.imbalance = 1000;
  const unsigned n = e.detach_fibers(1, d, out, engine::max_migrate_per_pass);
  CHECK(n == 27);  // 40 - 10 pinned - 3 already moved
  for (unsigned i = 0; i < n; ++i) CHECK(out[i]->pinned < 0);
  CHECK(e.rq(0).nr_queued.load() == 10);
  CHECK(e.rq(0).nr_pinned.load() == 10);
}

TEST_CASE("engine: newly-idle balance prefers the nearest domain", "[engine]") {
  // Two cores of two PUs: worker 0's SMT sibling is 1, its far neighbours 2, 3.
  engine e = make_engine("pack:1 core:2 pu:2", 4, "steal");
  REQUIRE(e.domains().per_cpu[0].size() == 2);
  std::vector<sched_entity> near(4), far(8);
  for (auto& se : near) e.enqueue(1, &se, 0);
  for (auto& se : far) e.enqueue(3, &se, 0);
  e.rq(1).idle = false;
  e.rq(3).idle = false;
  std::vector<usched::cpu_snapshot> scratch;
  // Each pass takes half (rounded up) of the nearest non-empty queue: the SMT
  // sibling's 4 go as 2, 1, 1, then the far core's 8 as 4, 2, 1, 1.
  std::vector<unsigned> pulled;
  std::vector<int> from;
  for (std::uint64_t r = 0;; ++r) {
    const unsigned near_before = e.rq(1).nr_queued.load();
    const unsigned n = e.newidle_balance(0, 0, r, scratch);
    if (n == 0) break;
    pulled.push_back(n);
    from.push_back(e.rq(1).nr_queued.load() < near_before ? 1 : 3);
    while (e.pick_next(0, 0)) {
    }
  }
  CHECK(pulled == std::vector<unsigned>{2, 1, 1, 4, 2, 1, 1});
  CHECK(from == std::vector<int>{1, 1, 1, 3, 3, 3, 3});
  CHECK(e.counters(0).newidle_pulls == 7);
  CHECK(e.counters(0).fibers_pulled == 12);
  CHECK(e.counters(0).newidle_attempts == 8);
}

TEST_CASE("engine: placement honours pins before asking the policy", "[engine]") {
  engine e = make_engine("pack:1 core:4 pu:1", 4, "steal");
  std::vector<usched::cpu_snapshot> scratch;
  sched_entity se;
  se.pinned = 2;
  CHECK(e.select_cpu(usched::placement_kind::spawn, se, 0, 0, scratch) == 2);
  se.pinned = -1;
  CHECK(e.select_cpu(usched::placement_kind::spawn, se, 0, 0, scratch) == 0);
}
