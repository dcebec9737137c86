// trace_ftrace.cpp: the kernel's ftrace text, written and read back.
//
// A line is what the kernel's trace_print_context() prints with the
// irq-info option on (its default):
//
//   "%16s-%-7d [%03d] FLAGS %5lu.%09lu: EVENT: ARGS"
//
// COMM-PID is the task current on that CPU (the kernel's `current`: here
// the fiber the worker last switched to), FLAGS the four latency columns
// (irqs-off, need-resched, hardirq/softirq, preempt-depth), which a fiber
// has none of: "....". Four, not the five of kernels since 5.13 (which add
// migrate-disable): Perfetto's older text tokenizer accepts at most four
// before the timestamp, its newer one both.
//
// The timestamp has nine decimals where the kernel's default prints six
// (microseconds): the records carry nanoseconds and the round trip through
// read_ftrace() must be exact. `trace-cmd report -t` prints nine the same
// way, and Perfetto's tokenizer takes any number of decimals (\d+\.\d+).
//
// The ARGS of the kernel's events are their TP_printk formats
// (include/trace/events/sched.h):
//   sched_switch:  "prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d"
//                  prev_state: "R" when runnable, "+" after it when the
//                  switch was a preemption (TASK_REPORT_MAX), else the
//                  state's letter: S for a sleep, X for a dead task
//                  (EXIT_DEAD: what a thread that is reaped at once shows)
//   sched_waking, sched_wakeup, sched_wakeup_new:
//                  "comm=%s pid=%d prio=%d target_cpu=%03d" (for waking,
//                  target_cpu is the task's CPU before placement)
//   sched_migrate_task: "comm=%s pid=%d prio=%d orig_cpu=%d dest_cpu=%d"
//   cpu_idle (power): "state=%lu cpu_id=%lu", 4294967295 (-1) on leaving
// Idle is pid 0, shown as <idle> in the line's task column and as
// swapper/N in sched_switch's comms, as the kernel shows its idle tasks.
#include <charconv>
#include <cstring>
#include <optional>
#include <cstdio>
#include <istream>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "trace_export.hpp"
#include "trace_names.hpp"

namespace usched::detail {
namespace {

namespace tn = trace_names;

// The kernel's TASK_COMM_LEN, less its terminating zero.
constexpr std::size_t comm_max = 15;
// The nice-0 priority every fiber and the idle task print.
constexpr int fiber_prio = 120;

// A comm as the parsers of this text need it: one token, no '=' (args
// split on spaces and '='), no brackets (the CPU column is found by its
// bracket).
std::string comm_of(std::string_view label) {
  if (label.empty()) return "fiber";
  std::string c(label.substr(0, comm_max));
  for (char& ch : c) {
    const auto u = static_cast<unsigned char>(ch);
    if (u <= 0x20 || u >= 0x7f || ch == '=' || ch == '[' || ch == ']') ch = '_';
  }
  return c;
}

// The text of a label chunk with every byte that is not a plain visible
// character (and '"', '\\') as \xNN: one token, read back byte for byte.
std::string escape_text(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (u <= 0x20 || u >= 0x7f || ch == '"' || ch == '\\') {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 0xf];
    } else {
      out += ch;
    }
  }
  return out;
}

class ftrace_writer {
 public:
  ftrace_writer(std::ostream& out, const trace_data& d) : out_(out), d_(d), labels_(tn::labels(d)) {
    const std::size_t nr = tn::cpus_of(d);
    current_.assign(nr, 0);
    // Each CPU's task before its first switch is that switch's prev.
    std::vector<bool> seen(nr, false);
    for (const trace_record& r : d.records) {
      if (r.type != trace_event::switch_to || r.cpu < 0) continue;
      const auto c = static_cast<std::size_t>(r.cpu);
      if (!seen[c]) {
        seen[c] = true;
        current_[c] = r.fiber;
      }
    }
  }

  void write() {
    header();
    for (const trace_record& r : d_.records) record(r);
    flush();
  }

 private:
  std::string comm(std::uint64_t fiber) const {
    if (fiber == 0) return "<idle>";
    const auto it = labels_.find(fiber);
    return comm_of(it == labels_.end() ? std::string_view() : std::string_view(it->second));
  }
  // sched_switch names the idle task by its comm, swapper/N.
  std::string switch_comm(std::uint64_t fiber, int cpu) const {
    return fiber == 0 ? "swapper/" + std::to_string(cpu) : comm(fiber);
  }

  void header() {
    buf_ += "# tracer: nop\n#\n";
    buf_ += "# entries-in-buffer/entries-written: " + std::to_string(d_.records.size()) + "/" +
            std::to_string(d_.records.size() + d_.dropped) + "   #P:" + std::to_string(d_.nr_cpus) + "\n";
    buf_ += "#\n";
    buf_ += "# usched: policy=" + d_.policy + " nr_cpus=" + std::to_string(d_.nr_cpus) +
            " virtual_time=" + (d_.virtual_time ? "1" : "0") + " dropped=" + std::to_string(d_.dropped) + "\n";
    buf_ += "#\n";
    buf_ +=
        "#                                _-----=> irqs-off\n"
        "#                               / _----=> need-resched\n"
        "#                              | / _---=> hardirq/softirq\n"
        "#                              || / _--=> preempt-depth\n"
        "#                              ||| /     delay\n"
        "#           TASK-PID     CPU#  ||||   TIMESTAMP  FUNCTION\n"
        "#              | |         |   ||||      |         |\n";
  }

  // line() starts one event line on `cpu`, shown running its current task.
  void line(int cpu, std::int64_t t, std::string_view event) {
    const std::uint64_t cur =
        cpu >= 0 && static_cast<std::size_t>(cpu) < current_.size() ? current_[static_cast<std::size_t>(cpu)] : 0;
    const bool neg = t < 0;
    const std::uint64_t a = neg ? 0 - static_cast<std::uint64_t>(t) : static_cast<std::uint64_t>(t);
    char pre[96];
    std::snprintf(pre, sizeof pre, "%16s-%-7llu [%03d] .... %s%5llu.%09llu: ", comm(cur).c_str(),
                  static_cast<unsigned long long>(cur), cpu < 0 ? 0 : cpu, neg ? "-" : "",
                  static_cast<unsigned long long>(a / 1000000000u), static_cast<unsigned long long>(a % 1000000000u));
    buf_ += pre;
    buf_ += event;
    buf_ += ": ";
  }

  static std::string cpu3(int cpu) {
    char b[16];
    std::snprintf(b, sizeof b, "%03d", cpu);
    return b;
  }

  void record(const trace_record& r) {
    switch (r.type) {
      case trace_event::switch_to: on_switch(r); break;
      case trace_event::wakeup: on_wakeup(r); break;
      case trace_event::migrate: on_migrate(r); break;
      case trace_event::balance: on_balance(r); break;
      case trace_event::idle: on_idle(r); break;
      case trace_event::label: on_label(r); break;
      case trace_event::none:
      case trace_event::count: break;  // not events: nothing to print
    }
    if (buf_.size() > (1u << 20)) flush();
  }

  void on_switch(const trace_record& r) {
    const auto reason = static_cast<stop_reason>(r.reason);
    std::string state = "R";
    if (r.fiber != 0) {
      switch (reason) {
        case stop_reason::block: state = "S"; break;
        case stop_reason::exit: state = "X"; break;
        case stop_reason::preempt_tick:
        case stop_reason::preempt_wakeup:
        case stop_reason::preempt_balance: state = "R+"; break;
        case stop_reason::yield:
        case stop_reason::count: break;
      }
    }
    line(r.cpu, r.time, "sched_switch");
    buf_ += "prev_comm=" + switch_comm(r.fiber, r.cpu) + " prev_pid=" + std::to_string(r.fiber) +
            " prev_prio=" + std::to_string(fiber_prio) + " prev_state=" + state +
            " ==> next_comm=" + switch_comm(r.other, r.cpu) + " next_pid=" + std::to_string(r.other) +
            " next_prio=" + std::to_string(fiber_prio) + "\n";
    line(r.cpu, r.time, "usched_stop");
    buf_ += "pid=" + std::to_string(r.fiber) + " reason=" + tn::name(tn::stop_reasons, r.reason);
    if (reason == stop_reason::block || r.detail != 0) buf_ += " on=" + tn::name(tn::wait_kinds, r.detail);
    buf_ += " runnable=" + std::to_string(r.flags) + " nr_running=" + std::to_string(r.depth) + "\n";
    if (r.cpu >= 0 && static_cast<std::size_t>(r.cpu) < current_.size()) current_[static_cast<std::size_t>(r.cpu)] = r.other;
  }

  void on_wakeup(const trace_record& r) {
    // The kernel's line is on the waker's CPU; a thread outside the
    // runtime has none, and its wake-up shows on the target's.
    const int at = r.aux >= 0 ? r.aux : r.cpu;
    const std::string task = "comm=" + comm(r.fiber) + " pid=" + std::to_string(r.fiber) +
                             " prio=" + std::to_string(fiber_prio) + " target_cpu=";
    if (r.flags & wake_flag_new) {
      line(at, r.time, "sched_wakeup_new");
      buf_ += task + cpu3(r.cpu) + "\n";
    } else {
      line(at, r.time, "sched_waking");
      buf_ += task + cpu3(r.from >= 0 ? r.from : r.cpu) + "\n";
      line(at, r.time, "sched_wakeup");
      buf_ += task + cpu3(r.cpu) + "\n";
    }
    line(at, r.time, "usched_wake");
    buf_ += "pid=" + std::to_string(r.fiber) + " reason=" + tn::name(tn::wake_reasons, r.reason) +
            " waker_pid=" + std::to_string(r.other) + " waker_cpu=" + std::to_string(r.aux) +
            " prev_cpu=" + std::to_string(r.from) + " running=" + ((r.flags & wake_flag_running) ? "1" : "0") +
            " preempts=" + ((r.flags & wake_flag_preempts) ? "1" : "0") + " nr_running=" + std::to_string(r.depth) +
            "\n";
  }

  void on_migrate(const trace_record& r) {
    const int at = r.aux >= 0 ? r.aux : r.cpu;
    line(at, r.time, "sched_migrate_task");
    buf_ += "comm=" + comm(r.fiber) + " pid=" + std::to_string(r.fiber) + " prio=" + std::to_string(fiber_prio) +
            " orig_cpu=" + std::to_string(r.from) + " dest_cpu=" + std::to_string(r.cpu) + "\n";
    line(at, r.time, "usched_migrate");
    buf_ += "pid=" + std::to_string(r.fiber) + " cause=" + tn::name(tn::migrate_causes, r.reason) +
            " level=" + std::to_string(r.detail) + " mover_cpu=" + std::to_string(r.aux) +
            " nr_running=" + std::to_string(r.depth) + "\n";
  }

  void on_balance(const trace_record& r) {
    line(r.cpu, r.time, "usched_balance");
    buf_ += "cpu=" + std::to_string(r.cpu) + " level=" + std::to_string(r.detail) +
            " idle=" + tn::name(tn::cpu_idle_types, r.reason) + " busiest_cpu=" + std::to_string(r.from) +
            " busiest_group=" + std::to_string(r.aux) +
            " busiest_type=" + tn::name(tn::group_types, static_cast<unsigned>(r.fiber & 0xffu)) +
            " local_type=" + tn::name(tn::group_types, static_cast<unsigned>(r.fiber >> 8 & 0xffu)) +
            " migration_type=" + tn::name(tn::migration_types, r.flags >> 4) +
            " imbalance=" + std::to_string(r.other) + " outcome=" + tn::name(tn::balance_outcomes, r.flags & 0xfu) +
            " moved=" + std::to_string(r.value) + "\n";
  }

  void on_idle(const trace_record& r) {
    const auto kind = static_cast<idle_kind>(r.reason);
    if (kind == idle_kind::park || kind == idle_kind::unpark) {
      line(r.cpu, r.time, "cpu_idle");
      buf_ += std::string("state=") + (kind == idle_kind::park ? "1" : "4294967295") +
              " cpu_id=" + std::to_string(r.cpu) + "\n";
    }
    line(r.cpu, r.time, "usched_idle");
    buf_ += "cpu=" + std::to_string(r.cpu) + " state=" + tn::name(tn::idle_kinds, r.reason) +
            " kicker_cpu=" + std::to_string(r.from) + "\n";
  }

  void on_label(const trace_record& r) {
    line(0, r.time, "usched_label");
    buf_ += "pid=" + std::to_string(r.fiber) + " chunk=" + std::to_string(r.detail) +
            " last=" + std::to_string(r.flags) + " text=\"" + escape_text(tn::label_text(r)) + "\"\n";
  }

  void flush() {
    out_ << buf_;
    buf_.clear();
  }

  std::ostream& out_;
  const trace_data& d_;
  std::unordered_map<std::uint64_t, std::string> labels_;
  std::vector<std::uint64_t> current_;
  std::string buf_;
};

// ---- reading -------------------------------------------------------------

struct parse_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One event line, split.
struct event_line {
  int cpu = 0;
  std::int64_t time = 0;
  std::string_view event;
  std::vector<std::pair<std::string_view, std::string_view>> args;

  std::string_view get(std::string_view key) const {
    for (const auto& [k, v] : args) {
      if (k == key) return v;
    }
    throw parse_error("no " + std::string(key) + "=");
  }
  bool has(std::string_view key) const {
    for (const auto& kv : args) {
      if (kv.first == key) return true;
    }
    return false;
  }
};

template <class Int>
Int parse_int(std::string_view s, std::string_view what) {
  Int v{};
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) {
    throw parse_error(std::string(what) + "='" + std::string(s) + "' is not a number in range");
  }
  return v;
}

// SECS.FRACTION, any number of decimals up to nine, exactly in ns.
std::int64_t parse_time(std::string_view s) {
  const bool neg = !s.empty() && s.front() == '-';
  if (neg) s.remove_prefix(1);
  const std::size_t dot = s.find('.');
  if (dot == std::string_view::npos || dot == 0 || s.size() - dot - 1 > 9 || s.size() - dot - 1 == 0) {
    throw parse_error("'" + std::string(s) + "' is not a timestamp (SECS.FRACTION)");
  }
  const auto secs = parse_int<std::int64_t>(s.substr(0, dot), "timestamp");
  std::string frac(s.substr(dot + 1));
  frac.resize(9, '0');
  const auto ns = parse_int<std::int64_t>(frac, "timestamp");
  const std::int64_t t = secs * 1000000000 + ns;
  return neg ? -t : t;
}

// split() reads "  COMM-PID [CPU] FLAGS TIME: EVENT: ARGS".
event_line split(std::string_view l) {
  event_line e;
  // The CPU column is the first " [digits]": a comm here has no spaces.
  std::size_t open = 0;
  for (;;) {
    open = l.find(" [", open);
    if (open == std::string_view::npos) throw parse_error("no [CPU] column");
    const std::size_t close = l.find(']', open);
    if (close != std::string_view::npos && close > open + 2 &&
        l.substr(open + 2, close - open - 2).find_first_not_of("0123456789") == std::string_view::npos) {
      e.cpu = parse_int<int>(l.substr(open + 2, close - open - 2), "cpu");
      open = close + 1;
      break;
    }
    open += 2;
  }
  const std::size_t colon = l.find(": ", open);
  if (colon == std::string_view::npos) throw parse_error("no 'TIMESTAMP: EVENT:'");
  std::string_view pre = l.substr(open, colon - open);
  while (!pre.empty() && pre.back() == ' ') pre.remove_suffix(1);
  const std::size_t sp = pre.rfind(' ');
  e.time = parse_time(sp == std::string_view::npos ? pre : pre.substr(sp + 1));
  std::string_view rest = l.substr(colon + 2);
  const std::size_t ev_end = rest.find(':');
  if (ev_end == std::string_view::npos) throw parse_error("no 'EVENT:'");
  e.event = rest.substr(0, ev_end);
  rest.remove_prefix(ev_end + 1);
  while (!rest.empty()) {
    const std::size_t s = rest.find_first_not_of(' ');
    if (s == std::string_view::npos) break;
    rest.remove_prefix(s);
    const std::size_t end = rest.find(' ');
    const std::string_view tok = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
    const std::size_t eq = tok.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;  // "==>"
    e.args.emplace_back(tok.substr(0, eq), tok.substr(eq + 1));
  }
  return e;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string unescape_text(std::string_view s) {
  if (s.size() < 2 || s.front() != '"' || s.back() != '"') throw parse_error("text= is not a quoted string");
  s = s.substr(1, s.size() - 2);
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (i + 3 >= s.size() || s[i + 1] != 'x') throw parse_error("text=: an escape is \\xNN");
    const int hi = hex_digit(s[i + 2]);
    const int lo = hex_digit(s[i + 3]);
    if (hi < 0 || lo < 0) throw parse_error("text=: an escape is \\xNN");
    out += static_cast<char>(hi << 4 | lo);
    i += 3;
  }
  return out;
}

template <std::size_t N>
std::uint8_t enum_value(const tn::name_table<N>& t, const event_line& e, std::string_view key) {
  const std::string_view v = e.get(key);
  const auto x = tn::value(t, v);
  if (!x) throw parse_error(std::string(key) + "='" + std::string(v) + "' is not a known name");
  return *x;
}

class ftrace_reader {
 public:
  trace_data read(std::istream& in) {
    std::string l;
    std::size_t n = 0;
    while (std::getline(in, l)) {
      ++n;
      if (!l.empty() && l.back() == '\r') l.pop_back();
      try {
        one(l);
      } catch (const parse_error& e) {
        throw std::runtime_error("line " + std::to_string(n) + ": " + e.what());
      }
    }
    flush();
    return std::move(d_);
  }

 private:
  void flush() {
    if (pending_) d_.records.push_back(*pending_);
    pending_.reset();
  }

  void header(std::string_view l) {
    const std::size_t p = l.find("#P:");
    if (p != std::string_view::npos && !saw_usched_) d_.nr_cpus = parse_int<std::size_t>(l.substr(p + 3), "#P");
    constexpr std::string_view tag = "# usched: ";
    if (l.substr(0, tag.size()) != tag) return;
    saw_usched_ = true;
    // The split's views point into the line: it must outlive them.
    const std::string line = "x [0] 0.0: usched: " + std::string(l.substr(tag.size()));
    const event_line e = split(line);
    d_.policy = std::string(e.get("policy"));
    d_.nr_cpus = parse_int<std::size_t>(e.get("nr_cpus"), "nr_cpus");
    d_.virtual_time = e.get("virtual_time") == "1";
    d_.dropped = parse_int<std::uint64_t>(e.get("dropped"), "dropped");
  }

  bool pending_is(trace_event type, std::uint64_t fiber) const {
    return pending_ && pending_->type == type && pending_->fiber == fiber;
  }

  void one(std::string_view l) {
    if (l.find_first_not_of(' ') == std::string_view::npos) return;
    if (l.front() == '#') {
      header(l);
      return;
    }
    const event_line e = split(l);
    const std::string_view ev = e.event;
    trace_record r;
    r.time = e.time;
    if (ev == "sched_switch") {
      flush();
      r.type = trace_event::switch_to;
      r.cpu = static_cast<std::int16_t>(e.cpu);
      r.fiber = parse_int<std::uint64_t>(e.get("prev_pid"), "prev_pid");
      r.other = parse_int<std::uint64_t>(e.get("next_pid"), "next_pid");
      // Without its usched_stop line: what prev_state says.
      const std::string_view st = e.get("prev_state");
      if (st == "R+") r.reason = static_cast<std::uint8_t>(stop_reason::preempt_tick);
      if (st == "S" || st == "D") r.reason = static_cast<std::uint8_t>(stop_reason::block);
      if (st == "X" || st == "Z") r.reason = static_cast<std::uint8_t>(stop_reason::exit);
      if (r.fiber != 0 && (st == "R" || st == "R+")) r.flags = switch_flag_runnable;
      pending_ = r;
    } else if (ev == "usched_stop") {
      const auto pid = parse_int<std::uint64_t>(e.get("pid"), "pid");
      if (!pending_is(trace_event::switch_to, pid)) throw parse_error("usched_stop without its sched_switch");
      pending_->reason = enum_value(tn::stop_reasons, e, "reason");
      pending_->detail = e.has("on") ? enum_value(tn::wait_kinds, e, "on") : std::uint8_t{0};
      pending_->flags = parse_int<std::uint8_t>(e.get("runnable"), "runnable");
      pending_->depth = parse_int<std::uint16_t>(e.get("nr_running"), "nr_running");
      flush();
    } else if (ev == "sched_waking" || ev == "sched_wakeup" || ev == "sched_wakeup_new") {
      const auto pid = parse_int<std::uint64_t>(e.get("pid"), "pid");
      const auto target = parse_int<std::int16_t>(e.get("target_cpu"), "target_cpu");
      if (ev == "sched_wakeup" && pending_is(trace_event::wakeup, pid) && !waking_done_) {
        pending_->cpu = target;
        waking_done_ = true;
        return;
      }
      flush();
      r.type = trace_event::wakeup;
      r.fiber = pid;
      r.cpu = target;
      if (ev == "sched_waking") r.from = target;
      if (ev == "sched_wakeup_new") r.flags = wake_flag_new;
      waking_done_ = ev != "sched_waking";
      pending_ = r;
    } else if (ev == "usched_wake") {
      const auto pid = parse_int<std::uint64_t>(e.get("pid"), "pid");
      if (!pending_is(trace_event::wakeup, pid)) throw parse_error("usched_wake without its sched_wakeup");
      pending_->reason = enum_value(tn::wake_reasons, e, "reason");
      pending_->other = parse_int<std::uint64_t>(e.get("waker_pid"), "waker_pid");
      pending_->aux = parse_int<std::int16_t>(e.get("waker_cpu"), "waker_cpu");
      pending_->from = parse_int<std::int16_t>(e.get("prev_cpu"), "prev_cpu");
      if (e.get("running") == "1") pending_->flags |= wake_flag_running;
      if (e.get("preempts") == "1") pending_->flags |= wake_flag_preempts;
      pending_->depth = parse_int<std::uint16_t>(e.get("nr_running"), "nr_running");
      flush();
    } else if (ev == "sched_migrate_task") {
      flush();
      r.type = trace_event::migrate;
      r.fiber = parse_int<std::uint64_t>(e.get("pid"), "pid");
      r.from = parse_int<std::int16_t>(e.get("orig_cpu"), "orig_cpu");
      r.cpu = parse_int<std::int16_t>(e.get("dest_cpu"), "dest_cpu");
      pending_ = r;
    } else if (ev == "usched_migrate") {
      const auto pid = parse_int<std::uint64_t>(e.get("pid"), "pid");
      if (!pending_is(trace_event::migrate, pid)) throw parse_error("usched_migrate without its sched_migrate_task");
      pending_->reason = enum_value(tn::migrate_causes, e, "cause");
      pending_->detail = parse_int<std::uint8_t>(e.get("level"), "level");
      pending_->aux = parse_int<std::int16_t>(e.get("mover_cpu"), "mover_cpu");
      pending_->depth = parse_int<std::uint16_t>(e.get("nr_running"), "nr_running");
      flush();
    } else if (ev == "usched_balance") {
      flush();
      r.type = trace_event::balance;
      r.cpu = parse_int<std::int16_t>(e.get("cpu"), "cpu");
      r.detail = parse_int<std::uint8_t>(e.get("level"), "level");
      r.reason = enum_value(tn::cpu_idle_types, e, "idle");
      r.from = parse_int<std::int16_t>(e.get("busiest_cpu"), "busiest_cpu");
      r.aux = parse_int<std::int16_t>(e.get("busiest_group"), "busiest_group");
      r.fiber = static_cast<std::uint64_t>(enum_value(tn::group_types, e, "busiest_type")) |
                static_cast<std::uint64_t>(enum_value(tn::group_types, e, "local_type")) << 8;
      const std::uint8_t mt = enum_value(tn::migration_types, e, "migration_type");
      const std::uint8_t outcome = enum_value(tn::balance_outcomes, e, "outcome");
      if (mt > 0xf || outcome > 0xf) throw parse_error("migration_type and outcome are 0..15");
      r.flags = static_cast<std::uint8_t>(outcome | mt << 4);
      r.other = parse_int<std::uint64_t>(e.get("imbalance"), "imbalance");
      r.value = parse_int<std::uint32_t>(e.get("moved"), "moved");
      d_.records.push_back(r);
    } else if (ev == "usched_idle") {
      flush();
      r.type = trace_event::idle;
      r.cpu = parse_int<std::int16_t>(e.get("cpu"), "cpu");
      r.reason = enum_value(tn::idle_kinds, e, "state");
      r.from = parse_int<std::int16_t>(e.get("kicker_cpu"), "kicker_cpu");
      d_.records.push_back(r);
    } else if (ev == "usched_label") {
      flush();
      r.type = trace_event::label;
      r.fiber = parse_int<std::uint64_t>(e.get("pid"), "pid");
      r.detail = parse_int<std::uint8_t>(e.get("chunk"), "chunk");
      r.flags = parse_int<std::uint8_t>(e.get("last"), "last");
      const std::string text = unescape_text(e.get("text"));
      if (text.size() > 8) throw parse_error("text= holds more than a chunk's 8 bytes");
      std::memcpy(&r.other, text.data(), text.size());
      d_.records.push_back(r);
    }
    // Any other event (cpu_idle, or a kernel trace's own) is not a record.
  }

  trace_data d_;
  std::optional<trace_record> pending_;
  bool waking_done_ = false;  // the pending wake-up has had its sched_wakeup
  bool saw_usched_ = false;
};

}  // namespace

void write_ftrace(std::ostream& out, const trace_data& d) { ftrace_writer(out, d).write(); }

trace_data read_ftrace(std::istream& in) { return ftrace_reader().read(in); }

}  // namespace usched::detail
