// stats.cpp: runtime_stats as a readable table and as JSON.
#include <fmt/format.h>

#include <usched/runtime.hpp>

namespace usched {
namespace {

double ms(std::uint64_t ns) { return static_cast<double>(ns) / 1e6; }

// wake_reasons(): the table's block of wake-ups by reason, one line per
// worker naming only its non-zero reasons ("-" for none), so that a run
// that only sleeps and spawns reads as two words, not ten columns; empty
// when no worker counted any.
std::string wake_reasons(const std::vector<worker_stats>& workers) {
  bool any = false;
  for (const auto& s : workers) any = any || s.wakeups.total() != 0;
  if (!any) return {};
  std::string out = fmt::format("{:>6} wake-ups by reason\n", "worker");
  for (std::size_t w = 0; w < workers.size(); ++w) {
    std::string line;
    for (std::size_t r = 0; r < wake_reason_count; ++r) {
      const auto why = static_cast<wake_reason>(r);
      const std::uint64_t n = workers[w].wakeups[why];
      if (n != 0) line += fmt::format(" {}={}", to_string(why), n);
    }
    out += fmt::format("{:>6}{}\n", w, line.empty() ? " -" : line);
  }
  return out;
}

// wake_reasons_json(): every reason with its count, in the enum's order,
// as one JSON object.
std::string wake_reasons_json(const wake_counts& c) {
  std::string out = "{";
  for (std::size_t r = 0; r < wake_reason_count; ++r) {
    const auto why = static_cast<wake_reason>(r);
    out += fmt::format("{}\"{}\":{}", r ? "," : "", to_string(why), c[why]);
  }
  out += '}';
  return out;
}

}  // namespace

std::string runtime_stats::to_table() const {
  std::string out = fmt::format("usched statistics (policy {})\n", policy);
  out += fmt::format("{:>6} {:>10} {:>8} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "worker",
                     "fibers_run", "parks", "busy_ms", "idle_ms", "nidle_try", "nidle_hit", "pulled",
                     "wk_prev", "wk_idle", "wk_other");
  for (std::size_t w = 0; w < workers.size(); ++w) {
    const worker_stats& s = workers[w];
    out += fmt::format("{:>6} {:>10} {:>8} {:>10.1f} {:>10.1f} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", w,
                       s.fibers_run, s.parks, ms(s.busy_ns), ms(s.idle_ns), s.newidle_attempts,
                       s.newidle_pulls, s.fibers_pulled, s.wake_prev, s.wake_idle_sibling, s.wake_other);
  }
  out += wake_reasons(workers);
  bool any_level = false;
  for (const auto& s : workers) any_level = any_level || !s.levels.empty();
  if (!any_level) return out;
  out += fmt::format("{:>6} {:>5} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>6}\n", "worker",
                     "level", "attempts", "balanced", "success", "failed", "m_load", "m_util", "m_task",
                     "m_misf", "odd");
  for (std::size_t w = 0; w < workers.size(); ++w) {
    for (const domain_level_stats& l : workers[w].levels) {
      out += fmt::format("{:>6} {:>5} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>6}\n", w, l.level,
                         l.attempts, l.balanced, l.successes, l.failures, l.moved_load, l.moved_util,
                         l.moved_task, l.moved_misfit, l.odd_picks);
    }
  }
  return out;
}

std::string runtime_stats::to_json() const {
  std::string out = fmt::format("{{\"policy\":\"{}\",\"workers\":[", policy);
  for (std::size_t w = 0; w < workers.size(); ++w) {
    const worker_stats& s = workers[w];
    if (w) out += ',';
    out += fmt::format(
        "{{\"worker\":{},\"fibers_run\":{},\"parks\":{},\"busy_ns\":{},\"idle_ns\":{},"
        "\"newidle_attempts\":{},\"newidle_pulls\":{},\"fibers_pulled\":{},\"wake_prev\":{},"
        "\"wake_idle_sibling\":{},\"wake_other\":{},\"wakeup_preemptions\":{},\"tick_preemptions\":{},\"active_pushes\":{},\"active_abandoned\":{},\"newidle_skipped\":{},\"handoffs\":{},\"wakeups\":{},\"levels\":[",
        w, s.fibers_run, s.parks, s.busy_ns, s.idle_ns, s.newidle_attempts, s.newidle_pulls,
        s.fibers_pulled, s.wake_prev, s.wake_idle_sibling, s.wake_other, s.wakeup_preemptions,
        s.tick_preemptions, s.active_pushes, s.active_abandoned, s.newidle_skipped, s.handoffs,
        wake_reasons_json(s.wakeups));
    for (std::size_t i = 0; i < s.levels.size(); ++i) {
      const domain_level_stats& l = s.levels[i];
      if (i) out += ',';
      out += fmt::format(
          "{{\"level\":\"{}\",\"attempts\":{},\"balanced\":{},\"successes\":{},\"failures\":{},"
          "\"moved\":{{\"migrate_load\":{},\"migrate_util\":{},\"migrate_task\":{},\"migrate_misfit\":{}}},"
          "\"odd_picks\":{}}}",
          l.level, l.attempts, l.balanced, l.successes, l.failures, l.moved_load, l.moved_util,
          l.moved_task, l.moved_misfit, l.odd_picks);
    }
    out += "]}";
  }
  out += "]}\n";
  return out;
}

}  // namespace usched
