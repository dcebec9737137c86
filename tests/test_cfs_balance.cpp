// The CFS balancer (policies/cfs_balance.hpp) from hand-built snapshots: the
// groups of seeds/003's dump, the seeds/000 scenario under v5.9, v5.10 and
// the three candidates, the local x busiest decision table cell by cell,
// find_busiest_queue per migration type, the detach rules and NUMA's
// tolerated imbalance. No threads, no clock.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "cfs_balance.hpp"
#include "cfs_family.hpp"
#include "cfs_features.hpp"
#include "domains.hpp"
#include "policy.hpp"
#include "topology.hpp"

namespace Catch {
template <>
struct StringMaker<usched::cfs::lb_imbalance> {
  // The kernel's name of a migration type, for failure messages.
  static const char* name_of(usched::migration_type type) {
    switch (type) {
      case usched::migration_type::migrate_load: return "migrate_load";
      case usched::migration_type::migrate_util: return "migrate_util";
      case usched::migration_type::migrate_task: return "migrate_task";
      case usched::migration_type::migrate_misfit: return "migrate_misfit";
    }
    return "?";
  }
  static std::string convert(const usched::cfs::lb_imbalance& x) {
    return std::string(name_of(x.type)) + "(" + std::to_string(x.imbalance) + ")";
  }
};
}  // namespace Catch

namespace {

namespace cfs = usched::cfs;
using usched::balance_request;
using usched::capacity_scale;
using usched::cfs_features;
using usched::cpu_idle_type;
using usched::cpu_snapshot;
using usched::detach_env;
using usched::fiber_view;
using usched::group_type;
using usched::migration_type;
using usched::sched_domain;
using usched::sched_group;
using cfs::lb_imbalance;
using cfs::sd_lb_stats;
using cfs::sg_lb_stats;

usched::domain_tree tree_of(const char* synthetic, unsigned workers) {
  const auto topo = usched::detail::topology::load(synthetic);
  return usched::build_domains(topo.place_workers(workers, usched::worker_unit::pu));
}

// A domain built by hand: `groups` are worker lists, in ascending order of
// first worker as build_domains() makes them.
sched_domain domain_of(unsigned flags, std::vector<std::vector<int>> groups,
                       unsigned imbalance_pct = 117) {
  sched_domain sd;
  sd.flags = flags;
  sd.imbalance_pct = imbalance_pct;
  std::vector<int> span;
  std::vector<sched_group> made;
  for (auto& cpus : groups) {
    sched_group g;
    g.capacity = cpus.size() * capacity_scale;
    span.insert(span.end(), cpus.begin(), cpus.end());
    g.cpus = std::move(cpus);
    made.push_back(std::move(g));
  }
  std::sort(span.begin(), span.end());
  sd.span = std::move(span);
  sd.groups = std::move(made);
  return sd;
}

// A worker running `nr` fibers that keep it fully busy: util at capacity,
// runnable and load of one full fiber each.
cpu_snapshot busy(unsigned nr, unsigned long util = capacity_scale) {
  cpu_snapshot s;
  s.nr_running = nr;
  s.nr_queued = nr > 0 ? nr - 1 : 0;
  s.idle = nr == 0;
  s.util_avg = util;
  s.runnable_avg = nr * capacity_scale;
  s.runnable_load = nr * capacity_scale;
  s.load_avg = nr * capacity_scale;
  return s;
}

// A worker that ran out of fibers; its util (and blocked load) still decays.
cpu_snapshot idle_cpu(unsigned long util = 0) {
  cpu_snapshot s;
  s.util_avg = util;
  s.load_avg = util;
  return s;
}

balance_request request(const sched_domain& sd, const std::vector<cpu_snapshot>& cpus, int this_cpu,
                        cpu_idle_type idle, bool prefer_sibling) {
  balance_request req;
  req.sd = &sd;
  req.cpus = cpus;
  req.this_cpu = this_cpu;
  req.idle = idle;
  req.prefer_sibling = prefer_sibling;
  return req;
}

// The variant Chris Mason measured (seeds/000): v5.9, or v5.10-rc1, before
// the LLC fix, here without v5.9's idlest-group util tie-break.
cfs_features v5_9() {
  return usched::with(usched::cfs_v5_9_features(), &cfs_features::idlest_util_tiebreak, false);
}

// The seeds/003 dump prints PELT values divided by 1024 with three decimals.
constexpr unsigned long x1024(double printed) {
  return static_cast<unsigned long>(printed * 1024 + 0.5);
}

// A group entity's load on its parent when the child cfs_rq's runnable load
// is what propagates (Tejun's patch): the entity's weight times the share of
// the child's weight that is runnable.
constexpr unsigned long propagated(double se_weight, double child_runnable, double child_weight) {
  return x1024(se_weight) * x1024(child_runnable) / x1024(child_weight);
}

}  // namespace

TEST_CASE("seed 003: the dump's groups A and B, by runnable load and by load with blocked",
          "[cfs]") {
  // Tejun's newly-idle balance on CPU 28 (32 CPUs, SMT pairs n and n+16,
  // gcap 1.150 per pair). Workers are indexed by CPU number. Per CPU:
  // runnable_load is the root's runnable load had the child's runnable load
  // propagated (what the balancer should see); load_avg is the root's r= as
  // dumped under Vincent's load_avg propagation, which leaks the child's
  // blocked load (what it saw: its grp= and avg= lines). util is u= capped
  // at the SMT thread's capacity, which reproduces gutil.
  constexpr unsigned long thread_capacity = x1024(1.150) / 2;
  std::vector<cpu_snapshot> cpus(32, idle_cpu());
  for (auto& c : cpus) {
    c.capacity = thread_capacity;
  }
  auto set = [&](int cpu, unsigned nr, unsigned long runnable_load, unsigned long load_avg,
                 double util) {
    cpu_snapshot& c = cpus[static_cast<std::size_t>(cpu)];
    c = busy(nr, std::min(x1024(util), thread_capacity));
    c.capacity = thread_capacity;
    c.runnable_load = runnable_load;
    c.load_avg = load_avg;
  };
  // Group A: CPU017 runs two schbench threads.
  set(1, 1, propagated(5.744, 0.527, 1.000), x1024(3.067), 0.520);
  set(17, 2, propagated(10.653, 0.988, 2.000), x1024(5.270), 0.973);
  // Group B: one thread each; Q014-asdf has l=1.004 but r=0.492 (blocked).
  set(14, 1, propagated(5.605, 0.492, 1.000), x1024(5.774), 0.970);
  set(30, 1, propagated(5.758, 0.558, 1.000), x1024(3.044), 0.541);
  // The destination's core: CPU28 just went idle, its sibling runs one.
  set(12, 1, x1024(1.0), x1024(1.0), 1.0);

  const sched_domain sd = domain_of(usched::SD_SHARE_PKG_RESOURCES, {{1, 17}, {12, 28}, {14, 30}});
  constexpr int group_a = 0;
  constexpr int local_group = 1;
  constexpr int group_b = 2;
  const balance_request req = request(sd, cpus, 28, cpu_idle_type::newly_idle, true);
  const unsigned pct = sd.imbalance_pct;

  cfs_features runnable_only;
  cfs_features blocked;
  blocked.blocked_load = true;

  SECTION("the statistics match the dump") {
    const sg_lb_stats a = cfs::update_sg_lb_stats(req, sd.groups[group_a], false, pct, blocked);
    const sg_lb_stats b = cfs::update_sg_lb_stats(req, sd.groups[group_b], false, pct, blocked);
    CHECK(a.group_capacity == 1178);  // gcap=1.150
    CHECK(a.group_load == 8537);      // grp=8.337
    CHECK(b.group_load == 9030);      // grp=8.819
    CHECK(a.group_util == 1121);      // gutil=1.095
    CHECK(b.group_util == 1143);      // gutil=1.116
    CHECK(a.sum_nr_running == 3);     // run=3
    CHECK(b.sum_nr_running == 2);     // run=2
    CHECK(a.idle_cpus == 0);
    CHECK(a.group_weight == 2);
    // v5.10's classification: A has more fibers than workers and util
    // above capacity, so it is overloaded (avg=7.247 exactly); B runs one
    // fiber per worker, so it is at most fully_busy, never overloaded.
    CHECK(a.type == group_type::overloaded);
    CHECK(a.avg_load == 7420);
    CHECK(b.type == group_type::fully_busy);
  }

  SECTION("as the dump typed them (both overloaded), the load metric decides") {
    // The 4.11 kernel of the dump typed both groups overloaded (type=2,
    // nocap=1) although B's run=2 is not more than its 2 CPUs; its counts
    // moved between the statistics and the dump. Taking its typing, the
    // groups compare by avg_load alone, which is what seeds/003 is about.
    auto pick = [&](const cfs_features& features) {
      auto typed = [&](int g) {
        sg_lb_stats s = cfs::update_sg_lb_stats(req, sd.groups[static_cast<std::size_t>(g)],
                                                        false, pct, features);
        s.type = group_type::overloaded;
        s.avg_load = s.group_load * capacity_scale / s.group_capacity;
        return s;
      };
      sd_lb_stats sds;
      sds.local = local_group;
      sds.local_stat = cfs::update_sg_lb_stats(req, sd.groups[local_group], true, pct, features);
      // The kernel's ring from CPU 28 meets B (CPU 30) before A (CPU 1).
      for (const int g : {group_b, group_a}) {
        const sg_lb_stats s = typed(g);
        if (s.has_stacked_cpu) ++sds.stacked_groups;
        if (cfs::update_sd_pick_busiest(req, sds, static_cast<std::size_t>(g), s)) {
          sds.busiest = g;
          sds.busiest_stat = s;
        }
      }
      return sds;
    };
    const sd_lb_stats by_runnable = pick(runnable_only);
    CHECK(by_runnable.busiest == group_a);
    CHECK(by_runnable.busiest_stat.avg_load == 7380);
    CHECK_FALSE(cfs::picked_group_without_stacked_cpu(by_runnable));

    const sd_lb_stats by_load = pick(blocked);
    CHECK(by_load.busiest == group_b);
    CHECK(by_load.busiest_stat.avg_load == 7849);  // avg=7.666 (to rounding)
    CHECK(cfs::picked_group_without_stacked_cpu(by_load));  // dbg_odd_cnt++
  }

  SECTION("v4.11's pass: cfs-runnable-load pulls from CPU017, cfs-blocked-load looks past it") {
    // Below an SMT level (SD_PREFER_SIBLING) with the local core running
    // one fiber on two workers, v4.11 types every group running two or
    // more "overloaded" (nocap=1 in the dump, B included) and ranks them by
    // avg_load: the load metric decides.
    cfs_features v4_11_runnable;
    v4_11_runnable.v4_11_balance = true;
    cfs_features v4_11_blocked = v4_11_runnable;
    v4_11_blocked.blocked_load = true;

    sd_lb_stats by_runnable = cfs::update_sd_lb_stats(req, v4_11_runnable);
    CHECK(by_runnable.busiest == group_a);
    CHECK(by_runnable.v4_11_busiest.type == cfs::v4_11_group::overloaded);
    CHECK(by_runnable.v4_11_busiest.no_capacity);
    CHECK(by_runnable.v4_11_busiest.avg_load == 7380);
    CHECK(by_runnable.v4_11_busiest.load_per_task == 2830);  // (3101 + 5390) / 3
    CHECK(by_runnable.v4_11_local.type == cfs::v4_11_group::other);
    CHECK(by_runnable.v4_11_local.avg_load == 890);
    CHECK_FALSE(cfs::picked_group_without_stacked_cpu(by_runnable));
    // A newly idle destination with room, a busiest group without: forced.
    // The domain's average is 15627 * 1024 / 3534 = 4528; A may give
    // (7380 - 4528) * 1178 / 1024 = 3280, more than a fiber (2830).
    CHECK(cfs::v4_11_find_imbalance(req, by_runnable, v4_11_runnable) ==
          lb_imbalance{migration_type::migrate_load, 3280});
    CHECK(by_runnable.avg_load == 4528);

    sd_lb_stats by_load = cfs::update_sd_lb_stats(req, v4_11_blocked);
    CHECK(by_load.busiest == group_b);
    CHECK(by_load.v4_11_busiest.avg_load == 7849);       // avg=7.666 (to rounding)
    CHECK(by_load.v4_11_busiest.load_per_task == 4515);  // pertask=4.409
    CHECK(cfs::picked_group_without_stacked_cpu(by_load));  // dbg_odd_cnt++
    // The averages give (7849 - 5386) * 1178 / 1024 = 2833, less than one
    // of B's fibers (4515): fix_small_imbalance() rounds it up to a whole
    // fiber, B being ahead of the local group by more than one.
    CHECK(cfs::v4_11_find_imbalance(req, by_load, v4_11_blocked) ==
          lb_imbalance{migration_type::migrate_load, 4515});

    // The registered pair, whole passes. Runnable load: CPU017's queued
    // thread (half its 5390) fits the 3280 and moves.
    const auto runnable = usched::make_policy("cfs-runnable-load");
    const usched::balance_decision runnable_pick = runnable->find_busiest(req);
    CHECK(runnable_pick.busiest == 17);
    CHECK(runnable_pick.type == migration_type::migrate_load);
    CHECK(runnable_pick.imbalance == 3280);
    CHECK_FALSE(runnable_pick.odd_pick);
    fiber_view queued;
    queued.load_avg = 5390 / 2;
    detach_env env;
    env.type = runnable_pick.type;
    env.imbalance = runnable_pick.imbalance;
    CHECK(runnable->can_detach(queued, env).take);
    // Load with blocked load: B's heavier worker, CPU014, runs one thread
    // and has none queued, so nothing can be detached and the stacked
    // CPU017 keeps its second thread. (The kernel skips CPU014 outright:
    // its load 5913 exceeds the imbalance and, against its SMT thread's
    // capacity_orig, its capacity is not reduced; usched's reference
    // capacity is 1024, so the dump's 589 looks reduced and CPU014 is
    // named, with the same outcome.)
    const usched::balance_decision load_pick = usched::make_policy("cfs-blocked-load")->find_busiest(req);
    CHECK(load_pick.busiest == 14);
    CHECK(load_pick.imbalance == 4515);
    CHECK(load_pick.odd_pick);
    CHECK(cpus[14].nr_running == 1);
  }

  SECTION("v4.11's fix_small_imbalance(): a whole fiber, or nothing") {
    // Two groups of two workers; busiest runs three fibers of load 1024,
    // local one.
    sd_lb_stats sds;
    sds.local_stat.group_capacity = 2048;
    sds.local_stat.sum_nr_running = 1;
    sds.busiest_stat.group_capacity = 2048;
    sds.busiest_stat.sum_nr_running = 3;
    sds.v4_11_local.avg_load = 512;
    sds.v4_11_local.load_per_task = 1024;
    sds.v4_11_busiest.avg_load = 1536;
    sds.v4_11_busiest.load_per_task = 1024;
    // Equal loads per fiber: two fibers' lead needed (imbn 2): 1536 + 512
    // >= 512 + 1024, so one fiber's load.
    CHECK(cfs::v4_11_fix_small_imbalance(sds, 100, 0) == 1024);
    // One fiber of lead only: 1024 + 512 < 768 + 1024. Throughput: now
    // (2048 * 1024 + 2048 * 768) / 1024 = 3584; moving one gives
    // 2048 * 512 + 2048 * min(1024, 768 + 512), / 1024 = 3072: no gain.
    sds.v4_11_busiest.avg_load = 1024;
    sds.v4_11_local.avg_load = 768;
    CHECK(cfs::v4_11_fix_small_imbalance(sds, 100, 0) == 100);
    // An empty local group borrows the destination's load per fiber (0:
    // idle) and keeps imbn 2: busiest's 900 + 900 >= 0 + 2 * 900, where 900
    // is one of its fibers (1800) per its capacity: move one.
    sds.local_stat.sum_nr_running = 0;
    sds.v4_11_local.avg_load = 0;
    sds.v4_11_busiest.avg_load = 900;
    sds.v4_11_busiest.load_per_task = 1800;
    CHECK(cfs::v4_11_fix_small_imbalance(sds, 0, 0) == 1800);
  }

  SECTION("v5.10's classification picks A whatever the load metric") {
    for (const cfs_features& features : {runnable_only, blocked}) {
      const sd_lb_stats sds = cfs::update_sd_lb_stats(req, features);
      CHECK(sds.local == local_group);
      CHECK(sds.busiest == group_a);
      CHECK_FALSE(cfs::picked_group_without_stacked_cpu(sds));
      // The destination's core has room and A has two more fibers: one of
      // CPU017's threads comes over.
      const usched::balance_decision d = cfs::find_busiest_group(req, features);
      CHECK(d.busiest == 17);
      CHECK(d.type == migration_type::migrate_task);
      CHECK(d.imbalance == 1);
      CHECK(d.busiest_type == group_type::overloaded);
      CHECK(d.local_type == group_type::has_spare);
    }
  }
}

TEST_CASE("seed 003: v4.11's loads: an idle worker's, the load indices and LB_BIAS", "[cfs]") {
  const cfs_features root = usched::cfs_v4_11_features();
  const cfs_features cgroup = usched::with(root, &cfs_features::blocked_load, true);

  SECTION("an idle worker's group entity is dequeued: its blocked load counts for nothing") {
    cpu_snapshot parked = idle_cpu(900);  // 900 of blocked load, decaying
    parked.runnable_load = 3;             // a rounding left on the root
    CHECK(cfs::cpu_load(parked, root) == 3);
    CHECK(cfs::cpu_load(parked, cgroup) == 3);
    cpu_snapshot running = busy(1);
    running.runnable_load = 500;
    running.load_avg = 1400;  // 900 of it blocked
    CHECK(cfs::cpu_load(running, root) == 500);
    CHECK(cfs::cpu_load(running, cgroup) == 1400);
    // A fiber queued on a worker still in its idle loop queues the entity.
    cpu_snapshot woken = parked;
    woken.nr_running = 1;
    woken.nr_queued = 1;
    CHECK(cfs::cpu_load(woken, cgroup) == 900);
  }

  SECTION("sd_init()'s indices per level and kind of pass") {
    const sched_domain smt = domain_of(usched::SD_SHARE_CPUCAPACITY | usched::SD_SHARE_PKG_RESOURCES, {{0}, {1}});
    const sched_domain llc = domain_of(usched::SD_SHARE_PKG_RESOURCES, {{0}, {1}});
    const sched_domain pkg = domain_of(0, {{0}, {1}});
    const sched_domain numa = domain_of(usched::SD_NUMA, {{0}, {1}});
    using enum usched::cpu_idle_type;
    CHECK(cfs::sd_load_idx(smt, not_idle) == 0);
    CHECK(cfs::sd_load_idx(smt, idle) == 0);
    CHECK(cfs::sd_load_idx(smt, newly_idle) == 0);
    CHECK(cfs::sd_load_idx(llc, not_idle) == 2);
    CHECK(cfs::sd_load_idx(llc, idle) == 0);
    CHECK(cfs::sd_load_idx(llc, newly_idle) == 0);
    CHECK(cfs::sd_load_idx(pkg, not_idle) == 2);
    CHECK(cfs::sd_load_idx(pkg, idle) == 1);
    CHECK(cfs::sd_load_idx(pkg, newly_idle) == 0);
    CHECK(cfs::sd_load_idx(numa, not_idle) == 3);
    CHECK(cfs::sd_load_idx(numa, idle) == 2);
    CHECK(cfs::sd_load_idx(numa, newly_idle) == 0);
  }

  SECTION("source_load() takes the lower, target_load() the higher, of index k - 1 and now") {
    cpu_snapshot c = busy(1);
    c.runnable_load = 1000;
    c.cpu_load[0] = 1200;
    c.cpu_load[1] = 3000;
    c.cpu_load[2] = 400;
    CHECK(cfs::source_load(c, 0, root) == 1000);
    CHECK(cfs::target_load(c, 0, root) == 1000);
    CHECK(cfs::source_load(c, 1, root) == 1000);
    CHECK(cfs::target_load(c, 1, root) == 1200);
    CHECK(cfs::source_load(c, 2, root) == 1000);
    CHECK(cfs::target_load(c, 2, root) == 3000);
    CHECK(cfs::source_load(c, 3, root) == 400);
    CHECK(cfs::target_load(c, 3, root) == 1000);
  }

  SECTION("a busy pass at the LLC ranks by history, an idle one by the load now") {
    // Local {0,1} runs one fiber; A {2,3} and B {4,5} run two on each
    // worker, all overloaded. Now A is the heavier (2048 a worker against
    // 1800); over the last ticks A was lighter (index 2 reads cpu_load[1]:
    // 1024), and a source counts the lower of the two.
    std::vector<cpu_snapshot> cpus(6, busy(2));
    cpus[0] = busy(1);
    cpus[1] = idle_cpu();
    for (const int a : {2, 3}) {
      cpus[static_cast<std::size_t>(a)].runnable_load = 2048;
      cpus[static_cast<std::size_t>(a)].cpu_load[1] = 1024;
    }
    for (const int b : {4, 5}) {
      cpus[static_cast<std::size_t>(b)].runnable_load = 1800;
      cpus[static_cast<std::size_t>(b)].cpu_load[1] = 1800;
    }
    // The destination's own history is high: target_load() counts it.
    cpus[0].runnable_load = 1024;
    cpus[0].cpu_load[1] = 1500;
    const sched_domain sd = domain_of(usched::SD_SHARE_PKG_RESOURCES, {{0, 1}, {2, 3}, {4, 5}});
    const balance_request busy_pass = request(sd, cpus, 0, cpu_idle_type::not_idle, true);
    const sd_lb_stats by_history = cfs::update_sd_lb_stats(busy_pass, root);
    CHECK(by_history.busiest == 2);
    CHECK(by_history.busiest_stat.group_load == 3600);
    CHECK(by_history.v4_11_busiest.avg_load == 1800);
    // The load per fiber is the load now, whatever the index.
    CHECK(by_history.busiest_stat.sum_weighted_load == 3600);
    CHECK(by_history.v4_11_busiest.load_per_task == 900);
    CHECK(by_history.local_stat.group_load == 1500);
    CHECK(by_history.local_stat.sum_weighted_load == 1024);
    CHECK(by_history.v4_11_local.avg_load == 750);
    CHECK(by_history.total_load == 1500 + 2048 + 3600);

    const balance_request idle_pass = request(sd, cpus, 1, cpu_idle_type::idle, true);
    const sd_lb_stats by_now = cfs::update_sd_lb_stats(idle_pass, root);
    CHECK(by_now.busiest == 1);
    CHECK(by_now.v4_11_busiest.avg_load == 2048);
    CHECK(by_now.local_stat.group_load == 1024);
    // Without the indices (every pass at index 0) the busy pass sees A too.
    const cfs_features no_idx = usched::with(root, &cfs_features::load_idx, false);
    CHECK(cfs::update_sd_lb_stats(busy_pass, no_idx).busiest == 1);
  }

  SECTION("an empty group with a rounding of load can be picked, and is then balanced") {
    // v4.11's update_sd_pick_busiest() ranks by type and avg_load only.
    std::vector<cpu_snapshot> cpus{busy(1), idle_cpu(), idle_cpu(), idle_cpu(), idle_cpu(), idle_cpu()};
    cpus[3].runnable_load = 2;
    const sched_domain sd = domain_of(usched::SD_SHARE_PKG_RESOURCES, {{0, 1}, {2, 3}, {4, 5}});
    const balance_request req = request(sd, cpus, 1, cpu_idle_type::newly_idle, true);
    sd_lb_stats sds = cfs::update_sd_lb_stats(req, root);
    CHECK(sds.busiest == 1);
    CHECK(sds.busiest_stat.sum_nr_running == 0);
    CHECK(sds.v4_11_busiest.avg_load == 1);
    CHECK(cfs::v4_11_find_imbalance(req, sds, root).imbalance == 0);
    CHECK_FALSE(cfs::find_busiest_group(req, root));
  }
}

TEST_CASE("seed 000: a queued hog next to a newly idle worker, single-worker LLC groups", "[cfs]") {
  // One LLC of four single-PU cores. Worker 0 just went idle after a long
  // burn (util still 1000); worker 1 runs a hog and has a second queued
  // behind it; workers 2 and 3 run one hog each.
  const auto tree = tree_of("pack:1 l3:1 core:4 pu:1", 4);
  const sched_domain& llc = tree.per_cpu[0].at(0);
  REQUIRE(llc.level == usched::sd_level::llc);
  REQUIRE(llc.has_flag(usched::SD_SHARE_PKG_RESOURCES));
  const std::vector<cpu_snapshot> cpus{idle_cpu(1000), busy(2), busy(1), busy(1)};
  const balance_request req = request(llc, cpus, 0, cpu_idle_type::newly_idle, false);
  fiber_view hog;
  hog.util_avg = 1000;
  hog.load_avg = capacity_scale;
  constexpr unsigned llc_cache_nice_tries = 1;

  auto env_of = [&](const usched::balance_decision& d, cpu_idle_type idle, unsigned failed) {
    detach_env env;
    env.type = d.type;
    env.imbalance = d.imbalance;
    env.idle = idle;
    env.nr_balance_failed = failed;
    env.cache_nice_tries = llc_cache_nice_tries;
    return env;
  };

  SECTION("v5.9: migrate_util of the idle worker's 24 spare units; the hog does not fit") {
    const auto d = cfs::find_busiest_group(req, v5_9());
    CHECK(d.busiest == 1);
    CHECK(d.type == migration_type::migrate_util);
    CHECK(d.imbalance == 24);
    CHECK(d.busiest_type == group_type::overloaded);
    CHECK(d.local_type == group_type::has_spare);
    CHECK_FALSE(cfs::can_detach(hog, env_of(d, cpu_idle_type::newly_idle, 0), v5_9()).take);
  }
  SECTION("v5.10 with the fix: migrate_task, one fiber, and it is taken") {
    const cfs_features cfs;
    const auto d = cfs::find_busiest_group(req, cfs);
    CHECK(d.busiest == 1);
    CHECK(d.type == migration_type::migrate_task);
    CHECK(d.imbalance == 1);
    const auto v = cfs::can_detach(hog, env_of(d, cpu_idle_type::newly_idle, 0), cfs);
    CHECK(v.take);
    CHECK(v.amount == 1);
  }
  SECTION("candidate A: single-worker groups spread by count") {
    cfs_features a = v5_9();
    a.weight1_spread = true;
    const auto d = cfs::find_busiest_group(req, a);
    CHECK(d.busiest == 1);
    CHECK(d.type == migration_type::migrate_task);
    CHECK(d.imbalance == 1);
    CHECK(cfs::can_detach(hog, env_of(d, cpu_idle_type::newly_idle, 0), a).take);
  }
  SECTION("candidate B: the hog goes once failures shift its util under the spare capacity") {
    cfs_features b = v5_9();
    b.failshift_util = true;
    const auto d = cfs::find_busiest_group(req, b);
    REQUIRE(d.type == migration_type::migrate_util);
    REQUIRE(d.imbalance == 24);
    // 1000 >> 5 = 31 > 24; 1000 >> 6 = 15.
    CHECK_FALSE(cfs::can_detach(hog, env_of(d, cpu_idle_type::idle, 5), b).take);
    const auto v = cfs::can_detach(hog, env_of(d, cpu_idle_type::idle, 6), b);
    CHECK(v.take);
    CHECK(v.amount == 1000);  // the fiber's whole util counts against the imbalance
  }
  SECTION("candidate C: an idle destination skips the util test") {
    cfs_features c = v5_9();
    c.idle_skips_util_check = true;
    const auto d = cfs::find_busiest_group(req, c);
    REQUIRE(d.type == migration_type::migrate_util);
    CHECK(cfs::can_detach(hog, env_of(d, cpu_idle_type::newly_idle, 0), c).take);
    CHECK(cfs::can_detach(hog, env_of(d, cpu_idle_type::idle, 0), c).take);
    CHECK_FALSE(cfs::can_detach(hog, env_of(d, cpu_idle_type::not_idle, 0), c).take);
  }
}

TEST_CASE("seed 000: Chris's SMT box, LLC groups are cores of two threads", "[cfs]") {
  // Four 2-thread cores in one LLC. Worker 0 just went idle (util 1000) next
  // to its busy sibling; core {2,3} runs three hogs, two on worker 2.
  const auto tree = tree_of("pack:1 l3:1 core:4 pu:2", 8);
  const auto& chain = tree.per_cpu[0];
  REQUIRE(chain.size() == 2);
  const sched_domain& smt = chain[0];
  const sched_domain& llc = chain[1];
  REQUIRE(llc.level == usched::sd_level::llc);
  const std::vector<cpu_snapshot> cpus{idle_cpu(1000), busy(1), busy(2), busy(1),
                                       busy(1),        busy(1), busy(1), busy(1)};
  // The LLC's child (SMT) prefers siblings; the SMT level has no child.
  const balance_request at_llc = request(llc, cpus, 0, cpu_idle_type::newly_idle, true);
  const balance_request at_smt = request(smt, cpus, 0, cpu_idle_type::newly_idle, false);
  fiber_view hog;
  hog.util_avg = 1000;
  hog.load_avg = capacity_scale;
  cfs_features a = v5_9();
  a.weight1_spread = true;

  auto env_of = [](const usched::balance_decision& d) {
    detach_env env;
    env.type = d.type;
    env.imbalance = d.imbalance;
    env.idle = cpu_idle_type::newly_idle;
    env.cache_nice_tries = 1;
    return env;
  };

  SECTION("the SMT level has nothing to pull: the sibling runs a single fiber") {
    for (const cfs_features& f : {v5_9(), cfs_features{}, a}) {
      CHECK_FALSE(cfs::find_busiest_group(at_smt, f));
    }
  }
  SECTION("v5.9: migrate_util 24 from worker 2; nothing moves") {
    const auto d = cfs::find_busiest_group(at_llc, v5_9());
    CHECK(d.busiest == 2);
    CHECK(d.type == migration_type::migrate_util);
    CHECK(d.imbalance == 24);
    CHECK_FALSE(cfs::can_detach(hog, env_of(d), v5_9()).take);
  }
  SECTION("candidate A does not help: the busiest group has two workers") {
    const auto d = cfs::find_busiest_group(at_llc, a);
    CHECK(d.busiest == 2);
    CHECK(d.type == migration_type::migrate_util);
    CHECK(d.imbalance == 24);
    CHECK_FALSE(cfs::can_detach(hog, env_of(d), a).take);
  }
  SECTION("v5.10 with the fix: half the fiber difference, one hog moves") {
    const auto d = cfs::find_busiest_group(at_llc, cfs_features{});
    CHECK(d.busiest == 2);
    CHECK(d.type == migration_type::migrate_task);
    CHECK(d.imbalance == 1);  // (3 - 1) / 2
    CHECK(cfs::can_detach(hog, env_of(d), cfs_features{}).take);
  }
}

namespace {

// Statistics of a group with `weight` workers, for the decision table: `nr`
// fibers, `idle` idle workers, util of the busy workers, one full load per
// fiber. avg_load is set only for overloaded groups, as update_sg_lb_stats
// does.
sg_lb_stats group_stats(group_type type, unsigned nr, unsigned idle, unsigned weight = 2) {
  sg_lb_stats s;
  s.type = type;
  s.sum_nr_running = nr;
  s.sum_h_nr_running = nr;
  s.idle_cpus = idle;
  s.group_weight = weight;
  s.group_capacity = weight * capacity_scale;
  s.group_util = (weight - idle) * capacity_scale;
  s.group_runnable = nr * capacity_scale;
  s.group_load = nr * capacity_scale;
  if (type == group_type::overloaded) {
    s.avg_load = s.group_load * capacity_scale / s.group_capacity;
  }
  if (type == group_type::misfit_task) {
    s.group_misfit_task_load = 900;
  }
  return s;
}

sg_lb_stats spare(unsigned nr, unsigned idle, unsigned weight = 2) {
  return group_stats(group_type::has_spare, nr, idle, weight);
}
sg_lb_stats fully_busy(unsigned nr, unsigned weight = 2) {
  return group_stats(group_type::fully_busy, nr, 0, weight);
}
sg_lb_stats overloaded(unsigned nr, unsigned weight = 2) {
  return group_stats(group_type::overloaded, nr, 0, weight);
}
sg_lb_stats of_type(group_type type) { return group_stats(type, 2, 0); }

// The same statistics with another group load (and avg_load to match).
sg_lb_stats with_load(sg_lb_stats s, unsigned long load) {
  s.group_load = load;
  if (s.type == group_type::overloaded) {
    s.avg_load = load * capacity_scale / s.group_capacity;
  }
  return s;
}

// Where a table cell is evaluated: the destination's state, the domain's
// flags, the child's preference and any third group's load and capacity
// (which only move the domain's average).
struct table_env {
  cpu_idle_type idle = cpu_idle_type::newly_idle;
  unsigned flags = 0;
  bool prefer_sibling = false;
  cfs_features features{};
  unsigned long other_load = 0;
  unsigned long other_capacity = 0;
};

// find_busiest_group()'s decision for local and busiest statistics built by
// hand; the domain's pct is features.wide_imbalance_pct (117) unless the
// flags make it a cache level (117 as well).
lb_imbalance decide(const sg_lb_stats& local, const sg_lb_stats& busiest,
                    const table_env& env = {}) {
  std::vector<int> local_cpus;
  std::vector<int> busiest_cpus;
  int cpu = 0;
  for (unsigned i = 0; i < local.group_weight; ++i) local_cpus.push_back(cpu++);
  for (unsigned i = 0; i < busiest.group_weight; ++i) busiest_cpus.push_back(cpu++);
  const sched_domain sd = domain_of(env.flags, {local_cpus, busiest_cpus});
  const std::vector<cpu_snapshot> cpus(static_cast<std::size_t>(cpu));
  const balance_request req = request(sd, cpus, 0, env.idle, env.prefer_sibling);
  sd_lb_stats sds;
  sds.local = 0;
  sds.busiest = 1;
  sds.prefer_sibling = env.prefer_sibling;
  sds.local_stat = local;
  sds.busiest_stat = busiest;
  sds.total_load = local.group_load + busiest.group_load + env.other_load;
  sds.total_capacity = local.group_capacity + busiest.group_capacity + env.other_capacity;
  return cfs::find_imbalance(req, sds, env.features);
}

lb_imbalance task(long n) { return {migration_type::migrate_task, n}; }
lb_imbalance util(long n) { return {migration_type::migrate_util, n}; }
lb_imbalance load(long n) { return {migration_type::migrate_load, n}; }
lb_imbalance misfit(long n) { return {migration_type::migrate_misfit, n}; }

constexpr cpu_idle_type busy_dst = cpu_idle_type::not_idle;

}  // namespace

TEST_CASE("decision table: local has_spare", "[cfs]") {
  SECTION("x has_spare: an idle destination evens idle workers") {
    CHECK(decide(spare(0, 2), spare(2, 0)) == task(1));
  }
  SECTION("x has_spare: with prefer_sibling, half the fiber difference") {
    table_env env;
    env.prefer_sibling = true;
    CHECK(decide(spare(0, 2), spare(2, 0), env) == task(1));
  }
  SECTION("x has_spare: an idle-worker difference of one is balanced") {
    CHECK(decide(spare(1, 1), spare(2, 0)).imbalance == 0);
  }
  SECTION("x fully_busy: an idle destination evens idle workers") {
    CHECK(decide(spare(0, 2), fully_busy(2)) == task(1));
  }
  SECTION("x misfit_task: one misfit fiber") {
    CHECK(decide(spare(1, 1), of_type(group_type::misfit_task)) == misfit(1));
  }
  SECTION("x asym_packing: every fiber of busiest") {
    CHECK(decide(spare(1, 1), of_type(group_type::asym_packing)) == task(2));
  }
  SECTION("x imbalanced: any one fiber") {
    CHECK(decide(spare(1, 1), of_type(group_type::imbalanced)) == task(1));
  }
  SECTION("x overloaded above the LLC: the local spare capacity, in util") {
    CHECK(decide(spare(1, 1), overloaded(4)) == util(1024));
  }
  SECTION("x overloaded inside the LLC, v5.10: fibers") {
    table_env env;
    env.flags = usched::SD_SHARE_PKG_RESOURCES;
    env.prefer_sibling = true;
    CHECK(decide(spare(1, 1), overloaded(4), env) == task(1));  // (4 - 1) / 2
  }
  SECTION("x overloaded inside the LLC, v5.9: util") {
    table_env env;
    env.flags = usched::SD_SHARE_PKG_RESOURCES;
    env.prefer_sibling = true;
    env.features = v5_9();
    CHECK(decide(spare(1, 1), overloaded(4), env) == util(1024));
  }
  SECTION("x overloaded, no spare capacity left: an idle destination takes one fiber") {
    sg_lb_stats local = spare(1, 1);
    local.group_util = local.group_capacity + 10;
    CHECK(decide(local, overloaded(4)) == task(1));
    table_env env;
    env.idle = busy_dst;
    CHECK(decide(local, overloaded(4), env) == util(0));
  }
}

TEST_CASE("decision table: local fully_busy", "[cfs]") {
  const sg_lb_stats local = fully_busy(2);
  SECTION("x has_spare: local is busier") { CHECK(decide(local, spare(1, 1)).imbalance == 0); }
  SECTION("x fully_busy: past the idle gates, busiest has no avg_load to give") {
    // Single-worker groups skip the idle-worker gate; busiest has a fiber
    // waiting, so calculate_imbalance runs and finds nothing to move.
    CHECK(decide(fully_busy(1, 1), fully_busy(2, 1)) == load(0));
    CHECK(decide(local, fully_busy(2)).imbalance == 0);
  }
  SECTION("x asym_packing") { CHECK(decide(local, of_type(group_type::asym_packing)) == task(2)); }
  SECTION("x imbalanced") { CHECK(decide(local, of_type(group_type::imbalanced)) == task(1)); }
  SECTION("x overloaded: load towards the domain's average") {
    // local avg 1024, busiest 2048, domain 1536.
    CHECK(decide(local, overloaded(4)) == load(1024));
  }
  SECTION("x overloaded: a local group loaded as much as busiest takes nothing") {
    CHECK(decide(with_load(local, 4096), overloaded(4)) == load(0));
  }
}

TEST_CASE("decision table: local imbalanced", "[cfs]") {
  const sg_lb_stats local = of_type(group_type::imbalanced);
  SECTION("x has_spare") { CHECK(decide(local, spare(1, 1)).imbalance == 0); }
  SECTION("x fully_busy") { CHECK(decide(local, fully_busy(2)).imbalance == 0); }
  SECTION("x asym_packing") { CHECK(decide(local, of_type(group_type::asym_packing)) == task(2)); }
  SECTION("x imbalanced") { CHECK(decide(local, of_type(group_type::imbalanced)) == task(1)); }
  SECTION("x overloaded") { CHECK(decide(local, overloaded(4)) == load(1024)); }
}

TEST_CASE("decision table: local overloaded", "[cfs]") {
  const sg_lb_stats local = with_load(overloaded(4), 2000);  // avg_load 1000
  SECTION("x has_spare") { CHECK(decide(local, spare(1, 1)).imbalance == 0); }
  SECTION("x fully_busy") { CHECK(decide(local, fully_busy(2)).imbalance == 0); }
  SECTION("x asym_packing") { CHECK(decide(local, of_type(group_type::asym_packing)) == task(2)); }
  SECTION("x imbalanced") { CHECK(decide(local, of_type(group_type::imbalanced)) == task(1)); }
  SECTION("x overloaded: balanced iff 100 * busiest.avg <= pct * local.avg") {
    CHECK(decide(local, with_load(overloaded(4), 2340)).imbalance == 0);  // 1170 at 117
    // 1171: domain average 1085, min(86, 85) * 2048 / 1024.
    CHECK(decide(local, with_load(overloaded(4), 2342)) == load(170));
  }
  SECTION("x overloaded: local at or above busiest") {
    CHECK(decide(local, with_load(overloaded(4), 2000)).imbalance == 0);
  }
  SECTION("x overloaded: local above the domain's average") {
    table_env env;
    env.other_capacity = 2 * capacity_scale;  // an empty third group
    CHECK(decide(local, with_load(overloaded(4), 3000), env).imbalance == 0);
  }
}

TEST_CASE("decision table: the gates for a busiest group that is not overloaded", "[cfs]") {
  SECTION("a busy destination never pulls from a non-overloaded busiest") {
    table_env env;
    env.idle = busy_dst;
    CHECK(decide(spare(0, 2), spare(2, 0), env).imbalance == 0);
    CHECK(decide(spare(0, 2), fully_busy(2), env).imbalance == 0);
    CHECK(decide(spare(0, 4, 4), fully_busy(4, 4), env).imbalance == 0);
    // ... but does pull from an overloaded one.
    CHECK(decide(spare(1, 1), overloaded(4), env) == util(1024));
  }
  SECTION("prefer_sibling forces the pull, even on a busy destination") {
    table_env env;
    env.idle = busy_dst;
    env.prefer_sibling = true;
    CHECK(decide(spare(1, 3, 4), fully_busy(4, 4), env) == task(1));  // (4 - 1) / 2
    // Not when the difference is one fiber or less.
    CHECK(decide(spare(3, 1, 4), fully_busy(4, 4), env).imbalance == 0);
  }
  SECTION("an idle destination, groups of four, needs local.idle > busiest.idle + 1") {
    CHECK(decide(spare(1, 3, 4), spare(2, 2, 4)).imbalance == 0);
    CHECK(decide(spare(0, 4, 4), spare(2, 2, 4)) == task(1));
  }
  SECTION("has_spare x has_spare halves the idle-worker difference") {
    CHECK(decide(spare(0, 4, 4), spare(3, 1, 4)) == task(1));  // (4 - 1) / 2
    CHECK(decide(spare(0, 4, 4), spare(4, 0, 4)) == task(2));  // (4 - 0) / 2
  }
  SECTION("a busiest running a single fiber has nothing waiting") {
    CHECK(decide(spare(0, 1, 1), fully_busy(1, 1)).imbalance == 0);
  }
}

TEST_CASE("the pipeline classifies and picks from snapshots", "[cfs]") {
  const sched_domain sd = domain_of(0, {{0, 1}, {2, 3}, {4, 5}});
  const cfs_features f;
  const unsigned pct = f.imbalance_pct(sd);
  REQUIRE(pct == 117);

  SECTION("group_has_capacity and group_is_overloaded at the pct margin") {
    constexpr auto v5_10 = cfs::capacity_signals::util_and_runnable;
    sg_lb_stats s = group_stats(group_type::has_spare, 3, 0);
    s.group_util = 1750;  // 2048 * 100 = 204800 > 1750 * 117 = 204750
    s.group_runnable = 1750;
    CHECK(cfs::group_has_capacity(pct, s, v5_10));
    CHECK_FALSE(cfs::group_is_overloaded(pct, s, v5_10));
    CHECK(cfs::group_classify(pct, s) == group_type::has_spare);
    s.group_util = 1751;  // 204800 < 204867
    CHECK_FALSE(cfs::group_has_capacity(pct, s, v5_10));
    CHECK(cfs::group_is_overloaded(pct, s, v5_10));
    CHECK(cfs::group_classify(pct, s) == group_type::overloaded);
    // One fiber per worker is never overloaded, only fully busy.
    s.sum_nr_running = 2;
    CHECK(cfs::group_classify(pct, s) == group_type::fully_busy);
    // Runnable pressure alone makes a group busy.
    s.group_util = 0;
    s.group_runnable = 2397;  // 2048 * 117 = 239616 < 239700
    CHECK(cfs::group_classify(pct, s) == group_type::fully_busy);
    s.sum_nr_running = 3;
    CHECK(cfs::group_classify(pct, s) == group_type::overloaded);
    // Before v5.7 (v4.11's balancer) runnable pressure counted for nothing.
    constexpr auto v4_11 = cfs::capacity_signals::util;
    CHECK(cfs::group_is_overloaded(pct, s, v5_10));
    CHECK_FALSE(cfs::group_is_overloaded(pct, s, v4_11));
    CHECK(cfs::group_has_capacity(pct, s, v4_11));
    CHECK_FALSE(cfs::group_has_capacity(pct, s, v5_10));
  }

  SECTION("update_sg_lb_stats: loads, idle workers, misfit only away from the destination") {
    std::vector<cpu_snapshot> cpus(6, idle_cpu());
    cpus[2] = busy(2);
    cpus[2].runnable_load = 1500;
    cpus[2].load_avg = 2500;  // 1000 of it blocked
    cpus[2].misfit_task_load = 700;
    cpus[3].idle = false;  // running nothing of ours, but not idle: not counted
    cpus[0].misfit_task_load = 900;
    cpus[0].nr_running = 1;
    cpus[0].idle = false;
    const balance_request req = request(sd, cpus, 0, cpu_idle_type::idle, false);
    const sg_lb_stats g = cfs::update_sg_lb_stats(req, sd.groups[1], false, pct, f);
    CHECK(g.group_load == 1500);
    CHECK(g.idle_cpus == 0);
    CHECK(g.group_misfit_task_load == 700);
    CHECK(g.type == group_type::misfit_task);
    cfs_features blocked;
    blocked.blocked_load = true;
    CHECK(cfs::update_sg_lb_stats(req, sd.groups[1], false, pct, blocked).group_load == 2500);
    const sg_lb_stats local = cfs::update_sg_lb_stats(req, sd.groups[0], true, pct, f);
    CHECK(local.group_misfit_task_load == 0);
    CHECK(local.idle_cpus == 1);
    CHECK(local.type == group_type::has_spare);
  }

  SECTION("has_spare groups: fewest idle workers, then most fibers, first of equals") {
    std::vector<cpu_snapshot> cpus{idle_cpu(), idle_cpu(), busy(1, 100), idle_cpu(),
                                   busy(1, 100), idle_cpu()};
    balance_request req = request(sd, cpus, 0, cpu_idle_type::idle, false);
    CHECK(cfs::update_sd_lb_stats(req, f).busiest == 1);  // equal: the first stays
    cpus[5] = busy(1, 100);
    req = request(sd, cpus, 0, cpu_idle_type::idle, false);
    CHECK(cfs::update_sd_lb_stats(req, f).busiest == 2);  // fewer idle workers
    cpus[3] = busy(2, 100);
    cpus[3].runnable_avg = capacity_scale;  // two small fibers, rarely runnable together
    req = request(sd, cpus, 0, cpu_idle_type::idle, false);
    const sd_lb_stats sds = cfs::update_sd_lb_stats(req, f);
    // Neither has an idle worker; {2,3} runs three fibers, {4,5} two.
    CHECK(sds.busiest == 1);
    CHECK(sds.busiest_stat.type == group_type::has_spare);
    CHECK(sds.total_load == 5 * capacity_scale);
    CHECK(sds.total_capacity == 6 * capacity_scale);
  }

  SECTION("the ring starts at the local group") {
    // Worker 4 balances: its group {4,5} comes first, then {0,1}, {2,3}.
    // Two equal has_spare groups: {0,1} is met first and stays.
    const std::vector<cpu_snapshot> cpus{busy(1, 100), idle_cpu(), busy(1, 100),
                                         idle_cpu(),   idle_cpu(), idle_cpu()};
    const balance_request req = request(sd, cpus, 4, cpu_idle_type::idle, false);
    const sd_lb_stats sds = cfs::update_sd_lb_stats(req, f);
    CHECK(sds.local == 2);
    CHECK(sds.busiest == 0);
  }

  SECTION("a misfit group is picked only by a local group with spare room and bigger workers") {
    std::vector<cpu_snapshot> cpus{idle_cpu(), idle_cpu(), busy(1, 400), busy(1, 400),
                                   busy(1), busy(1)};
    cpus[2].misfit_task_load = 400;
    cpus[2].capacity = 512;
    cpus[3].capacity = 512;
    const balance_request req = request(sd, cpus, 0, cpu_idle_type::idle, false);
    const sd_lb_stats sds = cfs::update_sd_lb_stats(req, f);
    CHECK(sds.busiest == 1);
    CHECK(sds.busiest_stat.type == group_type::misfit_task);
    const auto d = cfs::find_busiest_group(req, f);
    CHECK(d.busiest == 2);
    CHECK(d.type == migration_type::migrate_misfit);
    CHECK(d.imbalance == 1);

    // Same-sized workers: nothing to gain, the misfit group is not picked.
    cpus[2].capacity = capacity_scale;
    cpus[3].capacity = capacity_scale;
    const balance_request same = request(sd, cpus, 0, cpu_idle_type::idle, false);
    CHECK(cfs::update_sd_lb_stats(same, f).busiest_stat.type != group_type::misfit_task);

    // A local group without spare room: not picked either.
    cpus[2].capacity = 512;
    cpus[3].capacity = 512;
    cpus[0] = busy(1);
    cpus[1] = busy(1);
    const balance_request full = request(sd, cpus, 0, cpu_idle_type::idle, false);
    CHECK(cfs::update_sd_lb_stats(full, f).busiest_stat.type != group_type::misfit_task);
  }

  SECTION("no busiest without fibers, no decision without a local group") {
    const std::vector<cpu_snapshot> cpus(6, idle_cpu());
    const balance_request req = request(sd, cpus, 0, cpu_idle_type::idle, false);
    CHECK(cfs::update_sd_lb_stats(req, f).busiest == -1);
    CHECK_FALSE(cfs::find_busiest_group(req, f));
    const std::vector<cpu_snapshot> eight{busy(3), busy(3), busy(3), busy(3),
                                          busy(3), busy(3), idle_cpu(), idle_cpu()};
    const usched::balance_decision outside =
        cfs::find_busiest_group(request(sd, eight, 7, cpu_idle_type::idle, false), f);
    CHECK_FALSE(outside);
    CHECK(outside.busiest == -1);
  }
}

TEST_CASE("find_busiest_queue per migration type", "[cfs]") {
  const sched_domain sd = domain_of(0, {{0}, {1, 2, 3, 4}});
  const sched_group& group = sd.groups[1];
  const cfs_features f;
  std::vector<cpu_snapshot> cpus(5, idle_cpu());
  auto fbq = [&](migration_type type, long imbalance) {
    return cfs::find_busiest_queue(request(sd, cpus, 0, cpu_idle_type::idle, false), group,
                                           type, imbalance, f);
  };

  SECTION("migrate_task: the first worker with the most fibers") {
    cpus[1] = busy(1);
    cpus[2] = busy(3);
    cpus[3] = busy(3);
    cpus[4] = busy(2);
    CHECK(fbq(migration_type::migrate_task, 1) == 2);
  }
  SECTION("migrate_util: the highest util among workers with a fiber waiting") {
    cpus[1] = busy(1, 1024);  // one fiber: detaching would fail
    cpus[2] = busy(2, 700);
    cpus[3] = busy(3, 900);
    cpus[4] = busy(2, 800);
    CHECK(fbq(migration_type::migrate_util, 100) == 3);
    cpus[2] = busy(1, 700);
    cpus[3] = busy(1, 900);
    cpus[4] = busy(1, 800);
    CHECK(fbq(migration_type::migrate_util, 100) == -1);
  }
  SECTION("migrate_load: the highest load per capacity") {
    cpus[1] = busy(2);
    cpus[1].runnable_load = 2048;
    cpus[2] = busy(2);
    cpus[2].runnable_load = 1800;
    cpus[2].capacity = 512;  // 1800 / 512 > 2048 / 1024
    CHECK(fbq(migration_type::migrate_load, 500) == 2);
  }
  SECTION("migrate_load: one fiber heavier than the imbalance stays, unless capacity is reduced") {
    cpus[1] = busy(2);
    cpus[1].runnable_load = 1000;
    cpus[3] = busy(1);
    cpus[3].runnable_load = 5000;
    CHECK(fbq(migration_type::migrate_load, 1000) == 1);
    cpus[3].capacity = 875;  // 875 * 117 = 102375 < 102400: reduced
    CHECK(fbq(migration_type::migrate_load, 1000) == 3);
    cpus[3].capacity = 876;  // 102492: not reduced
    CHECK(fbq(migration_type::migrate_load, 1000) == 1);
    CHECK(fbq(migration_type::migrate_load, 5000) == 3);  // fits the imbalance
  }
  SECTION("migrate_misfit: the biggest misfit") {
    cpus[2] = busy(1);
    cpus[2].misfit_task_load = 300;
    cpus[3] = busy(1);
    cpus[3].misfit_task_load = 700;
    CHECK(fbq(migration_type::migrate_misfit, 1) == 3);
  }
}

TEST_CASE("can_detach: load, util, task, misfit and cache-hot rules", "[cfs]") {
  fiber_view fiber;
  fiber.load_avg = 1024;
  fiber.util_avg = 600;
  detach_env env;
  env.type = migration_type::migrate_load;
  env.imbalance = 300;
  env.idle = cpu_idle_type::idle;
  env.cache_nice_tries = 1;
  auto take = [&](const cfs_features& f, unsigned failed) {
    env.nr_balance_failed = failed;
    return cfs::can_detach(fiber, env, f).take;
  };

  SECTION("migrate_load, v5.10: the load halves with each failure") {
    const cfs_features f;
    CHECK_FALSE(take(f, 0));  // 1024 > 300
    CHECK_FALSE(take(f, 1));  // 512 > 300
    CHECK(take(f, 2));        // 256
    CHECK(cfs::can_detach(fiber, env, f).amount == 1024);
  }
  SECTION("migrate_load, v5.9: half the load, until failures exceed cache_nice_tries") {
    const cfs_features f = v5_9();
    CHECK_FALSE(take(f, 0));
    CHECK_FALSE(take(f, 1));
    CHECK(take(f, 2));
    env.cache_nice_tries = 2;  // NUMA levels
    CHECK_FALSE(take(f, 2));
    CHECK(take(f, 3));
    env.cache_nice_tries = 1;
    env.imbalance = 512;  // 1024 / 2 fits
    CHECK(take(f, 0));
  }
  SECTION("migrate_load: a fiber with no load counts one") {
    fiber.load_avg = 0;
    const auto v = cfs::can_detach(fiber, env, cfs_features{});
    CHECK(v.take);
    CHECK(v.amount == 1);
  }
  SECTION("migrate_util: the fiber's util must fit what is left") {
    env.type = migration_type::migrate_util;
    env.imbalance = 600;
    CHECK(take(cfs_features{}, 0));
    env.imbalance = 599;
    CHECK_FALSE(take(cfs_features{}, 0));
    CHECK_FALSE(take(cfs_features{}, 5));  // no failure shift without candidate B
  }
  SECTION("migrate_task counts one; migrate_misfit takes only a misfit") {
    env.type = migration_type::migrate_task;
    CHECK(cfs::can_detach(fiber, env, cfs_features{}).amount == 1);
    env.type = migration_type::migrate_misfit;
    env.imbalance = 1;
    env.src_capacity = 1024;
    CHECK_FALSE(take(cfs_features{}, 0));  // 600 fits 1024 with the 20% margin
    env.src_capacity = 700;                // 600 * 1280 > 700 * 1024
    CHECK(take(cfs_features{}, 0));
  }
  SECTION("a cache-hot fiber stays until failures exceed cache_nice_tries") {
    fiber.cache_hot = true;
    env.type = migration_type::migrate_task;
    CHECK_FALSE(take(cfs_features{}, 0));
    CHECK_FALSE(take(cfs_features{}, 1));
    CHECK(take(cfs_features{}, 2));
  }
}

TEST_CASE("NUMA: a pair of fibers may stay on its node (adjust_numa_imbalance)", "[cfs]") {
  const sched_domain numa = domain_of(usched::SD_NUMA, {{0, 1, 2, 3}, {4, 5, 6, 7}});
  std::vector<cpu_snapshot> cpus(8, idle_cpu());
  cpus[4] = busy(1);
  cpus[5] = busy(1);

  SECTION("two fibers on the busiest node: tolerated") {
    const auto req = request(numa, cpus, 0, cpu_idle_type::idle, false);
    const auto d = cfs::find_busiest_group(req, cfs_features{});
    CHECK_FALSE(d);
    CHECK(d.busiest_type == group_type::has_spare);
    cfs_features off;
    off.numa_imbalance_min = 0;
    const auto pulled = cfs::find_busiest_group(req, off);
    CHECK(pulled.busiest == 4);
    CHECK(pulled.type == migration_type::migrate_task);
    CHECK(pulled.imbalance == 1);  // (4 - 2) idle workers / 2
  }
  SECTION("three fibers: balanced as usual") {
    cpus[6] = busy(1);
    const auto req = request(numa, cpus, 0, cpu_idle_type::idle, false);
    const auto d = cfs::find_busiest_group(req, cfs_features{});
    CHECK(d.busiest == 4);
    CHECK(d.type == migration_type::migrate_task);
    CHECK(d.imbalance == 1);  // (4 - 1) idle workers / 2
  }
  SECTION("adjust_numa_imbalance itself") {
    CHECK(cfs::adjust_numa_imbalance(3, 2, 2) == 0);
    CHECK(cfs::adjust_numa_imbalance(3, 3, 2) == 3);
    CHECK(cfs::adjust_numa_imbalance(3, 1, 0) == 3);
  }
}

TEST_CASE("seed 002: v4.19's fbq_type leaves runqueues of well-placed fibers alone on NUMA levels",
          "[cfs][numa]") {
  CHECK(cfs::fbq_classify(2, 1, 1) == cfs::fbq_type::regular);
  CHECK(cfs::fbq_classify(2, 2, 1) == cfs::fbq_type::remote);
  CHECK(cfs::fbq_classify(2, 2, 2) == cfs::fbq_type::all);
  // Worker 0 balances; in the busiest group, worker 2 runs three fibers all
  // on their node (all), worker 3 two fibers away from theirs (remote).
  const sched_domain numa = domain_of(usched::SD_NUMA, {{0, 1}, {2, 3}});
  std::vector<cpu_snapshot> cpus = {idle_cpu(), idle_cpu(), busy(3), busy(2)};
  cpus[2].nr_numa_running = 3;
  cpus[2].nr_preferred_running = 3;
  cpus[3].nr_numa_running = 2;
  const balance_request req = request(numa, cpus, 0, cpu_idle_type::idle, false);
  const sched_group& group = numa.groups[1];
  cfs_features v4_19;
  v4_19.numa_v4_19 = true;
  CHECK(cfs::fbq_classify_group(req, group) == cfs::fbq_type::remote);
  // v5.10 takes the worker with the most fibers; v4.19 the remote one.
  CHECK(cfs::find_busiest_queue(req, group, migration_type::migrate_task, 1, cfs_features{}) == 2);
  CHECK(cfs::find_busiest_queue(req, group, migration_type::migrate_task, 1, v4_19, cfs::fbq_type::remote) == 3);
  CHECK(cfs::find_busiest_queue(req, group, migration_type::migrate_task, 1, v4_19, cfs::fbq_type::all) == 2);
  const usched::balance_decision d = cfs::find_busiest_group(req, v4_19);
  CHECK(d.busiest == 3);
  // Off SD_NUMA levels there are no classes.
  const sched_domain pkg = domain_of(0, {{0, 1}, {2, 3}});
  const balance_request in_pkg = request(pkg, cpus, 0, cpu_idle_type::idle, false);
  CHECK(cfs::find_busiest_queue(in_pkg, pkg.groups[1], migration_type::migrate_task, 1, v4_19,
                                cfs::fbq_type::regular) == 2);
}

TEST_CASE("seed 002: v4.19's migrate_degrades_locality() decides before cache hotness", "[cfs][numa]") {
  cfs_features v4_19;
  v4_19.numa_v4_19 = true;
  detach_env env;
  env.type = migration_type::migrate_task;
  env.imbalance = 1;
  env.idle = cpu_idle_type::idle;
  env.cache_nice_tries = 2;
  env.numa_level = true;
  env.src_node = 0;
  env.dst_node = 1;
  env.src_nr_running = 2;
  env.src_nr_preferred_running = 1;
  fiber_view home;  // prefers the source's node, cold
  home.preferred_node = 0;
  fiber_view away;  // prefers the destination's node, hot
  away.preferred_node = 1;
  away.cache_hot = true;
  CHECK(cfs::migrate_degrades_locality(home, env) == 1);
  CHECK(cfs::migrate_degrades_locality(away, env) == 0);
  CHECK_FALSE(cfs::can_detach(home, env, v4_19).take);
  CHECK(cfs::can_detach(home, env, cfs_features{}).take);
  CHECK(cfs::can_detach(away, env, v4_19).take);
  CHECK_FALSE(cfs::can_detach(away, env, cfs_features{}).take);
  // Failing long enough overrides locality as it does hotness.
  env.nr_balance_failed = 3;
  CHECK(cfs::can_detach(home, env, v4_19).take);
  env.nr_balance_failed = 0;
  // Every fiber of the source on its own node: locality has no say.
  env.src_nr_preferred_running = 2;
  CHECK(cfs::migrate_degrades_locality(home, env) == -1);
  CHECK(cfs::can_detach(home, env, v4_19).take);
  // Between two nodes it does not prefer: no say onto an idle worker, not
  // worse onto a busy one; within a node or below SD_NUMA, no say.
  fiber_view third;
  third.preferred_node = 2;
  third.cache_hot = true;
  CHECK(cfs::migrate_degrades_locality(third, env) == -1);
  CHECK_FALSE(cfs::can_detach(third, env, v4_19).take);
  env.idle = cpu_idle_type::not_idle;
  CHECK(cfs::migrate_degrades_locality(third, env) == 0);
  CHECK(cfs::can_detach(third, env, v4_19).take);
  env.numa_level = false;
  CHECK(cfs::migrate_degrades_locality(away, env) == -1);
}

// ---------------------------------------------------------- v6.x (eevdf)

TEST_CASE("build_domains: child flags, cores per group and imb_numa_nr (v5.18)", "[cfs][balance][v6]") {
  // Two NUMA nodes of two LLCs of two 2-way SMT cores.
  const auto tree = tree_of("pack:2 [numa] l3:2 core:2 pu:2", 16);
  const auto& chain = tree.per_cpu[0];
  REQUIRE(chain.size() == 4);  // SMT, LLC, PKG (the node), NUMA
  CHECK(chain[0].child_flags == 0);
  CHECK((chain[1].child_flags & usched::SD_SHARE_CPUCAPACITY) != 0);
  CHECK(std::vector<unsigned>(chain[1].group_cores.begin(), chain[1].group_cores.end()) ==
        std::vector<unsigned>{1, 1});
  CHECK(std::vector<unsigned>(chain[2].group_cores.begin(), chain[2].group_cores.end()) ==
        std::vector<unsigned>{2, 2});
  CHECK(std::vector<unsigned>(chain[3].group_cores.begin(), chain[3].group_cores.end()) ==
        std::vector<unsigned>{4, 4});
  // The first level above the LLC spans 2 LLCs: 2; the NUMA level spans
  // the first NUMA level once: 2 again.
  CHECK(chain[2].imb_numa_nr == 2);
  CHECK(chain[3].imb_numa_nr == 2);
}

TEST_CASE("adjust_numa_imbalance_v6: at most 2 while the destination stays light", "[cfs][balance][v6]") {
  CHECK(cfs::adjust_numa_imbalance_v6(2, 3, 4) == 0);
  CHECK(cfs::adjust_numa_imbalance_v6(3, 3, 4) == 3);
  CHECK(cfs::adjust_numa_imbalance_v6(2, 5, 4) == 2);
}

TEST_CASE("sibling_imbalance: fibers per core, 0 for a busy destination (v6.6)", "[cfs][balance][v6]") {
  sched_domain sd = domain_of(0, {{0, 1, 2, 3}, {4, 5}});
  sd.group_cores = std::vector<unsigned>{4, 2};
  std::vector<cpu_snapshot> cpus(6, idle_cpu());
  sd_lb_stats sds;
  sds.local = 1;
  sds.busiest = 0;
  sds.busiest_stat.sum_nr_running = 6;
  const auto req = request(sd, cpus, 4, cpu_idle_type::newly_idle, true);
  // 2 x (2 x 6 - 4 x 0) + 2 + 4 = 30, over 6 cores: 5.
  CHECK(cfs::sibling_imbalance(req, sds) == 5);
  CHECK(cfs::sibling_imbalance(request(sd, cpus, 4, cpu_idle_type::not_idle, true), sds) == 0);
  // One core's worth by the ratio, but the local group is empty: 2.
  sd.group_cores = std::vector<unsigned>{4, 1};
  sds.busiest_stat.sum_nr_running = 2;
  CHECK(cfs::sibling_imbalance(req, sds) == 2);
  // As many cores: the difference of counts.
  sd.group_cores = std::vector<unsigned>{2, 2};
  sds.busiest_stat.sum_nr_running = 5;
  sds.local_stat.sum_nr_running = 1;
  CHECK(cfs::sibling_imbalance(req, sds) == 4);
}

TEST_CASE("v6.6 prefer-sibling: a busy destination no longer forces the spread", "[cfs][balance][v6]") {
  // Local {0,1,2} runs one fiber on this_cpu 0; {3,4,5} runs one each at
  // low util: has_spare, no idle worker, three fibers against one.
  const sched_domain sd = domain_of(0, {{0, 1, 2}, {3, 4, 5}});
  std::vector<cpu_snapshot> cpus{busy(1, 300), idle_cpu(), idle_cpu(), busy(1, 300), busy(1, 300), busy(1, 300)};
  const auto busy_req = request(sd, cpus, 0, cpu_idle_type::not_idle, true);
  const auto v510 = cfs::find_busiest_group(busy_req, cfs_features{});
  CHECK(v510.busiest == 3);
  CHECK(v510.type == migration_type::migrate_task);
  CHECK(v510.imbalance == 1);
  const auto v6 = cfs::find_busiest_group(busy_req, usched::cfs_v6_features());
  CHECK(v6.busiest == -1);
  CHECK(v6.imbalance == 0);
  // Newly idle, both spread one: (3 - 1) / 2.
  const auto idle_req = request(sd, cpus, 0, cpu_idle_type::newly_idle, true);
  const auto v6_idle = cfs::find_busiest_group(idle_req, usched::cfs_v6_features());
  CHECK(v6_idle.busiest == 3);
  CHECK(v6_idle.imbalance == 1);
}

TEST_CASE("group_smt_balance: a loaded SMT core for an idle destination (v6.6)", "[cfs][balance][v6]") {
  // An LLC of three 2-way cores; this_cpu 0's core idles.
  sched_domain sd = domain_of(usched::SD_SHARE_PKG_RESOURCES, {{0, 1}, {2, 3}, {4, 5}});
  sd.child_flags = usched::SD_SHARE_CPUCAPACITY | usched::SD_SHARE_PKG_RESOURCES;
  std::vector<cpu_snapshot> cpus{idle_cpu(), idle_cpu(), busy(2, 500), idle_cpu(), busy(1, 300), busy(1, 300)};
  const cfs_features v6 = usched::cfs_v6_features();
  const auto req = request(sd, cpus, 0, cpu_idle_type::idle, true);
  const sg_lb_stats core1 = cfs::update_sg_lb_stats(req, sd.groups[1], false, 117, v6);
  CHECK(core1.type == group_type::has_spare);
  CHECK(core1.smt_balance);
  CHECK(cfs::busy_rank(core1) == 5);  // between misfit_task (4) and asym_packing (6)
  CHECK_FALSE(cfs::update_sg_lb_stats(req, sd.groups[1], false, 117, cfs_features{}).smt_balance);
  CHECK_FALSE(cfs::update_sg_lb_stats(req, sd.groups[0], true, 117, v6).smt_balance);
  const auto busy_req = request(sd, cpus, 0, cpu_idle_type::not_idle, true);
  CHECK_FALSE(cfs::update_sg_lb_stats(busy_req, sd.groups[1], false, 117, v6).smt_balance);
  sched_domain no_smt = sd;
  no_smt.child_flags = 0;
  CHECK_FALSE(cfs::update_sg_lb_stats(request(no_smt, cpus, 0, cpu_idle_type::idle, true), no_smt.groups[1],
                                      false, 117, v6)
                  .smt_balance);
  // Both loaded cores are smt_balance; core {4,5}, with no idle thread,
  // ranks as the busier has_spare one. One fiber moves.
  sd_lb_stats sds = cfs::update_sd_lb_stats(req, v6);
  CHECK(sds.busiest == 2);
  CHECK(cfs::find_imbalance(req, sds, v6) == lb_imbalance{migration_type::migrate_task, 1});
}

TEST_CASE("fully_busy ties: the later group wins unless the kept one is an SMT core (v6.5)",
          "[cfs][balance][v6]") {
  sched_domain sd = domain_of(0, {{0, 1}, {2, 3}, {4, 5}});
  std::vector<cpu_snapshot> cpus{busy(1), idle_cpu(), busy(1), busy(1), busy(1), busy(1)};
  const auto req = request(sd, cpus, 0, cpu_idle_type::idle, true);
  CHECK(cfs::update_sd_lb_stats(req, cfs_features{}).busiest == 1);
  CHECK(cfs::update_sd_lb_stats(req, usched::cfs_v6_features()).busiest == 2);
}

TEST_CASE("runnable boosting: find_busiest_queue's util counts waiting fibers (v6.5)", "[cfs][balance][v6]") {
  const sched_domain sd = domain_of(0, {{0, 1}, {2, 3}});
  std::vector<cpu_snapshot> cpus{idle_cpu(), idle_cpu(), busy(2, 600), busy(2, 800)};
  cpus[2].runnable_avg = 2048;
  cpus[3].runnable_avg = 900;
  const auto req = request(sd, cpus, 0, cpu_idle_type::newly_idle, true);
  CHECK(cfs::find_busiest_queue(req, sd.groups[1], migration_type::migrate_util, 500, cfs_features{}) == 3);
  CHECK(cfs::find_busiest_queue(req, sd.groups[1], migration_type::migrate_util, 500,
                                usched::cfs_v6_features()) == 2);
}

TEST_CASE("a delayed fiber moves only when load is balanced (v6.12)", "[cfs][balance][v6]") {
  fiber_view f;
  f.load_avg = 100;
  f.util_avg = 100;
  f.sched_delayed = true;
  detach_env env;
  env.type = migration_type::migrate_task;
  env.imbalance = 1;
  CHECK(cfs::can_detach(f, env, cfs_features{}).take);
  CHECK_FALSE(cfs::can_detach(f, env, usched::cfs_v6_features()).take);
  env.type = migration_type::migrate_load;
  env.imbalance = 1000;
  CHECK(cfs::can_detach(f, env, usched::cfs_v6_features()).take);
}
