// The example of docs/policies/writing-a-policy.md, compiled and tested: the
// page quotes the two marked regions of this file (`// [snippet NAME]` to
// `// [end NAME]`), and tests/doc_snippets.sh fails when a quote and its
// region differ. The example policy is not in the registry (a constant
// table in policies/registry.cpp), so the test builds it with its factory
// where a registered policy's test would call make_policy("idle-first").
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "policy_snapshots.hpp"

// [snippet policy]
// idle_first.cpp: `idle-first`, placement on an idle worker of the
// placing worker's LLC, and idle workers pulling one fiber at a time from
// the longest queue of the level they balance.
#include "policy.hpp"

namespace usched {
namespace {

class idle_first_policy final : public policy {
 public:
  // FIFO queues; idle workers pull, nobody balances from the tick; a
  // wake-up reads only the origin's LLC.
  idle_first_policy() noexcept
      : policy(policy_traits{.discipline = queue_discipline::fifo,
                             .pulls_when_idle = true,
                             .wake_reads_only_llcs = true}) {}

  std::string_view name() const noexcept override { return "idle-first"; }

  int select_cpu(const placement_request& req) const override {
    if (req.origin < 0) return static_cast<int>(req.random % req.cpus.size());
    for (std::size_t cpu = 0; cpu < req.cpus.size(); ++cpu) {
      const int c = static_cast<int>(cpu);
      if (req.domains->share_llc(req.origin, c) && req.cpus[cpu].idle) return c;
    }
    return req.origin;
  }

  balance_decision find_busiest(const balance_request& req) const override {
    balance_decision d;
    unsigned most = 0;
    for (const int cpu : req.sd->span) {
      const cpu_snapshot& s = req.cpus[static_cast<std::size_t>(cpu)];
      const unsigned movable = s.nr_queued - s.nr_pinned;
      if (cpu != req.this_cpu && movable > most) {
        most = movable;
        d = {cpu, migration_type::migrate_task, 1};
      }
    }
    return d;
  }
};

}  // namespace

std::unique_ptr<policy> make_idle_first() { return std::make_unique<idle_first_policy>(); }

}  // namespace usched
// [end policy]

using usched::test::cpus;
using usched::test::tree_of;

// [snippet test]
TEST_CASE("idle-first places on an idle worker of the LLC and pulls one from the longest queue",
          "[policy][idle-first]") {
  const auto tree = tree_of("pack:2 l3:1 core:2 pu:1", 4);  // LLCs {0, 1} and {2, 3}
  auto snap = cpus({2, 0, 0, 3});
  const auto pol = usched::make_idle_first();
  CHECK(pol->name() == "idle-first");
  CHECK(pol->traits().discipline == usched::queue_discipline::fifo);
  CHECK(pol->traits().pulls_when_idle);
  CHECK_FALSE(pol->traits().balances_periodically);
  CHECK_FALSE(pol->traits().rations_newidle);
  CHECK_FALSE(pol->traits().places_without_snapshot);
  CHECK(pol->traits().wake_reads_only_llcs);

  usched::placement_request req;
  req.cpus = snap;
  req.domains = &tree;
  req.kind = usched::placement_kind::wake;
  req.origin = 0;
  req.prev = 3;
  CHECK(pol->select_cpu(req) == 1);  // idle, in the waker's LLC
  snap[1] = snap[0];
  CHECK(pol->select_cpu(req) == 0);  // worker 2 is idle, but in the other LLC
  req.origin = -1;                   // a thread outside the runtime: by chance
  req.random = 6;
  CHECK(pol->select_cpu(req) == 2);  // 6 % 4

  const usched::sched_domain& sd = tree.per_cpu[2].back();
  REQUIRE(sd.span == std::vector<int>{0, 1, 2, 3});
  usched::balance_request b;
  b.this_cpu = 2;
  b.sd = &sd;
  b.cpus = snap;
  const auto d = pol->find_busiest(b);
  REQUIRE(d);
  CHECK(d.busiest == 3);  // three queued against two
  CHECK(d.type == usched::migration_type::migrate_task);
  CHECK(d.imbalance == 1);
  snap[3].nr_pinned = 3;
  CHECK(pol->find_busiest(b).busiest == 0);  // pinned fibers are not movable
  snap[0].nr_pinned = 2;
  snap[1].nr_pinned = 2;
  CHECK_FALSE(pol->find_busiest(b));  // nothing movable: balanced

  // The default can_detach(): under migrate_task a fiber counts one.
  usched::detach_env env;
  env.type = usched::migration_type::migrate_task;
  env.imbalance = 1;
  const usched::detach_verdict v = pol->can_detach(usched::fiber_view{}, env);
  CHECK(v.take);
  CHECK(v.amount == 1);
}
// [end test]
