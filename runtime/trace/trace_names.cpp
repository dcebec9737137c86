// trace_names.cpp: labels and track counts shared by the exporters.
#include "trace_names.hpp"

#include <algorithm>
#include <cstring>

namespace usched::detail::trace_names {

std::string label_text(const trace_record& r) {
  char bytes[8];
  std::memcpy(bytes, &r.other, sizeof bytes);
  std::size_t n = sizeof bytes;
  while (n > 0 && bytes[n - 1] == '\0') --n;
  return std::string(bytes, n);
}

std::unordered_map<std::uint64_t, std::string> labels(const trace_data& d) {
  std::unordered_map<std::uint64_t, std::string> out;
  for (const trace_record& r : d.records) {
    if (r.type != trace_event::label) continue;
    std::string& l = out[r.fiber];
    if (r.detail == 0) l.clear();
    l += label_text(r);
  }
  return out;
}

std::string fiber_name(std::uint64_t fiber, const std::unordered_map<std::uint64_t, std::string>& labels) {
  std::string s = "fiber " + std::to_string(fiber);
  const auto it = labels.find(fiber);
  if (it != labels.end() && !it->second.empty()) s += " (" + it->second + ")";
  return s;
}

std::size_t cpus_of(const trace_data& d) {
  std::size_t n = d.nr_cpus;
  for (const trace_record& r : d.records) {
    if (r.type == trace_event::label || r.cpu < 0) continue;
    n = std::max(n, static_cast<std::size_t>(r.cpu) + 1);
  }
  return n;
}

void spans(const trace_data& d, std::vector<run_span>& runs, std::vector<wake_span>& wakes) {
  struct cpu_state {
    bool running = false;
    bool switched = false;
    run_span open;
  };
  struct pending {
    std::int64_t time;
    int waker_cpu;
  };
  if (d.records.empty()) return;
  const std::int64_t first = d.records.front().time;
  const std::int64_t last = d.records.back().time;
  std::vector<cpu_state> cpus(cpus_of(d));
  std::unordered_map<std::uint64_t, pending> woken;
  for (const trace_record& r : d.records) {
    if (r.type == trace_event::wakeup) {
      woken.try_emplace(r.fiber, pending{r.time, r.aux});
      continue;
    }
    if (r.type != trace_event::switch_to || r.cpu < 0) continue;
    cpu_state& c = cpus[static_cast<std::size_t>(r.cpu)];
    if (c.running) {
      c.open.end = r.time;
      runs.push_back(c.open);
    } else if (r.fiber != 0 && !c.switched) {
      runs.push_back({r.cpu, r.fiber, first, r.time, true});
    }
    c.switched = true;
    c.running = r.other != 0;
    if (!c.running) continue;
    c.open = {r.cpu, r.other, r.time, r.time, false};
    const auto it = woken.find(r.other);
    if (it != woken.end()) {
      wakes.push_back({r.other, it->second.waker_cpu, r.cpu, it->second.time, r.time});
      woken.erase(it);
    }
  }
  for (cpu_state& c : cpus) {
    if (!c.running) continue;
    c.open.end = last;
    runs.push_back(c.open);
  }
}

}  // namespace usched::detail::trace_names
