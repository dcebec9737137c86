// The simulated machine (sim/machine.hpp): the tick's grid and its HZ,
// timer slack, interrupts that take a running fiber's time, the idle
// states' exit latencies, and the draws' determinism. Each case sets one
// mechanism on the noise-free machine and checks the times it gives, read
// from the run's trace, to the nanosecond.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "calibration.hpp"
#include "experiments.hpp"
#include "machine.hpp"
#include "schbench_model.hpp"
#include "simulator.hpp"
#include "trace.hpp"
#include "workload.hpp"

namespace {

namespace dt = usched::detail;
using usched::sim::simulator;

constexpr std::int64_t us = 1000;
constexpr std::int64_t ms = 1000 * us;

usched::sim::sim_config config(const std::string& topology, const std::string& policy) {
  usched::sim::sim_config c;
  c.topology = topology;
  c.policy = policy;
  c.options = usched::options::kernel_experiment();
  c.options.spin = std::chrono::microseconds(0);
  return c;
}

usched::sim::workload parse(const std::string& text) {
  std::istringstream in(text);
  return usched::sim::parse_workload(in, "w.txt");
}

// The run's records, in time order.
std::vector<dt::trace_record> traced(usched::sim::sim_config c, const std::string& workload) {
  dt::tracer t(dt::tracer::config{});
  c.trace = &t;
  {
    simulator sim(c);
    std::ostringstream out;
    usched::sim::run_workload(sim, parse(workload), out);
  }
  return t.collect().records;
}

bool is_switch(const dt::trace_record& r, dt::stop_reason why) {
  return r.type == dt::trace_event::switch_to && r.fiber != 0 && r.reason == static_cast<std::uint8_t>(why);
}

}  // namespace

TEST_CASE("machine: slices end on the machine's tick grid, at its HZ", "[sim][machine]") {
  // Two hogs on one worker: each slice ends at a tick, and every tick of a
  // machine with jiffies is a multiple of 1/HZ from the grid's phase (0
  // unless drawn).
  for (const unsigned hz : {250u, 1000u}) {
    auto c = config("pack:1 core:1 pu:1", "cfs");
    c.hz = hz;
    c.jiffies = true;
    const std::int64_t tick = 1'000'000'000 / static_cast<std::int64_t>(hz);
    const auto records = traced(c, "runtime 200ms\nfiber hog x2\n  run 1s\n");
    int slices = 0;
    for (const auto& r : records) {
      if (!is_switch(r, dt::stop_reason::preempt_tick)) continue;
      ++slices;
      CHECK(r.time % tick == 0);
    }
    INFO("HZ " << hz);
    CHECK(slices >= 5);
  }
}

TEST_CASE("machine: a drawn tick phase moves the whole grid, the same for every worker", "[sim][machine]") {
  auto c = config("pack:1 core:2 pu:1", "cfs");
  c.jiffies = true;
  c.jitter.random_tick_phase = true;
  c.seed = 7;
  const auto records = traced(c, "runtime 100ms\nfiber hog x2 pin=0\n  run 1s\nfiber other x2 pin=1\n  run 1s\n");
  std::int64_t phase = -1;
  int slices = 0;
  for (const auto& r : records) {
    if (!is_switch(r, dt::stop_reason::preempt_tick)) continue;
    ++slices;
    if (phase < 0) phase = r.time % ms;
    CHECK(r.time % ms == phase);
  }
  CHECK(slices >= 10);
  CHECK(phase > 0);
}

TEST_CASE("machine: a sleep's timer fires at its deadline plus the slack, or at a running CPU's tick before", "[sim][machine]") {
  constexpr std::int64_t slack = 50 * us;
  SECTION("alone: the slack, whole") {
    auto c = config("pack:1 core:1 pu:1", "cfs");
    c.jitter.timer_slack_ns = slack;
    const auto records = traced(c, "runtime 20ms\nfiber sleeper\n  run 10us\n  sleep 1ms\n  repeat\n");
    std::int64_t blocked = -1;
    int wakes = 0;
    for (const auto& r : records) {
      if (is_switch(r, dt::stop_reason::block)) blocked = r.time;
      if (r.type == dt::trace_event::wakeup && r.reason == static_cast<std::uint8_t>(usched::wake_reason::timer)) {
        REQUIRE(blocked >= 0);
        CHECK(r.time == blocked + 1 * ms + slack);
        ++wakes;
      }
    }
    CHECK(wakes >= 10);
  }
  SECTION("beside a hog: the first tick from the deadline on, when it comes within the slack") {
    auto c = config("pack:1 core:1 pu:1", "cfs");
    c.jiffies = true;
    c.jitter.timer_slack_ns = slack;
    const auto records =
        traced(c, "runtime 50ms\nfiber hog\n  run 10s\nfiber sleeper\n  run 10us\n  sleep 980us\n  repeat\n");
    std::int64_t blocked = -1;
    int at_tick = 0;
    int wakes = 0;
    for (const auto& r : records) {
      if (is_switch(r, dt::stop_reason::block)) blocked = r.time;
      if (r.type == dt::trace_event::wakeup && r.reason == static_cast<std::uint8_t>(usched::wake_reason::timer)) {
        REQUIRE(blocked >= 0);
        const std::int64_t deadline = blocked + 980 * us;
        const std::int64_t tick = (deadline + ms - 1) / ms * ms;
        CHECK(r.time == std::min(deadline + slack, tick));
        at_tick += r.time < deadline + slack ? 1 : 0;
        ++wakes;
      }
    }
    CHECK(wakes >= 10);
    CHECK(at_tick >= 1);
  }
}

TEST_CASE("machine: interrupts take their time from the running fiber, and only on a machine that has them",
          "[sim][machine]") {
  const std::string w = "runtime 1s\nfiber hog pin=0\n  run 100ms\n";
  const auto end_of = [&](const usched::sim::sim_config& c) {
    std::int64_t end = -1;
    for (const auto& r : traced(c, w)) {
      if (is_switch(r, dt::stop_reason::exit)) end = r.time;
    }
    return end;
  };
  auto c = config("pack:1 core:1 pu:1", "none");
  const std::int64_t quiet = end_of(c);
  // The switch into the fiber, then 100 ms of CPU.
  CHECK(quiet == c.cost.switch_ns + 100 * ms);
  c.jitter.irq_per_s = 2000;
  c.jitter.irq_ns = 10 * us;
  const std::int64_t noisy = end_of(c);
  // About 200 interrupts of 10 us in the run: 2 ms, give or take the
  // Poisson spread (its standard deviation is 14 interrupts).
  CHECK(noisy - quiet > 1500 * us);
  CHECK(noisy - quiet < 2500 * us);
  CHECK(end_of(c) == noisy);
  c.seed = 2;
  CHECK(end_of(c) != noisy);
}

TEST_CASE("machine: a parked worker wakes later from a deeper idle state", "[sim][machine]") {
  // A sleeper pinned to its own worker: each timer wakes its parked worker.
  // The idle period decides the state: 2 us after a short sleep, 80 us
  // after one past the deep state's residency.
  for (const std::int64_t sleep : {200 * us, 3 * ms}) {
    auto c = config("pack:1 core:1 pu:1", "cfs");
    c.jitter.idle_states = {{"shallow", 2 * us, 0}, {"deep", 80 * us, 1 * ms}};
    const auto records = traced(c, "runtime 40ms\nfiber sleeper\n  run 10us\n  sleep " + std::to_string(sleep / us) +
                                       "us\n  repeat\n");
    const std::int64_t exit = sleep >= 1 * ms ? 80 * us : 2 * us;
    std::int64_t woken = -1;
    int runs = 0;
    for (const auto& r : records) {
      if (r.type == dt::trace_event::wakeup && r.reason == static_cast<std::uint8_t>(usched::wake_reason::timer)) {
        woken = r.time;
      } else if (r.type == dt::trace_event::switch_to && r.fiber == 0 && r.other != 0 && woken >= 0) {
        INFO("sleep " << sleep << " ns");
        CHECK(r.time - woken == c.cost.wake_parked_ns + exit);
        ++runs;
        woken = -1;
      }
    }
    CHECK(runs >= 5);
  }
}

// A sleeper pinned to its own worker, sleeping `sleep`: each timer wakes its
// parked worker; the time from each timer's wake-up to the run, in order.
std::vector<std::int64_t> parked_wakeups(const usched::sim::sim_config& c, std::int64_t sleep) {
  const auto records = traced(c, "runtime 60ms\nfiber sleeper\n  run 10us\n  sleep " + std::to_string(sleep / us) +
                                     "us\n  repeat\n");
  std::vector<std::int64_t> out;
  std::int64_t woken = -1;
  for (const auto& r : records) {
    if (r.type == dt::trace_event::wakeup && r.reason == static_cast<std::uint8_t>(usched::wake_reason::timer)) {
      woken = r.time;
    } else if (r.type == dt::trace_event::switch_to && r.fiber == 0 && r.other != 0 && woken >= 0) {
      out.push_back(r.time - woken);
      woken = -1;
    }
  }
  return out;
}

TEST_CASE("machine: a vCPU descheduled past its deepest idle state pays the host's deep C-state by its chance",
          "[sim][machine]") {
  auto c = config("pack:1 core:1 pu:1", "cfs");
  c.jitter.idle_states = {{"halt-polled", 2 * us, 0}, {"halt-descheduled", 20 * us, 1 * ms}};
  c.jitter.host_deep_p = 1;
  c.jitter.host_deep_exit_ns = 50 * us;
  // Under the residency the vCPU's thread never left its host CPU: no
  // host state. Past it, every wake-up (chance 1) pays the exit, exactly
  // (sigma 0).
  for (const std::int64_t w : parked_wakeups(c, 500 * us)) CHECK(w == c.cost.wake_parked_ns + 2 * us);
  const auto deep = parked_wakeups(c, 3 * ms);
  REQUIRE(deep.size() >= 5);
  for (const std::int64_t w : deep) CHECK(w == c.cost.wake_parked_ns + 20 * us + 50 * us);
  // A chance of 0 draws nothing: the machine's own wake-up.
  c.jitter.host_deep_p = 0;
  for (const std::int64_t w : parked_wakeups(c, 3 * ms)) CHECK(w == c.cost.wake_parked_ns + 20 * us);
}

TEST_CASE("machine: a descheduled vCPU whose host CPU went to another task waits up to the host's slice",
          "[sim][machine]") {
  auto c = config("pack:1 core:1 pu:1", "cfs");
  c.jitter.idle_states = {{"halt-polled", 2 * us, 0}, {"halt-descheduled", 20 * us, 1 * ms}};
  // So frequent that a host task has come in every 2 ms off the CPU
  // (the chance of none is e^-2000).
  c.jitter.host_preempt_per_s = 1e6;
  c.jitter.host_wait_ns = 100 * us;
  for (const std::int64_t w : parked_wakeups(c, 500 * us)) CHECK(w == c.cost.wake_parked_ns + 2 * us);
  const auto waits = parked_wakeups(c, 3 * ms);
  REQUIRE(waits.size() >= 5);
  std::vector<std::int64_t> host;
  for (const std::int64_t w : waits) {
    const std::int64_t h = w - c.cost.wake_parked_ns - 20 * us;
    CHECK(h >= 1);
    CHECK(h <= 100 * us);
    host.push_back(h);
  }
  // Uniform up to the slice: not one value.
  std::sort(host.begin(), host.end());
  CHECK(host.front() < host.back());
  // The same seed, the same waits.
  CHECK(parked_wakeups(c, 3 * ms) == waits);
}

TEST_CASE("machine: draws follow the seed; the noise-free machine draws nothing", "[sim][machine]") {
  usched::sim::noise_source a(42);
  usched::sim::noise_source b(42);
  std::vector<std::int64_t> draws;
  for (int i = 0; i < 1001; ++i) {
    const std::int64_t v = a.around(10 * us, 0.5);
    CHECK(v == b.around(10 * us, 0.5));
    CHECK(v > 0);
    CHECK(v <= 160 * us);
    draws.push_back(v);
  }
  // The median of a log-normal is its median parameter.
  std::sort(draws.begin(), draws.end());
  CHECK(draws[500] > 9 * us);
  CHECK(draws[500] < 11 * us);
  CHECK(a.around(10 * us, 0) == 10 * us);

  const auto block = [](std::uint64_t seed, const std::string& machine) {
    auto c = config("pack:1 core:4 pu:2", "cfs");
    c.seed = seed;
    usched::sim::use_machine(c, usched::sim::machine_named(machine));
    simulator sim(c);
    std::ostringstream out;
    usched::sim::run_schbench_model(
        sim, usched::schbench::parse_cli(std::vector<std::string>{"-m", "2", "-t", "4", "-r", "3", "-c", "1000", "-s", "1000"}),
        out);
    return out.str();
  };
  CHECK(block(1, "vm40") == block(1, "vm40"));
  CHECK(block(1, "vm40") != block(2, "vm40"));
}

TEST_CASE("machine: unknown machines and noise settings are one-line errors naming what is accepted",
          "[sim][machine]") {
  CHECK_THROWS_WITH(usched::sim::machine_named("vm41"),
                    "--machine 'vm41': unknown machine; accepted: ideal, vm40, arm64-8, box32, server2s, kvm16");
  usched::sim::machine m = usched::sim::machine_named("ideal");
  CHECK_THROWS_WITH(usched::sim::set_noise(m, "hz", "200"), "--noise hz=200: expected one of 100, 250, 300, 1000");
  CHECK_THROWS_WITH(usched::sim::set_noise(m, "sigma", "-1"), "--noise sigma=-1: expected a number from 0 to 2");
  CHECK_THROWS_WITH(usched::sim::set_noise(m, "jitter", "1"),
                    "--noise jitter: unknown setting; accepted: hz, sigma, irq_per_s, irq_us, steal_per_s, steal_us, "
                    "timer_slack_us, host_preempt_per_s, host_wait_us, host_deep_p, host_deep_exit_us");
  CHECK_THROWS_WITH(usched::sim::set_noise(m, "host_deep_p", "2"), "--noise host_deep_p=2: expected a number from 0 to 1");
  usched::sim::set_noise(m, "host_wait_us", "6800");
  CHECK(m.jitter.host_wait_ns == 6800 * us);
  usched::sim::set_noise(m, "hz", "250");
  CHECK(m.hz == 250);
  CHECK(m.tick_ns() == 4 * ms);
}

TEST_CASE("machine: kvm16, the 16-vCPU guest, is a kernel machine at HZ=1000 with halted vCPUs", "[sim][machine]") {
  const usched::sim::machine m = usched::sim::machine_named("kvm16");
  CHECK(m.name == "kvm16");
  CHECK(m.hz == 1000);
  CHECK(m.tick_ns() == 1 * ms);
  CHECK(m.jiffies);
  // A kernel's idle CPU does not spin: the vCPU halts at once.
  CHECK(m.spin_us == 0);
  CHECK(m.jitter.random_tick_phase);
  // A guest sees no C-states: halted, polled by its host, then descheduled.
  REQUIRE(m.jitter.idle_states.size() == 2);
  CHECK(m.jitter.idle_states[0].name == "halt-polled");
  CHECK(m.jitter.idle_states[1].name == "halt-descheduled");
  CHECK(m.jitter.idle_states[1].residency_ns == 200 * us);
  // What is not fitted is vm40's class of machine.
  const usched::sim::machine vm = usched::sim::machine_named("vm40");
  CHECK(m.cost.switch_ns == vm.cost.switch_ns);
  CHECK(m.cost.migrate_llc_ns == vm.cost.migrate_llc_ns);
  CHECK(m.jitter.irq_per_s == vm.jitter.irq_per_s);
  CHECK(m.jitter.timer_slack_ns == vm.jitter.timer_slack_ns);
  // Fitted jointly to both of its blocks: the wake-up, and the host under
  // it (its deep C-state, its other tasks, steal on running vCPUs).
  CHECK(m.cost.waker_ns == 1 * us);
  CHECK(m.cost.waker_futex_ns == 3 * us);
  CHECK(m.cost.wake_parked_ns == 6 * us);
  CHECK(m.jitter.sigma == 0.75);
  CHECK(m.jitter.host_deep_p == 0.15);
  CHECK(m.jitter.host_deep_exit_ns == 150 * us);
  CHECK(m.jitter.host_preempt_per_s == 1.0);
  CHECK(m.jitter.host_wait_ns == 6800 * us);
  CHECK(m.jitter.steal_per_s == 3.0);
  CHECK(m.jitter.steal_ns == 1 * ms);
  // vm40 has no host noise: its fit and runs stay as they were.
  CHECK(vm.jitter.host_deep_p == 0);
  CHECK(vm.jitter.host_preempt_per_s == 0);
  CHECK(vm.jitter.steal_per_s == 0.2);
  const auto names = usched::sim::machine_names();
  CHECK(std::find(names.begin(), names.end(), "kvm16") != names.end());
}

TEST_CASE("machine: the experiments list the 16-vCPU guest's two runs, on its topology and machine", "[sim][machine]") {
  const auto list = usched::sim::experiment_list();
  std::vector<usched::sim::experiment_info> guest;
  for (const auto& x : list) {
    if (x.machine_name == "kvm16") guest.push_back(x);
  }
  REQUIRE(guest.size() == 2);
  // The last two on the page, after the seeds' experiments.
  CHECK(list[list.size() - 2].title == guest[0].title);
  CHECK(list.back().title == guest[1].title);
  for (const auto& x : guest) {
    INFO(x.title);
    CHECK(x.topology == "pack:1 core:16 pu:1");
    CHECK(x.compares_blocks);
    REQUIRE_FALSE(x.policies.empty());
    CHECK(x.policies.front() == usched::sim::hw16_policy);
    CHECK(std::find(x.policies.begin(), x.policies.end(), "cfs") != x.policies.end());
  }
  // The hardware's command lines, with -C 0 for schbench 93483e4's lack of
  // a message-thread think.
  CHECK(guest[0].schbench_args == "-m 2 -t 8 -r {r} -C 0");
  CHECK(guest[1].schbench_args == "-m 2 -t 8 -r {r} -c 1000000 -s 1000 -i 30 -z 120 -C 0");
  CHECK(usched::sim::hw16_def().schbench == guest[0].schbench_args);
  CHECK(usched::sim::hw16_sat().schbench == guest[1].schbench_args);
  CHECK(usched::sim::hw16_sat().block.p[4] == 331);
  CHECK(usched::sim::hw16_def().block.p[4] == 5304);
}

TEST_CASE("machine: --calibrate fits vm40 and kvm16, each against its own runs", "[sim][machine]") {
  CHECK(usched::sim::calibration_machines() == std::vector<std::string>{"vm40", "kvm16"});
  const auto vm = usched::sim::calibration_for("vm40");
  CHECK(vm.fit.policy == "cfs");
  CHECK(vm.predict.policy == "cfs-v5.9");
  const auto guest = usched::sim::calibration_for("kvm16", "cfs-v5.9");
  CHECK(guest.fit.machine == "kvm16");
  CHECK(guest.fit.policy == "cfs-v5.9");
  CHECK(guest.predict.policy == "cfs-v5.9");
  CHECK(guest.fit.block.p[0] == 39);
  CHECK(guest.predict.block.p[0] == 72);
  CHECK(usched::sim::calibration_for("kvm16").fit.policy == usched::sim::hw16_policy);
  // Fitted to both runs at once, over the wake-up and the host's noise.
  CHECK(guest.joint);
  CHECK_FALSE(vm.joint);
  CHECK(guest.grid.points() == 128);
  CHECK(vm.grid.points() == 144);
  CHECK_THROWS_WITH(usched::sim::calibration_for("box32"),
                    "--calibrate --machine box32: no block to fit it to; accepted: vm40, kvm16");
}
