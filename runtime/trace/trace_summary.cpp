// trace_summary.cpp: `perf sched latency` over a trace, and the trace
// files' names.
//
// perf's table (tools/perf/builtin-sched.c, output_lat_thread()):
//
//   "  %s:%d " (or "%s:(%d)" for merged tasks) padded to 24 columns, then
//   "|%11.3f ms |%9d | avg:%9.3f ms | max:%9.3f ms | max at: %13.6f s"
//
// between dashed rules, then a TOTAL row of the run time and switches.
// Here one more column counts each row's migrations, and below the totals
// the migrations by cause, the balance passes by outcome and the events
// the trace lost. The delay is from a fiber's first wake-up since it last
// ran to the switch that runs it (perf also times a preempted task from
// its preemption; a trace has no wake-up record there, and it is not
// counted).
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace_export.hpp"
#include "trace_names.hpp"

namespace usched::detail {
namespace {

namespace tn = trace_names;

constexpr double ns_per_ms = 1e6;
constexpr double ns_per_s = 1e9;
constexpr const char* rule =
    " ------------------------------------------------------------------------------------------------------------------------------\n";

struct row {
  std::string name;           // the label, or "" for an unlabelled fiber
  std::uint64_t first_fiber = 0;
  std::size_t fibers = 0;
  std::int64_t runtime = 0;   // ns
  std::uint64_t switches = 0;
  std::uint64_t delays = 0;
  std::int64_t total_delay = 0;
  std::int64_t max_delay = 0;
  std::int64_t max_at = 0;
  std::uint64_t migrations = 0;
};

}  // namespace

std::string latency_summary(const trace_data& d) {
  const auto labels = tn::labels(d);
  std::vector<tn::run_span> runs;
  std::vector<tn::wake_span> wakes;
  tn::spans(d, runs, wakes);

  // One row per label, and per unlabelled fiber.
  std::map<std::string, row> by_label;
  std::map<std::uint64_t, row> by_fiber;
  std::map<std::uint64_t, bool> counted;  // fibers already in their row's count
  const auto row_of = [&](std::uint64_t fiber) -> row& {
    const auto it = labels.find(fiber);
    row& r = it != labels.end() && !it->second.empty() ? by_label[it->second] : by_fiber[fiber];
    if (!counted[fiber]) {
      counted[fiber] = true;
      if (r.fibers++ == 0) r.first_fiber = fiber;
      if (it != labels.end()) r.name = it->second;
    }
    return r;
  };

  for (const tn::run_span& s : runs) {
    row& r = row_of(s.fiber);
    r.runtime += s.end - s.start;
    if (!s.before_trace) ++r.switches;
  }
  for (const tn::wake_span& w : wakes) {
    row& r = row_of(w.fiber);
    const std::int64_t delay = w.run - w.wake;
    ++r.delays;
    r.total_delay += delay;
    if (delay > r.max_delay || r.delays == 1) {
      r.max_delay = delay;
      r.max_at = w.run;
    }
  }
  std::array<std::uint64_t, static_cast<std::size_t>(migrate_cause::count) + 1> causes{};
  std::array<std::uint64_t, static_cast<std::size_t>(balance_outcome::count) + 1> outcomes{};
  std::uint64_t migrations = 0;
  std::uint64_t passes = 0;
  for (const trace_record& rec : d.records) {
    if (rec.type == trace_event::migrate) {
      ++row_of(rec.fiber).migrations;
      ++migrations;
      ++causes[std::min<std::size_t>(rec.reason, causes.size() - 1)];
    } else if (rec.type == trace_event::balance) {
      ++passes;
      ++outcomes[std::min<std::size_t>(rec.flags & 0xfu, outcomes.size() - 1)];
    }
  }

  std::vector<const row*> rows;
  for (const auto& [k, r] : by_label) rows.push_back(&r);
  for (const auto& [k, r] : by_fiber) rows.push_back(&r);
  // perf sched latency -s max: the longest delay first; then the longer
  // run time, then the name, so that equal rows keep one order.
  std::stable_sort(rows.begin(), rows.end(), [](const row* a, const row* b) {
    if (a->max_delay != b->max_delay) return a->max_delay > b->max_delay;
    if (a->runtime != b->runtime) return a->runtime > b->runtime;
    return a->first_fiber < b->first_fiber;
  });

  std::string out = "\n";
  out += rule;
  out += "  Task                  |   Runtime ms  | Switches | Average delay ms | Maximum delay ms | Maximum delay at       | Migrations\n";
  out += rule;
  std::int64_t all_runtime = 0;
  std::uint64_t all_switches = 0;
  char buf[256];
  for (const row* r : rows) {
    std::string task = "  " + (r->name.empty() ? std::string("fiber") : r->name);
    task += r->fibers > 1 ? ":(" + std::to_string(r->fibers) + ") " : ":" + std::to_string(r->first_fiber) + " ";
    if (task.size() < 24) task.resize(24, ' ');
    const double avg = r->delays ? static_cast<double>(r->total_delay) / static_cast<double>(r->delays) : 0.0;
    std::snprintf(buf, sizeof buf, "|%11.3f ms |%9llu | avg:%9.3f ms | max:%9.3f ms | max at: %13.6f s | %10llu\n",
                  static_cast<double>(r->runtime) / ns_per_ms, static_cast<unsigned long long>(r->switches),
                  avg / ns_per_ms, static_cast<double>(r->max_delay) / ns_per_ms,
                  static_cast<double>(r->max_at) / ns_per_s, static_cast<unsigned long long>(r->migrations));
    out += task + buf;
    all_runtime += r->runtime;
    all_switches += r->switches;
  }
  out += rule;
  std::snprintf(buf, sizeof buf, "  TOTAL:                |%11.3f ms |%9llu |\n",
                static_cast<double>(all_runtime) / ns_per_ms, static_cast<unsigned long long>(all_switches));
  out += buf;
  out += " ---------------------------------------------------\n";
  out += "  migrations: " + std::to_string(migrations) + " (";
  for (std::size_t i = 0; i < tn::migrate_causes.size(); ++i) {
    out += (i ? ", " : "") + std::string(tn::migrate_causes[i]) + " " + std::to_string(causes[i]);
  }
  out += ")\n  balance passes: " + std::to_string(passes) + " (";
  for (std::size_t i = 0; i < tn::balance_outcomes.size(); ++i) {
    out += (i ? ", " : "") + std::string(tn::balance_outcomes[i]) + " " + std::to_string(outcomes[i]);
  }
  out += ")\n  policy: " + (d.policy.empty() ? std::string("?") : d.policy) + ", " + std::to_string(d.nr_cpus) +
         " workers, " + (d.virtual_time ? "virtual time" : "real time") + ", " + std::to_string(d.records.size()) +
         " events, " + std::to_string(d.dropped) + " dropped\n";
  return out;
}

void write_trace_file(const std::string& path, const trace_data& d) {
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  std::ofstream f(path, std::ios::out | std::ios::trunc | std::ios::binary);
  if (!f) throw std::runtime_error("trace file '" + path + "': cannot be written");
  if (json) {
    write_chrome_json(f, d);
  } else {
    write_ftrace(f, d);
  }
  if (!f.flush()) throw std::runtime_error("trace file '" + path + "': writing failed");
}

trace_data read_raw_trace(std::istream& in) {
  raw_trace_header h;
  if (!in.read(reinterpret_cast<char*>(&h), sizeof h) || std::memcmp(h.magic, raw_trace_header{}.magic, 8) != 0) {
    throw std::runtime_error("not a raw trace (no USCHEDTR header)");
  }
  if (h.version != 1 || h.record_size != sizeof(trace_record)) {
    throw std::runtime_error("raw trace version " + std::to_string(h.version) + " with " +
                             std::to_string(h.record_size) + "-byte records; this reader takes version 1, " +
                             std::to_string(sizeof(trace_record)) + "-byte records");
  }
  trace_data d;
  d.nr_cpus = static_cast<std::size_t>(h.nr_cpus);
  d.dropped = h.dropped;
  d.virtual_time = h.virtual_time != 0;
  d.policy.assign(h.policy, strnlen(h.policy, sizeof h.policy));
  trace_record r;
  while (in.read(reinterpret_cast<char*>(&r), sizeof r)) d.records.push_back(r);
  if (in.gcount() != 0) throw std::runtime_error("raw trace cut short inside a record");
  std::stable_sort(d.records.begin(), d.records.end(),
                   [](const trace_record& a, const trace_record& b) { return a.time < b.time; });
  return d;
}

trace_data read_trace_file(const std::string& path) {
  std::ifstream f(path, std::ios::in | std::ios::binary);
  if (!f) throw std::runtime_error("trace file '" + path + "': cannot be read");
  try {
    char magic[8] = {};
    f.read(magic, sizeof magic);
    const bool raw = f.gcount() == sizeof magic && std::memcmp(magic, raw_trace_header{}.magic, sizeof magic) == 0;
    f.clear();
    f.seekg(0);
    return raw ? read_raw_trace(f) : read_ftrace(f);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("trace file '" + path + "': " + e.what());
  }
}

}  // namespace usched::detail
