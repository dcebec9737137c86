// machine.hpp: what a simulated machine adds to the scheduler's own
// decisions: how long its mechanisms take, how much those times vary, what
// interrupts take from running tasks, how deep its idle CPUs sleep, and its
// tick. A run is one machine (sim_config::machine); the experiments name
// the machine each kernel thread ran on (docs/simulator.md, "Machines").
//
// The model, per mechanism:
//
//   costs (switch, wake-ups, migration, the waker's share)
//       each draw is log-normal around the cost's median: median x
//       exp(sigma x N(0,1)), capped at 16x the median (sigma 0: the
//       constant, the noise-free model every test of a decision runs)
//   a parked (idle) CPU's wake-up
//       wake_parked drawn as above, plus the exit latency of the deepest
//       idle state whose target residency the idle period has passed: a
//       CPU that has idled longer sleeps deeper and wakes later
//   interrupts and softirqs
//       per CPU, arrivals of a Poisson process (irq_per_s), each taking a
//       log-normal time (irq) from whatever runs there; a second, rarer
//       process (steal_per_s, steal) stands for the long ones: a vCPU its
//       host preempts, a softirq burst
//   the host's CPU, given away under a descheduled vCPU
//       a guest's vCPU idle past its deepest idle state's residency has
//       its thread off its host CPU (halted past the halt-poll window),
//       and the host runs other tasks there: they arrive at
//       host_preempt_per_s per second of that time; when the guest wakes
//       the vCPU after one came, its thread waits for that task's rest of
//       a slice, uniform in (0, host_wait]; and with a chance of
//       host_deep_p, the host CPU left idle under it is in its own deep
//       C-state, whose exit (host_deep_exit, drawn as a cost) the wake-up
//       pays as well
//   timers
//       a sleep's timer is an hrtimer with the task's slack: it fires at
//       the deadline plus timer_slack_ns, or at the CPU's tick if one
//       falls in between while the CPU is running (hrtimers expire every
//       timer whose soft deadline has passed when any of them fires)
//   the tick
//       one grid per machine, every 1/HZ s from a phase drawn from the
//       seed, as jiffies are; an idle (nohz) CPU does not tick and rejoins
//       the grid when it wakes (the noise-free machine keeps usched's
//       per-worker tick instead, due one tick after the worker's last)
//
// Every draw comes from generators seeded by the run's seed, apart from
// the policies' own bits: the same seed gives the same run, and a
// noise-free machine draws nothing, so its runs are the model's without
// noise, bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace usched::sim {

// The costs of the real backend that the simulator charges, in ns: the
// medians of their draws on a machine with noise. Defaults are this
// project's own measurements (docs/performance.md, 2 workers on one LLC);
// the cross-LLC and NUMA ones are scaled from the cache line figures, since
// no such machine was at hand (docs/simulator.md).
struct costs {
  std::int64_t switch_ns = 100;          // a switch from one fiber to another (cfs yield, 86-100 ns)
  std::int64_t wake_spinning_ns = 300;   // a spinning worker sees its queue and runs (wake_cv p50 311 ns)
  std::int64_t wake_parked_ns = 5000;    // futex wake of a parked worker until it runs (wake_cv parked p50 5170 ns)
  std::int64_t migrate_llc_ns = 250;     // first run on another worker of the same LLC (a line across cores, 240 ns)
  std::int64_t migrate_cross_llc_ns = 1000;  // ... of another LLC
  std::int64_t migrate_numa_ns = 2000;   // ... of another NUMA node
  std::int64_t preempt_point_ns = 50;    // between two preempt points of a think loop (a clock read and a pause)
  std::int64_t waker_ns = 300;           // the waker's own time per wake-up or spawn it makes (placement, enqueue)
  std::int64_t waker_futex_ns = 2000;    // more for the waker when the wake-up must wake a parked worker (futex syscall)
  std::int64_t spin_poll_ns = 2000;      // between two balance polls of a spinning worker (64 pauses)
  std::int64_t balance_pass_ns = 30;     // a balance pass, per worker of the level's span (newly-idle rationing; 30 ns measured at 8-128 workers)
};

// cost_names() lists the names --cost accepts ("switch", ...), in order;
// set_cost() sets one, throwing std::invalid_argument with a one-line
// message for an unknown name or a negative value.
std::vector<std::string> cost_names();
void set_cost(costs& c, const std::string& name, std::int64_t ns);
std::int64_t get_cost(const costs& c, const std::string& name);

// An idle state of the machine's CPUs (cpuidle's struct cpuidle_state):
// how long waking from it takes, and how long a CPU must have idled to be
// in it.
struct idle_state {
  std::string name;
  std::int64_t exit_ns = 0;       // exit_latency
  std::int64_t residency_ns = 0;  // target_residency
};

struct noise {
  // The shape of every cost's log-normal (0: every cost is its median).
  double sigma = 0;
  // The idle states, shallowest first (empty: a parked CPU wakes in
  // wake_parked alone, whatever its idle period).
  std::vector<idle_state> idle_states;
  // Interrupts and softirqs: per CPU and second, and the median time each
  // takes (its spread is sigma's).
  double irq_per_s = 0;
  std::int64_t irq_ns = 0;
  // The long interruptions: per CPU and second, and their median length.
  double steal_per_s = 0;
  std::int64_t steal_ns = 0;
  // A descheduled vCPU's host CPU (a VM guest's machines): how often per
  // second, while the vCPU's thread is off it (idle past the deepest idle
  // state's residency), the host gives it to another task, and the longest
  // the woken vCPU then waits for it (the host task's slice; each wait is
  // uniform up to it).
  double host_preempt_per_s = 0;
  std::int64_t host_wait_ns = 0;
  // The chance that a descheduled vCPU's host CPU, idle under it, is in
  // the host's deep C-state when the vCPU is woken (the host governor's
  // pick), and that state's exit latency (the median of its draw).
  double host_deep_p = 0;
  std::int64_t host_deep_exit_ns = 0;
  // The hrtimer slack of a sleeping task (current->timer_slack_ns; 50 us
  // by default on Linux).
  std::int64_t timer_slack_ns = 0;
  // Whether the tick grid's phase is drawn from the seed (else it starts
  // at time 0, as on the noise-free machine).
  bool random_tick_phase = false;

  bool quiet() const noexcept {
    return sigma == 0 && idle_states.empty() && irq_per_s == 0 && steal_per_s == 0 && timer_slack_ns == 0 &&
           !random_tick_phase && host_preempt_per_s == 0 && host_deep_p == 0;
  }
};

// A machine: its tick, its costs and its noise, and what it stands for.
struct machine {
  std::string name;
  std::string description;  // in words, for the experiments page
  unsigned hz = 1000;       // CONFIG_HZ
  // The tick: one grid for every CPU (the kernel's jiffies; nohz CPUs
  // rejoin it), or each worker's own, due one tick after its last (usched's
  // monitor times each worker's tick so, and the noise-free machine models
  // usched's backend).
  bool jiffies = true;
  // How long an idle worker spins before it parks, in us (-1: the
  // runtime's options::spin). A kernel's idle CPU does not spin: it enters
  // its idle state at once (a VM guest halts), so the kernel machines say 0.
  int spin_us = -1;
  costs cost;
  noise jitter;
  std::int64_t tick_ns() const noexcept { return 1'000'000'000 / static_cast<std::int64_t>(hz); }
};

// machine_names() lists the machines --machine accepts, in order;
// machine_named() returns one, or throws std::invalid_argument with a
// one-line message naming the value and the accepted ones. The first,
// "ideal", is the noise-free model at HZ=1000 with the default costs.
std::vector<std::string> machine_names();
machine machine_named(const std::string& name);

// noise_names() lists the settings --noise NAME=VALUE accepts (hz, sigma,
// irq_per_s, irq_us, steal_per_s, steal_us, timer_slack_us,
// host_preempt_per_s, host_wait_us, host_deep_p, host_deep_exit_us); set_noise()
// sets one on `m`, throwing std::invalid_argument (one line) for an unknown
// name or a value out of range.
std::vector<std::string> noise_names();
void set_noise(machine& m, const std::string& name, const std::string& value);
// describe_noise() is the machine's settings in one line, as --noise would
// set them ("hz=1000 sigma=0.35 irq_per_s=...").
std::string describe_noise(const machine& m);

// A generator of the draws above, from its own seeded state.
class noise_source {
 public:
  explicit noise_source(std::uint64_t seed) noexcept : state_(seed) {}
  std::uint64_t bits() noexcept;
  // A uniform double in (0, 1).
  double uniform() noexcept;
  // A standard normal (Box-Muller, both halves used).
  double normal() noexcept;
  // A log-normal draw of median `median_ns` and shape `sigma`, capped at
  // 16x the median; `median_ns` itself when sigma or the median is 0.
  std::int64_t around(std::int64_t median_ns, double sigma) noexcept;
  // An exponential gap of a Poisson process of `per_s` per second, in ns.
  std::int64_t gap(double per_s) noexcept;
  // Whether an event of a Poisson process of `per_s` per second came in
  // `ns` (drawn only when per_s and ns are above 0; false otherwise).
  bool came_within(double per_s, std::int64_t ns) noexcept;

 private:
  std::uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace usched::sim
