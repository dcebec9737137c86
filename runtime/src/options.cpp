// options.cpp: reading the USCHED_* environment into options, the one
// validation both ways of setting a field go through, and the kernel's
// preset. It is a library of its own (usched_options), below the real
// backend and the simulator alike, so the simulator reads its settings the
// way a runtime does without linking the runtime.
//
// Every field is described once, in rules(): its name in code, its
// variable, how the variable's text is read, which values are accepted.
// from_env() only reads text into fields (a value that is not even of the
// right form is rejected there, naming the variable); validate() checks the
// ranges. A rejected value is reported in the terms the user set it in: the
// variable while the field still holds what the variable gave it, the field
// otherwise, whichever path reached validate().
#include <algorithm>
#include <cerrno>
#include <iterator>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <usched/error.hpp>
#include <usched/options.hpp>

#include "options_check.hpp"
#include "policy.hpp"

namespace usched {

namespace {
// The EEVDF switches, in bit order, as the kernel spells them.
constexpr std::string_view sched_feature_list[] = {
    "PLACE_LAG", "PLACE_DEADLINE_INITIAL", "PLACE_REL_DEADLINE", "RUN_TO_PARITY",
    "PREEMPT_SHORT", "DELAY_DEQUEUE", "DELAY_ZERO",
};
constexpr unsigned all_sched_features = (1u << std::size(sched_feature_list)) - 1;
static_assert(all_sched_features == options{}.eevdf_features, "every switch on by default");
}  // namespace

std::optional<unsigned> parse_sched_features(std::string_view list, unsigned mask) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) continue;
    const bool off = item.substr(0, 3) == "NO_";
    if (off) item.remove_prefix(3);
    const auto* it = std::find(std::begin(sched_feature_list), std::end(sched_feature_list), item);
    if (it == std::end(sched_feature_list)) return std::nullopt;
    const unsigned bit = 1u << (it - std::begin(sched_feature_list));
    mask = off ? mask & ~bit : mask | bit;
  }
  return mask;
}

std::string sched_feature_names() {
  std::string out;
  for (std::string_view n : sched_feature_list) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// The variable's text, or null when it is unset. An empty value counts as
// unset, so `USCHED_POLICY= prog` runs with the default, as an unset
// variable does (documented in the README's table).
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// The one rule for numbers: decimal digits only (no sign, no spaces, no
// unit), within unsigned long long.
std::optional<unsigned long long> parse_decimal(std::string_view s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  errno = 0;
  const std::string text(s);
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno != 0) return std::nullopt;
  return v;
}

// The one rule for words: exactly one of the listed spellings.
std::string joined(const std::vector<const char*>& words) {
  std::string out;
  for (const char* w : words) {
    if (!out.empty()) out += ", ";
    out += w;
  }
  return out;
}

const std::vector<const char*>& log_levels() {
  static const std::vector<const char*> levels = {"trace", "debug", "info", "warn",
                                                  "error", "critical", "off"};
  return levels;
}

bool is_log_level(const std::string& s) {
  for (const char* l : log_levels()) {
    if (s == l) return true;
  }
  return false;
}

bool is_policy(const std::string& s) {
  for (const auto& p : registered_policies()) {
    if (p.name == s) return true;
  }
  return false;
}

// One field: how it is named, read from its variable, shown and checked.
struct option_rule {
  const char* field;     // as written in code, after "options::"
  const char* variable;  // its USCHED_* variable, or null (set only from code)
  // Reads the variable's text into the field; false when the text is not
  // of the variable's form at all.
  std::function<bool(std::string_view, options&)> parse;
  std::function<bool(const options&)> valid;
  std::function<bool(const options&, const options&)> same;
  // The field's value as code would write it.
  std::function<std::string(const options&)> show;
  // What follows the subject in the message, for the variable and for the
  // field: " is not valid: expected ...".
  std::string complaint_env;
  std::string complaint_code;
};

std::string expected(const std::string& accepted) { return " is not valid: expected " + accepted; }

// A duration field counted in D (microseconds, milliseconds: `unit` is its
// name, `suffix` its suffix as code would print it), accepted in [lo, hi].
template <class D>
option_rule duration(const char* field, const char* variable, D options::*member, long long lo, long long hi,
                     const char* what, const char* unit, const char* suffix) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  option_rule r;
  r.field = field;
  r.variable = variable;
  r.parse = [member](std::string_view s, options& o) {
    const auto v = parse_decimal(s);
    if (!v || *v > static_cast<unsigned long long>(std::numeric_limits<long long>::max())) return false;
    o.*member = D(static_cast<long long>(*v));
    return true;
  };
  r.valid = [member, lo, hi](const options& o) {
    const long long v = (o.*member).count();
    return v >= lo && v <= hi;
  };
  r.same = [member](const options& a, const options& b) { return a.*member == b.*member; };
  r.show = [member, suffix](const options& o) { return std::to_string((o.*member).count()) + suffix; };
  r.complaint_env = expected(std::string(what) + " in " + unit + ", " + range);
  r.complaint_code = expected(std::string(what) + " in " + unit + ", " + range + " " + suffix);
  return r;
}

option_rule micros(const char* field, const char* variable, microseconds options::*member, long long lo,
                   long long hi, const char* what) {
  return duration(field, variable, member, lo, hi, what, "microseconds", "us");
}

option_rule millis(const char* field, const char* variable, milliseconds options::*member, long long lo,
                   long long hi, const char* what) {
  return duration(field, variable, member, lo, hi, what, "milliseconds", "ms");
}

// A count field, accepted in [lo, hi].
option_rule count(const char* field, const char* variable, unsigned options::*member, unsigned lo, unsigned hi,
                  const char* what) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  option_rule r;
  r.field = field;
  r.variable = variable;
  r.parse = [member](std::string_view s, options& o) {
    const auto v = parse_decimal(s);
    if (!v || *v > std::numeric_limits<unsigned>::max()) return false;
    o.*member = static_cast<unsigned>(*v);
    return true;
  };
  r.valid = [member, lo, hi](const options& o) { return o.*member >= lo && o.*member <= hi; };
  r.same = [member](const options& a, const options& b) { return a.*member == b.*member; };
  r.show = [member](const options& o) { return std::to_string(o.*member); };
  r.complaint_env = expected(std::string(what) + ", " + range);
  r.complaint_code = r.complaint_env;
  return r;
}

// A switch: exactly "0" or "1".
option_rule flag(const char* field, const char* variable, bool options::*member, const char* off,
                 const char* on) {
  option_rule r;
  r.field = field;
  r.variable = variable;
  r.parse = [member](std::string_view s, options& o) {
    if (s != "0" && s != "1") return false;
    o.*member = s == "1";
    return true;
  };
  r.valid = [](const options&) { return true; };
  r.same = [member](const options& a, const options& b) { return a.*member == b.*member; };
  r.show = [member](const options& o) { return std::string(o.*member ? "true" : "false"); };
  r.complaint_env = expected(std::string("0 (") + off + ") or 1 (" + on + ")");
  r.complaint_code = r.complaint_env;
  return r;
}

// A text field: any text is of the variable's form; `valid` judges it, and
// `complaint` is what follows the subject when it fails (empty when another
// layer judges it: the topology is read by topology::load()).
option_rule text(const char* field, const char* variable, std::string options::*member,
                 bool (*valid)(const std::string&), std::string complaint) {
  option_rule r;
  r.field = field;
  r.variable = variable;
  r.parse = [member](std::string_view s, options& o) {
    o.*member = std::string(s);
    return true;
  };
  r.valid = [member, valid](const options& o) { return valid(o.*member); };
  r.same = [member](const options& a, const options& b) { return a.*member == b.*member; };
  r.show = [member](const options& o) { return "'" + o.*member + "'"; };
  r.complaint_env = complaint;
  r.complaint_code = std::move(complaint);
  return r;
}

constexpr std::size_t kib = 1024;
constexpr std::size_t min_stack_kib = 16;
constexpr std::size_t max_stack_kib = 1024 * 1024;

const std::vector<option_rule>& rules() {
  static const std::vector<option_rule> table = [] {
    std::vector<option_rule> t;

    t.push_back(text("policy", "USCHED_POLICY", &options::policy, &is_policy,
                     " is not a registered policy; choose one of: " + policy_names_joined()));

    option_rule workers;
    workers.field = "workers";
    workers.variable = "USCHED_WORKERS";
    workers.parse = [](std::string_view s, options& o) {
      if (s == "pus" || s == "cores") {
        o.workers = 0;
        o.unit = s == "pus" ? worker_unit::pu : worker_unit::core;
        return true;
      }
      const auto v = parse_decimal(s);
      if (!v || *v == 0 || *v > std::numeric_limits<unsigned>::max()) return false;
      o.workers = static_cast<unsigned>(*v);
      return true;
    };
    workers.valid = [](const options& o) { return o.workers <= max_workers; };
    workers.same = [](const options& a, const options& b) {
      return a.workers == b.workers && (a.workers != 0 || a.unit == b.unit);
    };
    workers.show = [](const options& o) { return std::to_string(o.workers); };
    workers.complaint_env = expected("a number of workers, 1.." + std::to_string(max_workers) +
                                     ", 'pus' (one per PU) or 'cores' (one per core)");
    workers.complaint_code = expected("0 (one per unit) or a number of workers, 1.." +
                                      std::to_string(max_workers));
    t.push_back(std::move(workers));

    option_rule unit;
    unit.field = "unit";
    unit.variable = nullptr;  // USCHED_WORKERS=pus|cores sets it
    unit.valid = [](const options& o) {
      return o.unit == worker_unit::pu || o.unit == worker_unit::core;
    };
    unit.same = [](const options& a, const options& b) { return a.unit == b.unit; };
    unit.show = [](const options& o) { return std::to_string(static_cast<int>(o.unit)); };
    unit.complaint_code = expected("worker_unit::pu or worker_unit::core");
    t.push_back(std::move(unit));

    t.push_back(text("topology", "USCHED_TOPOLOGY", &options::topology,
                     [](const std::string&) { return true; }, ""));

    t.push_back(micros("slice", "USCHED_SLICE_US", &options::slice, 1, 10'000'000, "a slice"));
    t.push_back(millis("stall", "USCHED_STALL_MS", &options::stall, 0, 3'600'000, "a stall threshold"));

    option_rule stack;
    stack.field = "stack_size";
    stack.variable = "USCHED_STACK_KB";
    stack.parse = [](std::string_view s, options& o) {
      const auto v = parse_decimal(s);
      if (!v || *v > std::numeric_limits<std::size_t>::max() / kib) return false;
      o.stack_size = static_cast<std::size_t>(*v) * kib;
      return true;
    };
    stack.valid = [](const options& o) {
      return o.stack_size >= min_stack_kib * kib && o.stack_size <= max_stack_kib * kib;
    };
    stack.same = [](const options& a, const options& b) { return a.stack_size == b.stack_size; };
    stack.show = [](const options& o) { return std::to_string(o.stack_size); };
    stack.complaint_env = expected("a stack size in KiB, " + std::to_string(min_stack_kib) + ".." +
                                   std::to_string(max_stack_kib));
    stack.complaint_code = expected("a stack size in bytes, " + std::to_string(min_stack_kib * kib) +
                                    ".." + std::to_string(max_stack_kib * kib) + " (16 KiB..1 GiB)");
    t.push_back(std::move(stack));

    option_rule guard;
    guard.field = "stack_guard";
    guard.variable = "USCHED_GUARD_PAGES";
    guard.parse = [](std::string_view s, options& o) {
      if (s == "auto") return o.stack_guard = options::guard_pages::automatic, true;
      if (s == "mprotect") return o.stack_guard = options::guard_pages::mprotect, true;
      return false;
    };
    guard.valid = [](const options& o) {
      return o.stack_guard == options::guard_pages::automatic || o.stack_guard == options::guard_pages::mprotect;
    };
    guard.same = [](const options& a, const options& b) { return a.stack_guard == b.stack_guard; };
    guard.show = [](const options& o) { return std::to_string(static_cast<int>(o.stack_guard)); };
    guard.complaint_env = expected("auto or mprotect");
    guard.complaint_code = expected("guard_pages::automatic or mprotect");
    t.push_back(std::move(guard));

    t.push_back(micros("spin", "USCHED_SPIN_US", &options::spin, 0, 1'000'000, "a spin time"));
    t.push_back(flag("pin", "USCHED_PIN", &options::pin, "do not pin workers", "pin"));
    t.push_back(count("blocking_threads", "USCHED_BLOCKING_THREADS", &options::blocking_threads, 1, 4096,
                      "a number of threads"));
    t.push_back(micros("cfs_latency", "USCHED_CFS_LATENCY_US", &options::cfs_latency, 100,
                       10'000'000, "a period"));
    t.push_back(micros("cfs_min_granularity", "USCHED_CFS_MIN_GRANULARITY_US",
                       &options::cfs_min_granularity, 10, 10'000'000, "a time"));
    t.push_back(micros("cfs_wakeup_granularity", "USCHED_CFS_WAKEUP_GRANULARITY_US",
                       &options::cfs_wakeup_granularity, 0, 10'000'000, "a time"));
    option_rule scaling;
    scaling.field = "cfs_tunable_scaling";
    scaling.variable = "USCHED_CFS_TUNABLE_SCALING";
    scaling.parse = [](std::string_view s, options& o) {
      if (s == "none") return o.cfs_tunable_scaling = options::tunable_scaling::none, true;
      if (s == "log") return o.cfs_tunable_scaling = options::tunable_scaling::log, true;
      if (s == "linear") return o.cfs_tunable_scaling = options::tunable_scaling::linear, true;
      return false;
    };
    scaling.valid = [](const options& o) {
      return o.cfs_tunable_scaling == options::tunable_scaling::none ||
             o.cfs_tunable_scaling == options::tunable_scaling::log ||
             o.cfs_tunable_scaling == options::tunable_scaling::linear;
    };
    scaling.same = [](const options& a, const options& b) {
      return a.cfs_tunable_scaling == b.cfs_tunable_scaling;
    };
    scaling.show = [](const options& o) { return std::to_string(static_cast<int>(o.cfs_tunable_scaling)); };
    scaling.complaint_env = expected("none, log or linear");
    scaling.complaint_code = expected("tunable_scaling::none, log or linear");
    t.push_back(std::move(scaling));
    t.push_back(micros("eevdf_base_slice", "USCHED_EEVDF_BASE_SLICE_US", &options::eevdf_base_slice, 100,
                       100'000, "a slice"));
    option_rule features;
    features.field = "eevdf_features";
    features.variable = "USCHED_SCHED_FEATURES";
    features.parse = [](std::string_view s, options& o) {
      const auto mask = parse_sched_features(s, o.eevdf_features);
      if (!mask) return false;
      o.eevdf_features = *mask;
      return true;
    };
    features.valid = [](const options& o) { return (o.eevdf_features & ~all_sched_features) == 0; };
    features.same = [](const options& a, const options& b) { return a.eevdf_features == b.eevdf_features; };
    features.show = [](const options& o) { return std::to_string(o.eevdf_features); };
    features.complaint_env = expected("a comma-separated list of " + sched_feature_names() +
                                      ", each optionally prefixed NO_");
    features.complaint_code = expected("a bit mask below " + std::to_string(all_sched_features + 1));
    t.push_back(std::move(features));
    t.push_back(flag("load_tracking", "USCHED_LOAD_TRACKING", &options::load_tracking, "off", "on"));
    t.push_back(flag("join_handoff", "USCHED_JOIN_HANDOFF", &options::join_handoff, "off", "on"));
    t.push_back(flag("fork_balance", "USCHED_FORK_BALANCE", &options::fork_balance, "off", "on"));

    option_rule io;
    io.field = "io";
    io.variable = "USCHED_IO";
    io.parse = [](std::string_view s, options& o) {
      if (s == "auto") return o.io = options::io_backend::automatic, true;
      if (s == "io_uring") return o.io = options::io_backend::io_uring, true;
      if (s == "epoll") return o.io = options::io_backend::epoll, true;
      return false;
    };
    io.valid = [](const options& o) {
      return o.io == options::io_backend::automatic || o.io == options::io_backend::io_uring ||
             o.io == options::io_backend::epoll;
    };
    io.same = [](const options& a, const options& b) { return a.io == b.io; };
    io.show = [](const options& o) -> std::string {
      switch (o.io) {
        case options::io_backend::automatic: return "io_backend::automatic";
        case options::io_backend::io_uring: return "io_backend::io_uring";
        case options::io_backend::epoll: return "io_backend::epoll";
      }
      return std::to_string(static_cast<int>(o.io));
    };
    io.complaint_env = expected("auto, io_uring or epoll");
    io.complaint_code = expected("io_backend::automatic, io_uring or epoll");
    t.push_back(std::move(io));

    option_rule stats;
    stats.field = "stats";
    stats.variable = "USCHED_STATS";
    stats.parse = [](std::string_view s, options& o) {
      if (s == "0") return o.stats = options::stats_output::none, true;
      if (s == "1") return o.stats = options::stats_output::table, true;
      if (s == "json") return o.stats = options::stats_output::json, true;
      return false;
    };
    stats.valid = [](const options& o) {
      return o.stats == options::stats_output::none || o.stats == options::stats_output::table ||
             o.stats == options::stats_output::json;
    };
    stats.same = [](const options& a, const options& b) { return a.stats == b.stats; };
    stats.show = [](const options& o) { return std::to_string(static_cast<int>(o.stats)); };
    stats.complaint_env = expected("0, 1 (a table) or json");
    stats.complaint_code = expected("stats_output::none, table or json");
    t.push_back(std::move(stats));

    t.push_back(text("trace", "USCHED_TRACE", &options::trace, [](const std::string&) { return true; }, ""));
    t.push_back(count("trace_flight", "USCHED_TRACE_FLIGHT", &options::trace_flight, 0, 1u << 24,
                      "events kept per worker (0: the whole run)"));
    t.push_back(count("trace_limit_mb", "USCHED_TRACE_LIMIT_MB", &options::trace_limit_mb, 1, 65536,
                      "a whole run's trace memory in MiB"));

    t.push_back(text("log_level", "USCHED_LOG", &options::log_level, &is_log_level,
                     " is not a log level; choose one of: " + joined(log_levels())));
    return t;
  }();
  return table;
}

const option_rule& rule_for(std::string_view field) {
  for (const option_rule& r : rules()) {
    if (field == r.field) return r;
  }
  throw std::logic_error("usched: no option rule for '" + std::string(field) + "'");
}

// Whether the field's value in `o` is the one its variable gives it.
bool from_variable(const option_rule& r, const options& o) {
  const char* text = r.variable ? env(r.variable) : nullptr;
  if (!text || !r.parse) return false;
  options probe = o;
  return r.parse(text, probe) && r.same(probe, o);
}

std::string env_subject(const option_rule& r, const char* text) {
  return std::string(r.variable) + "='" + text + "'";
}

}  // namespace

namespace detail {

std::string option_subject(const options& o, std::string_view field) {
  const option_rule& r = rule_for(field);
  if (from_variable(r, o)) return env_subject(r, env(r.variable));
  return "options::" + std::string(r.field) + "=" + r.show(o);
}

}  // namespace detail

void options::validate() const {
  for (const option_rule& r : rules()) {
    if (r.valid(*this)) continue;
    if (from_variable(r, *this)) throw config_error(env_subject(r, env(r.variable)) + r.complaint_env);
    throw config_error("options::" + std::string(r.field) + "=" + r.show(*this) + r.complaint_code);
  }
}

options options::kernel_experiment() {
  options o;
  o.fork_balance = true;
  o.join_handoff = false;
  return o;
}

options options::from_env() { return from_env(options{}); }

options options::from_env(options base) {
  options o = std::move(base);
  for (const option_rule& r : rules()) {
    const char* text = r.variable ? env(r.variable) : nullptr;
    if (!text) continue;
    if (!r.parse(text, o)) throw config_error(env_subject(r, text) + r.complaint_env);
  }
  o.validate();
  return o;
}

}  // namespace usched
