// schbench_model.cpp: the schbench rounds as simulator programs (see
// schbench_model.hpp).
#include "schbench_model.hpp"

#include <memory>
#include <ostream>
#include <random>
#include <vector>

namespace usched::sim {
namespace {

constexpr std::int64_t ns_per_us = 1000;
constexpr std::int64_t ns_per_s = 1'000'000'000;

struct message_state;

struct worker_state {
  sim_event wake;
  std::int64_t wake_time = 0;
  message_state* msg = nullptr;
};

struct message_state {
  sim_event posted;
  std::vector<worker_state*> wake_list;  // pushed at the back, woken from the back (a LIFO stack)
  std::vector<std::unique_ptr<worker_state>> workers;
  std::mt19937_64 rng;
};

struct shared {
  const schbench::cli_options* o = nullptr;
  schbench::histogram latency;
};

class worker_program : public program {
 public:
  worker_program(shared& sh, worker_state& w) : sh_(sh), w_(w) {}

  step next(simulator& sim, sim_fiber&) override {
    if (phase_ == phase::woken) {
      // The clone's arithmetic: microsecond timestamps first, then the
      // difference, so a sub-microsecond wake-up counts as 0 or 1.
      const std::int64_t delta_us = sim.now() / ns_per_us - w_.wake_time / ns_per_us;
      if (delta_us > 0) sh_.latency.record(static_cast<std::uint64_t>(delta_us));
      phase_ = phase::thought;
      return step::spin_until(sim.now() + static_cast<std::int64_t>(sh_.o->worker_think_us) * ns_per_us);
    }
    w_.wake.posted = false;
    w_.msg->wake_list.push_back(&w_);
    sim.post(w_.msg->posted);
    phase_ = phase::woken;
    return step::wait(w_.wake);
  }

 private:
  enum class phase { thought, woken };
  shared& sh_;
  worker_state& w_;
  phase phase_ = phase::thought;
};

class message_program : public program {
 public:
  message_program(shared& sh, message_state& m) : sh_(sh), m_(m) {}

  step next(simulator& sim, sim_fiber&) override {
    const schbench::cli_options& o = *sh_.o;
    switch (phase_) {
      case phase::start:
        // The message thread starts its own workers, as schbench's does, so
        // the policy places them at spawn.
        for (auto& w : m_.workers) sim.spawn(std::make_unique<worker_program>(sh_, *w), -1, -1, "worker");
        [[fallthrough]];
      case phase::slept:
        // wake_all(): take the whole list and ONE timestamp, then post the
        // workers one at a time, each post costing the message thread its
        // share (the simulator charges it), so the last one woken sees the
        // time the others took.
        m_.posted.posted = false;
        waking_.clear();
        waking_.swap(m_.wake_list);
        wake_time_ = sim.now();
        phase_ = phase::waking;
        [[fallthrough]];
      case phase::waking:
        if (!waking_.empty()) {
          worker_state* w = waking_.back();
          waking_.pop_back();
          w->wake_time = wake_time_;
          sim.post(w->wake);
          return step::run(0);
        }
        phase_ = phase::posted;
        return step::wait(m_.posted);
      case phase::posted:
        phase_ = phase::thought;
        return step::spin_until(sim.now() + static_cast<std::int64_t>(o.message_think_us) * ns_per_us);
      case phase::thought: {
        const std::uint64_t span = o.sleep_us / 4;
        std::uniform_int_distribution<std::uint64_t> draw(0, span > 0 ? span - 1 : 0);
        const std::uint64_t jitter = span > 0 ? draw(m_.rng) : 0;
        phase_ = phase::slept;
        return step::sleep(static_cast<std::int64_t>(o.sleep_us + jitter) * ns_per_us);
      }
    }
    return step::exit();
  }

 private:
  enum class phase { start, slept, waking, posted, thought };
  shared& sh_;
  message_state& m_;
  phase phase_ = phase::start;
  std::vector<worker_state*> waking_;
  std::int64_t wake_time_ = 0;
};

}  // namespace

void check_model_options(const schbench::cli_options& o) {
  if (o.threads) throw schbench::usage_error("--threads: the simulator runs usched's scheduler only");
  if (o.runtime_s == 0) {
    throw schbench::usage_error("-r 0 runs until a signal; a simulated run needs a length: -r 1.." +
                                std::to_string(schbench::max_sec_value));
  }
}

schbench::run_summary run_schbench_model(simulator& sim, const schbench::cli_options& o, std::ostream& out) {
  check_model_options(o);
  shared sh;
  sh.o = &o;
  const unsigned per = schbench::resolve_worker_threads(o, sim.nr_cpus());
  std::vector<std::unique_ptr<message_state>> msgs;
  for (unsigned i = 0; i < o.message_threads; ++i) {
    auto m = std::make_unique<message_state>();
    m->rng.seed(sim.random() ^ i);
    for (unsigned j = 0; j < per; ++j) {
      auto w = std::make_unique<worker_state>();
      w->msg = m.get();
      m->workers.push_back(std::move(w));
    }
    msgs.push_back(std::move(m));
  }
  for (auto& m : msgs) sim.spawn(std::make_unique<message_program>(sh, *m), -1, -1, "message");

  // The clone's report schedule, on one-second ticks of virtual time.
  schbench::report_schedule schedule(o);
  for (std::uint64_t tick = 1; tick < o.runtime_s; ++tick) {
    sim.run_until(static_cast<std::int64_t>(tick) * ns_per_s);
    const schbench::report_schedule::actions act = schedule.at(tick);
    if (act.warmup) out << "warmup done, zeroing stats\n";
    if (act.print) out << schbench::format_block(sh.latency, tick);
    if (act.zero) sh.latency.clear();
  }
  sim.run_until(static_cast<std::int64_t>(o.runtime_s) * ns_per_s);
  out << schbench::format_block(sh.latency, o.runtime_s) << std::flush;
  schbench::run_summary s = schbench::summarize(sh.latency, o.runtime_s);
  s.policy = sim.config().policy;
  s.mode = "sim";
  s.workers = sim.nr_cpus();
  s.topology = sim.topology_line();
  s.worker_threads = per;
  s.message_threads = o.message_threads;
  s.command_line = o.command_line;
  return s;
}

}  // namespace usched::sim
