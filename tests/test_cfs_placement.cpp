// test_cfs_placement.cpp: CFS wake and spawn placement (policies/cfs_placement.*)
// on hand-built snapshots of synthetic machines. Each case states the
// situation, the kernel rule it exercises and the one worker that must come
// out; the seed cases rebuild the situations argued about in seeds/002 (NUMA
// placement) and seeds/004 (idlest-group tie-break).
#include "cfs_features.hpp"
#include "cfs_family.hpp"
#include "cfs_placement.hpp"
#include "domains.hpp"
#include "policy.hpp"
#include "topology.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

using usched::cfs_features;
using usched::cpu_snapshot;
using usched::fiber_view;
using usched::numa_idle_rule;
using usched::placement_kind;
using usched::placement_request;
using usched::sched_domain;
using usched::sched_group;
using usched::detail::topology;
using usched::worker_unit;
namespace cfs = usched::cfs;

// Two NUMA nodes (one per package) of four single-PU cores, no shared cache:
// node 0 = workers 0-3, node 1 = workers 4-7. Chains: PKG, NUMA.
// Every core has a cache of its own and none is shared (an L1 each).
const char* const numa_machine = "pack:2 [numa] core:4 l1:1 pu:1";
// One package, two L3s of two 2-way SMT cores: LLC 0 = workers 0-3 (cores
// {0,1} {2,3}), LLC 1 = workers 4-7 (cores {4,5} {6,7}). Chains: SMT, LLC, PKG.
const char* const smt_machine = "pack:1 l3:2 core:2 pu:2";
// Two packages of one L3 over two 2-way SMT cores: SMT, LLC (= package), SYS.
const char* const two_package_smt = "pack:2 l3:1 core:2 pu:2";
// Three packages of two single-PU cores: PKG, SYS with groups {0,1} {2,3} {4,5}.
const char* const three_packages = "pack:3 core:2 pu:1";
// Two packages of two single-PU cores, one NUMA node: PKG, SYS.
const char* const two_packages = "pack:2 core:2 l1:1 pu:1";  // no cache shared

// The load of one nice-0 fiber that is always runnable.
constexpr unsigned long full_load = 1024;

// A fiber always runnable at `load`, preferring node `preferred` (-1 = none).
fiber_view fiber_of(unsigned long load, int preferred = -1) {
  fiber_view f;
  f.load_avg = load;
  f.util_avg = load;
  f.preferred_node = preferred;
  return f;
}

// A machine of `workers` workers on a synthetic topology, every worker idle,
// and helpers to make some busy. The snapshots carry the node of each
// worker, as the engine fills them.
struct machine {
  usched::domain_tree tree;
  std::vector<cpu_snapshot> cpus;

  machine(const char* synthetic, unsigned workers) {
    const auto places = topology::load(synthetic).place_workers(workers, worker_unit::pu);
    tree = usched::build_domains(places);
    cpus.resize(places.size());
    for (std::size_t i = 0; i < places.size(); ++i) {
      cpus[i].numa_node = places[i].numa_node;
    }
  }

  cpu_snapshot& at(int w) { return cpus.at(static_cast<std::size_t>(w)); }

  // Worker w runs one always-runnable fiber of `load` that prefers node
  // `preferred` (-1 = none); its utilization is `util`.
  machine& run(int w, unsigned long load = full_load, int preferred = -1,
               unsigned long util = full_load) {
    cpu_snapshot& s = at(w);
    s.nr_running = 1;
    s.idle = false;
    s.load_avg = load;
    s.runnable_load = load;
    s.util_avg = util;
    s.runnable_avg = full_load;
    s.curr_load = load;
    s.curr_preferred_node = preferred;
    return *this;
  }

  // Worker w is idle but still carries decaying utilization of fibers that
  // ran there (PELT blocked util).
  machine& idle_with_util(int w, unsigned long util) {
    at(w).util_avg = util;
    return *this;
  }

  const sched_domain& domain(int w, std::size_t level) const {
    return tree.per_cpu.at(static_cast<std::size_t>(w)).at(level);
  }
  const sched_domain& widest(int w) const {
    return tree.per_cpu.at(static_cast<std::size_t>(w)).back();
  }

  placement_request request(placement_kind kind, int origin, int prev, fiber_view f) const {
    placement_request req;
    req.kind = kind;
    req.origin = origin;
    req.prev = prev;
    req.fiber = f;
    req.cpus = cpus;
    req.domains = &tree;
    return req;
  }
  placement_request wake(int origin, int prev, fiber_view f = fiber_of(full_load)) const {
    return request(placement_kind::wake, origin, prev, f);
  }
  placement_request spawn(int origin, fiber_view f = fiber_of(full_load)) const {
    return request(placement_kind::spawn, origin, -1, f);
  }
};

cfs_features with_tiebreak(bool on) {
  cfs_features f;
  f.idlest_util_tiebreak = on;
  return f;
}

cfs_features with_rule(numa_idle_rule rule) {
  cfs_features f;
  f.numa_rule = rule;
  return f;
}

std::vector<int> cpus_of(const sched_group* g) {
  REQUIRE(g != nullptr);
  return g->cpus;
}

}  // namespace

// ---------------------------------------------------------------- seeds/004

TEST_CASE("seed 004: equal idle workers, the less utilized group wins only with the tie-break",
          "[cfs][placement]") {
  // Local group {0,1} is fully busy; {2,3} and {4,5} both have spare capacity
  // and one idle worker each. The busy worker of {2,3} has util 500, that of
  // {4,5} util 300, and {4,5} is met second in the ring.
  machine m(three_packages, 6);
  m.run(0).run(1).run(3, full_load, -1, 500).run(5, full_load, -1, 300);
  const placement_request req = m.spawn(0);
  const sched_domain& sys = m.widest(0);

  SECTION("with the tie-break the 300 group wins although it is listed second") {
    CHECK(cpus_of(cfs::find_idlest_group(req, sys, 0, with_tiebreak(true))) == std::vector{4, 5});
    CHECK(cfs::select_task_rq(req, with_tiebreak(true)) == 4);
  }
  SECTION("without it the first group found stays") {
    CHECK(cpus_of(cfs::find_idlest_group(req, sys, 0, with_tiebreak(false))) == std::vector{2, 3});
    CHECK(cfs::select_task_rq(req, with_tiebreak(false)) == 2);
  }
  SECTION("the registered policies: v5.9 has the tie-break, cfs-no-idlest-util is the revert") {
    for (const char* name : {"cfs", "cfs-v5.9", "cfs-v5.9-weight1", "cfs-v5.9-idle", "cfs-v5.9-failshift",
                             "cfs-numa-mel"}) {
      INFO(name);
      CHECK(usched::make_policy(name)->select_cpu(req) == 4);
    }
    // The revert, and the v4.11 pair, which predate the tie-break.
    for (const char* name : {"cfs-no-idlest-util", "cfs-blocked-load", "cfs-runnable-load"}) {
      INFO(name);
      CHECK(usched::make_policy(name)->select_cpu(req) == 2);
    }
  }
  SECTION("a less utilized group found first is kept either way") {
    m.run(3, full_load, -1, 300).run(5, full_load, -1, 500);
    const placement_request swapped = m.spawn(0);
    CHECK(cfs::select_task_rq(swapped, with_tiebreak(true)) == 2);
    CHECK(cfs::select_task_rq(swapped, with_tiebreak(false)) == 2);
  }
}

TEST_CASE("seed 004: \"first found\" follows the ring, which starts at the local group",
          "[cfs][placement]") {
  // The spawner is worker 2, so the ring is {2,3} (local, busy), {4,5}, {0,1}:
  // {4,5} (util 500) is found before {0,1} (util 300).
  machine m(three_packages, 6);
  m.run(2).run(3).run(1, full_load, -1, 300).run(5, full_load, -1, 500);
  const placement_request req = m.spawn(2);
  CHECK(cfs::select_task_rq(req, with_tiebreak(true)) == 0);
  CHECK(cfs::select_task_rq(req, with_tiebreak(false)) == 4);
}

TEST_CASE("seed 004: more idle workers beats lower utilization", "[cfs][placement]") {
  // {2,3}: one idle worker, util 100. {4,5}: two idle workers carrying 600 of
  // decaying util. The idle count decides before util is looked at.
  machine m(three_packages, 6);
  m.run(0).run(1).run(2, full_load, -1, 100).idle_with_util(4, 300).idle_with_util(5, 300);
  const placement_request req = m.spawn(0);
  for (const bool tiebreak : {true, false}) {
    CAPTURE(tiebreak);
    CHECK(cpus_of(cfs::find_idlest_group(req, m.widest(0), 0, with_tiebreak(tiebreak))) ==
          std::vector{4, 5});
    CHECK(cfs::select_task_rq(req, with_tiebreak(tiebreak)) == 4);
  }
}

TEST_CASE("seed 004: update_pick_idlest cell by cell", "[cfs][placement]") {
  using usched::group_type;
  cfs::sg_lb_stats idlest;
  idlest.type = group_type::has_spare;
  idlest.idle_cpus = 2;
  idlest.group_util = 500;
  cfs::sg_lb_stats cand = idlest;
  const cfs_features on = with_tiebreak(true);
  const cfs_features off = with_tiebreak(false);

  cand.group_util = 300;  // equal idle, lower util
  CHECK(cfs::update_pick_idlest(idlest, cand, on));
  CHECK_FALSE(cfs::update_pick_idlest(idlest, cand, off));
  cand.group_util = 500;  // equal idle, equal util: first found stays
  CHECK_FALSE(cfs::update_pick_idlest(idlest, cand, on));
  cand.idle_cpus = 3;  // more idle, more util
  cand.group_util = 900;
  CHECK(cfs::update_pick_idlest(idlest, cand, on));
  CHECK(cfs::update_pick_idlest(idlest, cand, off));
  cand.idle_cpus = 1;  // fewer idle, less util
  cand.group_util = 0;
  CHECK_FALSE(cfs::update_pick_idlest(idlest, cand, on));

  cand = idlest;  // a lower type always wins, a higher one never
  idlest.type = group_type::fully_busy;
  CHECK(cfs::update_pick_idlest(idlest, cand, on));
  CHECK_FALSE(cfs::update_pick_idlest(cand, idlest, on));

  cand.type = group_type::overloaded;  // same busy type: strictly lower avg_load
  idlest.type = group_type::overloaded;
  idlest.avg_load = 1200;
  cand.avg_load = 1100;
  CHECK(cfs::update_pick_idlest(idlest, cand, on));
  cand.avg_load = 1200;
  CHECK_FALSE(cfs::update_pick_idlest(idlest, cand, on));
}

TEST_CASE("seed 004: a spawn from outside the runtime has no local group", "[cfs][placement]") {
  // origin -1: every group of the machine-wide level is a candidate.
  machine m(two_packages, 4);
  m.run(1, full_load, -1, 500).run(3, full_load, -1, 300);
  CHECK(cfs::select_task_rq(m.spawn(-1), with_tiebreak(true)) == 2);
  CHECK(cfs::select_task_rq(m.spawn(-1), with_tiebreak(false)) == 0);
}

// ---------------------------------------------------------------- seeds/002

TEST_CASE("seed 002: the NUMA search stops at the first idle worker of the preferred node",
          "[cfs][placement]") {
  // The fiber (load 1024) prefers node 1 and would otherwise run on node 0,
  // which is busier (workers 0-2 run fibers), so moving keeps the nodes
  // balanced. Node 1: worker 4 runs a fiber with no preference (a swap worth
  // 1000), 5 and 6 are idle, 7 runs a fiber that wants node 0: a swap worth
  // 2000 that a full scan would end on.
  machine m(numa_machine, 8);
  m.run(0).run(1).run(2).run(4).run(7, full_load, 0);
  const placement_request req = m.wake(0, 0, fiber_of(full_load, 1));
  for (const numa_idle_rule rule : {numa_idle_rule::mel, numa_idle_rule::srikar}) {
    CAPTURE(static_cast<int>(rule));
    const cfs::numa_choice c = cfs::task_numa_find_cpu(req, 0, 1, with_rule(rule));
    CHECK(c.cpu == 5);
    CHECK_FALSE(c.swap);
    CHECK(c.imp == cfs::numa_score_preferred);
    // The dispatcher: worker 0 is where the wake-up would land; the NUMA
    // step replaces it with the first idle worker of node 1.
    CHECK(cfs::select_task_rq(req, with_rule(rule)) == 5);
  }
}

TEST_CASE("seed 002: a move onto an idle worker that unbalances the nodes is refused",
          "[cfs][placement]") {
  // Node 0 runs nothing but the fiber (load 1024, prefers node 1); node 1
  // runs three fibers that are at home there and has worker 7 idle. Moving
  // would make it 0 vs 4096 where it was 1024 vs 3072.
  machine m(numa_machine, 8);
  m.run(4, full_load, 1).run(5, full_load, 1).run(6, full_load, 1);
  const placement_request req = m.wake(-1, 1, fiber_of(full_load, 1));
  CHECK(cfs::load_too_imbalanced(0, 4096, 4096, 4096, 1024, 3072));
  for (const numa_idle_rule rule : {numa_idle_rule::mel, numa_idle_rule::srikar}) {
    CAPTURE(static_cast<int>(rule));
    CHECK(cfs::task_numa_find_cpu(req, 0, 1, with_rule(rule)).cpu == -1);
    CHECK(cfs::select_task_rq(req, with_rule(rule)) == 1);  // stays on its idle prev
  }

  SECTION("v4.19-rc1 takes the idle worker anyway: it beats the best found so far") {
    // maymove || imp > best_imp: nothing was found yet, and the move to the
    // preferred node improves the fiber's placement.
    cfs_features rc1 = with_rule(numa_idle_rule::v4_19_rc1);
    rc1.numa_stop_on_move = false;
    const auto choice = cfs::task_numa_find_cpu(req, 0, 1, rc1);
    CHECK(choice.cpu == 7);
    CHECK_FALSE(choice.swap);
    CHECK(cfs::select_task_rq(req, rc1) == 7);
    CHECK(usched::make_policy("cfs")->select_cpu(req) == 1);
    // The registered 4.19 pair never asks at a wake-up: the fiber stays on
    // its idle prev, and the same search runs from the tick for it running
    // there (its load then counted on node 0, 1024 vs 3072 as above).
    CHECK(usched::make_policy("cfs-numa-v4.19-rc1")->select_cpu(req) == 1);
    CHECK(usched::make_policy("cfs-numa-mel")->select_cpu(req) == 1);
    m.run(1, full_load, 1);
    const placement_request tick = m.wake(1, 1, fiber_of(full_load, 1));
    const usched::numa_migration rc1_tick = usched::make_policy("cfs-numa-v4.19-rc1")->numa_migrate(tick);
    CHECK(rc1_tick.cpu == 7);
    CHECK_FALSE(rc1_tick.swap);
    CHECK(usched::make_policy("cfs-numa-mel")->numa_migrate(tick).cpu == -1);
    // cfs keeps its wake-up placement and has no tick search.
    CHECK(usched::make_policy("cfs")->numa_migrate(tick).cpu == -1);
  }

  SECTION("with node 0 as loaded as node 1 the same move is allowed") {
    // 4096 vs 3072 before, 3072 vs 4096 after: no worse.
    m.run(0).run(1).run(2);
    const placement_request loaded = m.wake(-1, 3, fiber_of(full_load, 1));
    CHECK_FALSE(cfs::load_too_imbalanced(3072, 4096, 4096, 4096, 4096, 3072));
    CHECK(cfs::task_numa_find_cpu(loaded, 0, 1, cfs_features{}).cpu == 7);
    CHECK(cfs::select_task_rq(loaded, cfs_features{}) == 7);
  }
}

TEST_CASE("seed 002: mel and srikar differ exactly when a better swap precedes the idle worker",
          "[cfs][placement]") {
  // Node 0: worker 0 runs a fiber, plus the woken fiber (prefers node 1):
  // 2048 vs 1024, so a move keeps the balance. Node 1: worker 4 runs a fiber
  // that wants node 0 (swap worth 2000), workers 5-7 are idle (move worth 1000).
  machine m(numa_machine, 8);
  m.run(0).run(4, full_load, 0);
  const placement_request req = m.wake(0, 0, fiber_of(full_load, 1));

  const cfs::numa_choice mel = cfs::task_numa_find_cpu(req, 0, 1, with_rule(numa_idle_rule::mel));
  CHECK(mel.cpu == 5);
  CHECK_FALSE(mel.swap);
  CHECK(mel.imp == 1000);

  const cfs::numa_choice srikar =
      cfs::task_numa_find_cpu(req, 0, 1, with_rule(numa_idle_rule::srikar));
  CHECK(srikar.cpu == 4);
  CHECK(srikar.swap);
  CHECK(srikar.imp == 2000);

  // A placement cannot carry out a swap: under srikar the fiber stays where
  // the wake path put it; under mel it goes to the idle worker.
  CHECK(cfs::select_task_rq(req, with_rule(numa_idle_rule::mel)) == 5);
  CHECK(cfs::select_task_rq(req, with_rule(numa_idle_rule::srikar)) == 0);

  SECTION("a swap no better than the move: both rules take the idle worker") {
    m.run(4, full_load, -1);  // the running fiber has no preference: swap worth 1000
    const placement_request even = m.wake(0, 0, fiber_of(full_load, 1));
    for (const numa_idle_rule rule : {numa_idle_rule::mel, numa_idle_rule::srikar}) {
      CAPTURE(static_cast<int>(rule));
      const cfs::numa_choice c = cfs::task_numa_find_cpu(even, 0, 1, with_rule(rule));
      CHECK(c.cpu == 5);
      CHECK_FALSE(c.swap);
    }
  }
}

TEST_CASE("seed 002: tiny swap improvements are rejected (SMALLIMP)", "[cfs][placement]") {
  // Node 1 has no idle worker; its fibers prefer node 1 (a swap worth 0) and
  // the nodes are so unbalanced that the fiber may not simply move.
  machine m(numa_machine, 8);
  for (int w = 4; w < 8; ++w) {
    m.run(w, full_load, 1);
  }
  const placement_request req = m.wake(-1, 0, fiber_of(full_load, 1));
  CHECK(cfs::task_numa_find_cpu(req, 0, 1, cfs_features{}).cpu == -1);
  CHECK(cfs::select_task_rq(req, cfs_features{}) == 0);
}

TEST_CASE("seed 002: adjust_numa_imbalance forgives a small imbalance", "[cfs][placement]") {
  const unsigned min = cfs_features{}.numa_imbalance_min;
  REQUIRE(min == 2);
  CHECK(cfs::adjust_numa_imbalance(1, 1, min) == 0);
  CHECK(cfs::adjust_numa_imbalance(2, 2, min) == 0);  // busiest node running 2: left alone
  CHECK(cfs::adjust_numa_imbalance(1, 3, min) == 1);  // running 3: the imbalance counts
  CHECK(cfs::adjust_numa_imbalance(5, 7, min) == 5);
  CHECK(cfs::adjust_numa_imbalance(1, 1, 0) == 1);  // 0 disables the allowance
  CHECK(cfs::adjust_numa_imbalance(1, 0, 0) == 1);
}

TEST_CASE("seed 002: load_too_imbalanced compares capacity-scaled loads", "[cfs][placement]") {
  // Equal capacity: 2048|0 -> 1024|1024 improves, 1024|1024 -> 0|2048 worsens.
  CHECK_FALSE(cfs::load_too_imbalanced(1024, 1024, 4096, 4096, 2048, 0));
  CHECK(cfs::load_too_imbalanced(0, 2048, 4096, 4096, 1024, 1024));
  // Equal imbalance after the move is not "too" imbalanced.
  CHECK_FALSE(cfs::load_too_imbalanced(0, 1024, 4096, 4096, 1024, 0));
  // A destination twice as big may take twice the load: 1024/2048 vs 2048/4096.
  CHECK_FALSE(cfs::load_too_imbalanced(1024, 2048, 2048, 4096, 2048, 1024));
  CHECK(cfs::load_too_imbalanced(0, 3072, 2048, 4096, 1024, 2048));
}

// ------------------------------------------------------ select_idle_sibling

TEST_CASE("select_idle_sibling: target, then a cache-affine idle prev", "[cfs][placement]") {
  machine m(smt_machine, 8);
  SECTION("an idle target is kept") {
    CHECK(cfs::select_idle_sibling(m.wake(-1, 5), 5, 0) == 0);
  }
  SECTION("a busy target and an idle prev in its LLC: prev") {
    m.run(0).run(3);
    CHECK(cfs::select_idle_sibling(m.wake(-1, 2), 2, 0) == 2);
  }
  SECTION("an idle prev in another LLC is not taken") {
    m.run(0).run(2).run(3);
    CHECK(cfs::select_idle_sibling(m.wake(-1, 4), 4, 0) == 1);
  }
}

TEST_CASE("select_idle_sibling: a whole idle core before an idle PU with a busy sibling",
          "[cfs][placement]") {
  machine m(smt_machine, 8);
  SECTION("target 0 busy, its sibling 1 idle, core {2,3} idle: 2") {
    m.run(0);
    CHECK(cfs::select_idle_sibling(m.wake(-1, 0), 0, 0) == 2);
  }
  SECTION("the core scan wraps from target: target 2 busy, core {0,1} idle: 0") {
    m.run(2);
    CHECK(cfs::select_idle_sibling(m.wake(-1, 2), 2, 2) == 0);
  }
}

TEST_CASE("select_idle_sibling: no idle core but an idle PU", "[cfs][placement]") {
  machine m(smt_machine, 8);
  SECTION("the only idle PU") {
    m.run(0).run(2).run(3);
    CHECK(cfs::select_idle_sibling(m.wake(-1, 0), 0, 0) == 1);
  }
  SECTION("the first idle PU scanning from target, wrapping") {
    m.run(0).run(2);  // idle: 1 and 3, each beside a busy sibling
    CHECK(cfs::select_idle_sibling(m.wake(-1, 2), 2, 2) == 3);
    CHECK(cfs::select_idle_sibling(m.wake(-1, 0), 0, 0) == 1);
  }
}

TEST_CASE("select_idle_sibling: a recently used worker before the scan, and prev becomes the next candidate",
          "[cfs][placement]") {
  // v5.9/v5.10 step 4: p->recent_used_cpu, if idle, cache-affine with the
  // target, neither prev nor target; the fiber then remembers prev.
  machine m(smt_machine, 8);
  m.run(0).run(2);  // target 0 and prev 2 busy; 1 and 3 idle
  fiber_view f = fiber_of(full_load);
  f.recent_used_cpu = 3;
  placement_request req = m.wake(-1, 2, f);
  usched::placement_effects fx;
  req.effects = &fx;
  CHECK(cfs::select_idle_sibling(req, 2, 0) == 3);  // the scan from 0 would find 1
  CHECK(fx.fiber_recent_used_cpu == 2);
  SECTION("a recently used worker in another LLC is not tried") {
    f.recent_used_cpu = 5;
    placement_request other = m.wake(-1, 2, f);
    usched::placement_effects fx2;
    other.effects = &fx2;
    CHECK(cfs::select_idle_sibling(other, 2, 0) == 1);
    CHECK(fx2.fiber_recent_used_cpu == usched::placement_effects::keep_recent);
  }
}

TEST_CASE("select_idle_sibling: no idle-core scan while the LLC's has_idle_cores hint is clear",
          "[cfs][placement]") {
  machine m(smt_machine, 8);
  m.run(0);  // target 0 busy, sibling 1 idle, core {2,3} idle
  SECTION("hint set: the whole idle core") {
    CHECK(cfs::select_idle_sibling(m.wake(-1, 0), 0, 0) == 2);
  }
  SECTION("hint clear: the first idle PU, beside a busy sibling") {
    for (int c = 0; c < 4; ++c) m.at(c).llc_has_idle_cores = false;
    CHECK(cfs::select_idle_sibling(m.wake(-1, 0), 0, 0) == 1);
  }
  SECTION("a scan that finds no idle core asks for the hint to be cleared") {
    m.run(2);  // idle: 1 and 3, each beside a busy sibling
    placement_request req = m.wake(-1, 0);
    usched::placement_effects fx;
    req.effects = &fx;
    CHECK(cfs::select_idle_sibling(req, 0, 0) == 1);
    CHECK(fx.clear_idle_cores == 0);
  }
}

TEST_CASE("select_idle_cpu: SIS_PROP bounds the scan by the waker's idle average", "[cfs][placement]") {
  // nr = span x (avg_idle / 512) / (avg_scan_cost + 1), at least 4, pre-
  // decremented: with the minimum, three workers are examined.
  machine llc8("pack:1 core:8 pu:1", 8);
  for (int c = 0; c < 7; ++c) llc8.run(c);  // only worker 7 idle
  const sched_domain& llc = llc8.domain(0, 0);
  REQUIRE(llc.span.size() == 8);
  SECTION("a waker that idles briefly: 3 examined from target 0, worker 7 not reached") {
    llc8.at(0).avg_idle_ns = 10'000;     // 19 ns a worker
    llc8.at(0).avg_scan_cost_ns = 1'000;
    placement_request req = llc8.wake(0, 1);
    usched::placement_effects fx;
    req.effects = &fx;
    CHECK(cfs::select_idle_cpu(req, llc, 0) == -1);
    CHECK(fx.scanned == -1);  // cut short: the average is not updated
  }
  SECTION("a waker with long idle periods scans the whole LLC") {
    llc8.at(0).avg_idle_ns = 1'000'000;  // 1953 ns a worker: nr = 8 x 1953 / 1001 = 15
    llc8.at(0).avg_scan_cost_ns = 1'000;
    placement_request req = llc8.wake(0, 1);
    usched::placement_effects fx;
    req.effects = &fx;
    CHECK(cfs::select_idle_cpu(req, llc, 0) == 7);
    CHECK(fx.scanned == 8);
  }
}

TEST_CASE("select_idle_sibling: nothing idle in the LLC keeps target, never leaves the LLC",
          "[cfs][placement]") {
  machine m(smt_machine, 8);
  m.run(0).run(1).run(2).run(3);  // LLC 0 busy, LLC 1 (4-7) all idle
  CHECK(cfs::select_idle_sibling(m.wake(-1, 1), 1, 1) == 1);
  CHECK(cfs::select_idle_sibling(m.wake(-1, 0), 0, 3) == 3);
  // Through the dispatcher: waker 0 and prev 2 both busy in LLC 0; WA_WEIGHT
  // keeps prev and nothing idle in LLC 0 keeps it there.
  CHECK(cfs::select_task_rq(m.wake(0, 2), cfs_features{}) == 2);
}

TEST_CASE("select_idle_sibling: without a shared cache the answer is target",
          "[cfs][placement]") {
  machine m(numa_machine, 8);  // every worker's cache is its own
  m.run(0);
  CHECK(cfs::select_idle_sibling(m.wake(-1, 0), 0, 0) == 0);
}

// --------------------------------------------------------------- wake_affine

TEST_CASE("wake_affine: an idle waker sharing the cache", "[cfs][placement]") {
  machine m(smt_machine, 8);
  const sched_domain& llc = m.domain(0, 1);
  REQUIRE(llc.level == usched::sd_level::llc);
  SECTION("prev idle: prev") {
    CHECK(cfs::wake_affine(m.wake(0, 2), llc, 0, 2, cfs_features{}) == 2);
  }
  SECTION("prev busy: the waker, even where WA_WEIGHT would keep prev") {
    m.run(2, 512);  // (0 + 1024) * 100 > 512 * 108: by weight prev would win
    CHECK(cfs::wake_affine(m.wake(0, 2), llc, 0, 2, cfs_features{}) == 0);
    // and select_idle_sibling keeps the idle waker.
    CHECK(cfs::select_task_rq(m.wake(0, 2), cfs_features{}) == 0);
  }
}

TEST_CASE("wake_affine: WA_WEIGHT picks the lighter side", "[cfs][placement]") {
  // Waker 0 and prev 4 are in different LLCs; the narrowest domain holding
  // both is the package (pct 117 -> prev side biased by 108).
  machine m(smt_machine, 8);
  const sched_domain& pkg = m.domain(0, 2);
  REQUIRE(pkg.level == usched::sd_level::pkg);

  SECTION("a light waker takes the fiber") {
    m.run(0, 1024).run(4, 3072);  // (1024 + 1024) * 100 < (3072 - 1024) * 108
    CHECK(cfs::wake_affine(m.wake(0, 4), pkg, 0, 4, cfs_features{}) == 0);
  }
  SECTION("the fiber's own blocked load on prev does not count against prev") {
    // (1024 + 1024) * 100 = 204800 against (2048 - 1024) * 108 = 110592:
    // prev. Counting the sleeping fiber's load on prev (2048 * 108) would
    // have sent it to the waker.
    m.run(0, 1024).run(4, 2048);
    CHECK(cfs::wake_affine(m.wake(0, 4), pkg, 0, 4, cfs_features{}) == 4);
  }
  SECTION("a heavy waker leaves it at prev") {
    m.run(0, 2048).run(4, 1024);  // 3072 * 100 > 0 * 108
    CHECK(cfs::wake_affine(m.wake(0, 4), pkg, 0, 4, cfs_features{}) == 4);
    // ... and select_idle_sibling finds the idle core of prev's LLC.
    CHECK(cfs::select_task_rq(m.wake(0, 4), cfs_features{}) == 6);
  }
  SECTION("WA_BIAS follows the domain's imbalance_pct") {
    // A fiber of load 100: (1024 + 100) * 100 = 112400 against
    // (1124 - 100) * 108 = 110592, or * 112 = 114688.
    m.run(0, 1024).run(4, 1124);
    cfs_features v5_10;
    CHECK(cfs::wake_affine(m.wake(0, 4, fiber_of(100)), pkg, 0, 4, v5_10) == 4);
    cfs_features v5_9;
    v5_9.wide_imbalance_pct = 125;
    CHECK(cfs::wake_affine(m.wake(0, 4, fiber_of(100)), pkg, 0, 4, v5_9) == 0);
  }
}

// --------------------------------------------------------------------- spawn

TEST_CASE("spawn: a busy package sends the fiber to the idle one, onto an idle core",
          "[cfs][placement]") {
  machine m(two_package_smt, 8);
  m.run(0).run(1).run(2).run(3);  // package 0 (workers 0-3) all busy
  SECTION("package 1 all idle") {
    CHECK(cfs::select_task_rq(m.spawn(0), cfs_features{}) == 4);
  }
  SECTION("package 1 with one busy worker: the fully idle core") {
    m.run(4);
    CHECK(cfs::find_idlest_cpu(m.spawn(0), 0, cfs_features{}) == 6);
    CHECK(cfs::select_task_rq(m.spawn(0), cfs_features{}) == 6);
  }
}

TEST_CASE("spawn: across NUMA nodes a node with idle workers keeps the fiber", "[cfs][placement]") {
  machine m(numa_machine, 8);
  m.run(0);  // node 0: one busy worker, three idle; node 1 all idle
  SECTION("no preference: stay on the spawner's node, on an idle worker") {
    CHECK(cfs::select_task_rq(m.spawn(0), cfs_features{}) == 1);
  }
  SECTION("preferring node 1: go there") {
    CHECK(cfs::select_task_rq(m.spawn(0, fiber_of(full_load, 1)), cfs_features{}) == 4);
  }
}

TEST_CASE("spawn: find_idlest_group_cpu takes the first idle worker, else the least loaded",
          "[cfs][placement]") {
  machine m(two_packages, 4);
  sched_group g;
  g.cpus = {0, 1, 2, 3};
  m.run(0, 900).run(1, 300).run(2, 300).run(3, 600);
  CHECK(cfs::find_idlest_group_cpu(m.spawn(0), g, 0) == 1);
  m.at(2) = cpu_snapshot{};
  CHECK(cfs::find_idlest_group_cpu(m.spawn(0), g, 0) == 2);
}

TEST_CASE("spawn: find_idlest_group_cpu takes the shallowest idle state, then the latest idle stamp",
          "[cfs][placement]") {
  // The kernel's find_idlest_group_cpu() (v5.9/v5.10): among idle CPUs the
  // smallest exit latency wins whatever the stamps; of equal latency the
  // latest rq->idle_stamp; a busy CPU only when none is idle.
  constexpr std::int64_t parked = 5000;
  machine m("pack:1 core:6 pu:1", 6);
  sched_group g;
  g.cpus = {0, 1, 2, 3, 4, 5};
  const auto idle_in = [&](int w, std::int64_t exit_latency, std::int64_t stamp) {
    m.at(w).idle_exit_latency_ns = exit_latency;
    m.at(w).idle_stamp_ns = stamp;
  };
  m.run(0, 300);
  idle_in(1, parked, 100);
  idle_in(2, 0, 50);
  idle_in(3, 0, 80);
  idle_in(4, parked, 900);  // idled last, but parked
  idle_in(5, 0, 80);        // as deep and as recent as 3: the first found stays
  CHECK(cfs::find_idlest_group_cpu(m.spawn(0), g, 0) == 3);

  SECTION("the spinning ones busy: the most recently parked") {
    m.run(2, 600).run(3, 600).run(5, 600);
    CHECK(cfs::find_idlest_group_cpu(m.spawn(0), g, 0) == 4);
  }
  SECTION("a shallower state found later restarts the stamp comparison at its own stamp") {
    m.run(2, 600);
    idle_in(1, parked, 900);
    idle_in(3, 0, 10);
    idle_in(4, 0, 5);
    idle_in(5, 0, 20);
    CHECK(cfs::find_idlest_group_cpu(m.spawn(0), g, 0) == 5);
  }
  SECTION("between two non-zero exit latencies the smaller wins, whatever the stamps") {
    idle_in(4, parked, 900);
    idle_in(1, 1000, 1);
    m.run(2, 600).run(3, 600).run(5, 600);
    CHECK(cfs::find_idlest_group_cpu(m.spawn(0), g, 0) == 1);
  }
  SECTION("every idle worker equal: the first in index order") {
    for (const int w : {1, 2, 3, 4, 5}) idle_in(w, 0, 0);
    CHECK(cfs::find_idlest_group_cpu(m.spawn(0), g, 0) == 1);
  }
  SECTION("none idle: the least loaded, whatever stale idle state it reports") {
    m.run(1, 500).run(2, 400).run(3, 200).run(4, 200).run(5, 100);
    idle_in(3, parked, 1);
    CHECK(cfs::find_idlest_group_cpu(m.spawn(0), g, 0) == 5);
  }
}

TEST_CASE("spawn: find_idlest_cpu ends on the spinning worker of the idlest package, not the parked one",
          "[cfs][placement]") {
  // Package 0 (workers 0, 1) busy; package 1's worker 2 parked more
  // recently than worker 3 started spinning. At the package level the two
  // single-worker groups tie (one idle worker each, no util), so the
  // worker the system level chose stays.
  machine m(two_packages, 4);
  m.run(0).run(1);
  m.at(2).idle_exit_latency_ns = 5000;
  m.at(2).idle_stamp_ns = 700;
  m.at(3).idle_exit_latency_ns = 0;
  m.at(3).idle_stamp_ns = 300;
  CHECK(cfs::find_idlest_cpu(m.spawn(0), 0, cfs_features{}) == 3);
  CHECK(cfs::select_task_rq(m.spawn(0), cfs_features{}) == 3);
  m.at(3).idle_exit_latency_ns = 5000;  // both parked: the latest stamp
  CHECK(cfs::select_task_rq(m.spawn(0), cfs_features{}) == 2);
}

// ------------------------------------------------------------------ fallbacks

TEST_CASE("select_task_rq: degenerate requests still name a valid worker", "[cfs][placement]") {
  machine one("pack:1 core:1 pu:1", 1);
  CHECK(cfs::select_task_rq(one.spawn(0), cfs_features{}) == 0);
  CHECK(cfs::select_task_rq(one.spawn(-1), cfs_features{}) == 0);
  CHECK(cfs::select_task_rq(one.wake(-1, -1), cfs_features{}) == 0);

  machine m(two_packages, 4);
  placement_request no_tree = m.wake(1, 3);
  no_tree.domains = nullptr;
  CHECK(cfs::select_task_rq(no_tree, cfs_features{}) == 3);
  // A wake-up with no prev is placed as if the fiber last ran on the waker.
  m.run(2);
  CHECK(cfs::select_task_rq(m.wake(2, -1), cfs_features{}) == 2);
}

TEST_CASE("seed 002: task_numa_migrate() counts the running fiber's load once and reports a swap",
          "[cfs][placement][numa]") {
  // Worker 0 runs the fiber (prefers node 1) and worker 1 another fiber:
  // node 0 2048, node 1 1024 with worker 4 running a fiber that wants node
  // 0 (swap worth 2000) and 5-7 idle.
  machine m(numa_machine, 8);
  m.run(0, full_load, 1).run(1).run(4, full_load, 0);
  const placement_request req = m.wake(0, 0, fiber_of(full_load, 1));
  cfs_features v4_19 = with_rule(numa_idle_rule::srikar);
  v4_19.numa_v4_19 = true;
  // Counted once, a move is 1024 vs 2048 from 2048 vs 1024: balanced, and
  // the swap beats it under srikar.
  const usched::numa_migration srikar = cfs::task_numa_migrate(req, v4_19);
  CHECK(srikar.cpu == 4);
  CHECK(srikar.swap);
  v4_19.numa_rule = numa_idle_rule::mel;
  const usched::numa_migration mel = cfs::task_numa_migrate(req, v4_19);
  CHECK(mel.cpu == 5);
  CHECK_FALSE(mel.swap);

  SECTION("the running fiber's load is in its worker's already") {
    // Node 0 runs the fiber alone, node 1 one fiber at home: 1024 each,
    // and moving would make it 0 against 2048. Counted again (as a woken
    // fiber is), node 0 would look 2048 and the move balanced.
    machine lone(numa_machine, 8);
    lone.run(0, full_load, 1).run(4, full_load, 1);
    const placement_request running = lone.wake(0, 0, fiber_of(full_load, 1));
    CHECK(cfs::task_numa_migrate(running, v4_19).cpu == -1);
    CHECK(cfs::task_numa_find_cpu(running, 0, 1, v4_19, false).cpu == 5);
  }
  // Already on its node, or without one: nothing.
  CHECK(cfs::task_numa_migrate(m.wake(4, 4, fiber_of(full_load, 1)), v4_19).cpu == -1);
  CHECK(cfs::task_numa_migrate(m.wake(0, 0, fiber_of(full_load)), v4_19).cpu == -1);
  // The wake-up placement leaves the preferred node out.
  CHECK(cfs::select_task_rq(m.wake(0, 2, fiber_of(full_load, 1)), v4_19) == 2);
}

// ------------------------------------------------------ v6.x wake-up placement (eevdf)

TEST_CASE("nr_idle_scan: SIS_UTIL's scan depth from the LLC's util (v6.0)", "[cfs][placement][v6]") {
  machine m("pack:1 core:8 pu:1", 8);
  const sched_domain& llc = m.domain(0, 0);
  REQUIRE(llc.span.size() == 8);
  REQUIRE(llc.imbalance_pct == 117);
  SECTION("an idle LLC is scanned whole") { CHECK(cfs::nr_idle_scan(m.wake(-1, 0), llc) == 8); }
  SECTION("half util: 1024 - 512^2 x 117^2 / (10000 x 1024) = 674, x 8 / 1024 = 5") {
    for (int w = 0; w < 8; ++w) m.idle_with_util(w, 512);
    CHECK(cfs::nr_idle_scan(m.wake(-1, 0), llc) == 5);
  }
  SECTION("from 1024 x 100 / 117 on, nothing") {
    for (int w = 0; w < 8; ++w) m.idle_with_util(w, 876);
    CHECK(cfs::nr_idle_scan(m.wake(-1, 0), llc) == 0);
  }
}

TEST_CASE("select_idle_sibling under SIS_UTIL stops after nr_idle_scan workers", "[cfs][placement][v6]") {
  machine m("pack:1 core:8 pu:1", 8);
  for (int w = 0; w < 8; ++w) m.run(w, full_load, -1, 512);  // nr_idle_scan 5: workers 1-5 from target 0
  const cfs_features v6 = usched::cfs_v6_features();
  SECTION("an idle worker 5 is the fifth examined") {
    m.at(5) = cpu_snapshot{};
    m.at(5).util_avg = 512;
    CHECK(cfs::select_idle_sibling(m.wake(-1, 0), 0, 0, v6) == 5);
  }
  SECTION("an idle worker 6 is beyond it: target; v5.10 (no waker, SIS_PROP unbounded) finds it") {
    m.at(6) = cpu_snapshot{};
    m.at(6).util_avg = 512;
    CHECK(cfs::select_idle_sibling(m.wake(-1, 0), 0, 0, v6) == 0);
    CHECK(cfs::select_idle_sibling(m.wake(-1, 0), 0, 0) == 6);
  }
  SECTION("an LLC at 85% util is not scanned at all") {
    for (int w = 1; w < 8; ++w) m.idle_with_util(w, 876);
    m.at(3) = cpu_snapshot{};
    m.at(3).util_avg = 876;
    m.idle_with_util(0, 876);
    CHECK(cfs::nr_idle_scan(m.wake(-1, 0), m.domain(0, 0)) == 0);
    CHECK(cfs::select_idle_sibling(m.wake(-1, 0), 0, 0, v6) == 0);
  }
}

TEST_CASE("select_idle_sibling since v5.16: an idle SMT sibling of prev before the LLC scan",
          "[cfs][placement][v6]") {
  // Cores {0,1} {2,3} {4,5} {6,7} in one LLC; no idle core (hint cleared).
  machine m("pack:1 core:4 pu:2", 8);
  for (int w = 0; w < 8; ++w) m.run(w);
  for (int w = 0; w < 8; ++w) m.at(w).llc_has_idle_cores = false;
  m.at(3) = cpu_snapshot{};
  m.at(5) = cpu_snapshot{};
  m.at(3).llc_has_idle_cores = false;
  m.at(5).llc_has_idle_cores = false;
  const cfs_features merged = usched::with(cfs_features{}, &cfs_features::sis_merged_scan, true);
  // prev 4 (busy), target 0: v5.10 scans from 0 and finds 3; v5.16 takes
  // prev's sibling 5.
  CHECK(cfs::select_idle_sibling(m.wake(-1, 4), 4, 0) == 3);
  CHECK(cfs::select_idle_sibling(m.wake(-1, 4), 4, 0, merged) == 5);
}

TEST_CASE("select_idle_cpu_v6: the idle-core scan remembers the first idle worker", "[cfs][placement][v6]") {
  machine m("pack:1 core:4 pu:2", 8);
  for (int w = 0; w < 8; ++w) m.run(w);
  m.at(6) = cpu_snapshot{};  // core {6,7} half idle; no core wholly idle
  usched::placement_effects fx;
  auto req = m.wake(-1, 0);
  req.effects = &fx;
  const cfs_features merged = usched::with(cfs_features{}, &cfs_features::sis_merged_scan, true);
  CHECK(cfs::select_idle_cpu_v6(req, m.domain(0, 1), 0, true, merged) == 6);
  CHECK(fx.clear_idle_cores == 0);
  SECTION("a wholly idle core wins over the idle worker met before it") {
    m.at(2) = cpu_snapshot{};
    m.at(3) = cpu_snapshot{};
    usched::placement_effects fx2;
    auto req2 = m.wake(-1, 0);
    req2.effects = &fx2;
    // From target + 1 = 1: core {0,1} (busy), {2,3} idle.
    CHECK(cfs::select_idle_cpu_v6(req2, m.domain(0, 1), 0, true, merged) == 2);
    CHECK(fx2.clear_idle_cores == -1);
  }
}

TEST_CASE("recent_used_cpu since v5.16: prev is recorded whatever is found", "[cfs][placement][v6]") {
  machine m("pack:1 core:8 pu:1", 8);
  for (int w = 0; w < 8; ++w) m.run(w);
  m.at(6) = cpu_snapshot{};
  fiber_view f = fiber_of(full_load);
  f.recent_used_cpu = 3;  // busy: not taken
  m.at(1).avg_idle_ns = 1'000'000'000;  // the waker's SIS_PROP budget covers the LLC
  const cfs_features v6 = usched::with(cfs_features{}, &cfs_features::recent_used_cpu_prev, true);
  usched::placement_effects old_fx;
  auto req = m.wake(1, 2, f);
  req.effects = &old_fx;
  CHECK(cfs::select_task_rq(req, cfs_features{}) == 6);
  CHECK(old_fx.fiber_recent_used_cpu == usched::placement_effects::keep_recent);
  CHECK(old_fx.waker_recent_used_cpu);
  usched::placement_effects new_fx;
  req.effects = &new_fx;
  CHECK(cfs::select_task_rq(req, v6) == 6);
  CHECK(new_fx.fiber_recent_used_cpu == 2);
  CHECK_FALSE(new_fx.waker_recent_used_cpu);
}
