// simulator.cpp: the simulated backend's event loop (see simulator.hpp).
#include "simulator.hpp"
#include "random.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>
#include <stdexcept>
#include <utility>

#include <usched/detail/wait.hpp>
#include <usched/error.hpp>

#include "topology.hpp"

namespace usched::sim {

using detail::pick_result;
using usched::placement_kind;
using usched::wake_reason;
using detail::prev_action;
using detail::kick_result;
using detail::wake_result;

namespace {

constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();

}  // namespace

// ---- state -------------------------------------------------------------------

enum class simulator::ev : std::uint8_t {
  resume,    // a switch (or a wake-up's cost) has passed: the worker runs its fiber
  check,     // a running worker's preempt point: the step's end, the tick, the slice
  spin_poll, // a spinning worker's periodic look (balance, the end of the spin)
  look,      // a woken or notified idle worker looks for work (find_work)
  timer,     // a sleep's timer fires: wake the fiber, from the worker it slept on
  timer_soft,  // a sleep's deadline, when the machine has timer slack: when its timer fires
  callback,  // a call from outside any worker (schbench's reporting thread)
};

struct simulator::event {
  std::int64_t t;
  std::uint64_t seq;
  ev kind;
  int cpu;
  std::uint64_t gen;
  sim_fiber* f;
  bool operator>(const event& o) const noexcept { return t != o.t ? t > o.t : seq > o.seq; }
};

struct simulator::vcpu {
  enum class state : std::uint8_t { running, spinning, parked, waking };
  state st = state::spinning;
  sim_fiber* curr = nullptr;
  // Events carry the generation they were made in; a change of state
  // (a switch, idling, parking) makes the older ones stale.
  std::uint64_t gen = 0;
  std::int64_t seg_start = 0;    // when the running step's current stretch began
  std::int64_t slice_start = 0;  // when the running fiber's slice began
  std::int64_t next_tick = 0;
  std::int64_t pending_check = never;
  std::int64_t spin_until = 0;
  std::int64_t phase_start = 0;  // when it last went busy or idle
  bool busy = false;
  bool kicked = false;  // sent by a pull kick: its next look balances unrationed
  std::uint64_t rng = 0;
  // The machine's interrupts on this CPU (machine.hpp): the intervals they
  // take, in order, without overlap, from `irq_first` on; every arrival
  // before `irq_known` is among them.
  std::vector<std::pair<std::int64_t, std::int64_t>> irqs;
  std::size_t irq_first = 0;
  std::int64_t irq_known = 0;
  std::int64_t next_irq = never;
  std::int64_t next_steal = never;
  noise_source irq_rng{0};
  std::vector<usched::cpu_snapshot> scratch;
  std::uint64_t fibers_run = 0;
  std::uint64_t parks = 0;
  std::uint64_t idle_ns = 0;
  std::uint64_t busy_ns = 0;
};

simulator::simulator(sim_config cfg)
    : cfg_(std::move(cfg)), rng_(0x51a0000ULL ^ cfg_.seed), draw_(detail::splitmix64_mix(0xc057ULL ^ cfg_.seed)) {
  cfg_.options.policy = cfg_.policy;
  cfg_.options.topology = cfg_.topology;
  const auto topo = detail::topology::load(cfg_.topology, "--topology '" + cfg_.topology + "'");
  places_ = topo.place_workers(topo.nr_pus(), usched::worker_unit::pu, "--topology '" + cfg_.topology + "'");
  topology_line_ = topo.describe();
  detail::engine_config ecfg = detail::engine_config_of(cfg_.options);
  ecfg.balance_pass_per_cpu_ns = cfg_.cost.balance_pass_ns;
  if (cfg_.hz != 100 && cfg_.hz != 250 && cfg_.hz != 300 && cfg_.hz != 1000) {
    throw config_error("the simulated machine's HZ " + std::to_string(cfg_.hz) + ": expected 100, 250, 300 or 1000");
  }
  tick_ns_ = 1'000'000'000 / static_cast<std::int64_t>(cfg_.hz);
  ecfg.tick_ns = tick_ns_;
  if (cfg_.jitter.random_tick_phase) tick_phase_ = static_cast<std::int64_t>(draw_.bits() % static_cast<std::uint64_t>(tick_ns_));
  irqs_on_ = cfg_.jitter.irq_per_s > 0 || cfg_.jitter.steal_per_s > 0;
  engine_ = std::make_unique<detail::engine>(build_domains(places_), make_policy(cfg_.policy), ecfg);
  if (cfg_.trace) {
    detail::engine::trace_hooks hooks;
    hooks.id = [](const detail::sched_entity& se) noexcept {
      return static_cast<std::uint64_t>(static_cast<const sim_fiber&>(se).id);
    };
    // What a blocking fiber waits in, as the runtime's primitives name it:
    // schbench's futex post and wait is a binary semaphore.
    hooks.wait = [](const detail::sched_entity& se) noexcept {
      detail::wait_kind k = detail::wait_kind::none;
      switch (static_cast<const sim_fiber&>(se).current.what) {
        case step::kind::sleep: k = detail::wait_kind::sleep; break;
        case step::kind::wait: k = detail::wait_kind::semaphore; break;
        case step::kind::join: k = detail::wait_kind::join; break;
        default: break;
      }
      return static_cast<std::uint8_t>(k);
    };
    engine_->set_tracer(cfg_.trace, hooks);
  }
  spin_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(cfg_.options.spin).count();
  cpus_.resize(engine_->nr_cpus());
  for (std::size_t c = 0; c < cpus_.size(); ++c) {
    std::uint64_t s = cfg_.seed * 0x100000001b3ULL + c;
    vcpu& v = cpus_[c];
    v.rng = detail::splitmix64(s);
    v.next_tick = tick_phase_;
    if (irqs_on_) {
      // Each CPU's interrupts start at a phase of their own.
      v.irq_rng = noise_source(detail::splitmix64_mix(s ^ 0x1a9ULL));
      v.next_irq = v.irq_rng.gap(cfg_.jitter.irq_per_s);
      v.next_steal = v.irq_rng.gap(cfg_.jitter.steal_per_s);
      v.irq_known = std::min(v.next_irq, v.next_steal);
    }
  }
  // Every worker starts as the real ones do: it looks for work, spins, parks.
  for (std::size_t c = 0; c < cpus_.size(); ++c) push(0, ev::look, static_cast<int>(c), 0);
  for (auto& v : cpus_) v.st = vcpu::state::waking;
}

simulator::~simulator() = default;

unsigned simulator::nr_cpus() const noexcept { return static_cast<unsigned>(cpus_.size()); }

unsigned simulator::nr_nodes() const noexcept {
  const auto& nodes = engine_->domains().cpu_node;
  int top = 0;
  for (const int n : nodes) top = std::max(top, n);
  return static_cast<unsigned>(top) + 1;
}

std::uint64_t simulator::random() noexcept { return detail::splitmix64(rng_); }

// A worker's own generator, as a real worker's next_random(); the shared one
// for -1 (a thread outside the runtime).
std::uint64_t simulator::random_of(int cpu) noexcept {
  return cpu >= 0 ? detail::splitmix64(cpus_[static_cast<std::size_t>(cpu)].rng) : random();
}

void simulator::push(std::int64_t t, ev kind, int cpu, std::uint64_t gen, sim_fiber* f) {
  heap_.push_back(event{t, seq_++, kind, cpu, gen, f});
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
}

void simulator::at(std::int64_t t, std::function<void()> f) {
  callbacks_.push_back(std::move(f));
  push(t, ev::callback, -1, callbacks_.size() - 1);
}

void simulator::run_until(std::int64_t t) {
  // Events that all happen at one instant, without end, would never let the
  // clock reach `t` (a program whose steps take no time, with every cost set
  // to 0): stop with an error instead of hanging.
  constexpr std::uint64_t max_events_per_instant = 10'000'000;
  std::uint64_t at_this_instant = 0;
  while (!heap_.empty() && heap_.front().t <= t) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
    const event e = heap_.back();
    heap_.pop_back();
    at_this_instant = e.t == now_ ? at_this_instant + 1 : 0;
    if (at_this_instant > max_events_per_instant) {
      throw std::runtime_error("the simulated clock stopped at " + std::to_string(now_) + " ns: " +
                               std::to_string(max_events_per_instant) +
                               " events without time passing; some step or cost must take time");
    }
    now_ = e.t;
    ++events_;
    handle(e);
  }
  now_ = std::max(now_, t);
}

void simulator::handle(const event& e) {
  if (e.kind == ev::callback) {
    // Moved out first: the callback may add more.
    std::function<void()> f = std::move(callbacks_[e.gen]);
    f();
    return;
  }
  if (e.kind == ev::timer) {
    try_to_wake_up(*e.f, placement_kind::wake, wake_reason::timer, e.cpu);
    return;
  }
  if (e.kind == ev::timer_soft) {
    // An hrtimer with slack is programmed for its hard deadline, and
    // expires earlier only if another timer interrupt of its CPU comes
    // between: on a running CPU, its tick.
    std::int64_t fire = now_ + cfg_.jitter.timer_slack_ns;
    const vcpu& v = cpus_[static_cast<std::size_t>(e.cpu)];
    if (v.st == vcpu::state::running) fire = std::min(fire, cfg_.jiffies ? tick_after(now_ - 1) : std::max(v.next_tick, now_));
    if (fire <= now_) {
      try_to_wake_up(*e.f, placement_kind::wake, wake_reason::timer, e.cpu);
    } else {
      push(fire, ev::timer, e.cpu, 0, e.f);
    }
    return;
  }
  vcpu& v = cpus_[static_cast<std::size_t>(e.cpu)];
  if (e.gen != v.gen) return;  // stale
  switch (e.kind) {
    case ev::resume:
      start_running(e.cpu);
      break;
    case ev::check:
      if (e.t != v.pending_check) return;  // superseded by an earlier check
      v.pending_check = never;
      check(e.cpu);
      break;
    case ev::spin_poll:
      spin_poll(e.cpu);
      break;
    case ev::look:
      // A parked worker is a CPU in nohz idle: its tick stopped, and on a
      // machine with jiffies it rejoins the grid at the next tick, not at
      // once. usched's worker ticks when it looks, if its tick is due.
      if (v.st == vcpu::state::parked) {
        --nr_parked_;
        if (cfg_.jiffies) v.next_tick = tick_after(now_);
      }
      if (v.st == vcpu::state::spinning) --nr_spinning_;
      v.st = vcpu::state::waking;
      find_work(e.cpu);
      break;
    default:
      break;
  }
}

// ---- fibers --------------------------------------------------------------------

namespace {

// The slice a fiber asks for (spawn_options::slice), as the runtime's
// spawn records it.
void ask_slice(sim_fiber& f, std::int64_t slice_ns) {
  if (slice_ns == 0) return;
  f.ev_flags |= detail::ev_custom_slice;
  f.ev_slice.request = static_cast<std::uint32_t>(slice_ns);
}

}  // namespace

sim_fiber& simulator::spawn(std::unique_ptr<program> p, int pin, int node, const char* label, std::int64_t slice_ns) {
  auto f = std::make_unique<sim_fiber>();
  f->id = static_cast<int>(fibers_.size()) + 1;
  f->prog = std::move(p);
  f->pinned = pin;
  f->preferred_node = node;
  ask_slice(*f, slice_ns);
  sim_fiber& ref = *f;
  fibers_.push_back(std::move(f));
  if (cfg_.trace && label) cfg_.trace->emit_label(now_, static_cast<std::uint64_t>(ref.id), label);
  try_to_wake_up(ref, placement_kind::spawn, wake_reason::spawn, acting_cpu_);
  return ref;
}

sim_fiber& simulator::spawn_on(std::unique_ptr<program> p, int cpu, int node, std::int64_t slice_ns) {
  auto f = std::make_unique<sim_fiber>();
  f->id = static_cast<int>(fibers_.size()) + 1;
  f->prog = std::move(p);
  f->preferred_node = node;
  ask_slice(*f, slice_ns);
  sim_fiber& ref = *f;
  fibers_.push_back(std::move(f));
  engine_->enqueue(cpu, &ref, detail::enqueue_kind::spawn, now_, false, wake_reason::spawn);
  ref.woken_at = now_;
  ++ref.times_woken;
  if (cfg_.trace) {
    // Queued without a placement: a spawn from outside, onto `cpu`.
    detail::trace_record t;
    t.time = now_;
    t.type = detail::trace_event::wakeup;
    t.fiber = static_cast<std::uint64_t>(ref.id);
    t.cpu = static_cast<std::int16_t>(cpu);
    t.reason = static_cast<std::uint8_t>(wake_reason::spawn);
    t.flags = detail::wake_flag_new;
    t.depth = detail::trace_depth(engine_->nr_queued(cpu));
    cfg_.trace->emit(t);
  }
  notify(cpu);
  poke(cpu);
  return ref;
}

void simulator::post(sim_event& e) {
  if (sim_fiber* w = e.waiter) {
    e.waiter = nullptr;
    try_to_wake_up(*w, placement_kind::wake, wake_reason::sync, acting_cpu_);
  } else {
    e.posted = true;
  }
}

// The real backend's runtime_impl::try_to_wake_up(): the engine places and
// queues the fiber, the backend wakes whom it says.
void simulator::try_to_wake_up(sim_fiber& f, placement_kind kind, wake_reason why, int origin) {
  std::vector<usched::cpu_snapshot>& scratch =
      origin >= 0 ? cpus_[static_cast<std::size_t>(origin)].scratch : outside_scratch_;
  const std::uint64_t bits = random_of(origin);
  woken(f, engine_->wake_up(&f, kind, why, origin, bits, scratch, now_));
}

// The exiting fiber on `cpu` wakes its joiner (runtime_impl::fiber_done()).
void simulator::wake_joiner(sim_fiber& f, int cpu) {
  std::vector<usched::cpu_snapshot>& scratch = cpus_[static_cast<std::size_t>(cpu)].scratch;
  woken(f, engine_->wake_joiner(&f, cpu, random_of(cpu), scratch, now_));
}

void simulator::woken(sim_fiber& f, const wake_result& r) {
  // The waker pays for the placement, and for a futex wake if it must
  // wake a parked worker (a fiber's program acting; not a timer). The
  // wake-up reaches the chosen worker once the placement is done, after
  // whatever the waker did before it in this step: a message thread's
  // third post is seen after its first two. The futex wake's own time
  // runs on the waker while the parked worker wakes (wake_parked counts
  // from the wake call).
  std::int64_t reach = 0;
  if (acting_cpu_ >= 0) {
    charge_ns_ += cost(cfg_.cost.waker_ns);
    reach = charge_ns_;
    if (r.cpu >= 0 && r.notify && cpus_[static_cast<std::size_t>(r.cpu)].st == vcpu::state::parked) {
      charge_ns_ += cost(cfg_.cost.waker_futex_ns);
    }
  }
  if (r.cpu < 0) return;
  f.woken_at = now_;
  ++f.times_woken;
  if (r.notify) notify(r.cpu, reach);
  poke(r.cpu);
  if (r.kick) kick_idle(r.cpu, r.pull);
}

// kick_idle(): carries out the engine's kick decision (engine::kick) over
// the virtual workers, as runtime_impl::kick_idle does over real ones: a
// spinning worker told to balance leaves its spin at once (notify), one
// already told counts; a parked one is notified, marked for a pull kick.
void simulator::kick_idle(int busy_cpu, bool pull) {
  struct idle_cpus {
    simulator& sim;
    int busy_cpu;
    unsigned nr_spinning() const noexcept { return static_cast<unsigned>(sim.nr_spinning_); }
    unsigned nr_parked() const noexcept { return static_cast<unsigned>(sim.nr_parked_); }
    std::uint64_t random() const noexcept { return sim.random_of(busy_cpu); }
    bool tell_spinning(int cpu) const {
      vcpu& v = sim.cpus_[static_cast<std::size_t>(cpu)];
      if (v.st == vcpu::state::spinning) {
        v.kicked = true;
        sim.notify(cpu);
        return true;
      }
      return v.st == vcpu::state::waking && v.kicked;
    }
    bool parked(int cpu) const noexcept { return sim.cpus_[static_cast<std::size_t>(cpu)].st == vcpu::state::parked; }
  };
  const kick_result k = engine_->kick(busy_cpu, pull, idle_cpus{*this, busy_cpu});
  if (k.cpu < 0) return;
  engine_->trace_idle(k.cpu, detail::idle_kind::kick, now_, busy_cpu);
  if (k.pull) cpus_[static_cast<std::size_t>(k.cpu)].kicked = true;
  notify(k.cpu);
}

// notify(): work was queued on `cpu`. A spinning worker sees it at its next
// look at its queue; a parked one after a futex wake.
void simulator::notify(int cpu, std::int64_t after) {
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  if (v.st == vcpu::state::spinning) {
    push(free_at(cpu, now_ + after + cost(cfg_.cost.wake_spinning_ns)), ev::look, cpu, ++v.gen);
    --nr_spinning_;
    v.st = vcpu::state::waking;
  } else if (v.st == vcpu::state::parked) {
    engine_->trace_idle(cpu, detail::idle_kind::unpark, now_);
    const std::int64_t idled = now_ - v.phase_start;
    const std::int64_t waking = cost(cfg_.cost.wake_parked_ns) + idle_exit_ns(idled) + host_wait_ns(idled);
    push(free_at(cpu, now_ + after + waking), ev::look, cpu, ++v.gen);
    --nr_parked_;
    v.st = vcpu::state::waking;
  }
}

// ---- running -------------------------------------------------------------------

std::int64_t simulator::migration_cost(int from, int to) {
  if (from < 0 || from == to) return 0;
  const usched::domain_tree& d = engine_->domains();
  if (d.share_llc(from, to)) return cost(cfg_.cost.migrate_llc_ns);
  const int nf = d.cpu_node.empty() ? 0 : d.cpu_node[static_cast<std::size_t>(from)];
  const int nt = d.cpu_node.empty() ? 0 : d.cpu_node[static_cast<std::size_t>(to)];
  return cost(nf == nt ? cfg_.cost.migrate_cross_llc_ns : cfg_.cost.migrate_numa_ns);
}

// switch_to(): `next` was picked on `cpu`; it runs once the switch (and
// whatever its move costs) has passed.
void simulator::switch_to(int cpu, sim_fiber* next, std::int64_t extra_ns) {
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  if (!v.busy) {
    v.idle_ns += static_cast<std::uint64_t>(now_ - v.phase_start);
    v.phase_start = now_;
    v.busy = true;
  }
  v.st = vcpu::state::running;
  v.curr = next;
  v.pending_check = never;
  ++v.fibers_run;
  const std::int64_t took = cost(cfg_.cost.switch_ns) + migration_cost(next->last_cpu, cpu) + extra_ns;
  if (next->last_cpu >= 0 && next->last_cpu != cpu) {
    ++migrations_;
    const auto& nodes = engine_->domains().cpu_node;
    if (!nodes.empty() && nodes[static_cast<std::size_t>(next->last_cpu)] != nodes[static_cast<std::size_t>(cpu)]) {
      ++numa_migrations_;
    }
  }
  next->last_cpu = cpu;
  push(after_cpu(cpu, now_, took), ev::resume, cpu, ++v.gen);
}

void simulator::start_running(int cpu) {
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  sim_fiber* f = v.curr;
  v.seg_start = now_;
  v.slice_start = now_;
  if (!f->started) {
    f->started = true;
    ask_program(cpu);
    return;
  }
  const step::kind k = f->current.what;
  if (k == step::kind::run || (k == step::kind::spin_until && f->current.ns > now_)) {
    schedule_check(cpu);  // a preempted step goes on
  } else {
    ask_program(cpu);     // its wait, sleep or join has ended
  }
}

// ask_program(): the running fiber's step has ended; its program acts and
// says what it does next. Steps that end at once (a wait already posted, a
// zero run) loop here.
void simulator::ask_program(int cpu) {
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  for (unsigned spins = 0;; ++spins) {
    sim_fiber* f = v.curr;
    step s;
    if (f->deferred) {
      f->deferred = false;
      s = f->after;
    } else {
      acting_cpu_ = cpu;
      charge_ns_ = 0;
      s = f->prog->next(*this, *f);
      acting_cpu_ = -1;
      if (charge_ns_ > 0) {
        // What its wake-ups cost it comes first, on its CPU.
        if (s.what == step::kind::run) {
          s.ns += charge_ns_;
        } else {
          f->deferred = true;
          f->after = s;
          s = step::run(charge_ns_);
        }
        charge_ns_ = 0;
      }
    }
    if (spins > 1'000'000) throw std::runtime_error("a simulated fiber makes no progress");
    f->current = s;
    switch (s.what) {
      case step::kind::run:
        if (s.ns <= 0) continue;
        f->remaining_ns = s.ns;
        v.seg_start = now_;
        schedule_check(cpu);
        return;
      case step::kind::spin_until:
        if (s.ns <= now_) continue;
        v.seg_start = now_;
        schedule_check(cpu);
        return;
      case step::kind::sleep:
        push(now_ + std::max<std::int64_t>(0, s.ns), cfg_.jitter.timer_slack_ns > 0 ? ev::timer_soft : ev::timer, cpu, 0, f);
        leave(cpu, prev_action::block);
        return;
      case step::kind::wait:
        if (s.event->posted) {
          s.event->posted = false;
          continue;
        }
        s.event->waiter = f;
        leave(cpu, prev_action::block);
        return;
      case step::kind::join:
        if (s.target->exited) continue;
        s.target->joiners.push_back(f);
        // The join hand-off in its two steps; the real backend takes them
        // in the block's one lock hold (engine::schedule with the joinee
        // named), which the engine's tests hold to the same decisions.
        engine_->hand_off(cpu, s.target);
        leave(cpu, prev_action::block);
        return;
      case step::kind::exit:
        f->exited = true;
        acting_cpu_ = cpu;
        // The first joiner gets the hand-off back (the real backend has one
        // joiner per fiber, and takes this and the exit's pick in one lock
        // hold: engine::exit_to_joiner); any others are plain wake-ups.
        for (std::size_t i = 0; i < f->joiners.size(); ++i) {
          if (i == 0) {
            wake_joiner(*f->joiners[i], cpu);
          } else {
            try_to_wake_up(*f->joiners[i], placement_kind::wake, wake_reason::join, cpu);
          }
        }
        acting_cpu_ = -1;
        f->joiners.clear();
        leave(cpu, prev_action::exit);
        return;
    }
  }
}

// schedule_check(): when the running fiber next reaches a preempt point
// that matters: its step's end, the tick, or its slice's end while others
// wait.
void simulator::schedule_check(int cpu) {
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  const sim_fiber* f = v.curr;
  std::int64_t t = f->current.what == step::kind::run ? after_cpu(cpu, now_, f->remaining_ns) : f->current.ns;
  t = std::min(t, std::max(v.next_tick, now_ + 1));
  const bool resched = engine_->resched_asked(cpu);
  if (engine_->has_queued(cpu) || resched) {
    t = std::min(t, std::max(v.slice_start + engine_->slice_ns(cpu), now_ + cfg_.cost.preempt_point_ns));
    if (resched) t = std::min(t, now_ + cfg_.cost.preempt_point_ns);
  }
  t = free_at(cpu, t);
  v.pending_check = t;
  push(t, ev::check, cpu, v.gen);
}

// poke(): something arrived on `cpu`'s runqueue or asked its running fiber
// to yield; a running fiber notices at its next preempt point.
void simulator::poke(int cpu) {
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  if (v.st != vcpu::state::running || v.pending_check == never) return;
  std::int64_t t = v.pending_check;
  if (engine_->resched_asked(cpu)) t = std::min(t, now_ + cfg_.cost.preempt_point_ns);
  if (engine_->has_queued(cpu)) {
    t = std::min(t, std::max(v.slice_start + engine_->slice_ns(cpu), now_ + cfg_.cost.preempt_point_ns));
  }
  t = free_at(cpu, t);
  if (t < v.pending_check) {
    v.pending_check = t;
    push(t, ev::check, cpu, v.gen);
  }
}

// A balance pass may have asked a busiest worker to yield (active balance):
// find it. (A pass's other effects land on the balancing worker itself,
// which looks at its queue right after.)
void simulator::poke_requests() {
  const std::uint64_t n = engine_->active_balance_requests();
  if (n == seen_requests_) return;
  seen_requests_ = n;
  for (std::size_t c = 0; c < cpus_.size(); ++c) {
    if (cpus_[c].st == vcpu::state::running && engine_->resched_asked(static_cast<int>(c))) {
      poke(static_cast<int>(c));
    }
  }
}

void simulator::advance(int cpu) {
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  sim_fiber* f = v.curr;
  if (f->current.what == step::kind::run) f->remaining_ns -= cpu_between(cpu, v.seg_start, now_);
  v.seg_start = now_;
  prune_irqs(v);
}

// check(): the running fiber's preempt point (worker::preempt_check): the
// tick if due, then the engine's should_preempt.
void simulator::check(int cpu) {
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  advance(cpu);
  sim_fiber* f = v.curr;
  const bool done = f->current.what == step::kind::run ? f->remaining_ns <= 0 : now_ >= f->current.ns;
  if (done) {
    ask_program(cpu);
    return;
  }
  if (now_ >= v.next_tick) tick(cpu);
  if (engine_->should_preempt(cpu, now_ - v.slice_start)) {
    leave(cpu, prev_action::requeue);
    return;
  }
  schedule_check(cpu);
}

unsigned simulator::tick(int cpu) {
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  v.next_tick = cfg_.jiffies ? tick_after(now_) : now_ + tick_ns_;
  const detail::tick_result r = engine_->tick(cpu, now_, random_of(cpu), v.scratch);
  if (r.kick) kick_idle(cpu);
  poke_requests();
  return r.pulled;
}

// leave(): the running fiber stops running as `action` says; the engine
// picks the next (worker::yield_current, block_current, exit_current).
void simulator::leave(int cpu, prev_action action) {
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  sim_fiber* prev = v.curr;
  const pick_result r = engine_->schedule(cpu, prev, action, now_);
  if (r.pushed_to >= 0) notify(r.pushed_to);
  auto* next = static_cast<sim_fiber*>(r.next);
  if (next == prev) {
    // Picked again (a requeue with nothing ahead of it): it goes on.
    v.slice_start = now_;
    v.seg_start = now_;
    schedule_check(cpu);
    return;
  }
  if (next) {
    switch_to(cpu, next, 0);
    return;
  }
  idle(cpu);
}

// ---- idle ----------------------------------------------------------------------

void simulator::idle(int cpu) {
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  v.curr = nullptr;
  v.pending_check = never;
  ++v.gen;
  if (v.busy) {
    v.busy_ns += static_cast<std::uint64_t>(now_ - v.phase_start);
    v.phase_start = now_;
    v.busy = false;
  }
  v.st = vcpu::state::waking;
  find_work(cpu);
}

// find_work(): worker::find_work and the start of idle_wait.
void simulator::find_work(int cpu) {
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  if (now_ >= v.next_tick) tick(cpu);
  auto* next = static_cast<sim_fiber*>(engine_->find_work(cpu, now_, random_of(cpu), v.scratch, std::exchange(v.kicked, false)));
  poke_requests();
  if (next) {
    switch_to(cpu, next, 0);
    return;
  }
  if (spin_ns_ <= 0) {
    park(cpu);
    return;
  }
  v.st = vcpu::state::spinning;
  engine_->trace_idle(cpu, detail::idle_kind::spin, now_);
  // Idle since phase_start, spinning: exit latency 0 (worker::idle_wait).
  engine_->set_idle_state(cpu, 0, v.phase_start);
  ++nr_spinning_;
  v.spin_until = now_ + spin_ns_;
  push(std::min(now_ + cfg_.cost.spin_poll_ns, v.spin_until), ev::spin_poll, cpu, ++v.gen);
}

void simulator::spin_poll(int cpu) {
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  if (engine_->idle_poll(cpu, now_, random_of(cpu), v.scratch) > 0 || (now_ >= v.next_tick && tick(cpu) > 0)) {
    poke_requests();
    --nr_spinning_;
    v.st = vcpu::state::waking;
    find_work(cpu);
    return;
  }
  if (now_ >= v.spin_until) {
    --nr_spinning_;
    park(cpu);
    return;
  }
  push(std::min(now_ + cfg_.cost.spin_poll_ns, v.spin_until), ev::spin_poll, cpu, v.gen);
}

// park(): worker::idle_wait's announce, last look and sleep.
void simulator::park(int cpu) {
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  v.st = vcpu::state::parked;
  ++nr_parked_;
  ++v.gen;
  if (engine_->has_queued(cpu) ||
      engine_->idle_poll(cpu, now_, random_of(cpu), v.scratch) > 0) {
    poke_requests();
    --nr_parked_;
    v.st = vcpu::state::waking;
    find_work(cpu);
    return;
  }
  ++v.parks;
  engine_->trace_idle(cpu, detail::idle_kind::park, now_);
  // What a spawn's placement reads of it (find_idlest_group_cpu()): the
  // machine's wake of a parked worker and its first idle state's exit, the
  // state a CPU that has just gone idle is in.
  engine_->set_idle_state(cpu, cfg_.cost.wake_parked_ns + idle_exit_ns(0), v.phase_start);
}

// ---- the machine ---------------------------------------------------------------

std::int64_t simulator::cost(std::int64_t median) noexcept { return draw_.around(median, cfg_.jitter.sigma); }

std::int64_t simulator::tick_after(std::int64_t t) const noexcept {
  if (t < tick_phase_) return tick_phase_;
  return tick_phase_ + ((t - tick_phase_) / tick_ns_ + 1) * tick_ns_;
}

// idle_exit_ns(): the exit latency of the deepest idle state whose target
// residency an idle period of `idled` ns has passed.
std::int64_t simulator::idle_exit_ns(std::int64_t idled) const noexcept {
  std::int64_t exit = 0;
  for (const idle_state& s : cfg_.jitter.idle_states) {
    if (idled >= s.residency_ns) exit = s.exit_ns;
  }
  return exit;
}

// host_wait_ns(): what a vCPU idle for `idled` ns adds to its wake-up on
// its host. Its thread has been off its host CPU since the deepest idle
// state's residency (halted past the halt-poll window). If the host gave
// the CPU to another task in that time, the vCPU waits for the rest of
// that task's slice; if the CPU idled, it may be in the host's deep
// C-state, whose exit it pays. Nothing is drawn on a machine without them.
std::int64_t simulator::host_wait_ns(std::int64_t idled) noexcept {
  const noise& n = cfg_.jitter;
  const bool preempts = n.host_preempt_per_s > 0 && n.host_wait_ns > 0;
  const bool deep = n.host_deep_p > 0 && n.host_deep_exit_ns > 0;
  if (!preempts && !deep) return 0;
  const std::int64_t off = idled - (n.idle_states.empty() ? 0 : n.idle_states.back().residency_ns);
  if (off <= 0) return 0;
  if (preempts && draw_.came_within(n.host_preempt_per_s, off)) {
    return std::max<std::int64_t>(1, std::llround(draw_.uniform() * static_cast<double>(n.host_wait_ns)));
  }
  if (deep && draw_.uniform() < n.host_deep_p) return cost(n.host_deep_exit_ns);
  return 0;
}

// irqs_known(): every interrupt of `v` arriving up to `t` is in its list.
// An arrival while an interrupt is being handled waits for it (the
// interval grows).
void simulator::irqs_known(vcpu& v, std::int64_t t) {
  while (v.irq_known <= t) {
    const bool steal = v.next_steal < v.next_irq;
    const std::int64_t at = steal ? v.next_steal : v.next_irq;
    const std::int64_t len =
        v.irq_rng.around(steal ? cfg_.jitter.steal_ns : cfg_.jitter.irq_ns, cfg_.jitter.sigma);
    if (steal) {
      v.next_steal = at + v.irq_rng.gap(cfg_.jitter.steal_per_s);
    } else {
      v.next_irq = at + v.irq_rng.gap(cfg_.jitter.irq_per_s);
    }
    if (v.irqs.size() > v.irq_first && at <= v.irqs.back().second) {
      v.irqs.back().second += len;
    } else {
      v.irqs.emplace_back(at, at + len);
    }
    v.irq_known = std::min(v.next_irq, v.next_steal);
  }
}

// prune_irqs(): forgets the interrupts that ended before the running
// stretch began, or, on a CPU not running, before now: nothing asks about
// earlier times again.
void simulator::prune_irqs(vcpu& v) {
  const std::int64_t floor = v.st == vcpu::state::running ? v.seg_start : now_;
  while (v.irq_first < v.irqs.size() && v.irqs[v.irq_first].second <= floor) ++v.irq_first;
  if (v.irq_first > 256 && 2 * v.irq_first > v.irqs.size()) {
    v.irqs.erase(v.irqs.begin(), v.irqs.begin() + static_cast<std::ptrdiff_t>(v.irq_first));
    v.irq_first = 0;
  }
}

// free_at(): the first time from `t` on at which no interrupt holds `cpu`.
std::int64_t simulator::free_at(int cpu, std::int64_t t) {
  if (!irqs_on_) return t;
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  prune_irqs(v);
  for (;;) {
    irqs_known(v, t);
    bool moved = false;
    for (std::size_t i = v.irq_first; i < v.irqs.size() && v.irqs[i].first <= t; ++i) {
      if (t < v.irqs[i].second) {
        t = v.irqs[i].second;
        moved = true;
      }
    }
    if (!moved) return t;
  }
}

// after_cpu(): when the task running on `cpu` from `from` has had `ns` of
// the CPU, the interrupts' time left out.
std::int64_t simulator::after_cpu(int cpu, std::int64_t from, std::int64_t ns) {
  if (!irqs_on_) return from + ns;
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  std::int64_t t = free_at(cpu, from);
  for (;;) {
    irqs_known(v, t + ns);
    const auto it = std::find_if(v.irqs.begin() + static_cast<std::ptrdiff_t>(v.irq_first), v.irqs.end(),
                                 [&](const auto& irq) { return irq.first >= t; });
    if (it == v.irqs.end() || it->first >= t + ns) return t + ns;
    ns -= it->first - t;
    t = free_at(cpu, it->first);
  }
}

// cpu_between(): the CPU time the running task had from `a` to `b`.
std::int64_t simulator::cpu_between(int cpu, std::int64_t a, std::int64_t b) {
  if (!irqs_on_ || b <= a) return b - a;
  vcpu& v = cpus_[static_cast<std::size_t>(cpu)];
  irqs_known(v, b);
  std::int64_t taken = 0;
  for (std::size_t i = v.irq_first; i < v.irqs.size() && v.irqs[i].first < b; ++i) {
    taken += std::max<std::int64_t>(0, std::min(b, v.irqs[i].second) - std::max(a, v.irqs[i].first));
  }
  return b - a - taken;
}

// ---- statistics ------------------------------------------------------------------

runtime_stats simulator::stats() const {
  runtime_stats st;
  st.policy = cfg_.policy;
  for (std::size_t c = 0; c < cpus_.size(); ++c) {
    const vcpu& v = cpus_[c];
    worker_stats w;
    w.fibers_run = v.fibers_run;
    w.parks = v.parks;
    const auto phase = static_cast<std::uint64_t>(now_ - v.phase_start);
    w.idle_ns = v.idle_ns + (v.busy ? 0 : phase);
    w.busy_ns = v.busy_ns + (v.busy ? phase : 0);
    engine_->add_counters(static_cast<int>(c), w);
    st.workers.push_back(std::move(w));
  }
  return st;
}

}  // namespace usched::sim
