// Policy decisions from hand-built snapshots: no threads, no clock.
#include <catch2/catch.hpp>

#include <vector>

#include <usched/error.hpp>

#include "domains.hpp"
#include "policy.hpp"
#include "policy_snapshots.hpp"
#include "topology.hpp"

using usched::test::cpus;
using usched::test::tree_of;

TEST_CASE("registry lists every policy in order and rejects unknown names", "[policy]") {
  const auto reg = usched::registered_policies();
  REQUIRE(reg.size() == 14);
  CHECK(reg[0].name == "cfs");
  CHECK(reg[10].name == "none");
  CHECK(reg[11].name == "steal");
  CHECK(reg[12].name == "steal-lifo");
  CHECK(reg[13].name == "eevdf");
  CHECK(usched::make_policy("steal-lifo")->traits().discipline == usched::queue_discipline::lifo);
  CHECK_FALSE(usched::make_policy("steal")->traits().discipline == usched::queue_discipline::lifo);
  for (const auto& p : reg) {
    CHECK(usched::make_policy(p.name)->name() == p.name);
    CHECK_FALSE(p.summary.empty());
  }
  CHECK_THROWS_AS(usched::make_policy("cfs-v2.6"), usched::config_error);
  CHECK_THROWS_WITH(usched::make_policy(""),
                    Catch::StartsWith("USCHED_POLICY='' is not a registered policy; choose one of: cfs, "));
}

TEST_CASE("each policy's traits: the queue discipline, when it balances, what placement reads", "[policy]") {
  using usched::queue_discipline;
  // The kernel's busy-interval multiplier, 16 since v5.10 (32 before): the
  // default of every policy.
  CHECK(usched::policy_traits{}.busy_factor == 16);

  const usched::policy_traits cfs = usched::make_policy("cfs")->traits();
  CHECK(cfs.discipline == queue_discipline::fair);
  CHECK(cfs.pulls_when_idle);
  CHECK(cfs.balances_periodically);
  CHECK(cfs.rations_newidle);
  CHECK_FALSE(cfs.places_without_snapshot);
  CHECK(cfs.wake_reads_only_llcs);
  CHECK(cfs.busy_factor == 16);
  CHECK(cfs.smt_ignores_cache_hot);
  CHECK(cfs.shortens_busy_interval);

  // v5.9 and the variants built on it: busy_factor 32, hot fibers held
  // between SMT siblings, the full busy interval.
  for (const char* name : {"cfs-v5.9", "cfs-v5.9-weight1", "cfs-v5.9-idle", "cfs-v5.9-failshift",
                           "cfs-blocked-load", "cfs-runnable-load"}) {
    CAPTURE(name);
    const usched::policy_traits t = usched::make_policy(name)->traits();
    CHECK(t.discipline == queue_discipline::fair);
    CHECK(t.balances_periodically);
    CHECK(t.busy_factor == 32);
    CHECK_FALSE(t.smt_ignores_cache_hot);
    CHECK_FALSE(t.shortens_busy_interval);
  }

  // v6.18: cfs's fixed facts around the EEVDF discipline, with v5.16's
  // newly-idle gate.
  const usched::policy_traits eevdf = usched::make_policy("eevdf")->traits();
  CHECK(eevdf.discipline == queue_discipline::eevdf);
  CHECK(eevdf.pulls_when_idle);
  CHECK(eevdf.balances_periodically);
  CHECK(eevdf.rations_newidle);
  CHECK(eevdf.newidle_gate_by_domain_cost);
  CHECK_FALSE(cfs.newidle_gate_by_domain_cost);
  CHECK_FALSE(eevdf.places_without_snapshot);
  CHECK(eevdf.wake_reads_only_llcs);
  CHECK(eevdf.busy_factor == 16);
  CHECK(eevdf.smt_ignores_cache_hot);
  CHECK(eevdf.shortens_busy_interval);

  for (const char* name : {"none", "steal", "steal-lifo"}) {
    CAPTURE(name);
    const usched::policy_traits t = usched::make_policy(name)->traits();
    CHECK(t.places_without_snapshot);
    CHECK_FALSE(t.balances_periodically);
    CHECK_FALSE(t.rations_newidle);
    CHECK_FALSE(t.wake_reads_only_llcs);
  }
  CHECK(usched::make_policy("none")->traits().discipline == queue_discipline::fifo);
  CHECK(usched::make_policy("steal")->traits().discipline == queue_discipline::fifo);
}

TEST_CASE("none places locally and returns woken fibers to their worker", "[policy][none]") {
  const auto tree = tree_of("pack:1 core:4 pu:1", 4);
  const auto snap = cpus({3, 0, 0, 0});
  const auto pol = usched::make_policy("none");
  usched::placement_request req;
  req.cpus = snap;
  req.domains = &tree;
  req.kind = usched::placement_kind::spawn;
  req.origin = 0;
  CHECK(pol->select_cpu(req) == 0);  // busy, but none does not look
  req.kind = usched::placement_kind::wake;
  req.origin = 1;
  req.prev = 3;
  CHECK(pol->select_cpu(req) == 3);  // back where it last ran, not the waker
  req.kind = usched::placement_kind::spawn;
  req.origin = -1;
  req.prev = -1;
  req.random = 6;
  CHECK(pol->select_cpu(req) == 2);  // from outside: random % workers
  CHECK_FALSE(pol->traits().pulls_when_idle);
  usched::balance_request b;
  b.sd = &tree.per_cpu[1][0];
  b.cpus = snap;
  b.this_cpu = 1;
  CHECK_FALSE(pol->find_busiest(b));
}

TEST_CASE("steal places on the waker and takes half of a victim's movable queue", "[policy][steal]") {
  const auto tree = tree_of("pack:1 core:4 pu:1", 4);
  const auto pol = usched::make_policy("steal");
  CHECK(pol->traits().pulls_when_idle);

  auto snap = cpus({0, 0, 5, 0});
  usched::placement_request req;
  req.cpus = snap;
  req.domains = &tree;
  req.kind = usched::placement_kind::wake;
  req.origin = 1;
  req.prev = 3;
  CHECK(pol->select_cpu(req) == 1);  // runs next to its waker
  req.origin = -1;
  CHECK(pol->select_cpu(req) == 3);  // woken from outside: its last worker

  const usched::sched_domain& sd = tree.per_cpu[0].back();
  REQUIRE(sd.span == std::vector<int>{0, 1, 2, 3});
  usched::balance_request b;
  b.this_cpu = 0;
  b.sd = &sd;
  b.cpus = snap;
  b.idle = usched::cpu_idle_type::newly_idle;

  // 5 queued, 1 of them pinned: 4 movable, take 2 (half).
  snap[2].nr_pinned = 1;
  for (std::uint64_t r = 0; r < 4; ++r) {
    b.random = r;
    const auto d = pol->find_busiest(b);
    REQUIRE(d);
    CHECK(d.busiest == 2);
    CHECK(d.type == usched::migration_type::migrate_task);
    CHECK(d.imbalance == 2);
  }
  // A single movable fiber can be taken: half rounded up.
  snap[2].nr_queued = 2;
  CHECK(pol->find_busiest(b).imbalance == 1);
  // Only pinned fibers queued: nothing to take.
  snap[2].nr_queued = 1;
  CHECK_FALSE(pol->find_busiest(b));

  // Two victims: the scan starts at random % span and wraps.
  snap = cpus({0, 4, 0, 6});
  b.cpus = snap;
  b.random = 2;  // starts at cpu 2: finds 3 first
  CHECK(pol->find_busiest(b).busiest == 3);
  CHECK(pol->find_busiest(b).imbalance == 3);
  b.random = 0;  // starts at 0 (self, skipped): finds 1 first
  CHECK(pol->find_busiest(b).busiest == 1);
  CHECK(pol->find_busiest(b).imbalance == 2);
}
