// The EEVDF discipline (runtime/engine/eevdf.cpp) in the simulator, on one
// CPU, where every number is exact: the fairness figure of "sched/fair:
// Commit to lag based placement", the latency a short slice buys
// (PREEMPT_SHORT), and the switches' parsing.
#include <catch2/catch.hpp>

#include <chrono>
#include <sstream>
#include <string>

#include <usched/options.hpp>
#include <usched/usched.hpp>

#include "test_support.hpp"

#include "calibration.hpp"
#include "simulator.hpp"
#include "workload.hpp"

namespace {

using usched::sim::simulator;

usched::sim::sim_config one_cpu(const std::string& policy, const std::string& features = "") {
  usched::sim::sim_config c =
      usched::sim::experiment_config("pack:1 core:1 pu:1", policy, 1, usched::sim::machine_named("ideal"));
  const auto mask = usched::parse_sched_features(features, c.options.eevdf_features);
  REQUIRE(mask);
  c.options.eevdf_features = *mask;
  return c;
}

usched::schbench::run_summary run(const usched::sim::sim_config& c, const std::string& text) {
  std::istringstream in(text);
  const usched::sim::workload w = usched::sim::parse_workload(in, "w.txt");
  simulator sim(c);
  std::ostringstream out;
  return usched::sim::run_workload(sim, w, out);
}

// A hog and a fiber that runs 2 ms and sleeps 2 ms, for 2 s: every wake-up
// of the sleeper follows a completed run of 2 ms, so its share of the CPU
// is its wake-ups x 2 ms / 2 s (to within one run: 0.1 points).
double sleeper_share(const usched::sim::sim_config& c) {
  const auto s = run(c,
                     "runtime 2s\n"
                     "fiber hog\n  run 1s\n  repeat\n"
                     "fiber sleeper\n  run 2ms\n  sleep 2ms\n  repeat\n");
  return 100.0 * static_cast<double>(s.samples) * 2e6 / 2e9;
}

}  // namespace

TEST_CASE("eevdf: a sleeper that runs half the time gets a third of the CPU beside a hog, under CFS half",
          "[sim][eevdf]") {
  // CFS's sleeper credit (GENTLE_FAIR_SLEEPERS): the 2 ms it slept are
  // within sched_latency / 2, all credited back: it runs its 2 ms at once.
  static const double cfs = sleeper_share(one_cpu("cfs"));
  CHECK(cfs == Approx(50.0).margin(3.0));
  // Lag placement: it wakes at the average and shares 1:1 while it runs,
  // 2 ms in 4: a third, whichever of the later refinements are on.
  const std::string features = GENERATE(as<std::string>{}, "", "NO_DELAY_DEQUEUE", "NO_RUN_TO_PARITY",
                                        "NO_PREEMPT_SHORT", "NO_DELAY_ZERO");
  INFO("features=" << features);
  CHECK(sleeper_share(one_cpu("eevdf", features)) == Approx(100.0 / 3).margin(3.0));
}

TEST_CASE("eevdf: a woken fiber with a shorter slice preempts a protected one (PREEMPT_SHORT)", "[sim][eevdf]") {
  // Two hogs take turns a base slice (0.7 ms on one CPU) at a time, each
  // protected from wake-ups for its turn (RUN_TO_PARITY). A fiber that
  // wakes every 5 ms for 100 us of work asks for a 100 us slice.
  const std::string hogs = "runtime 1s\nfiber hog x2\n  run 1s\n  repeat\n";
  const std::string short_one = hogs + "fiber short slice=100us\n  run 100us\n  sleep 5ms\n  repeat\n";
  const std::string base_one = hogs + "fiber short\n  run 100us\n  sleep 5ms\n  repeat\n";
  const auto p99 = [](const usched::schbench::run_summary& s) { return usched::schbench::percentile_value(s, 99.0); };
  // Its earlier deadline and PREEMPT_SHORT: it runs at once.
  CHECK(p99(run(one_cpu("eevdf"), short_one)) <= 10);
  // Without PREEMPT_SHORT it waits out the running hog's protection, up to
  // a tick past it; so does a fiber with the base slice.
  CHECK(p99(run(one_cpu("eevdf", "NO_PREEMPT_SHORT"), short_one)) >= 700);
  CHECK(p99(run(one_cpu("eevdf"), base_one)) >= 700);
}

TEST_CASE("eevdf: the switches are read as the kernel's sched_features file reads them", "[eevdf][options]") {
  const unsigned all = usched::options{}.eevdf_features;
  CHECK(usched::parse_sched_features("", all) == all);
  const auto off = usched::parse_sched_features("NO_RUN_TO_PARITY, NO_DELAY_DEQUEUE", all);
  REQUIRE(off);
  CHECK(*off == (all & ~(1u << 3) & ~(1u << 5)));
  CHECK(usched::parse_sched_features("RUN_TO_PARITY", *off) == (*off | (1u << 3)));
  CHECK_FALSE(usched::parse_sched_features("NO_SUCH_THING", all));
  CHECK(usched::sched_feature_names() ==
        "PLACE_LAG, PLACE_DEADLINE_INITIAL, PLACE_REL_DEADLINE, RUN_TO_PARITY, PREEMPT_SHORT, DELAY_DEQUEUE, "
        "DELAY_ZERO");
}

TEST_CASE("eevdf: spawn_options::slice is checked, and a fiber that asks for one runs with it", "[eevdf][runtime]") {
  usched::runtime rt(usched::test::make_options("eevdf", 1));
  usched::spawn_options bad;
  bad.slice = std::chrono::microseconds(50);
  CHECK_THROWS_WITH(rt.spawn(bad, [] {}),
                    "spawn_options::slice=50000ns is out of range: allowed 0 (the base slice) or 100000..100000000 ns");
  bad.slice = std::chrono::milliseconds(101);
  CHECK_THROWS_WITH(rt.spawn(bad, [] {}), Catch::Contains("spawn_options::slice=101000000ns is out of range"));
  // A short-slice fiber and a base-slice one both run to completion, on
  // one worker, with yields in between.
  const int sum = rt.run([] {
    usched::spawn_options quick;
    quick.slice = std::chrono::microseconds(100);
    auto a = usched::spawn(quick, [] {
      for (int i = 0; i < 100; ++i) usched::this_fiber::yield();
      return 1;
    });
    auto b = usched::spawn([] {
      for (int i = 0; i < 100; ++i) usched::this_fiber::yield();
      return 2;
    });
    return a.join() + b.join();
  });
  CHECK(sum == 3);
}
