// trace_json.cpp: the Trace Event Format (Chrome JSON) writer.
//
// The format's events used here: "M" metadata (process_name, thread_name,
// thread_sort_index), "X" complete slices (ts + dur), "i" instants with
// "s": "t" (thread scope), "s"/"f" flow events joined by id, "f" with
// "bp": "e" so that it binds to the slice enclosing its timestamp (the run
// that starts there) rather than to the next slice to begin, and "C"
// counters. ts and dur are microseconds; the nanoseconds are their three
// decimals, so nothing is rounded, and "displayTimeUnit": "ns" shows them.
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "trace_export.hpp"
#include "trace_names.hpp"

namespace usched::detail {
namespace {

namespace tn = trace_names;

// The process every track belongs to: the runtime.
constexpr int trace_pid = 1;

void append_escaped(std::string& out, std::string_view s) {
  // A label is bytes: valid UTF-8 passes as it is, anything else is
  // escaped byte by byte, so the file stays valid JSON whatever a label
  // held (or where the recorder's 64-byte cut fell).
  bool utf8 = true;
  for (std::size_t i = 0; i < s.size() && utf8;) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) utf8 = false;
    for (std::size_t k = 1; utf8 && k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) utf8 = false;
    }
    i += len == 0 ? 1 : len;
  }
  static constexpr char hex[] = "0123456789abcdef";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || (c >= 0x80 && !utf8)) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    } else {
      out += ch;
    }
  }
}

void append_string(std::string& out, std::string_view s) {
  out += '"';
  append_escaped(out, s);
  out += '"';
}

// Microseconds with three decimals: exactly the nanoseconds.
void append_us(std::string& out, std::int64_t ns) {
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  out += std::to_string(ns / 1000);
  const int rem = static_cast<int>(ns % 1000);
  out += '.';
  out += static_cast<char>('0' + rem / 100);
  out += static_cast<char>('0' + rem / 10 % 10);
  out += static_cast<char>('0' + rem % 10);
}

class json_writer {
 public:
  json_writer(std::ostream& out, const trace_data& d)
      : out_(out), d_(d), labels_(tn::labels(d)), nr_(tn::cpus_of(d)), cpus_(nr_) {
    if (!d.records.empty()) {
      first_ = d.records.front().time;
      last_ = d.records.back().time;
    }
  }

  void write() {
    buf_ = "{\"traceEvents\":[\n";
    metadata();
    for (const trace_record& r : d_.records) record(r);
    finish();
    buf_ += "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"policy\":";
    append_string(buf_, d_.policy);
    buf_ += ",\"nr_cpus\":" + std::to_string(d_.nr_cpus) + ",\"virtual_time\":" +
            (d_.virtual_time ? "true" : "false") + ",\"dropped\":" + std::to_string(d_.dropped) + "}}\n";
    flush();
  }

 private:
  struct cpu_state {
    bool running = false;      // a run slice is open
    std::uint64_t fiber = 0;   // its fiber
    std::int64_t since = 0;
    bool before_trace = false;
    bool parked = false;       // a "parked" slice is open
    std::int64_t parked_since = 0;
    bool drawn = false;        // anything drawn on this track yet
    bool switched = false;     // a switch seen on this worker yet
  };
  struct pending_wake {
    std::int64_t time;
    int tid;
  };

  int track_of(int cpu) const { return cpu >= 0 && static_cast<std::size_t>(cpu) < nr_ ? cpu : static_cast<int>(nr_); }

  // begin() opens one event object with its common fields.
  void begin(const char* ph, std::string_view name, int tid, std::int64_t ts) {
    if (!first_event_) buf_ += ",\n";
    first_event_ = false;
    buf_ += "{\"ph\":\"";
    buf_ += ph;
    buf_ += "\",\"name\":";
    append_string(buf_, name);
    buf_ += ",\"pid\":" + std::to_string(trace_pid) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":";
    append_us(buf_, ts);
    if (buf_.size() > (1u << 20)) flush();
  }

  void metadata() {
    std::string pname = "usched (policy " + (d_.policy.empty() ? std::string("?") : d_.policy) + ")";
    if (d_.virtual_time) pname += ", virtual time";
    begin("M", "process_name", 0, 0);
    buf_ += ",\"args\":{\"name\":";
    append_string(buf_, pname);
    buf_ += "}}";
    for (std::size_t t = 0; t <= nr_; ++t) {
      const int tid = static_cast<int>(t);
      begin("M", "thread_name", tid, 0);
      buf_ += ",\"args\":{\"name\":\"" + (t < nr_ ? "worker " + std::to_string(t) : std::string("outside threads")) +
              "\"}}";
      begin("M", "thread_sort_index", tid, 0);
      buf_ += ",\"args\":{\"sort_index\":" + std::to_string(t) + "}}";
    }
  }

  void run_slice(int tid, cpu_state& c, std::int64_t end, std::string_view stop, std::string_view on) {
    begin("X", tn::fiber_name(c.fiber, labels_), tid, c.since);
    buf_ += ",\"dur\":";
    append_us(buf_, end - c.since);
    buf_ += ",\"cat\":\"run\",\"args\":{\"fiber\":" + std::to_string(c.fiber);
    const auto it = labels_.find(c.fiber);
    if (it != labels_.end()) {
      buf_ += ",\"label\":";
      append_string(buf_, it->second);
    }
    buf_ += ",\"stop\":";
    append_string(buf_, stop);
    if (!on.empty()) {
      buf_ += ",\"on\":";
      append_string(buf_, on);
    }
    if (c.before_trace) buf_ += ",\"before_trace\":true";
    buf_ += "}}";
    c.running = false;
    c.before_trace = false;
  }

  void parked_slice(int tid, cpu_state& c, std::int64_t end, bool before_trace) {
    begin("X", "parked", tid, c.parked_since);
    buf_ += ",\"dur\":";
    append_us(buf_, end - c.parked_since);
    buf_ += ",\"cat\":\"idle\"";
    if (before_trace) buf_ += ",\"args\":{\"before_trace\":true}";
    buf_ += '}';
    c.parked = false;
  }

  void instant(std::string_view name, const char* cat, int tid, std::int64_t ts) {
    begin("i", name, tid, ts);
    buf_ += ",\"s\":\"t\",\"cat\":\"";
    buf_ += cat;
    buf_ += "\",\"args\":{";
  }

  void counter(const trace_record& r, int cpu) {
    if (cpu < 0 || static_cast<std::size_t>(cpu) >= nr_) return;
    begin("C", "nr_running worker " + std::to_string(cpu), static_cast<int>(cpu), r.time);
    buf_ += ",\"args\":{\"nr_running\":" + std::to_string(r.depth) + "}}";
  }

  void record(const trace_record& r) {
    switch (r.type) {
      case trace_event::switch_to: on_switch(r); break;
      case trace_event::wakeup: on_wakeup(r); break;
      case trace_event::migrate: on_migrate(r); break;
      case trace_event::balance: on_balance(r); break;
      case trace_event::idle: on_idle(r); break;
      case trace_event::label:
      case trace_event::none:
      case trace_event::count: break;
    }
  }

  void on_switch(const trace_record& r) {
    const int tid = track_of(r.cpu);
    if (static_cast<std::size_t>(tid) >= nr_) return;  // no worker: nothing to draw
    cpu_state& c = cpus_[static_cast<std::size_t>(tid)];
    const std::string stop = tn::name(tn::stop_reasons, r.reason);
    const std::string on =
        r.reason == static_cast<std::uint8_t>(stop_reason::block) || r.detail != 0 ? tn::name(tn::wait_kinds, r.detail)
                                                                                     : std::string();
    if (c.parked) parked_slice(tid, c, r.time, false);
    if (c.running) {
      run_slice(tid, c, r.time, stop, on);
    } else if (r.fiber != 0 && !c.switched) {
      // A flight recorder's dump: the run began before the first record.
      c.fiber = r.fiber;
      c.since = first_;
      c.before_trace = true;
      run_slice(tid, c, r.time, stop, on);
    }
    if (r.other != 0) {
      c.running = true;
      c.fiber = r.other;
      c.since = r.time;
      const auto it = wakes_.find(r.other);
      if (it != wakes_.end()) {
        const std::string id = std::to_string(++flows_);
        begin("s", "wakeup", it->second.tid, it->second.time);
        buf_ += ",\"cat\":\"wakeup\",\"id\":" + id + "}";
        begin("f", "wakeup", tid, r.time);
        buf_ += ",\"cat\":\"wakeup\",\"id\":" + id + ",\"bp\":\"e\"}";
        wakes_.erase(it);
      }
    }
    c.drawn = true;
    c.switched = true;
    counter(r, r.cpu);
  }

  void on_wakeup(const trace_record& r) {
    const int tid = track_of(r.aux);
    instant("wakeup " + tn::fiber_name(r.fiber, labels_), "wakeup", tid, r.time);
    buf_ += "\"fiber\":" + std::to_string(r.fiber) + ",\"target_cpu\":" + std::to_string(r.cpu) +
            ",\"prev_cpu\":" + std::to_string(r.from) + ",\"waker\":" + std::to_string(r.other) +
            ",\"waker_cpu\":" + std::to_string(r.aux) + ",\"reason\":\"" + tn::name(tn::wake_reasons, r.reason) +
            "\",\"new\":" + ((r.flags & wake_flag_new) ? "true" : "false") +
            ",\"running\":" + ((r.flags & wake_flag_running) ? "true" : "false") +
            ",\"preempts\":" + ((r.flags & wake_flag_preempts) ? "true" : "false") + "}}";
    if (static_cast<std::size_t>(tid) < nr_) cpus_[static_cast<std::size_t>(tid)].drawn = true;
    // The first wake-up before the fiber runs is the one that made it
    // runnable (perf sched latency counts from it too).
    wakes_.try_emplace(r.fiber, pending_wake{r.time, tid});
    counter(r, r.cpu);
  }

  void on_migrate(const trace_record& r) {
    const int tid = track_of(r.cpu);
    instant("migrate " + tn::fiber_name(r.fiber, labels_), "migrate", tid, r.time);
    buf_ += "\"fiber\":" + std::to_string(r.fiber) + ",\"from\":" + std::to_string(r.from) +
            ",\"to\":" + std::to_string(r.cpu) + ",\"cause\":\"" + tn::name(tn::migrate_causes, r.reason) +
            "\",\"level\":" + std::to_string(r.detail) + ",\"mover_cpu\":" + std::to_string(r.aux) + "}}";
    if (static_cast<std::size_t>(tid) < nr_) cpus_[static_cast<std::size_t>(tid)].drawn = true;
    counter(r, r.cpu);
  }

  void on_balance(const trace_record& r) {
    const int tid = track_of(r.cpu);
    const std::string outcome = tn::name(tn::balance_outcomes, r.flags & 0xfu);
    instant("balance L" + std::to_string(r.detail) + ": " + outcome, "balance", tid, r.time);
    buf_ += "\"idle\":\"" + tn::name(tn::cpu_idle_types, r.reason) + "\",\"level\":" + std::to_string(r.detail) +
            ",\"busiest_cpu\":" + std::to_string(r.from) + ",\"busiest_group\":" + std::to_string(r.aux) +
            ",\"migration_type\":\"" + tn::name(tn::migration_types, r.flags >> 4) +
            "\",\"imbalance\":" + std::to_string(r.other) + ",\"outcome\":\"" + outcome +
            "\",\"moved\":" + std::to_string(r.value) + "}}";
    if (static_cast<std::size_t>(tid) < nr_) cpus_[static_cast<std::size_t>(tid)].drawn = true;
  }

  void on_idle(const trace_record& r) {
    const int tid = track_of(r.cpu);
    const bool worker = static_cast<std::size_t>(tid) < nr_;
    const auto kind = static_cast<idle_kind>(r.reason);
    if (worker && kind == idle_kind::park) {
      cpu_state& c = cpus_[static_cast<std::size_t>(tid)];
      if (c.parked) parked_slice(tid, c, r.time, false);
      c.parked = true;
      c.parked_since = r.time;
      c.drawn = true;
      return;
    }
    if (worker && kind == idle_kind::unpark) {
      cpu_state& c = cpus_[static_cast<std::size_t>(tid)];
      if (c.parked) {
        parked_slice(tid, c, r.time, false);
        return;
      }
      if (!c.drawn) {  // parked since before the first record
        c.parked_since = first_;
        parked_slice(tid, c, r.time, true);
        c.drawn = true;
        return;
      }
    }
    instant(tn::name(tn::idle_kinds, r.reason), "idle", tid, r.time);
    buf_ += "\"kicker_cpu\":" + std::to_string(r.from) + "}}";
    if (worker) cpus_[static_cast<std::size_t>(tid)].drawn = true;
  }

  void finish() {
    for (std::size_t t = 0; t < nr_; ++t) {
      cpu_state& c = cpus_[t];
      const int tid = static_cast<int>(t);
      if (c.running) run_slice(tid, c, last_, "trace_end", "");
      if (c.parked) parked_slice(tid, c, last_, false);
    }
  }

  void flush() {
    out_ << buf_;
    buf_.clear();
  }

  std::ostream& out_;
  const trace_data& d_;
  std::unordered_map<std::uint64_t, std::string> labels_;
  std::size_t nr_;
  std::vector<cpu_state> cpus_;
  std::unordered_map<std::uint64_t, pending_wake> wakes_;
  std::int64_t first_ = 0;
  std::int64_t last_ = 0;
  std::uint64_t flows_ = 0;
  bool first_event_ = true;
  std::string buf_;
};

}  // namespace

void write_chrome_json(std::ostream& out, const trace_data& d) { json_writer(out, d).write(); }

}  // namespace usched::detail
