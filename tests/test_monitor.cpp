// The runtime's monitor (runtime/src/monitor.hpp): its step driven by hand,
// over a made-up host and clock, so that when it asks a worker to look,
// when it reports a stall and when a hang are exact; then the monitor of a
// real runtime, its requests carried out by real workers.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/base_sink.h>

#include <usched/usched.hpp>

#include "trace_export.hpp"

#include "monitor.hpp"
#include "runtime_impl.hpp"
#include "test_support.hpp"

using usched::detail::mark_running;
using usched::detail::monitor;
using usched::detail::request_look;
using usched::detail::request_slice;

namespace {

// A host of workers set by hand: what each runs, when its tick is due, and
// what the monitor asked of it.
struct fake_host {
  struct worker_state {
    std::uint64_t mark = 0;
    std::uint64_t looks = 0;
    std::uint64_t next_tick = monitor::never_again;
    bool resched = false;
    bool queued = false;
  };
  struct request_made {
    std::size_t worker;
    std::uint64_t bits;
    std::uint64_t mark;
  };
  struct stall_made {
    std::size_t worker;
    std::uint64_t mark;
    std::uint64_t quiet;
  };
  std::vector<worker_state> w;
  std::vector<request_made> requests;
  std::vector<stall_made> stalls;
  std::vector<std::uint64_t> hangs;
  bool parked = false;
  std::uint64_t epoch = 0;
  bool hang = false;

  explicit fake_host(std::size_t n) : w(n) {}
  std::size_t nr_workers() const { return w.size(); }
  std::uint64_t run_mark(std::size_t i) const { return w[i].mark; }
  std::uint64_t looks(std::size_t i) const { return w[i].looks; }
  std::uint64_t next_tick(std::size_t i) const { return w[i].next_tick; }
  bool resched_asked(std::size_t i) const { return w[i].resched; }
  bool has_queued(std::size_t i) const { return w[i].queued; }
  void request(std::size_t i, std::uint64_t bits, std::uint64_t mark) { requests.push_back({i, bits, mark}); }
  void stalled(std::size_t i, std::uint64_t mark, std::uint64_t quiet) { stalls.push_back({i, mark, quiet}); }
  bool all_parked() const { return parked; }
  std::uint64_t park_epoch() const { return epoch; }
  bool hang_possible() const { return hang; }
  void hung(std::uint64_t quiet) { hangs.push_back(quiet); }
};

// Counter ticks: a slice of 3,000, a stall threshold of 50,000, a tick of
// 1,000, a hang after 100,000 parked.
monitor::config test_config(std::uint64_t slice = 3000, std::uint64_t stall = 50'000) {
  monitor::config c;
  c.slice = slice;
  c.stall = stall;
  c.hang_quiet = 100'000;
  c.period = 1000;
  return c;
}

constexpr std::uint64_t run_a = 2 * 7 + 1;  // a run mark: the 7th switch, a fiber running
constexpr std::uint64_t run_b = 2 * 8 + 1;

}  // namespace

TEST_CASE("monitor: the slice request is made exactly when the run has used its slice with others waiting",
          "[monitor]") {
  monitor m(test_config(), 2);
  fake_host h(2);
  h.w[0].mark = run_a;
  h.w[0].queued = true;
  // First seen at 10,000: the slice is timed from there.
  auto o = m.step(h, 10'000);
  CHECK(h.requests.empty());
  CHECK(o.next == 11'000);  // a period: no tick is due, the slice ends later
  m.step(h, 12'999);
  CHECK(h.requests.empty());
  m.step(h, 13'000);
  REQUIRE(h.requests.size() == 1);
  CHECK(h.requests[0].worker == 0);
  CHECK(h.requests[0].bits == request_slice);
  CHECK(h.requests[0].mark == run_a);
  // Nothing queued behind it: no slice request, though it is past its slice.
  h.w[0].queued = false;
  m.step(h, 14'000);
  CHECK(h.requests.size() == 1);
  // A new run (a switch) starts a new slice.
  h.w[0].mark = run_b;
  h.w[0].queued = true;
  m.step(h, 15'000);
  CHECK(h.requests.size() == 1);
  m.step(h, 17'999);
  CHECK(h.requests.size() == 1);
  m.step(h, 18'000);
  REQUIRE(h.requests.size() == 2);
  CHECK(h.requests[1].mark == run_b);
  // An idle worker (even mark) is never asked.
  CHECK(!mark_running(h.w[1].mark));
  for (const auto& r : h.requests) CHECK(r.worker == 0);
}

TEST_CASE("monitor: a fair engine's slice is the tick's: only the tick and need_resched ask", "[monitor]") {
  monitor m(test_config(0), 1);
  fake_host h(1);
  h.w[0].mark = run_a;
  h.w[0].queued = true;
  h.w[0].next_tick = 5000;
  m.step(h, 1000);
  m.step(h, 4999);
  CHECK(h.requests.empty());
  m.step(h, 5000);
  REQUIRE(h.requests.size() == 1);
  CHECK(h.requests[0].bits == request_look);
  h.w[0].next_tick = 6000;
  h.w[0].resched = true;
  m.step(h, 5500);
  REQUIRE(h.requests.size() == 2);
  CHECK(h.requests[1].bits == request_look);
}

TEST_CASE("monitor: it looks again at the next tick, the slice's end or the stall threshold", "[monitor]") {
  monitor m(test_config(), 1);
  fake_host h(1);
  h.w[0].mark = run_a;
  h.w[0].next_tick = 10'400;
  CHECK(m.step(h, 10'000).next == 10'400);  // the tick, before the period and the slice
  h.w[0].next_tick = 20'000;
  CHECK(m.step(h, 10'500).next == 11'500);  // the period
  CHECK(m.step(h, 12'600).next == 13'000);  // the slice's end
  // Idle but awake (spinning): a period; every worker parked: never.
  h.w[0].mark = 2 * 9;
  CHECK(m.step(h, 14'000).next == 15'000);
  h.parked = true;
  CHECK(m.step(h, 15'000).next == monitor::never_again);
}

TEST_CASE("monitor: a stalled fiber is reported once per stall, and a preempt point ends a stall", "[monitor]") {
  monitor m(test_config(), 1);
  fake_host h(1);
  h.w[0].mark = run_a;
  m.step(h, 0);
  m.step(h, 49'999);
  CHECK(h.stalls.empty());
  auto o = m.step(h, 50'000);
  REQUIRE(h.stalls.size() == 1);
  CHECK(h.stalls[0].worker == 0);
  CHECK(h.stalls[0].mark == run_a);
  CHECK(h.stalls[0].quiet == 50'000);
  CHECK(o.next == 51'000);
  for (std::uint64_t t = 51'000; t <= 200'000; t += 1000) m.step(h, t);
  CHECK(h.stalls.size() == 1);
  // It reached a preempt point (a look): long, not stalled; quiet again
  // for the threshold, it is a new stall.
  h.w[0].looks = 1;
  m.step(h, 201'000);
  m.step(h, 250'999);
  CHECK(h.stalls.size() == 1);
  m.step(h, 251'000);
  REQUIRE(h.stalls.size() == 2);
  CHECK(h.stalls[1].quiet == 50'000);
  // A switch to another fiber that stalls too: reported once more.
  h.w[0].mark = run_b;
  m.step(h, 260'000);
  m.step(h, 310'000);
  REQUIRE(h.stalls.size() == 3);
  CHECK(h.stalls[2].mark == run_b);
}

TEST_CASE("monitor: a stall threshold of 0 reports nothing", "[monitor]") {
  monitor m(test_config(3000, 0), 1);
  fake_host h(1);
  h.w[0].mark = run_a;
  h.parked = false;
  for (std::uint64_t t = 0; t <= 10'000'000; t += 1000) m.step(h, t);
  CHECK(h.stalls.empty());
  h.w[0].mark = 2 * 9;
  h.parked = true;
  h.hang = true;
  for (std::uint64_t t = 10'000'000; t <= 20'000'000; t += 1000) m.step(h, t);
  CHECK(h.hangs.empty());
}

TEST_CASE("monitor: a hang is reported once, after every worker has been parked for the quiet time",
          "[monitor]") {
  monitor m(test_config(), 2);
  fake_host h(2);
  h.parked = true;
  h.hang = true;
  h.epoch = 4;
  auto o = m.step(h, 1000);
  CHECK(h.hangs.empty());
  CHECK(o.all_parked);
  CHECK(o.next == 101'000);
  m.step(h, 100'999);
  CHECK(h.hangs.empty());
  o = m.step(h, 101'000);
  REQUIRE(h.hangs.size() == 1);
  CHECK(h.hangs[0] == 100'000);
  CHECK(o.next == monitor::never_again);  // reported: asleep until a worker unparks
  m.step(h, 900'000);
  CHECK(h.hangs.size() == 1);
  // A worker woke and parked again (the epoch moved): a new watch.
  h.epoch = 5;
  m.step(h, 1'000'000);
  m.step(h, 1'099'999);
  CHECK(h.hangs.size() == 1);
  m.step(h, 1'100'000);
  CHECK(h.hangs.size() == 2);
  // Something can still wake them (a timer, I/O, a blocking call): no hang.
  h.epoch = 6;
  h.hang = false;
  for (std::uint64_t t = 1'200'000; t <= 2'000'000; t += 50'000) m.step(h, t);
  CHECK(h.hangs.size() == 2);
  // Not every worker parked: none either, and the watch starts over.
  h.hang = true;
  h.parked = false;
  m.step(h, 2'100'000);
  h.parked = true;
  m.step(h, 2'150'000);
  m.step(h, 2'249'999);
  CHECK(h.hangs.size() == 2);
  m.step(h, 2'250'000);
  CHECK(h.hangs.size() == 3);
}

// The real backend: a request from the monitor is what ends a FIFO slice
// (no clock is read at the preempt point), and the tick still runs for a
// fiber that only calls preempt points. Real time, for the monitor's thread.
TEST_CASE("monitor: a fiber looping on preempt points is ticked and gives way when its slice is used up",
          "[monitor][realtime]") {
  auto opts = usched::test::make_options("none", 1);
  opts.slice = std::chrono::microseconds(1000);
  usched::runtime rt(opts);
  std::atomic<int> turns{0};
  std::atomic<int> last{-1};
  rt.run([&] {
    auto body = [&](int me) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (turns.load() < 6 && std::chrono::steady_clock::now() < give_up) {
        if (last.exchange(me) != me) turns.fetch_add(1);
        usched::this_fiber::preempt_point();
      }
    };
    auto a = usched::spawn(body, 0);
    auto b = usched::spawn(body, 1);
    a.join();
    b.join();
  });
  CHECK(turns.load() >= 6);
  // Every turn after the first came from a requeue at a preempt point.
  CHECK(rt.stats().workers[0].fibers_run >= 6);
}

namespace {

// A log sink that keeps the warnings' text and counts the stall reports.
class capture_sink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::atomic<int> stalls{0};
  std::string text() {
    std::lock_guard<std::mutex> g(mutex_);
    return text_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string line(msg.payload.data(), msg.payload.size());
    text_ += line + "\n";
    if (line.find(" without a switch or a preempt point") != std::string::npos) stalls.fetch_add(1);
  }
  void flush_() override {}

 private:
  std::string text_;
};

// capture_log(): a sink on `rt`'s logger, added from one of its fibers'
// runtime before the fiber under test is spawned (nothing logs meanwhile).
std::shared_ptr<capture_sink> capture_log(usched::runtime& rt) {
  usched::detail::runtime_impl* impl = rt.run([] { return &usched::detail::worker_of_this_thread()->rt(); });
  auto sink = std::make_shared<capture_sink>();
  impl->log().sinks().push_back(sink);
  return sink;
}

// spin_until(): busy, with no switch and no preempt point, until `done`
// says so or 10 s have passed.
template <class Done>
void spin_until(Done done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done() && std::chrono::steady_clock::now() < give_up) {
  }
}

}  // namespace

// A real stall: a fiber that holds its worker past the threshold without a
// preempt point is named once in the runtime's log. It holds the worker
// until the report has come (10 s at most), then for five thresholds more,
// in which no second report may come.
TEST_CASE("monitor: a fiber that holds its worker past USCHED_STALL_MS is named once", "[monitor][realtime]") {
  auto opts = usched::test::make_options("steal", 1);
  opts.stall = std::chrono::milliseconds(20);
  usched::runtime rt(opts);
  auto sink = capture_log(rt);
  usched::spawn_options so;
  so.label = "holder";
  rt.spawn(so, [&sink] {
    spin_until([&] { return sink->stalls.load() != 0; });
    const auto more = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    spin_until([&] { return std::chrono::steady_clock::now() >= more; });
  }).join();
  const std::string text = sink->text();
  INFO(text);
  CHECK(sink->stalls.load() == 1);
  CHECK(text.find(" (\"holder\") has run on worker 0 for ") != std::string::npos);
  CHECK(text.find("(USCHED_STALL_MS=20)") != std::string::npos);
}

// With a flight recorder, the stall's report leaves its last events in
// USCHED_TRACE's file, and says so beside the warning.
TEST_CASE("monitor: a stall's report writes the flight recorder's last events", "[monitor][realtime][trace]") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("usched-stall-" + std::to_string(::getpid()) + ".txt")).string();
  std::filesystem::remove(path);
  auto opts = usched::test::make_options("steal", 1);
  opts.stall = std::chrono::milliseconds(20);
  opts.trace = path;
  opts.trace_flight = 64;
  usched::runtime rt(opts);
  auto sink = capture_log(rt);
  usched::spawn_options so;
  so.label = "holder";
  rt.spawn(so, [&sink] { spin_until([&] { return sink->text().find("are in '") != std::string::npos; }); }).join();
  const std::string text = sink->text();
  INFO(text);
  CHECK(sink->stalls.load() == 1);
  CHECK(text.find("the stall of fiber ") != std::string::npos);
  CHECK(text.find(" last events are in '" + path + "'") != std::string::npos);
  // The file holds the trace up to the stall: the holder's spawn and its
  // switch in, and at most 64 records of the worker.
  const usched::detail::trace_data d = usched::detail::read_trace_file(path);
  std::size_t switches_in = 0;
  for (const auto& r : d.records) {
    if (r.type == usched::detail::trace_event::switch_to && r.other != 0) ++switches_in;
  }
  CHECK(switches_in >= 1);
  CHECK(d.records.size() <= 2 * 64);  // the worker's ring and the outside threads'
  std::filesystem::remove(path);
}

// USCHED_STALL_MS=0: the same fiber, 100 ms without a preempt point, is
// not named.
TEST_CASE("monitor: USCHED_STALL_MS=0 names no stall", "[monitor][realtime]") {
  auto opts = usched::test::make_options("steal", 1);
  opts.stall = std::chrono::milliseconds(0);
  usched::runtime rt(opts);
  auto sink = capture_log(rt);
  rt.spawn([] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    spin_until([&] { return std::chrono::steady_clock::now() >= until; });
  }).join();
  CHECK(sink->stalls.load() == 0);
  CHECK(sink->text().empty());
}

// A hang inside the runtime: its one fiber waits on a channel that nothing
// in the runtime sends on, no timer, no I/O. Once every worker has been
// parked for a second the monitor lists it, once; a send from this thread
// then ends it.
TEST_CASE("monitor: a runtime whose fibers all wait with nothing to wake them is reported once",
          "[monitor][realtime]") {
  auto opts = usched::test::make_options("steal", 2);
  usched::runtime rt(opts);
  usched::detail::runtime_impl* impl = rt.run([] { return &usched::detail::worker_of_this_thread()->rt(); });
  auto sink = std::make_shared<capture_sink>();
  impl->log().sinks().push_back(sink);
  usched::channel<int> never(0);
  usched::spawn_options so;
  so.label = "waiter";
  auto waiter = rt.spawn(so, [&never] { return never.recv().value_or(-1); });
  const auto reported = [&] { return sink->text().find("every worker has been parked") != std::string::npos; };
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!reported() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Another second and a half parked: still one report.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const std::string text = sink->text();
  INFO(text);
  const auto first = text.find("every worker has been parked");
  REQUIRE(first != std::string::npos);
  CHECK(text.find("every worker has been parked", first + 1) == std::string::npos);
  CHECK(text.find("while 1 fiber waits with nothing in the runtime to wake them") != std::string::npos);
  CHECK(text.find(" (\"waiter\") is blocked in channel::recv on 0x") != std::string::npos);
  never.send(7);
  CHECK(waiter.join() == 7);
}
