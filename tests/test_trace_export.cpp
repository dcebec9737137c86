// The trace exporters (runtime/trace): a hand-built trace written as
// Chrome JSON (parsed back and checked track by track), as ftrace text
// (against the kernel's TP_printk lines, and read back record for record),
// summed up as perf sched latency (numbers computed by hand) and drawn.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <variant>

#include <unistd.h>
#include <vector>

#include <usched/detail/wait.hpp>
#include <usched/wake_reason.hpp>

#include "policy.hpp"
#include "trace_export.hpp"
#include "trace_records.hpp"

namespace {

using namespace usched::detail;

// ---- building records ----------------------------------------------------

trace_record sw(std::int64_t t, int cpu, std::uint64_t prev, std::uint64_t next, stop_reason why, std::uint16_t depth,
                std::uint8_t on = 0) {
  const bool runnable = prev != 0 && why != stop_reason::block && why != stop_reason::exit;
  return usched::test::switch_record(t, cpu, prev, next, why, depth, runnable ? switch_flag_runnable : 0, on);
}

trace_record wake(std::int64_t t, std::uint64_t fiber, int cpu, int last, std::uint64_t waker, int waker_cpu,
                  usched::wake_reason why, std::uint8_t flags, std::uint16_t depth) {
  return usched::test::wakeup_record(t, fiber, cpu, last, waker, waker_cpu, why, flags, depth);
}

trace_record migrate(std::int64_t t, std::uint64_t fiber, int from, int to, migrate_cause why, int level, int mover,
                     std::uint16_t depth) {
  return usched::test::migrate_record(t, fiber, from, to, why, level, mover, depth);
}

trace_record balance(std::int64_t t, int cpu, int level, usched::cpu_idle_type idle, int busiest, int group,
                     usched::migration_type mt, std::uint64_t imbalance, balance_outcome outcome, std::uint32_t moved) {
  trace_record r;
  r.time = t;
  r.type = trace_event::balance;
  r.cpu = static_cast<std::int16_t>(cpu);
  r.detail = static_cast<std::uint8_t>(level);
  r.reason = static_cast<std::uint8_t>(idle);
  r.from = static_cast<std::int16_t>(busiest);
  r.aux = static_cast<std::int16_t>(group);
  r.other = imbalance;
  r.flags = static_cast<std::uint8_t>(static_cast<unsigned>(outcome) | static_cast<unsigned>(mt) << 4);
  r.value = moved;
  return r;
}

trace_record idle(std::int64_t t, int cpu, idle_kind k, int kicker = -1) {
  trace_record r;
  r.time = t;
  r.type = trace_event::idle;
  r.cpu = static_cast<std::int16_t>(cpu);
  r.reason = static_cast<std::uint8_t>(k);
  r.from = static_cast<std::int16_t>(kicker);
  return r;
}

// The label records tracer::emit_label() writes.
void label(std::vector<trace_record>& out, std::int64_t t, std::uint64_t fiber, std::string_view text) {
  const std::size_t chunks = text.empty() ? 1 : (text.size() + 7) / 8;
  for (std::size_t i = 0; i < chunks; ++i) {
    trace_record r;
    r.time = t;
    r.type = trace_event::label;
    r.fiber = fiber;
    const std::string_view part = text.substr(std::min(text.size(), i * 8), 8);
    std::memcpy(&r.other, part.data(), part.size());
    r.detail = static_cast<std::uint8_t>(i);
    r.flags = i + 1 == chunks ? label_flag_last : 0;
    out.push_back(r);
  }
}

using usched::cpu_idle_type;
using usched::migration_type;
using usched::wake_reason;

// Three workers, a flight recorder's dump: fiber 1 runs on worker 0 when
// it starts. Fiber 2 ("request handler") is spawned, runs, blocks, is
// woken on another worker and migrates there; fibers 3 and 4 share the
// label "worker". Every migration cause and balance outcome once.
//
//   worker 0: [1 before trace 1..3] [3: 3..17] [2: 17..21]
//   worker 1: [2: 4..11] [1: 13..22 (trace end)]
//   worker 2: spin 5, parked 6..9, kick 8, [4: 10..20]  (us)
trace_data hand_trace() {
  trace_data d;
  d.policy = "cfs";
  d.nr_cpus = 3;
  d.virtual_time = true;
  d.dropped = 7;
  auto& v = d.records;
  label(v, 1000, 2, "request handler");
  label(v, 1000, 3, "worker");
  label(v, 1000, 4, "worker");
  v.push_back(wake(2000, 2, 1, -1, 1, 0, wake_reason::spawn, wake_flag_new, 1));
  v.push_back(sw(3000, 0, 1, 3, stop_reason::preempt_tick, 2));
  v.push_back(sw(4000, 1, 0, 2, stop_reason::yield, 1));
  v.push_back(idle(5000, 2, idle_kind::spin));
  v.push_back(idle(6000, 2, idle_kind::park));
  v.push_back(balance(7000, 1, 0, cpu_idle_type::newly_idle, 0, 0, migration_type::migrate_task, 1,
                      balance_outcome::balanced, 0));
  v.push_back(wake(8000, 4, 2, 2, 2, 1, wake_reason::channel, wake_flag_preempts, 1));
  v.push_back(idle(8000, 2, idle_kind::kick, 1));
  v.push_back(idle(9000, 2, idle_kind::unpark));
  v.push_back(sw(10000, 2, 0, 4, stop_reason::yield, 1));
  v.push_back(sw(11000, 1, 2, 0, stop_reason::block, 0, static_cast<std::uint8_t>(wait_kind::channel_recv)));
  v.push_back(migrate(12000, 1, 0, 1, migrate_cause::newidle, 0, 1, 1));
  v.push_back(balance(12000, 1, 0, cpu_idle_type::newly_idle, 0, 0, migration_type::migrate_task, 1,
                      balance_outcome::moved, 1));
  v.push_back(sw(13000, 1, 0, 1, stop_reason::yield, 1));
  v.push_back(wake(13000, 2, 0, 1, 4, 2, wake_reason::sync, 0, 2));
  v.push_back(migrate(13000, 2, 1, 0, migrate_cause::wake, 1, 2, 2));
  v.push_back(balance(15000, 2, 1, cpu_idle_type::not_idle, 0, 0, migration_type::migrate_load, 512,
                      balance_outcome::none_movable, 0));
  // The busiest group's type, and the local group's above it.
  v.back().fiber = static_cast<std::uint64_t>(usched::group_type::overloaded) |
                   static_cast<std::uint64_t>(usched::group_type::fully_busy) << 8;
  v.push_back(balance(16000, 2, 1, cpu_idle_type::idle, 0, 0, migration_type::migrate_misfit, 1,
                      balance_outcome::active_asked, 0));
  v.push_back(sw(17000, 0, 3, 2, stop_reason::preempt_wakeup, 2));
  v.push_back(migrate(18000, 3, 0, 2, migrate_cause::active, 1, 0, 2));
  v.push_back(migrate(19000, 3, 2, 1, migrate_cause::steal, 0, 1, 2));
  v.push_back(migrate(19500, 3, 1, 2, migrate_cause::periodic, 1, 2, 1));
  v.push_back(sw(20000, 2, 4, 0, stop_reason::exit, 0));
  v.push_back(sw(21000, 0, 2, 0, stop_reason::preempt_balance, 1));
  v.push_back(sw(22000, 1, 1, 0, stop_reason::block, 0, static_cast<std::uint8_t>(wait_kind::mutex)));
  return d;
}

// ---- a small JSON reader, enough to check the structure ------------------

struct json;
using json_object = std::map<std::string, json>;
using json_array = std::vector<json>;
struct json {
  std::variant<std::nullptr_t, bool, double, std::string, std::shared_ptr<json_array>, std::shared_ptr<json_object>> v;
  const json_object& obj() const { return *std::get<std::shared_ptr<json_object>>(v); }
  const json_array& arr() const { return *std::get<std::shared_ptr<json_array>>(v); }
  const std::string& str() const { return std::get<std::string>(v); }
  double num() const { return std::get<double>(v); }
  bool has(const std::string& k) const { return obj().count(k) != 0; }
  const json& at(const std::string& k) const { return obj().at(k); }
};

class json_parser {
 public:
  explicit json_parser(const std::string& s) : s_(s) {}
  json parse() {
    json j = value();
    ws();
    if (i_ != s_.size()) fail("trailing text");
    return j;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("JSON: " + what + " at byte " + std::to_string(i_));
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    ws();
    if (i_ >= s_.size() || s_[i_] != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c < 0x20) fail("a control character in a string");
      if (c == '\\') {
        ++i_;
        if (i_ >= s_.size()) fail("a cut escape");
        const char e = s_[i_];
        if (e == 'u') {
          if (i_ + 4 >= s_.size()) fail("a cut \\u");
          out += static_cast<char>(std::stoi(s_.substr(i_ + 1, 4), nullptr, 16));
          i_ += 4;
        } else if (e == '"' || e == '\\' || e == '/') {
          out += e;
        } else if (e == 'n') {
          out += '\n';
        } else if (e == 't') {
          out += '\t';
        } else {
          fail("an unknown escape");
        }
        ++i_;
        continue;
      }
      out += s_[i_++];
    }
    expect('"');
    return out;
  }
  json value() {
    ws();
    if (i_ >= s_.size()) fail("end of text");
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      auto o = std::make_shared<json_object>();
      ws();
      if (s_[i_] == '}') {
        ++i_;
        return json{o};
      }
      for (;;) {
        const std::string k = string();
        expect(':');
        if (!o->emplace(k, value()).second) fail("a key twice: " + k);
        ws();
        if (s_[i_] == ',') {
          ++i_;
          continue;
        }
        expect('}');
        return json{o};
      }
    }
    if (c == '[') {
      ++i_;
      auto a = std::make_shared<json_array>();
      ws();
      if (s_[i_] == ']') {
        ++i_;
        return json{a};
      }
      for (;;) {
        a->push_back(value());
        ws();
        if (s_[i_] == ',') {
          ++i_;
          continue;
        }
        expect(']');
        return json{a};
      }
    }
    if (c == '"') return json{string()};
    if (s_.compare(i_, 4, "true") == 0) {
      i_ += 4;
      return json{true};
    }
    if (s_.compare(i_, 5, "false") == 0) {
      i_ += 5;
      return json{false};
    }
    if (s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
      return json{nullptr};
    }
    const std::size_t start = i_;
    if (s_[i_] == '-') ++i_;
    if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) fail("not a value");
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' || s_[i_] == 'e' ||
                              s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-')) {
      ++i_;
    }
    return json{std::stod(s_.substr(start, i_ - start))};
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

json chrome_json(const trace_data& d) {
  std::ostringstream out;
  write_chrome_json(out, d);
  return json_parser(out.str()).parse();
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

bool contains_line(const std::vector<std::string>& lines, const std::string& l) {
  return std::find(lines.begin(), lines.end(), l) != lines.end();
}

}  // namespace

TEST_CASE("trace export: Chrome JSON parses, with a slice per run, an instant per event and a flow per wake-up") {
  const trace_data d = hand_trace();
  const json j = chrome_json(d);
  REQUIRE(j.at("displayTimeUnit").str() == "ns");
  const json_array& ev = j.at("traceEvents").arr();

  std::map<std::string, int> by_ph;
  for (const json& e : ev) ++by_ph[e.at("ph").str()];
  // process_name, and thread_name + thread_sort_index for 3 workers and
  // the outside track.
  CHECK(by_ph["M"] == 1 + 2 * 4);
  // Runs: fiber 1 before the trace, 3, 2, 4, 1 (to the trace's end), 2;
  // and worker 2's park.
  CHECK(by_ph["X"] == 6 + 1);
  // 3 wake-ups, 5 migrations, 4 balance passes, a spin and a kick.
  CHECK(by_ph["i"] == 3 + 5 + 4 + 2);
  // Every wake-up was followed by its run.
  CHECK(by_ph["s"] == 3);
  CHECK(by_ph["f"] == 3);
  // 9 switches, 3 wake-ups, 5 migrations carry a depth.
  CHECK(by_ph["C"] == 17);

  // Worker tracks are named.
  std::map<int, std::string> names;
  for (const json& e : ev) {
    if (e.at("ph").str() == "M" && e.at("name").str() == "thread_name") {
      names[static_cast<int>(e.at("tid").num())] = e.at("args").at("name").str();
    }
  }
  CHECK(names == std::map<int, std::string>{{0, "worker 0"}, {1, "worker 1"}, {2, "worker 2"}, {3, "outside threads"}});

  // Slices on one track do not overlap; the run slices are the ones drawn
  // above, in ns.
  struct slice {
    std::int64_t ts, dur;
    std::string name;
  };
  std::map<int, std::vector<slice>> tracks;
  const auto ns = [](const json& x) { return static_cast<std::int64_t>(x.num() * 1000 + 0.5); };
  for (const json& e : ev) {
    if (e.at("ph").str() != "X") continue;
    tracks[static_cast<int>(e.at("tid").num())].push_back({ns(e.at("ts")), ns(e.at("dur")), e.at("name").str()});
  }
  for (auto& [tid, s] : tracks) {
    std::sort(s.begin(), s.end(), [](const slice& a, const slice& b) { return a.ts < b.ts; });
    for (std::size_t i = 1; i < s.size(); ++i) {
      INFO("track " << tid << ": " << s[i - 1].name << " then " << s[i].name);
      CHECK(s[i - 1].ts + s[i - 1].dur <= s[i].ts);
    }
  }
  REQUIRE(tracks[0].size() == 3);
  CHECK(tracks[0][0].name == "fiber 1");
  CHECK(tracks[0][0].ts == 1000);
  CHECK(tracks[0][0].dur == 2000);
  CHECK(tracks[0][1].name == "fiber 3 (worker)");
  CHECK(tracks[0][1].dur == 14000);
  CHECK(tracks[0][2].name == "fiber 2 (request handler)");
  REQUIRE(tracks[1].size() == 2);
  CHECK(tracks[1][1].name == "fiber 1");
  CHECK(tracks[1][1].ts + tracks[1][1].dur == 22000);  // still running at the trace's end
  REQUIRE(tracks[2].size() == 2);
  CHECK(tracks[2][0].name == "parked");
  CHECK(tracks[2][0].ts == 6000);
  CHECK(tracks[2][0].dur == 3000);

  // The run before the trace says so; a run says how it stopped.
  for (const json& e : ev) {
    if (e.at("ph").str() != "X" || e.at("name").str() != "fiber 1" || ns(e.at("ts")) != 1000) continue;
    CHECK(e.at("args").at("before_trace").v == json{true}.v);
    CHECK(e.at("args").at("stop").str() == "preempt_tick");
  }

  // Every flow start has one end, bound ("bp": "e") at the start of a run
  // slice on the track the fiber ran on; the start is on the waker's track.
  std::map<double, const json*> starts;
  std::map<double, const json*> ends;
  for (const json& e : ev) {
    if (e.at("ph").str() == "s") CHECK(starts.emplace(e.at("id").num(), &e).second);
    if (e.at("ph").str() == "f") CHECK(ends.emplace(e.at("id").num(), &e).second);
  }
  REQUIRE(starts.size() == ends.size());
  std::set<std::pair<std::int64_t, std::int64_t>> flows;  // (wake ts, run ts)
  for (const auto& [id, s] : starts) {
    REQUIRE(ends.count(id) == 1);
    const json& f = *ends[id];
    CHECK(f.at("bp").str() == "e");
    const int tid = static_cast<int>(f.at("tid").num());
    const std::int64_t ts = ns(f.at("ts"));
    CHECK(std::any_of(tracks[tid].begin(), tracks[tid].end(), [&](const slice& x) { return x.ts == ts; }));
    flows.emplace(ns(s->at("ts")), ts);
  }
  CHECK(flows == std::set<std::pair<std::int64_t, std::int64_t>>{{2000, 4000}, {8000, 10000}, {13000, 17000}});

  // A migration's and a balance pass's decision are in their args.
  int migrations = 0;
  std::set<std::string> causes;
  std::set<std::string> outcomes;
  for (const json& e : ev) {
    if (e.at("ph").str() != "i") continue;
    CHECK(e.at("s").str() == "t");
    if (e.at("cat").str() == "migrate") {
      ++migrations;
      causes.insert(e.at("args").at("cause").str());
    }
    if (e.at("cat").str() == "balance") {
      outcomes.insert(e.at("args").at("outcome").str());
      if (e.at("args").at("outcome").str() == "none_movable") {
        CHECK(e.at("args").at("imbalance").num() == 512);
        CHECK(e.at("args").at("migration_type").str() == "migrate_load");
        CHECK(e.at("args").at("idle").str() == "not_idle");
        CHECK(e.at("args").at("level").num() == 1);
        CHECK(e.at("tid").num() == 2);
      }
    }
  }
  CHECK(migrations == 5);
  CHECK(causes == std::set<std::string>{"wake", "newidle", "periodic", "active", "steal"});
  CHECK(outcomes == std::set<std::string>{"balanced", "moved", "none_movable", "active_asked"});
}

TEST_CASE("trace export: Chrome JSON escapes a label that is not text") {
  trace_data d;
  d.nr_cpus = 1;
  label(d.records, 0, 5, std::string("a\"b\\c\n\xff", 7));
  d.records.push_back(sw(10, 0, 0, 5, stop_reason::yield, 1));
  const json j = chrome_json(d);
  bool found = false;
  for (const json& e : j.at("traceEvents").arr()) {
    if (e.at("ph").str() == "X") {
      CHECK(e.at("args").at("label").str() == std::string("a\"b\\c\n\xff", 7));
      found = true;
    }
  }
  CHECK(found);
}

TEST_CASE("trace export: ftrace lines are the kernel's TP_printk formats") {
  std::ostringstream out;
  write_ftrace(out, hand_trace());
  const std::vector<std::string> l = lines_of(out.str());
  REQUIRE(l.size() > 10);
  CHECK(l[0] == "# tracer: nop");
  CHECK(l[2] == "# entries-in-buffer/entries-written: 29/36   #P:3");
  CHECK(contains_line(l, "# usched: policy=cfs nr_cpus=3 virtual_time=1 dropped=7"));
  // sched_switch: "prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d";
  // a preemption is R+, a block S, an exit X, idle swapper/N.
  CHECK(contains_line(l, "           fiber-1       [000] ....     0.000003000: sched_switch: prev_comm=fiber prev_pid=1 "
                         "prev_prio=120 prev_state=R+ ==> next_comm=worker next_pid=3 next_prio=120"));
  CHECK(contains_line(l, "          <idle>-0       [001] ....     0.000004000: sched_switch: prev_comm=swapper/1 "
                         "prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=request_handler next_pid=2 next_prio=120"));
  CHECK(contains_line(l, " request_handler-2       [001] ....     0.000011000: sched_switch: prev_comm=request_handler "
                         "prev_pid=2 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120"));
  CHECK(contains_line(l, "          worker-4       [002] ....     0.000020000: sched_switch: prev_comm=worker prev_pid=4 "
                         "prev_prio=120 prev_state=X ==> next_comm=swapper/2 next_pid=0 next_prio=120"));
  CHECK(contains_line(l, " request_handler-2       [001] ....     0.000011000: usched_stop: pid=2 reason=block "
                         "on=channel_recv runnable=0 nr_running=0"));
  // sched_wakeup_new / sched_waking / sched_wakeup: "comm=%s pid=%d prio=%d target_cpu=%03d", on the
  // waker's CPU; waking's target is the fiber's CPU before placement.
  CHECK(contains_line(l, "           fiber-1       [000] ....     0.000002000: sched_wakeup_new: comm=request_handler "
                         "pid=2 prio=120 target_cpu=001"));
  CHECK(contains_line(l, "          worker-4       [002] ....     0.000013000: sched_waking: comm=request_handler pid=2 "
                         "prio=120 target_cpu=001"));
  CHECK(contains_line(l, "          worker-4       [002] ....     0.000013000: sched_wakeup: comm=request_handler pid=2 "
                         "prio=120 target_cpu=000"));
  CHECK(contains_line(l, "          worker-4       [002] ....     0.000013000: usched_wake: pid=2 reason=sync "
                         "waker_pid=4 waker_cpu=2 prev_cpu=1 running=0 preempts=0 nr_running=2"));
  // sched_migrate_task: "comm=%s pid=%d prio=%d orig_cpu=%d dest_cpu=%d", on the mover's CPU.
  CHECK(contains_line(l, "          <idle>-0       [001] ....     0.000012000: sched_migrate_task: comm=fiber pid=1 "
                         "prio=120 orig_cpu=0 dest_cpu=1"));
  CHECK(contains_line(l, "          <idle>-0       [001] ....     0.000012000: usched_migrate: pid=1 cause=newidle "
                         "level=0 mover_cpu=1 nr_running=1"));
  // cpu_idle: "state=%lu cpu_id=%lu", (u32)-1 on leaving.
  CHECK(contains_line(l, "          <idle>-0       [002] ....     0.000006000: cpu_idle: state=1 cpu_id=2"));
  CHECK(contains_line(l, "          <idle>-0       [002] ....     0.000009000: cpu_idle: state=4294967295 cpu_id=2"));
  CHECK(contains_line(l, "          <idle>-0       [002] ....     0.000008000: usched_idle: cpu=2 state=kick kicker_cpu=1"));
  CHECK(contains_line(l, "          worker-4       [002] ....     0.000015000: usched_balance: cpu=2 level=1 "
                         "idle=not_idle busiest_cpu=0 busiest_group=0 busiest_type=overloaded local_type=fully_busy "
                         "migration_type=migrate_load imbalance=512 "
                         "outcome=none_movable moved=0"));
  CHECK(contains_line(l, "           fiber-1       [000] ....     0.000001000: usched_label: pid=2 chunk=1 last=1 "
                         "text=\"handler\""));
  CHECK(contains_line(l, "           fiber-1       [000] ....     0.000001000: usched_label: pid=2 chunk=0 last=0 "
                         "text=\"request\\x20\""));
}

TEST_CASE("trace export: ftrace text reads back record for record") {
  SECTION("the hand-built trace") {
    const trace_data d = hand_trace();
    std::stringstream s;
    write_ftrace(s, d);
    const trace_data back = read_ftrace(s);
    CHECK(back.policy == d.policy);
    CHECK(back.nr_cpus == d.nr_cpus);
    CHECK(back.virtual_time == d.virtual_time);
    CHECK(back.dropped == d.dropped);
    CHECK(back.records == d.records);
  }
  SECTION("every event type and every value of every enum") {
    trace_data d;
    d.policy = "steal-lifo";
    d.nr_cpus = 4;
    std::int64_t t = 1'234'567'890'123;  // past a second: the seconds column
    auto& v = d.records;
    std::uint64_t fiber = 1;
    for (unsigned why = 0; why < static_cast<unsigned>(stop_reason::count); ++why) {
      for (unsigned on = 0; on <= static_cast<unsigned>(wait_kind::task_group); ++on) {
        trace_record r = sw(++t, static_cast<int>(on % 4), fiber, fiber + 1, static_cast<stop_reason>(why),
                            static_cast<std::uint16_t>(on), static_cast<std::uint8_t>(on));
        v.push_back(r);
        r.fiber = 0;  // from idle
        r.time = ++t;
        v.push_back(r);
        ++fiber;
      }
    }
    for (unsigned why = 0; why < usched::wake_reason_count; ++why) {
      for (std::uint8_t flags = 0; flags < 8; ++flags) {
        ++fiber;
        v.push_back(wake(++t, fiber, 3, (flags & wake_flag_new) ? -1 : 2, fiber % 3, static_cast<int>(flags % 2) - 1,
                         static_cast<wake_reason>(why), flags, 65535));
      }
    }
    for (unsigned c = 0; c < static_cast<unsigned>(migrate_cause::count); ++c) {
      v.push_back(migrate(++t, ++fiber, 1, 2, static_cast<migrate_cause>(c), static_cast<int>(c), static_cast<int>(c) - 1, 3));
    }
    for (unsigned idle_type = 0; idle_type < 3; ++idle_type) {
      for (unsigned mt = 0; mt < 4; ++mt) {
        for (unsigned o = 0; o < static_cast<unsigned>(balance_outcome::count); ++o) {
          v.push_back(balance(++t, 1, static_cast<int>(mt), static_cast<cpu_idle_type>(idle_type), 2, -1,
                              static_cast<migration_type>(mt), 0xffffffffffffull + o, static_cast<balance_outcome>(o), o));
        }
      }
    }
    for (unsigned k = 0; k < static_cast<unsigned>(idle_kind::count); ++k) {
      v.push_back(idle(++t, 2, static_cast<idle_kind>(k), k == 3 ? 0 : -1));
    }
    label(v, ++t, 77, "");
    label(v, ++t, 78, std::string("tab\there, \"quoted\" \\ and a\0zero and more than sixty-four bytes in all, cut", 64));
    label(v, ++t, 79, "\xe2\x82\xac");
    std::stringstream s;
    write_ftrace(s, d);
    const trace_data back = read_ftrace(s);
    CHECK(back.policy == d.policy);
    CHECK(back.nr_cpus == d.nr_cpus);
    REQUIRE(back.records.size() == d.records.size());
    for (std::size_t i = 0; i < d.records.size(); ++i) {
      INFO("record " << i << ", " << to_string(d.records[i].type));
      CHECK(back.records[i] == d.records[i]);
    }
  }
}

TEST_CASE("trace export: ftrace reading names the line it cannot read") {
  std::istringstream bad("# tracer: nop\n          <idle>-0       [000] ....     0.000001000: usched_idle: cpu=0 "
                         "state=snooze kicker_cpu=-1\n");
  CHECK_THROWS_WITH(read_ftrace(bad), "line 2: state='snooze' is not a known name");
  std::istringstream garbled("# tracer: nop\nnot a trace line\n");
  CHECK_THROWS_WITH(read_ftrace(garbled), "line 2: no [CPU] column");
  // A kernel's own lines, and its default six decimals, read too.
  std::istringstream kernel(
      "          <idle>-0       [001] d..2.  5061.372048: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 "
      "prev_state=R ==> next_comm=kworker/1:1 next_pid=93 next_prio=120\n"
      "     kworker/1:1-93      [001] d..3.  5061.372101: sched_stat_runtime: comm=kworker/1:1 pid=93 runtime=9 [ns]\n");
  const trace_data k = read_ftrace(kernel);
  REQUIRE(k.records.size() == 1);
  CHECK(k.records[0].time == 5061372048000);
  CHECK(k.records[0].other == 93);
  CHECK(k.records[0].cpu == 1);
}

TEST_CASE("trace export: the latency summary's numbers, as perf sched latency prints them") {
  const std::string s = latency_summary(hand_trace());
  const std::vector<std::string> l = lines_of(s);
  INFO(s);
  // Sorted by maximum delay: the handler waited 2 us after its spawn and 4
  // after its second wake-up; fiber 4 ("worker", merged with fiber 3) 2 us;
  // fiber 1 was never woken. Run time: the handler 7 + 4 us, the workers
  // 14 + 10, fiber 1 2 (before the trace) + 9.
  REQUIRE(l.size() == 13);
  CHECK(l[2] == "  Task                  |   Runtime ms  | Switches | Average delay ms | Maximum delay ms | Maximum delay "
                "at       | Migrations");
  CHECK(l[4] == "  request handler:2     |      0.011 ms |        2 | avg:    0.003 ms | max:    0.004 ms | max at:      "
                "0.000017 s |          1");
  CHECK(l[5] == "  worker:(2)            |      0.024 ms |        2 | avg:    0.002 ms | max:    0.002 ms | max at:      "
                "0.000010 s |          3");
  CHECK(l[6] == "  fiber:1               |      0.011 ms |        1 | avg:    0.000 ms | max:    0.000 ms | max at:      "
                "0.000000 s |          1");
  CHECK(l[8] == "  TOTAL:                |      0.046 ms |        5 |");
  CHECK(l[10] == "  migrations: 5 (wake 1, newidle 1, periodic 1, active 1, steal 1)");
  CHECK(l[11] == "  balance passes: 4 (balanced 1, moved 1, none_movable 1, active_asked 1)");
  CHECK(l[12] == "  policy: cfs, 3 workers, virtual time, 29 events, 7 dropped");
}

TEST_CASE("trace export: a trace file's format follows its name, and a path it cannot write is named") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("usched-trace-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const trace_data d = hand_trace();
  write_trace_file((dir / "t.json").string(), d);
  write_trace_file((dir / "t.txt").string(), d);
  std::ifstream j(dir / "t.json");
  std::string first;
  std::getline(j, first);
  CHECK(first == "{\"traceEvents\":[");
  CHECK(read_trace_file((dir / "t.txt").string()).records == d.records);
  CHECK_THROWS_WITH(write_trace_file("/nonexistent-dir/t.json", d),
                    "trace file '/nonexistent-dir/t.json': cannot be written");
  CHECK_THROWS_WITH(read_trace_file("/nonexistent-dir/t.txt"), "trace file '/nonexistent-dir/t.txt': cannot be read");
  fs::remove_all(dir);
}

TEST_CASE("trace export: the timeline is a PNG") {
  namespace fs = std::filesystem;
  bool gnuplot = false;
  if (const char* path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) gnuplot = gnuplot || fs::exists(fs::path(dir) / "gnuplot");
  }
  if (!gnuplot) {
    WARN("gnuplot is not on PATH (scripts/bootstrap.sh installs it): the timeline is not drawn");
    return;
  }
  const fs::path png = fs::temp_directory_path() / ("usched-timeline-test-" + std::to_string(::getpid()) + ".png");
  write_timeline_png(hand_trace(), 0, 0, png.string(), "test");
  std::ifstream f(png, std::ios::binary);
  char sig[8] = {};
  f.read(sig, 8);
  CHECK(std::string(sig, 8) == "\x89PNG\r\n\x1a\n");
  fs::remove(png);
  CHECK_THROWS_WITH(write_timeline_png(hand_trace(), 5000, 4000, png.string(), ""),
                    "timeline '" + png.string() + "': the window 5000..4000 ns is empty; expected from < to, within "
                    "the trace's times");
}
