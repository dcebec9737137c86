// simulator.hpp: the simulated backend. Virtual workers, one per PU of any
// topology, run simulated fibers through the same engine and policy objects
// the real runtime uses, on a virtual clock, one event at a time.
//
// The simulator supplies only what a backend supplies (DESIGN.md, seam 2):
// time, workers that run, spin, park and are woken, timers, and what each
// fiber does. Every scheduling decision (placement, enqueue, pick, the
// newly-idle pull, the tick's balance and kick, preemption) is an engine
// call, the same calls the real backend makes:
//
//   real backend (runtime/src/)        simulator
//   ---------------------------        ---------
//   switch_to + context switch         a cost, then the fiber's next step
//   preempt_point() in a think loop    a check at the slice end, the tick
//                                      and preempt_point_ns after a request
//   idle_wait: spin, poll, park        spin for options::spin, poll every
//                                      spin_poll_ns, then park
//   notify() / futex wake              wake_parked_ns later the worker looks
//   timer heap (timers.cpp), fired     an event at the deadline; the wake-up
//   by its owner or an idle worker     is from the worker that armed it
//
// Deterministic: one event at a time in (time, sequence) order, every random
// bit drawn from generators seeded by --seed, no host clock read anywhere.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include <usched/options.hpp>
#include <usched/runtime.hpp>

#include "engine.hpp"
#include "machine.hpp"

namespace usched::sim {

class simulator;
struct sim_fiber;

// A wait object of the simulated program: schbench's fpost/fwait word, a
// futex that is `posted` or not. post() wakes the one waiter, if any, else
// leaves the post for the next wait.
struct sim_event {
  bool posted = false;
  sim_fiber* waiter = nullptr;
};

// What a fiber does next, returned by its program when its last step ends.
struct step {
  enum class kind : std::uint8_t {
    run,         // use the CPU for `ns` of CPU time, with preempt points
    spin_until,  // use the CPU until virtual time `ns` (schbench's think:
                 // time spent preempted counts), with preempt points
    sleep,       // block for `ns`, on a timer of the worker it blocks on
    wait,        // block on `event` until posted (at once if already posted)
    join,        // block until fiber `target` has exited
    exit,        // finished
  };
  kind what = kind::exit;
  std::int64_t ns = 0;
  sim_event* event = nullptr;
  sim_fiber* target = nullptr;

  static step run(std::int64_t ns) { return {kind::run, ns, nullptr, nullptr}; }
  static step spin_until(std::int64_t t) { return {kind::spin_until, t, nullptr, nullptr}; }
  static step sleep(std::int64_t ns) { return {kind::sleep, ns, nullptr, nullptr}; }
  static step wait(sim_event& e) { return {kind::wait, 0, &e, nullptr}; }
  static step join(sim_fiber& f) { return {kind::join, 0, nullptr, &f}; }
  static step exit() { return {}; }
};

// A simulated fiber's behaviour: next() is called, on the worker that runs
// it, each time its previous step has ended (and once when it first runs).
// It may act at once through the simulator (post, spawn, read the time) and
// returns the step that takes time.
class program {
 public:
  virtual ~program() = default;
  virtual step next(simulator& sim, sim_fiber& self) = 0;
};

struct sim_fiber : detail::sched_entity {
  int id = 0;
  std::unique_ptr<program> prog;
  // The step in progress while runnable: the CPU time a run still needs,
  // or the virtual time a spin_until ends.
  step current;
  std::int64_t remaining_ns = 0;
  int last_cpu = -1;      // where it last ran (for the migration cost)
  std::int64_t woken_at = 0;  // when it was last made runnable
  // How many times it was made runnable (its spawn included): a program
  // tells by it whether a blocking step really blocked, as a wait on an
  // event already posted ends at once and wakes nothing.
  std::uint64_t times_woken = 0;
  bool started = false;
  bool exited = false;
  std::vector<sim_fiber*> joiners;
  // The step its program returned while its wake-ups' cost to it is still
  // being run (simulator::charge).
  bool deferred = false;
  step after;
};

struct sim_config {
  std::string topology;      // what USCHED_TOPOLOGY takes
  std::string policy = "cfs";
  std::uint64_t seed = 1;
  // The runtime's options the engine and the idle loop read (spin, slice,
  // cfs_*, fork_balance, join_handoff): the embedder's defaults unless set.
  // usched_sim runs options::kernel_experiment() with the USCHED_*
  // variables on top (options::from_env); its --experiments page runs the
  // preset alone.
  usched::options options;
  // The machine (machine.hpp): the backend's costs (the medians of their
  // draws), the tick's HZ and grid, and the noise around them. The default
  // is the noise-free model at HZ=1000 with usched's per-worker tick;
  // use_machine() sets them all from one.
  costs cost;
  unsigned hz = 1000;
  bool jiffies = false;  // machine::jiffies
  noise jitter;
  // When set, every scheduling event is recorded into it in virtual time
  // (detail/trace.hpp): the engine's own (switches, wake-ups and their
  // placement, migrations, balance passes) and the idle loop's (spin,
  // park, unpark, kick). Set before the simulator is made; it must
  // outlive it.
  detail::tracer* trace = nullptr;
};

// use_machine() sets `cfg`'s costs, HZ and noise to `m`'s, and its idle
// spin where the machine has its own.
inline void use_machine(sim_config& cfg, const machine& m) {
  if (m.spin_us >= 0) cfg.options.spin = std::chrono::microseconds(m.spin_us);
  cfg.cost = m.cost;
  cfg.hz = m.hz;
  cfg.jiffies = m.jiffies;
  cfg.jitter = m.jitter;
}

class simulator {
 public:
  // Builds the topology (the runtime's parser and its errors), one worker
  // per PU, the engine and the policy. Throws usched::config_error.
  explicit simulator(sim_config cfg);
  ~simulator();

  // spawn() makes a fiber running `p`, placed by the engine as a spawn from
  // the worker running now (or from outside, before the run or from an
  // event callback). Returns it; it lives as long as the simulator.
  // `label` names it in a trace (spawn_options::label), as the schbench
  // model names its message and worker threads. `slice_ns`: the slice it
  // asks for under EEVDF (spawn_options::slice; 0: the base slice).
  sim_fiber& spawn(std::unique_ptr<program> p, int pin = -1, int node = -1, const char* label = nullptr,
                   std::int64_t slice_ns = 0);
  // spawn_on() starts a fiber queued on worker `cpu` without asking the
  // policy (an experiment's starting state, as the engine tests set one up
  // by hand); it is not pinned: balancing may move it from there. It
  // counts as a spawn on `cpu` (wake_reason::spawn), as spawn() does.
  sim_fiber& spawn_on(std::unique_ptr<program> p, int cpu, int node = -1, std::int64_t slice_ns = 0);
  // post() is the program's fpost: wakes the waiter (a wake-up from the
  // worker running now, counted as wake_reason::sync: the word is a futex
  // the waiter sleeps on) or leaves the post.
  void post(sim_event& e);
  // at() calls `f` at virtual time `t`, outside any worker (the reporting
  // thread of schbench).
  void at(std::int64_t t, std::function<void()> f);
  // run_until() runs every event up to virtual time `t`.
  void run_until(std::int64_t t);

  std::int64_t now() const noexcept { return now_; }
  // The worker whose fiber's program is being asked now, -1 outside.
  int current_cpu() const noexcept { return acting_cpu_; }
  std::uint64_t random() noexcept;
  unsigned nr_cpus() const noexcept;
  const detail::engine& eng() const noexcept { return *engine_; }
  const sim_config& config() const noexcept { return cfg_; }
  // The one-line topology summary, as the runtime describes it.
  const std::string& topology_line() const noexcept { return topology_line_; }
  // Fibers that started running on another worker than the one they last
  // ran on (the kernel's cpu-migrations), and those of them that changed
  // NUMA node.
  std::uint64_t migrations() const noexcept { return migrations_; }
  std::uint64_t numa_migrations() const noexcept { return numa_migrations_; }
  // The NUMA nodes of the simulated machine (1 without NUMA).
  unsigned nr_nodes() const noexcept;
  // What runtime::stats() returns, for the simulated workers.
  runtime_stats stats() const;
  // Events handled so far (for the speed benchmark).
  std::uint64_t events() const noexcept { return events_; }

 private:
  struct vcpu;
  struct event;
  enum class ev : std::uint8_t;

  void push(std::int64_t t, ev kind, int cpu, std::uint64_t gen, sim_fiber* f = nullptr);
  void handle(const event& e);
  // The worker-side paths, named after worker.cpp's.
  void find_work(int cpu);
  void switch_to(int cpu, sim_fiber* next, std::int64_t extra_ns);
  void start_running(int cpu);
  void check(int cpu);
  void advance(int cpu);
  void ask_program(int cpu);
  void begin_step(int cpu, const step& s);
  void leave(int cpu, detail::prev_action action);
  void idle(int cpu);
  void spin_poll(int cpu);
  void park(int cpu);
  // notify(): work was queued on `cpu`, and the worker learns of it `after`
  // ns from now (a wake-up's placement by a fiber still running).
  void notify(int cpu, std::int64_t after = 0);
  // try_to_wake_up(): the engine's wake-up of `f` from `origin`, for
  // `why` (a sleep's timer, a post, a join, a spawn).
  void try_to_wake_up(sim_fiber& f, usched::placement_kind kind, usched::wake_reason why, int origin);
  void wake_joiner(sim_fiber& f, int cpu);
  // What a wake-up's result asks of the backend: the waker's charge, the
  // worker to notify, the trace.
  void woken(sim_fiber& f, const detail::wake_result& r);
  void kick_idle(int busy_cpu, bool pull = false);
  unsigned tick(int cpu);  // fibers its periodic balance pulled here
  void schedule_check(int cpu);
  void poke(int cpu);
  void poke_requests();
  std::int64_t migration_cost(int from, int to);
  std::uint64_t random_of(int cpu) noexcept;
  // The machine (machine.hpp): a cost's draw around its median; the first
  // tick of the grid after `t`; an idle CPU's exit latency; a descheduled
  // vCPU's wait for its host CPU; the interrupts' time on a CPU.
  std::int64_t cost(std::int64_t median) noexcept;
  std::int64_t tick_after(std::int64_t t) const noexcept;
  std::int64_t idle_exit_ns(std::int64_t idled) const noexcept;
  std::int64_t host_wait_ns(std::int64_t idled) noexcept;
  void irqs_known(vcpu& v, std::int64_t t);
  void prune_irqs(vcpu& v);
  std::int64_t free_at(int cpu, std::int64_t t);
  std::int64_t after_cpu(int cpu, std::int64_t from, std::int64_t ns);
  std::int64_t cpu_between(int cpu, std::int64_t a, std::int64_t b);

  sim_config cfg_;
  std::unique_ptr<detail::engine> engine_;
  std::vector<detail::worker_place> places_;
  std::string topology_line_;
  std::vector<vcpu> cpus_;
  std::vector<std::unique_ptr<sim_fiber>> fibers_;
  std::vector<usched::cpu_snapshot> outside_scratch_;
  std::vector<event> heap_;  // a min-heap by (time, sequence)
  std::vector<std::function<void()>> callbacks_;
  std::int64_t now_ = 0;
  std::uint64_t seq_ = 0;
  std::uint64_t events_ = 0;
  std::uint64_t rng_;
  noise_source draw_;  // the costs' draws
  std::int64_t tick_ns_ = 1'000'000;
  std::int64_t tick_phase_ = 0;  // the tick grid: tick_phase_ + k x tick_ns_
  bool irqs_on_ = false;
  int acting_cpu_ = -1;
  // The cost the acting fiber's wake-ups and spawns have run up in its
  // program's next(); run on its CPU before the step it returned.
  std::int64_t charge_ns_ = 0;
  std::int64_t spin_ns_ = 0;  // options::spin
  std::uint64_t seen_requests_ = 0;
  std::uint64_t migrations_ = 0;       // fibers that ran on another worker than the one they last ran on
  std::uint64_t numa_migrations_ = 0;  // ... of another NUMA node  // engine::active_balance_requests() at the last look
  int nr_spinning_ = 0;
  int nr_parked_ = 0;
};

}  // namespace usched::sim
