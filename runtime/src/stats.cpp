// stats.cpp: runtime_stats as a readable table and as JSON.
#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

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

// The percentiles the table and the JSON report, and their JSON names.
constexpr std::array<double, 4> latency_percentiles = {50.0, 90.0, 99.0, 99.9};
constexpr std::array<std::string_view, 4> latency_percentile_keys = {"p50_ns", "p90_ns", "p99_ns", "p999_ns"};

double us(std::uint64_t ns) { return static_cast<double>(ns) / 1e3; }

// latency_row(): one line of the table's latency block.
std::string latency_row(std::string_view who, std::string_view why, const latency_histogram& h) {
  std::string out = fmt::format("{:>6} {:>8} {:>10} {:>9.1f}", who, why, h.count, us(h.mean_ns()));
  for (const double p : latency_percentiles) out += fmt::format(" {:>9.1f}", us(h.percentile(p)));
  out += fmt::format(" {:>9.1f}\n", us(h.max_ns));
  return out;
}

// wake_latencies(): the table's block of wake-to-run delays: for the whole
// runtime, one line per reason that has any and the total; then each
// worker's total. Empty when nothing was recorded.
std::string wake_latencies(const runtime_stats& st) {
  const latency_histogram all = st.wake_latency();
  if (all.count == 0) return {};
  std::string out = fmt::format("{:>6} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  wake-to-run (us)\n",
                                "worker", "reason", "count", "mean", "p50", "p90", "p99", "p99.9", "max");
  for (std::size_t r = 0; r < wake_reason_count; ++r) {
    const auto why = static_cast<wake_reason>(r);
    const latency_histogram h = st.wake_latency(why);
    if (h.count != 0) out += latency_row("all", to_string(why), h);
  }
  out += latency_row("all", "total", all);
  for (std::size_t w = 0; w < st.workers.size(); ++w) {
    out += latency_row(fmt::format("{}", w), "total", st.workers[w].wake_latency());
  }
  return out;
}

// latency_json(): one histogram as a JSON object: count, sum, max, the
// percentiles, and its non-empty buckets as [lower bound ns, count] pairs.
std::string latency_json(const latency_histogram& h) {
  std::string out = fmt::format("{{\"count\":{},\"sum_ns\":{},\"max_ns\":{}", h.count, h.sum_ns, h.max_ns);
  for (std::size_t i = 0; i < latency_percentiles.size(); ++i) {
    out += fmt::format(",\"{}\":{}", latency_percentile_keys[i], h.percentile(latency_percentiles[i]));
  }
  out += ",\"buckets\":[";
  bool first = true;
  for (std::size_t b = 0; b < latency_histogram::bucket_count; ++b) {
    if (h.buckets[b] == 0) continue;
    out += fmt::format("{}[{},{}]", first ? "" : ",", latency_histogram::bucket_lower(b), h.buckets[b]);
    first = false;
  }
  out += "]}";
  return out;
}

// wake_latency_json(): the total and every reason (in the enum's order,
// empty ones included, so a reader finds every key), as one JSON object.
std::string wake_latency_json(const latency_histogram& total,
                              const std::array<latency_histogram, wake_reason_count>& by_reason) {
  std::string out = "{\"total\":" + latency_json(total);
  for (std::size_t r = 0; r < wake_reason_count; ++r) {
    out += fmt::format(",\"{}\":{}", to_string(static_cast<wake_reason>(r)), latency_json(by_reason[r]));
  }
  out += '}';
  return out;
}

}  // namespace

std::uint64_t latency_histogram::percentile(double p) const noexcept {
  if (count == 0) return 0;
  // The rank of the p-th percentile: at least the first sample.
  auto rank = static_cast<std::uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count)));
  if (rank == 0) rank = 1;
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < bucket_count; ++i) {
    seen += buckets[i];
    if (seen >= rank) return std::min(max_ns, bucket_lower(i) + bucket_width(i) / 2);
  }
  return max_ns;
}

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
  out += wake_latencies(*this);
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
    out += "],\"wake_latency\":" + wake_latency_json(s.wake_latency(), s.wake_latencies) + '}';
  }
  std::array<latency_histogram, wake_reason_count> by_reason;
  for (std::size_t r = 0; r < wake_reason_count; ++r) by_reason[r] = wake_latency(static_cast<wake_reason>(r));
  out += "],\"wake_latency\":" + wake_latency_json(wake_latency(), by_reason) + "}\n";
  return out;
}

}  // namespace usched
