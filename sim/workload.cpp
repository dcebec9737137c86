// workload.cpp: the text workload's parser and its programs (workload.hpp).
#include "workload.hpp"

#include <istream>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>

namespace usched::sim {
namespace {

constexpr std::int64_t max_duration_ns = 366LL * 24 * 3600 * 1'000'000'000LL;

std::int64_t parse_duration(const std::string& text, const std::string& where) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string unit = text.substr(digits);
  std::int64_t scale = 0;
  if (unit == "ns") scale = 1;
  if (unit == "us") scale = 1000;
  if (unit == "ms") scale = 1'000'000;
  if (unit == "s") scale = 1'000'000'000;
  if (digits == 0 || digits > 18 || scale == 0) {
    throw workload_error(where + "'" + text + "' is not a duration; expected a whole number with ns, us, ms or s");
  }
  const std::int64_t n = std::stoll(text.substr(0, digits));
  if (n > max_duration_ns / scale) throw workload_error(where + "'" + text + "' is longer than a year");
  return n * scale;
}

unsigned parse_count(const std::string& text, const std::string& where, unsigned max) {
  if (text.size() < 2 || text[0] != 'x' || text.find_first_not_of("0123456789", 1) != std::string::npos ||
      text.size() > 8 || std::stoul(text.substr(1)) > max) {
    throw workload_error(where + "'" + text + "' is not a count; expected x0..x" + std::to_string(max));
  }
  return static_cast<unsigned>(std::stoul(text.substr(1)));
}

struct run_state {
  const workload* w = nullptr;
  std::map<std::string, const fiber_def*> defs;
  std::map<std::string, std::unique_ptr<sim_event>> events;
  schbench::histogram latency;

  sim_event& event(const std::string& name) {
    auto& e = events[name];
    if (!e) e = std::make_unique<sim_event>();
    return *e;
  }
};

class file_program : public program {
 public:
  file_program(run_state& st, const fiber_def& def) : st_(st), def_(def) {}

  step next(simulator& sim, sim_fiber& self) override {
    if (blocked_) {
      blocked_ = false;
      // A blocking step that ended at once (a wait whose post was already
      // there, a join whose fiber exited while the spawn's cost was run)
      // woke nothing, and is no sample.
      if (self.times_woken != times_woken_at_block_) {
        // A wake-up: runnable since the engine queued it, running now.
        // Every one is a sample, a wake-up served within the microsecond
        // too: this histogram describes the workload's wake-ups, and
        // leaving out the 0 us ones would push every percentile up (a
        // sleeper that always gets its CPU at once would report nothing).
        // The clone and its model keep schbench's `delta > 0`.
        const std::int64_t us = sim.now() / 1000 - self.woken_at / 1000;
        st_.latency.record_any(static_cast<std::uint64_t>(us));
      }
    }
    for (;;) {
      if (pc_ == def_.steps.size()) {
        ++round_;
        if (def_.repeat != 0 && round_ >= def_.repeat) return step::exit();
        pc_ = 0;
        if (def_.steps.empty()) return step::exit();
      }
      const workload_step& s = def_.steps[pc_++];
      switch (s.what) {
        case workload_step::kind::run:
          return step::run(s.ns);
        case workload_step::kind::sleep:
          block(self);
          return step::sleep(s.ns);
        case workload_step::kind::wait:
          block(self);
          return step::wait(st_.event(s.name));
        case workload_step::kind::post:
          sim.post(st_.event(s.name));
          break;
        case workload_step::kind::spawn:
          for (unsigned i = 0; i < s.count; ++i) {
            const fiber_def& d = *st_.defs.at(s.name);
            children_.push_back(&sim.spawn(std::make_unique<file_program>(st_, d), d.pin, d.node, nullptr, d.slice_ns));
          }
          break;
        case workload_step::kind::join:
          while (!children_.empty() && children_.back()->exited) children_.pop_back();
          if (!children_.empty()) {
            --pc_;  // come back here when it has exited
            block(self);
            return step::join(*children_.back());
          }
          break;
      }
    }
  }

 private:
  run_state& st_;
  const fiber_def& def_;
  // block() notes that the step about to be returned blocks the fiber.
  void block(const sim_fiber& self) noexcept {
    blocked_ = true;
    times_woken_at_block_ = self.times_woken;
  }

  std::size_t pc_ = 0;
  std::uint64_t round_ = 0;
  bool blocked_ = false;
  std::uint64_t times_woken_at_block_ = 0;
  std::vector<sim_fiber*> children_;
};

}  // namespace

workload parse_workload(std::istream& in, const std::string& file) {
  workload w;
  fiber_def* cur = nullptr;
  bool runtime_seen = false;
  std::string line;
  std::vector<std::pair<int, std::string>> spawned;  // (line, name), checked at the end
  for (int no = 1; std::getline(in, line); ++no) {
    const std::string where = file + ":" + std::to_string(no) + ": ";
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> t;
    for (std::string x; words >> x;) t.push_back(x);
    if (t.empty()) continue;
    const std::string& op = t[0];
    const auto want = [&](std::size_t lo, std::size_t hi, const char* form) {
      if (t.size() < lo || t.size() > hi) throw workload_error(where + "expected '" + form + "'");
    };
    if (cur && cur->repeat != 1 && op != "fiber") {
      throw workload_error(where + "'" + op + "' after 'repeat': repeat must be the fiber's last step");
    }
    if (op == "runtime") {
      want(2, 2, "runtime DURATION");
      if (runtime_seen) throw workload_error(where + "a second 'runtime'");
      runtime_seen = true;
      w.runtime_ns = parse_duration(t[1], where);
      if (w.runtime_ns <= 0) throw workload_error(where + "the runtime must be longer than 0");
    } else if (op == "fiber") {
      want(2, 7, "fiber NAME [xN] [pin=W] [on=W] [node=N] [slice=DURATION]");
      for (const auto& f : w.fibers) {
        if (f.name == t[1]) throw workload_error(where + "fiber '" + t[1] + "' is defined twice (line " + std::to_string(f.line) + ")");
      }
      fiber_def d;
      d.name = t[1];
      d.line = no;
      for (std::size_t i = 2; i < t.size(); ++i) {
        if (t[i].rfind("slice=", 0) == 0) {
          d.slice_ns = parse_duration(t[i].substr(6), where);
          if (d.slice_ns < 100'000 || d.slice_ns > 100'000'000) {
            throw workload_error(where + "'" + t[i] + "' is out of range: a slice is 100us..100ms");
          }
        } else if (t[i].rfind("node=", 0) == 0) {
          const std::string v = t[i].substr(5);
          if (v.empty() || v.size() > 4 || v.find_first_not_of("0123456789") != std::string::npos) {
            throw workload_error(where + "'" + t[i] + "' is not a NUMA node; expected node=N with N a node index");
          }
          d.node = std::stoi(v);
        } else if (t[i].rfind("pin=", 0) == 0 || t[i].rfind("on=", 0) == 0) {
          const bool pin = t[i][0] == 'p';
          const std::string v = t[i].substr(pin ? 4 : 3);
          if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos) {
            throw workload_error(where + "'" + t[i] + "' is not a worker; expected " + (pin ? "pin" : "on") +
                                 "=W with W a worker index");
          }
          (pin ? d.pin : d.on) = std::stoi(v);
        } else {
          d.count = parse_count(t[i], where, 100000);
        }
      }
      w.fibers.push_back(std::move(d));
      cur = &w.fibers.back();
    } else if (!cur) {
      throw workload_error(where + "'" + op + "' outside a fiber; a step follows a 'fiber NAME' line");
    } else if (op == "run" || op == "sleep") {
      want(2, 2, op == "run" ? "run DURATION" : "sleep DURATION");
      workload_step s;
      s.what = op == "run" ? workload_step::kind::run : workload_step::kind::sleep;
      s.ns = parse_duration(t[1], where);
      cur->steps.push_back(s);
    } else if (op == "wait" || op == "post") {
      want(2, 2, op == "wait" ? "wait EVENT" : "post EVENT");
      workload_step s;
      s.what = op == "wait" ? workload_step::kind::wait : workload_step::kind::post;
      s.name = t[1];
      cur->steps.push_back(s);
    } else if (op == "spawn") {
      want(2, 3, "spawn NAME [xN]");
      workload_step s;
      s.what = workload_step::kind::spawn;
      s.name = t[1];
      if (t.size() == 3) s.count = parse_count(t[2], where, 100000);
      spawned.emplace_back(no, s.name);
      cur->steps.push_back(s);
    } else if (op == "join") {
      want(1, 1, "join");
      workload_step s;
      s.what = workload_step::kind::join;
      cur->steps.push_back(s);
    } else if (op == "repeat") {
      want(1, 2, "repeat [N]");
      cur->repeat = 0;
      if (t.size() == 2) {
        if (t[1].find_first_not_of("0123456789") != std::string::npos || t[1].size() > 9 || std::stoul(t[1]) == 0) {
          throw workload_error(where + "'" + t[1] + "' is not a repeat count; expected 1..999999999");
        }
        cur->repeat = std::stoul(t[1]);
        if (cur->repeat == 1) cur->repeat = 1;  // once in all: as if absent
      }
    } else {
      throw workload_error(where + "unknown statement '" + op +
                           "'; expected runtime, fiber, run, sleep, wait, post, spawn, join or repeat");
    }
  }
  for (const auto& [no, name] : spawned) {
    bool found = false;
    for (const auto& f : w.fibers) found |= f.name == name;
    if (!found) throw workload_error(file + ":" + std::to_string(no) + ": spawn of '" + name + "', which no 'fiber' line defines");
  }
  if (w.fibers.empty()) throw workload_error(file + ": no 'fiber' line: nothing to run");
  for (const auto& f : w.fibers) {
    // A fiber that repeats only steps that take no time would never give
    // the simulated clock a chance to move.
    if (f.repeat == 1) continue;
    bool takes_time = false;
    for (const auto& st : f.steps) {
      takes_time |= (st.what == workload_step::kind::run && st.ns > 0) || st.what == workload_step::kind::sleep ||
                    st.what == workload_step::kind::wait || st.what == workload_step::kind::join;
    }
    if (!takes_time) {
      throw workload_error(file + ":" + std::to_string(f.line) + ": fiber '" + f.name +
                           "' repeats steps that take no time (a run of 0, posts, spawns); it needs a run, "
                           "sleep, wait or join");
    }
  }
  return w;
}

schbench::run_summary run_workload(simulator& sim, const workload& w, std::ostream& out) {
  run_state st;
  st.w = &w;
  for (const auto& f : w.fibers) {
    for (const int worker : {f.pin, f.on}) {
      if (worker >= static_cast<int>(sim.nr_cpus())) {
        throw workload_error("fiber '" + f.name + "' (line " + std::to_string(f.line) + "): worker " +
                             std::to_string(worker) + " but the topology has workers 0.." +
                             std::to_string(sim.nr_cpus() - 1));
      }
    }
    if (f.node >= static_cast<int>(sim.nr_nodes())) {
      throw workload_error("fiber '" + f.name + "' (line " + std::to_string(f.line) + "): node " +
                           std::to_string(f.node) + " but the topology has nodes 0.." +
                           std::to_string(sim.nr_nodes() - 1));
    }
    st.defs[f.name] = &f;
  }
  for (const auto& f : w.fibers) {
    for (unsigned i = 0; i < f.count; ++i) {
      auto p = std::make_unique<file_program>(st, f);
      if (f.on >= 0 && f.pin < 0) {
        sim.spawn_on(std::move(p), f.on, f.node, f.slice_ns);
      } else {
        sim.spawn(std::move(p), f.pin, f.node, nullptr, f.slice_ns);
      }
    }
  }
  sim.run_until(w.runtime_ns);
  const std::uint64_t secs = static_cast<std::uint64_t>(w.runtime_ns / 1'000'000'000);
  out << schbench::format_block(st.latency, secs) << std::flush;
  schbench::run_summary s = schbench::summarize(st.latency, secs);
  s.policy = sim.config().policy;
  s.mode = "sim";
  s.workers = sim.nr_cpus();
  s.topology = sim.topology_line();
  return s;
}

}  // namespace usched::sim
