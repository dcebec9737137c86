// Trace recording (runtime/engine/trace.hpp), from the recorder up: the
// tracer alone (merge order, the flight ring, the memory bound, labels, a
// collect() taken while writers run); the engine's records with an
// injected clock, event by event; the simulator's records against its
// statistics; the real runtime's file against runtime::stats(). The
// exporters' own formats are tests/test_trace_export.cpp's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <unistd.h>

#include <usched/detail/wait.hpp>
#include <usched/usched.hpp>

#include "engine.hpp"
#include "engine_test_access.hpp"
#include "simulator.hpp"
#include "test_support.hpp"
#include "topology.hpp"
#include "trace.hpp"
#include "trace_export.hpp"
#include "trace_names.hpp"
#include "trace_records.hpp"
#include "workload.hpp"

namespace {

using usched::wake_reason;
using usched::detail::balance_outcome;
using usched::detail::enqueue_kind;
using usched::detail::migrate_cause;
using usched::detail::prev_action;
using usched::detail::sched_entity;
using usched::detail::stop_reason;
using usched::detail::trace_data;
using usched::detail::trace_event;
using usched::detail::trace_record;
using usched::detail::tracer;
using test_access = usched::detail::engine_test_access;

// ---- the tracer alone --------------------------------------------------------------

// A record whose fields all follow from (cpu, seq): time, fiber and other
// tell which it is, value and depth are checks on the rest of its words.
trace_record numbered(int cpu, std::uint64_t seq, std::int64_t t) {
  trace_record r;
  r.time = t;
  r.type = trace_event::migrate;
  r.cpu = static_cast<std::int16_t>(cpu);
  r.fiber = static_cast<std::uint64_t>(cpu) * 1000 + seq;
  r.other = seq;
  r.value = static_cast<std::uint32_t>(seq * 3 + 1);
  r.depth = static_cast<std::uint16_t>(seq & 0xffff);
  return r;
}

tracer::config whole_run(std::size_t cpus, std::size_t limit = std::size_t{1} << 30) {
  tracer::config c;
  c.nr_cpus = cpus;
  c.kind = tracer::mode::whole_run;
  c.limit_bytes = limit;
  return c;
}

tracer::config flight(std::size_t cpus, std::size_t n) {
  tracer::config c;
  c.nr_cpus = cpus;
  c.kind = tracer::mode::flight;
  c.flight_records = n;
  return c;
}

// The bytes of one chunk of records, as the memory bound counts them.
constexpr std::size_t chunk_bytes = tracer::chunk_records * 40;

}  // namespace

TEST_CASE("trace recording: one thread's records come back whole, in time order, equal times as written",
          "[trace][recording]") {
  tracer t(whole_run(2));
  // Not bound: the outside buffer.
  const std::vector<std::int64_t> times = {50, 30, 30, 10, 50, 20};
  for (std::size_t i = 0; i < times.size(); ++i) t.emit(numbered(1, i, times[i]));
  const trace_data d = t.collect();
  CHECK(d.nr_cpus == 2);
  CHECK(d.dropped == 0);
  CHECK_FALSE(d.virtual_time);
  // A stable sort by time: 10, 20, 30 (seq 1, then 2), 50 (seq 0, then 4).
  const std::vector<trace_record> want = {numbered(1, 3, 10), numbered(1, 5, 20), numbered(1, 1, 30),
                                          numbered(1, 2, 30), numbered(1, 0, 50), numbered(1, 4, 50)};
  CHECK(d.records == want);
}

TEST_CASE("trace recording: bound workers' buffers merge by time, worker 0 first among equal times, outside last",
          "[trace][recording]") {
  constexpr int cpus = 3;
  tracer t(whole_run(cpus));
  // Each worker writes times 10, 20, 20, 30 (seq 0..3); the outside thread
  // (this one) the same.
  const std::vector<std::int64_t> times = {10, 20, 20, 30};
  std::vector<std::thread> threads;
  for (int c = 0; c < cpus; ++c) {
    threads.emplace_back([&t, &times, c] {
      t.bind_thread(c);
      for (std::size_t i = 0; i < times.size(); ++i) t.emit(numbered(c, i, times[i]));
      t.unbind_thread();
      // Unbound: the outside buffer, after the main thread's (joined below).
    });
  }
  for (auto& th : threads) th.join();
  for (std::size_t i = 0; i < times.size(); ++i) t.emit(numbered(cpus, i, times[i]));
  // A thread bound to a worker index the tracer does not have stays outside.
  t.bind_thread(cpus);
  t.emit(numbered(cpus, 9, 40));
  t.unbind_thread();

  std::vector<trace_record> want;
  for (std::int64_t time : {10, 20, 30}) {
    for (int c = 0; c <= cpus; ++c) {
      for (std::size_t i = 0; i < times.size(); ++i) {
        if (times[i] == time) want.push_back(numbered(c, i, time));
      }
    }
  }
  want.push_back(numbered(cpus, 9, 40));
  const trace_data d = t.collect();
  CHECK(d.records == want);
  CHECK(d.dropped == 0);
}

TEST_CASE("trace recording: a flight ring keeps exactly the last N records of each buffer, N a power of two, 16 or more",
          "[trace][recording]") {
  CHECK(tracer(flight(1, 0)).cfg().flight_records == 16);
  CHECK(tracer(flight(1, 5)).cfg().flight_records == 16);
  CHECK(tracer(flight(1, 16)).cfg().flight_records == 16);
  CHECK(tracer(flight(1, 17)).cfg().flight_records == 32);
  CHECK(tracer(flight(1, 64)).cfg().flight_records == 64);
  CHECK(tracer(flight(1, 1000)).cfg().flight_records == 1024);

  tracer t(flight(2, 20));  // 32 per buffer
  REQUIRE(t.cfg().flight_records == 32);
  // Worker 0: 100 records; worker 1: 7 (fewer than the ring); outside: 33.
  std::thread w0([&t] {
    t.bind_thread(0);
    for (std::uint64_t i = 0; i < 100; ++i) t.emit(numbered(0, i, static_cast<std::int64_t>(i)));
  });
  w0.join();
  std::thread w1([&t] {
    t.bind_thread(1);
    for (std::uint64_t i = 0; i < 7; ++i) t.emit(numbered(1, i, static_cast<std::int64_t>(1000 + i)));
  });
  w1.join();
  for (std::uint64_t i = 0; i < 33; ++i) t.emit(numbered(2, i, static_cast<std::int64_t>(2000 + i)));
  std::vector<trace_record> want;
  for (std::uint64_t i = 68; i < 100; ++i) want.push_back(numbered(0, i, static_cast<std::int64_t>(i)));
  for (std::uint64_t i = 0; i < 7; ++i) want.push_back(numbered(1, i, static_cast<std::int64_t>(1000 + i)));
  for (std::uint64_t i = 1; i < 33; ++i) want.push_back(numbered(2, i, static_cast<std::int64_t>(2000 + i)));
  const trace_data d = t.collect();
  CHECK(d.records == want);
  // Overwritten by newer records is what a ring is for, not a loss.
  CHECK(d.dropped == 0);
  CHECK(t.dropped() == 0);
}

TEST_CASE("trace recording: past the memory bound records are dropped and counted, never half kept",
          "[trace][recording]") {
  SECTION("a bound below one chunk still allows one chunk") {
    tracer t(whole_run(2, 1));
    std::thread w([&t] {
      t.bind_thread(0);
      for (std::uint64_t i = 0; i < tracer::chunk_records + 10; ++i) t.emit(numbered(0, i, static_cast<std::int64_t>(i)));
    });
    w.join();
    // The only chunk is worker 0's: worker 1 and the outside threads drop
    // everything.
    std::thread w1([&t] {
      t.bind_thread(1);
      for (std::uint64_t i = 0; i < 5; ++i) t.emit(numbered(1, i, 0));
    });
    w1.join();
    t.emit(numbered(2, 0, 0));
    const trace_data d = t.collect();
    REQUIRE(d.records.size() == tracer::chunk_records);
    for (std::uint64_t i = 0; i < tracer::chunk_records; ++i) {
      REQUIRE(d.records[i] == numbered(0, i, static_cast<std::int64_t>(i)));
    }
    CHECK(d.dropped == 10 + 5 + 1);
    CHECK(t.dropped() == 16);
  }
  SECTION("the bound is shared: chunks one buffer took are not another's") {
    tracer t(whole_run(2, 3 * chunk_bytes + chunk_bytes / 2));  // three chunks
    std::thread w0([&t] {
      t.bind_thread(0);
      // Two chunks and one record: three chunks.
      for (std::uint64_t i = 0; i < 2 * tracer::chunk_records + 1; ++i) t.emit(numbered(0, i, 1));
    });
    w0.join();
    std::thread w1([&t] {
      t.bind_thread(1);
      for (std::uint64_t i = 0; i < 3; ++i) t.emit(numbered(1, i, 0));
    });
    w1.join();
    const trace_data d = t.collect();
    CHECK(d.records.size() == 2 * tracer::chunk_records + 1);
    CHECK(d.dropped == 3);
    // What is kept is each buffer's first records, in order.
    CHECK(d.records.front() == numbered(0, 0, 1));
    CHECK(d.records.back() == numbered(0, 2 * tracer::chunk_records, 1));
  }
}

TEST_CASE("trace recording: a label is split into eight-byte records and read back by the exporters",
          "[trace][recording]") {
  using usched::detail::trace_names::label_text;
  using usched::detail::trace_names::labels;
  tracer t(whole_run(1));
  const std::string name = "connection handler 17";  // 21 bytes: three records
  t.emit_label(5, 7, name);
  t.emit_label(6, 8, "");
  const std::string long_name(usched::detail::trace_label_max + 9, 'x');
  t.emit_label(7, 9, long_name);
  t.emit_label(8, 10, "12345678");  // exactly one record
  const trace_data d = t.collect();
  REQUIRE(d.records.size() == 3 + 1 + 8 + 1);
  for (std::size_t i = 0; i < 3; ++i) {
    const trace_record& r = d.records[i];
    CHECK(r.type == trace_event::label);
    CHECK(r.time == 5);
    CHECK(r.fiber == 7);
    CHECK(r.detail == i);
    CHECK(r.flags == (i == 2 ? usched::detail::label_flag_last : 0));
    CHECK(label_text(r) == name.substr(i * 8, 8));
  }
  CHECK(d.records[3].flags == usched::detail::label_flag_last);
  CHECK(d.records[3].other == 0);
  CHECK(d.records[11].flags == usched::detail::label_flag_last);
  CHECK(d.records[12].flags == usched::detail::label_flag_last);
  CHECK(d.records[12].detail == 0);
  const auto got = labels(d);
  CHECK(got.at(7) == name);
  CHECK(got.at(8).empty());
  CHECK(got.at(9) == long_name.substr(0, usched::detail::trace_label_max));
  CHECK(got.at(10) == "12345678");
  // And through the ftrace text: the fiber's comm is its label, cut as
  // TASK_COMM_LEN cuts it, and the label records come back as they were.
  std::stringstream text;
  usched::detail::write_ftrace(text, d);
  const trace_data back = usched::detail::read_ftrace(text);
  CHECK(back.records == d.records);
}

namespace {

// The stress cases' record: every word derived from the sequence number,
// so that a record put together from two different writes cannot pass.
constexpr std::uint64_t stress_key = 0x5a5a'1234'dead'beefULL;

trace_record stress_record(int cpu, std::uint64_t seq) {
  trace_record r;
  r.time = static_cast<std::int64_t>(seq);
  r.type = trace_event::switch_to;
  r.cpu = static_cast<std::int16_t>(cpu);
  r.from = static_cast<std::int16_t>(seq & 0x7fff);
  r.other = seq;
  r.fiber = seq ^ stress_key;
  r.value = static_cast<std::uint32_t>(seq * 7);
  return r;
}

bool whole(const trace_record& r) {
  const std::uint64_t seq = r.other;
  return r.type == trace_event::switch_to && r.fiber == (seq ^ stress_key) && r.time == static_cast<std::int64_t>(seq) &&
         r.from == static_cast<std::int16_t>(seq & 0x7fff) && r.value == static_cast<std::uint32_t>(seq * 7);
}

// Two bound writers append until told to stop; the caller collects
// meanwhile. Each writer has written at least `warm` records before
// run() calls `reader`.
template <class Reader>
void with_writers(tracer& t, std::uint64_t warm, std::uint64_t limit, Reader reader) {
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  std::vector<std::thread> writers;
  for (int c = 0; c < 2; ++c) {
    writers.emplace_back([&, c] {
      t.bind_thread(c);
      for (std::uint64_t i = 0; i < limit && (i < warm || !stop.load(std::memory_order_relaxed)); ++i) {
        t.emit(stress_record(c, i));
        if (i + 1 == warm) ready.fetch_add(1);
      }
      t.unbind_thread();
    });
  }
  const auto finish = [&] {
    stop.store(true);
    for (auto& w : writers) w.join();
  };
  while (ready.load() < 2) std::this_thread::yield();
  try {
    reader();
  } catch (...) {
    finish();
    throw;
  }
  finish();
}

// The records of each worker's buffer in a trace, in the order collected.
std::map<int, std::vector<std::uint64_t>> seqs_by_cpu(const trace_data& d) {
  std::map<int, std::vector<std::uint64_t>> out;
  for (const trace_record& r : d.records) out[r.cpu].push_back(r.other);
  return out;
}

}  // namespace

TEST_CASE("trace recording: a flight recorder read while written returns only whole records and counts the rest",
          "[trace][recording][stress]") {
  // A small ring, written over many times during each collect().
  tracer t(flight(2, 16));
  const unsigned rounds = 2000 / usched::test::volume_divisor;
  std::uint64_t lost = 0, kept = 0;
  with_writers(t, 16, ~std::uint64_t{0}, [&] {
    for (unsigned n = 0; n < rounds; ++n) {
      const trace_data d = t.collect();
      for (const trace_record& r : d.records) {
        if (!whole(r)) FAIL("a torn record: seq " << r.other << " fiber " << r.fiber << " time " << r.time);
      }
      // Per buffer: consecutive, in order; what is missing of the ring's
      // 16 was counted as dropped.
      std::size_t got = 0;
      for (const auto& [cpu, seqs] : seqs_by_cpu(d)) {
        REQUIRE((cpu == 0 || cpu == 1));
        for (std::size_t i = 1; i < seqs.size(); ++i) REQUIRE(seqs[i] == seqs[i - 1] + 1);
        got += seqs.size();
      }
      REQUIRE(got + d.dropped == 2 * 16);
      lost += d.dropped;
      kept += got;
    }
  });
  // Quiet again: everything whole, nothing lost.
  const trace_data d = t.collect();
  CHECK(d.records.size() == 32);
  CHECK(d.dropped == 0);
  INFO("kept " << kept << ", lost " << lost);
  CHECK(kept > 0);
}

TEST_CASE("trace recording: a whole run read while written returns each buffer's prefix, whole and in order",
          "[trace][recording][stress]") {
  tracer t(whole_run(2));
  const unsigned rounds = 200 / usched::test::volume_divisor;
  with_writers(t, 1, 8 * tracer::chunk_records, [&] {
    std::map<int, std::size_t> last;
    for (unsigned n = 0; n < rounds; ++n) {
      const trace_data d = t.collect();
      CHECK(d.dropped == 0);
      for (const trace_record& r : d.records) {
        if (!whole(r)) FAIL("a torn record: seq " << r.other);
      }
      for (const auto& [cpu, seqs] : seqs_by_cpu(d)) {
        for (std::size_t i = 0; i < seqs.size(); ++i) REQUIRE(seqs[i] == i);
        // A later collect() sees at least as much.
        REQUIRE(seqs.size() >= last[cpu]);
        last[cpu] = seqs.size();
      }
    }
  });
}

// ---- the engine's records, with an injected clock ----------------------------------

namespace {

// A fiber as the engine tests make them, with the id and the wait kind the
// trace hooks report.
struct traced_fiber : sched_entity {
  std::uint64_t id = 0;
  usched::detail::wait_kind waits_in = usched::detail::wait_kind::none;
};

usched::detail::engine::trace_hooks fiber_hooks() {
  usched::detail::engine::trace_hooks h;
  h.id = [](const sched_entity& se) noexcept { return static_cast<const traced_fiber&>(se).id; };
  h.wait = [](const sched_entity& se) noexcept {
    return static_cast<std::uint8_t>(static_cast<const traced_fiber&>(se).waits_in);
  };
  return h;
}

usched::detail::engine make_engine(const char* synthetic, unsigned workers, const char* policy,
                                   usched::detail::engine_config cfg = {}) {
  const auto topo = usched::detail::topology::load(synthetic);
  return usched::detail::engine(usched::build_domains(topo.place_workers(workers, usched::worker_unit::pu)),
                                usched::make_policy(policy), cfg);
}

std::deque<traced_fiber> fibers(std::size_t n) {
  std::deque<traced_fiber> f(n);
  for (std::size_t i = 0; i < n; ++i) f[i].id = 101 + i;
  return f;
}

trace_record switch_rec(std::int64_t t, int cpu, std::uint64_t prev, std::uint64_t next, stop_reason why,
                        std::uint16_t depth, std::uint8_t flags = 0, std::uint8_t detail = 0) {
  return usched::test::switch_record(t, cpu, prev, next, why, depth, flags, detail);
}

// The engine's events read as placed: the worker first, then the fiber.
trace_record wakeup_rec(std::int64_t t, int cpu, std::uint64_t fiber, wake_reason why, int prev_cpu, int origin,
                        std::uint64_t waker, std::uint8_t flags, std::uint16_t depth) {
  return usched::test::wakeup_record(t, fiber, cpu, prev_cpu, waker, origin, why, flags, depth);
}

trace_record migrate_rec(std::int64_t t, std::uint64_t fiber, int from, int to, migrate_cause why, int level, int by,
                         std::uint16_t depth) {
  return usched::test::migrate_record(t, fiber, from, to, why, level, by, depth);
}

constexpr std::uint8_t new_flag = usched::detail::wake_flag_new;
constexpr std::uint8_t running_flag = usched::detail::wake_flag_running;
constexpr std::uint8_t preempts_flag = usched::detail::wake_flag_preempts;
constexpr std::uint8_t runnable_flag = usched::detail::switch_flag_runnable;
constexpr std::int64_t ms = 1'000'000;

}  // namespace

TEST_CASE("trace recording: spawns, a block and a wake-up onto another worker, record by record",
          "[trace][recording][engine]") {
  auto e = make_engine("pack:1 core:2 pu:1", 2, "steal");
  tracer t(whole_run(2));
  e.set_tracer(&t, fiber_hooks());
  std::vector<usched::cpu_snapshot> scratch;
  auto f = fibers(4);
  auto [a, b, c, d] = std::tie(f[0], f[1], f[2], f[3]);
  a.pinned = b.pinned = c.pinned = 0;
  // Two spawns from outside the runtime onto worker 0.
  CHECK(e.wake_up(&a, usched::placement_kind::spawn, wake_reason::spawn, -1, 1, scratch, 10).cpu == 0);
  CHECK(e.wake_up(&b, usched::placement_kind::spawn, wake_reason::spawn, -1, 1, scratch, 20).cpu == 0);
  // Worker 0 finds a; a spawns c onto its own worker.
  REQUIRE(e.find_work(0, 30, 1, scratch) == &a);
  CHECK(e.wake_up(&c, usched::placement_kind::spawn, wake_reason::spawn, 0, 1, scratch, 40).cpu == 0);
  // a blocks in a mutex: c, spawned by the fiber running there, runs next
  // (the work stealers' runnext).
  a.waits_in = usched::detail::wait_kind::mutex;
  REQUIRE(e.schedule(0, &a, prev_action::block, 50).next == &c);
  // c wakes a, which may now only run on worker 1: a wake-up migration.
  a.pinned = 1;
  const auto w = e.wake_up(&a, usched::placement_kind::wake, wake_reason::sync, 0, 1, scratch, 60);
  CHECK(w.cpu == 1);
  // d is woken while still on worker 0, on its way to block: it stays.
  d.cpu.store(0);
  d.on_rq.store(true);
  CHECK(e.wake_up(&d, usched::placement_kind::wake, wake_reason::channel, 1, 1, scratch, 70).cpu == -1);
  // c yields to b; b exits, c runs again.
  REQUIRE(e.schedule(0, &c, prev_action::yield, 80).next == &b);
  REQUIRE(e.schedule(0, &b, prev_action::exit, 90).next == &c);

  const std::vector<trace_record> want = {
      wakeup_rec(10, 0, a.id, wake_reason::spawn, -1, -1, 0, new_flag, 1),
      wakeup_rec(20, 0, b.id, wake_reason::spawn, -1, -1, 0, new_flag, 2),
      switch_rec(30, 0, 0, a.id, stop_reason::exit, 1),
      wakeup_rec(40, 0, c.id, wake_reason::spawn, -1, 0, a.id, new_flag, 2),
      switch_rec(50, 0, a.id, c.id, stop_reason::block, 1, 0, static_cast<std::uint8_t>(usched::detail::wait_kind::mutex)),
      migrate_rec(60, a.id, 0, 1, migrate_cause::wake, -1, 0, 1),
      wakeup_rec(60, 1, a.id, wake_reason::sync, 0, 0, c.id, 0, 1),
      // From worker 1, whose running fiber (none) is the waker.
      wakeup_rec(70, 0, d.id, wake_reason::channel, 0, 1, 0, running_flag, 1),
      switch_rec(80, 0, c.id, b.id, stop_reason::yield, 1, runnable_flag),
      switch_rec(90, 0, b.id, c.id, stop_reason::exit, 0),
  };
  CHECK(t.collect().records == want);
  // The counters the simulator's checks below rely on: every wake-up
  // record, running or not, is one wake-up counted on its worker.
  CHECK(e.counters(0).wakeups[static_cast<std::size_t>(wake_reason::spawn)].get() == 3);
  CHECK(e.counters(0).wakeups[static_cast<std::size_t>(wake_reason::channel)].get() == 1);
  CHECK(e.counters(1).wakeups[static_cast<std::size_t>(wake_reason::sync)].get() == 1);
}

TEST_CASE("trace recording: the preemptions say who asked: a wake-up, the tick, an active balance",
          "[trace][recording][engine][cfs]") {
  std::vector<usched::cpu_snapshot> scratch;
  SECTION("a wake-up preemption (check_preempt_wakeup)") {
    auto e = make_engine("pack:1 core:1 pu:1", 1, "cfs");
    tracer t(whole_run(1));
    e.set_tracer(&t, fiber_hooks());
    auto f = fibers(2);
    auto [a, b] = std::tie(f[0], f[1]);
    e.enqueue(0, &a, enqueue_kind::spawn, 0);
    e.enqueue(0, &b, enqueue_kind::spawn, 0);
    // b (the smaller START_DEBIT) runs, blocks; a runs.
    REQUIRE(e.find_work(0, 0, 1, scratch) == &b);
    b.waits_in = usched::detail::wait_kind::sleep;
    REQUIRE(e.schedule(0, &b, prev_action::block, 100'000).next == &a);
    // b comes back 1.1 ms of vruntime behind a, past the 1 ms wake-up
    // granularity: it asks a to yield.
    b.vruntime = a.vruntime + 500'000 - 1'100'000;
    CHECK(e.wake_up(&b, usched::placement_kind::wake, wake_reason::timer, 0, 1, scratch, 600'000).cpu == 0);
    REQUIRE(e.should_preempt(0, 0));
    // a spawns c before its preempt point: a spawn asks nothing, and the
    // request still pending is b's, not c's.
    auto g = fibers(3);
    traced_fiber& c = g[2];
    CHECK(e.wake_up(&c, usched::placement_kind::spawn, wake_reason::spawn, 0, 1, scratch, 650'000).cpu == 0);
    REQUIRE(e.schedule(0, &a, prev_action::requeue, 700'000).next == &b);
    const std::vector<trace_record> want = {
        switch_rec(0, 0, 0, b.id, stop_reason::exit, 1),
        switch_rec(100'000, 0, b.id, a.id, stop_reason::block, 0, 0,
                   static_cast<std::uint8_t>(usched::detail::wait_kind::sleep)),
        // A timer wakes on no fiber's behalf: no waker.
        wakeup_rec(600'000, 0, b.id, wake_reason::timer, 0, 0, 0, preempts_flag, 1),
        wakeup_rec(650'000, 0, c.id, wake_reason::spawn, -1, 0, a.id, new_flag, 2),
        switch_rec(700'000, 0, a.id, b.id, stop_reason::preempt_wakeup, 2, runnable_flag),
    };
    CHECK(t.collect().records == want);
    CHECK(e.counters(0).wakeup_preemptions == 1);
  }
  SECTION("the tick's (check_preempt_tick)") {
    auto e = make_engine("pack:1 core:1 pu:1", 1, "cfs");
    tracer t(whole_run(1));
    e.set_tracer(&t, fiber_hooks());
    auto f = fibers(3);
    for (auto& x : f) e.enqueue(0, &x, enqueue_kind::spawn, 0);
    // Three fibers on one CPU: a 6 ms period, 2 ms slices; the last
    // spawned runs first.
    REQUIRE(e.find_work(0, 0, 1, scratch) == &f[2]);
    e.tick(0, 1 * ms, 1, scratch);
    REQUIRE_FALSE(e.should_preempt(0, 0));
    e.tick(0, 3 * ms, 1, scratch);
    REQUIRE(e.should_preempt(0, 0));
    const auto* next = static_cast<const traced_fiber*>(e.schedule(0, &f[2], prev_action::requeue, 3 * ms).next);
    REQUIRE(next != nullptr);
    REQUIRE(next != &f[2]);
    const std::vector<trace_record> want = {
        switch_rec(0, 0, 0, f[2].id, stop_reason::exit, 2),
        switch_rec(3 * ms, 0, f[2].id, next->id, stop_reason::preempt_tick, 2, runnable_flag),
    };
    CHECK(t.collect().records == want);
    CHECK(e.counters(0).tick_preemptions == 1);
  }
  SECTION("an active balance's: the push, then the switch") {
    auto e = make_engine("pack:1 l3:1 core:2 pu:1", 2, "cfs");
    tracer t(whole_run(2));
    e.set_tracer(&t, fiber_hooks());
    auto f = fibers(2);
    auto [a, b] = std::tie(f[0], f[1]);
    e.enqueue(0, &a, enqueue_kind::spawn, 0);
    e.enqueue(0, &b, enqueue_kind::spawn, 0);
    REQUIRE(e.find_work(0, 0, 1, scratch) == &b);
    REQUIRE(e.schedule(0, &b, prev_action::requeue, 6 * ms).next == &a);
    REQUIRE(e.schedule(0, &a, prev_action::requeue, 12 * ms).next == &b);
    // What load_balance() does when worker 1's passes keep failing: it
    // asks worker 0 to push to it and to yield at its next preempt point.
    auto& q0 = test_access::rq(e, 0);
    q0.active_balance_dst = 1;
    q0.resched_cause = static_cast<std::uint8_t>(stop_reason::preempt_balance);
    q0.need_resched = true;
    REQUIRE(e.should_preempt(0, 0));
    // The requeue of b: a, which ran least recently, moves; b runs on (no
    // switch). Then b blocks and worker 0 is idle.
    const auto r = e.schedule(0, &b, prev_action::requeue, 13 * ms);
    CHECK(r.next == &b);
    CHECK(r.pushed_to == 1);
    // Asked again with only b left: b itself is pushed, and worker 0 goes idle.
    q0.active_balance_dst = 1;
    q0.resched_cause = static_cast<std::uint8_t>(stop_reason::preempt_balance);
    q0.need_resched = true;
    const auto r2 = e.schedule(0, &b, prev_action::requeue, 14 * ms);
    CHECK(r2.next == nullptr);
    CHECK(r2.pushed_to == 1);
    const std::vector<trace_record> want = {
        switch_rec(0, 0, 0, b.id, stop_reason::exit, 1),
        switch_rec(6 * ms, 0, b.id, a.id, stop_reason::preempt_tick, 1, runnable_flag),
        switch_rec(12 * ms, 0, a.id, b.id, stop_reason::preempt_tick, 1, runnable_flag),
        // Named before it is attached: worker 1's queue is still empty.
        migrate_rec(13 * ms, a.id, 0, 1, migrate_cause::active, -1, 0, 0),
        migrate_rec(14 * ms, b.id, 0, 1, migrate_cause::active, -1, 0, 1),
        switch_rec(14 * ms, 0, b.id, 0, stop_reason::preempt_balance, 0, runnable_flag),
    };
    CHECK(t.collect().records == want);
    CHECK(e.counters(0).active_pushes == 2);
  }
}

namespace {

// The balance record's fields, read back.
struct balance_view {
  int cpu;
  int level;
  usched::cpu_idle_type idle;
  balance_outcome outcome;
  usched::migration_type type;
  unsigned moved;
  int busiest;
  int busiest_group;
};

balance_view view(const trace_record& r) {
  return {r.cpu,
          r.detail,
          static_cast<usched::cpu_idle_type>(r.reason),
          static_cast<balance_outcome>(r.flags & 0xf),
          static_cast<usched::migration_type>(r.flags >> 4),
          r.value,
          r.from,
          r.aux};
}

std::vector<trace_record> of_type(const trace_data& d, trace_event type) {
  std::vector<trace_record> out;
  for (const auto& r : d.records) {
    if (r.type == type) out.push_back(r);
  }
  return out;
}

}  // namespace

TEST_CASE("trace recording: a newly-idle pull is a balance pass that moved, then the migration, then the switch",
          "[trace][recording][engine]") {
  const std::string policy = GENERATE(as<std::string>{}, "cfs", "steal", "steal-lifo");
  CAPTURE(policy);
  auto e = make_engine("pack:1 l3:1 core:2 pu:1", 2, policy.c_str());
  tracer t(whole_run(2));
  e.set_tracer(&t, fiber_hooks());
  std::vector<usched::cpu_snapshot> scratch;
  auto f = fibers(2);
  // Worker 0 runs f[0] with f[1] queued behind it.
  e.enqueue(0, &f[0], enqueue_kind::spawn, 0);
  REQUIRE(e.find_work(0, 0, 1, scratch) == &f[0]);
  e.enqueue(0, &f[1], enqueue_kind::spawn, 0);
  // Worker 1 has nothing: its look for work pulls f[1] (a pull kick's
  // pass, not rationed by the average idle period).
  REQUIRE(e.find_work(1, 5 * ms, 3, scratch, true) == &f[1]);
  const trace_data d = t.collect();
  REQUIRE(d.records.size() == 4);
  CHECK(d.records[0] == switch_rec(0, 0, 0, f[0].id, stop_reason::exit, 0));
  const balance_view b = view(d.records[1]);
  CHECK(d.records[1].type == trace_event::balance);
  CHECK(d.records[1].time == 5 * ms);
  CHECK(b.cpu == 1);
  CHECK(b.level == 0);
  CHECK(b.idle == usched::cpu_idle_type::newly_idle);
  CHECK(b.outcome == balance_outcome::moved);
  CHECK(b.moved == 1);
  CHECK(b.busiest == 0);
  // Worker 1's LLC level has the local group (itself) first, then worker 0's.
  const auto& groups = e.domains().per_cpu[1][0].groups;
  REQUIRE(groups.size() == 2);
  CHECK(groups[static_cast<std::size_t>(b.busiest_group)].cpus == std::vector<int>{0});
  CHECK(e.counters(1, 0).moved[static_cast<std::size_t>(b.type)] == 1);
  CHECK(e.counters(1, 0).successes == 1);
  const migrate_cause cause = policy == "cfs" ? migrate_cause::newidle : migrate_cause::steal;
  CHECK(d.records[2] == migrate_rec(5 * ms, f[1].id, 0, 1, cause, 0, 1, 0));
  CHECK(d.records[3] == switch_rec(5 * ms, 1, 0, f[1].id, stop_reason::exit, 0));
  CHECK(e.counters(1).fibers_pulled == 1);
}

TEST_CASE("trace recording: a periodic pass with nothing to do is one balanced record, and its counters agree",
          "[trace][recording][engine]") {
  auto e = make_engine("pack:1 l3:1 core:2 pu:1", 2, "cfs");
  tracer t(whole_run(2));
  e.set_tracer(&t, fiber_hooks());
  std::vector<usched::cpu_snapshot> scratch;
  auto f = fibers(2);
  for (int c = 0; c < 2; ++c) {
    e.enqueue(c, &f[static_cast<std::size_t>(c)], enqueue_kind::spawn, 0);
    REQUIRE(e.find_work(c, 0, 1, scratch) == &f[static_cast<std::size_t>(c)]);
  }
  e.tick(1, 1000 * ms, 1, scratch);
  const auto passes = of_type(t.collect(), trace_event::balance);
  REQUIRE(passes.size() == 1);
  const balance_view b = view(passes[0]);
  CHECK(passes[0].time == 1000 * ms);
  CHECK(b.cpu == 1);
  CHECK(b.level == 0);
  CHECK(b.idle == usched::cpu_idle_type::not_idle);
  CHECK(b.outcome == balance_outcome::balanced);
  CHECK(b.moved == 0);
  CHECK(e.counters(1, 0).attempts == 1);
  CHECK(e.counters(1, 0).balanced == 1);
}

TEST_CASE("trace recording: with no tracer the engine decides the same and records nothing",
          "[trace][recording][engine]") {
  const std::string policy = GENERATE(as<std::string>{}, "cfs", "steal", "none");
  CAPTURE(policy);
  // One script, twice: spawns, picks, a block and a cross-worker wake-up,
  // a newly-idle pull, ticks; every result and counter compared.
  const auto script = [&policy](tracer* t) {
    auto e = make_engine("pack:1 l3:1 core:2 pu:1", 2, policy.c_str());
    if (t) e.set_tracer(t, fiber_hooks());
    std::vector<usched::cpu_snapshot> scratch;
    auto f = fibers(4);
    std::vector<std::int64_t> out;
    const auto idx = [&f](const sched_entity* se) -> std::int64_t {
      for (std::size_t i = 0; i < f.size(); ++i) {
        if (&f[i] == se) return static_cast<std::int64_t>(i);
      }
      return -1;
    };
    for (std::size_t i = 0; i < 3; ++i) {
      const auto r = e.wake_up(&f[i], usched::placement_kind::spawn, wake_reason::spawn, 0, i + 1, scratch,
                               static_cast<std::int64_t>(i) * ms);
      out.insert(out.end(), {r.cpu, r.notify, r.kick, r.pull});
    }
    sched_entity* c0 = e.find_work(0, 3 * ms, 2, scratch);
    sched_entity* c1 = e.find_work(1, 3 * ms, 3, scratch, true);
    out.insert(out.end(), {idx(c0), idx(c1)});
    if (c0) {
      const auto r = e.schedule(0, c0, prev_action::block, 4 * ms);
      out.insert(out.end(), {idx(r.next), r.pushed_to});
      const auto w = e.wake_up(c0, usched::placement_kind::wake, wake_reason::sync, 1, 9, scratch, 5 * ms);
      out.insert(out.end(), {w.cpu, w.kick});
    }
    for (int k = 0; k < 20; ++k) {
      for (int c = 0; c < 2; ++c) {
        const auto r = e.tick(c, (6 + k) * ms, static_cast<std::uint64_t>(k + c), scratch);
        out.insert(out.end(), {r.pulled, r.kick});
      }
    }
    for (int c = 0; c < 2; ++c) {
      const auto& k = e.counters(c);
      out.insert(out.end(), {static_cast<std::int64_t>(k.fibers_pulled.get()),
                             static_cast<std::int64_t>(k.wakeups[static_cast<std::size_t>(wake_reason::sync)].get()),
                             test_access::rq(e, c).nr_running, test_access::rq(e, c).nr_queued.load()});
      for (std::size_t l = 0; l < e.domains().per_cpu[static_cast<std::size_t>(c)].size(); ++l) {
        out.push_back(static_cast<std::int64_t>(e.counters(c, l).attempts.get()));
      }
    }
    for (const auto& x : f) out.insert(out.end(), {x.cpu.load(), static_cast<std::int64_t>(x.vruntime)});
    return out;
  };
  tracer t(whole_run(2));
  const auto traced = script(&t);
  const auto plain = script(nullptr);
  CHECK(traced == plain);
  CHECK_FALSE(t.collect().records.empty());
  auto e = make_engine("pack:1 core:1 pu:1", 1, policy.c_str());
  CHECK(e.tracing() == nullptr);
}

// ---- the simulator: records against its statistics -------------------------------

namespace {

// A workload with every kind of wake-up the simulator makes (spawn, join,
// timer, sync), CPU hogs that fill the queues, and fibers that come and go
// while others run, so that every balance path has something to do.
constexpr const char* busy_workload = R"(runtime 300ms
fiber parent x2
  spawn child x5
  join
  sleep 1ms
  repeat
fiber child x0
  run 700us
  sleep 300us
  run 400us
fiber pinger
  run 200us
  post ev
  sleep 1500us
  repeat
fiber ponger
  wait ev
  run 2ms
  repeat
fiber hog x3 on=0
  run 5ms
  repeat
)";

struct sim_run {
  trace_data trace;
  usched::runtime_stats stats;
};

sim_run run_sim(const std::string& topology, const std::string& policy) {
  usched::sim::sim_config c;
  c.topology = topology;
  c.policy = policy;
  c.options = usched::test::make_options(policy, 1);
  tracer t({});
  c.trace = &t;
  usched::sim::simulator sim(c);
  std::istringstream in(busy_workload);
  const auto w = usched::sim::parse_workload(in, "busy.txt");
  std::ostringstream out;
  usched::sim::run_workload(sim, w, out);
  return {t.collect(), sim.stats()};
}

}  // namespace

TEST_CASE("trace recording: the simulator's records add up to its statistics, worker by worker and level by level",
          "[trace][recording][sim]") {
  const std::string topology = GENERATE(as<std::string>{}, "pack:1 l3:1 core:2 pu:2", "pack:2 core:2 pu:1");
  const std::string policy = GENERATE(as<std::string>{}, "cfs", "cfs-v5.9", "steal", "none");
  CAPTURE(topology, policy);
  const sim_run r = run_sim(topology, policy);
  const auto& workers = r.stats.workers;
  const std::size_t n = workers.size();
  REQUIRE(n == 4);
  CHECK(r.trace.dropped == 0);
  std::vector<std::uint64_t> runs(n), pulled(n), pushed(n), parks(n);
  std::vector<usched::wake_counts> wakes(n);
  // Per worker and level: passes, and passes by outcome; fibers moved by
  // migration type.
  std::vector<std::vector<std::array<std::uint64_t, 4>>> outcomes(n);
  std::vector<std::vector<std::array<std::uint64_t, 4>>> moved(n);
  for (std::size_t c = 0; c < n; ++c) {
    outcomes[c].resize(workers[c].levels.size());
    moved[c].resize(workers[c].levels.size());
  }
  std::uint64_t any_pulls = 0, any_balances = 0;
  for (const trace_record& e : r.trace.records) {
    const auto c = static_cast<std::size_t>(e.cpu);
    REQUIRE(c < n);
    switch (e.type) {
      case trace_event::switch_to:
        if (e.other != 0) ++runs[c];
        break;
      case trace_event::wakeup:
        ++wakes[c].n[e.reason];
        break;
      case trace_event::migrate: {
        const auto why = static_cast<migrate_cause>(e.reason);
        if (why == migrate_cause::newidle || why == migrate_cause::periodic || why == migrate_cause::steal) {
          ++pulled[c];
          ++any_pulls;
        }
        if (why == migrate_cause::active) ++pushed[static_cast<std::size_t>(e.from)];
        break;
      }
      case trace_event::balance: {
        const balance_view b = view(e);
        REQUIRE(static_cast<std::size_t>(b.level) < outcomes[c].size());
        ++outcomes[c][static_cast<std::size_t>(b.level)][static_cast<std::size_t>(b.outcome)];
        if (b.outcome == balance_outcome::moved) {
          moved[c][static_cast<std::size_t>(b.level)][static_cast<std::size_t>(b.type)] += b.moved;
        }
        ++any_balances;
        break;
      }
      case trace_event::idle:
        if (static_cast<usched::detail::idle_kind>(e.reason) == usched::detail::idle_kind::park) ++parks[c];
        break;
      default:
        break;
    }
  }
  for (std::size_t c = 0; c < n; ++c) {
    CAPTURE(c);
    const usched::worker_stats& w = workers[c];
    CHECK(runs[c] == w.fibers_run);
    CHECK(wakes[c].n == w.wakeups.n);
    CHECK(pulled[c] == w.fibers_pulled);
    CHECK(pushed[c] == w.active_pushes);
    CHECK(parks[c] == w.parks);
    for (std::size_t l = 0; l < w.levels.size(); ++l) {
      CAPTURE(l);
      const auto& got = outcomes[c][l];
      const usched::domain_level_stats& s = w.levels[l];
      CHECK(got[0] + got[1] + got[2] + got[3] == s.attempts);
      CHECK(got[static_cast<std::size_t>(balance_outcome::balanced)] == s.balanced);
      CHECK(got[static_cast<std::size_t>(balance_outcome::moved)] == s.successes);
      CHECK(got[static_cast<std::size_t>(balance_outcome::none_movable)] +
                got[static_cast<std::size_t>(balance_outcome::active_asked)] ==
            s.failures);
      CHECK(moved[c][l][static_cast<std::size_t>(usched::migration_type::migrate_load)] == s.moved_load);
      CHECK(moved[c][l][static_cast<std::size_t>(usched::migration_type::migrate_util)] == s.moved_util);
      CHECK(moved[c][l][static_cast<std::size_t>(usched::migration_type::migrate_task)] == s.moved_task);
      CHECK(moved[c][l][static_cast<std::size_t>(usched::migration_type::migrate_misfit)] == s.moved_misfit);
    }
  }
  // The workload exercises what it is meant to: every policy but none
  // balances, and moves something.
  if (policy != "none") {
    CHECK(any_balances > 0);
    CHECK(any_pulls > 0);
  } else {
    CHECK(any_balances == 0);
    CHECK(any_pulls == 0);
  }
}

TEST_CASE("trace recording: the simulator's records are in virtual time order and its ftrace text reads back",
          "[trace][recording][sim]") {
  const sim_run r = run_sim("pack:1 l3:1 core:2 pu:2", "cfs");
  REQUIRE(r.trace.records.size() > 1000);
  CHECK(std::is_sorted(r.trace.records.begin(), r.trace.records.end(),
                       [](const trace_record& a, const trace_record& b) { return a.time < b.time; }));
  std::stringstream text;
  usched::detail::write_ftrace(text, r.trace);
  const trace_data back = usched::detail::read_ftrace(text);
  REQUIRE(back.records.size() == r.trace.records.size());
  for (std::size_t i = 0; i < back.records.size(); ++i) {
    const trace_record& a = r.trace.records[i];
    const trace_record& b = back.records[i];
    INFO("record " << i << " type " << int(a.type) << " cpu " << a.cpu << "/" << b.cpu << " fiber " << a.fiber << "/"
                   << b.fiber << " other " << a.other << "/" << b.other << " from " << a.from << "/" << b.from
                   << " aux " << a.aux << "/" << b.aux << " reason " << int(a.reason) << "/" << int(b.reason)
                   << " detail " << int(a.detail) << "/" << int(b.detail) << " flags " << int(a.flags) << "/"
                   << int(b.flags) << " value " << a.value << "/" << b.value << " depth " << a.depth << "/" << b.depth);
    REQUIRE(a == b);
  }
}

// ---- the real runtime ------------------------------------------------------------

namespace {

// A folder of its own under the system's temporary one, removed at the end.
class temp_dir {
 public:
  temp_dir() {
    static std::atomic<unsigned> n{0};
    path_ = std::filesystem::temp_directory_path() /
            ("usched-trace-test-" + std::to_string(::getpid()) + "-" + std::to_string(n.fetch_add(1)));
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Spawns, yields, mutex and channel waits, joins and sleeps: `spawned`
// counts the fibers made (run()'s own included).
void mixed_workload(std::atomic<unsigned>& spawned) {
  spawned.fetch_add(1);
  usched::mutex m;
  usched::channel<int> ch(0);
  int counter = 0;
  std::vector<usched::join_handle<void>> hs;
  for (int i = 0; i < 4; ++i) {
    spawned.fetch_add(1);
    hs.push_back(usched::spawn([&m, &counter] {
      for (int k = 0; k < 10; ++k) {
        std::lock_guard<usched::mutex> lock(m);
        ++counter;
        usched::this_fiber::yield();
      }
    }));
  }
  spawned.fetch_add(1);
  hs.push_back(usched::spawn([&ch] {
    for (int i = 0; i < 20; ++i) ch.send(i);
    usched::this_fiber::sleep_for(std::chrono::microseconds(200));
  }));
  spawned.fetch_add(1);
  usched::spawn_options labelled;
  labelled.label = "sleeper";
  hs.push_back(usched::spawn(labelled, [] {
    for (int i = 0; i < 3; ++i) usched::this_fiber::sleep_for(std::chrono::microseconds(100));
  }));
  for (int i = 0; i < 20; ++i) REQUIRE(ch.recv() == i);
  for (auto& h : hs) h.join();
  REQUIRE(counter == 40);
}

// What the trace says of each fiber and worker, checked as it is read:
// a fiber runs on one worker at a time, and stops on the worker it ran on.
struct runtime_trace_view {
  std::vector<std::uint64_t> runs;  // switches into a fiber, per worker
  std::vector<usched::wake_counts> wakes;
  std::map<std::uint64_t, unsigned> spawns;  // wakeup(new) records per fiber
  std::map<std::uint64_t, stop_reason> last_stop;
  std::vector<std::string> problems;
};

// Two workers' clocks (the engine's counter) may disagree by their skew:
// a fiber's stop on one worker and its start on another, a switch apart,
// may be merged the wrong way round when they are this close.
constexpr std::int64_t clock_skew_ns = 50'000;

runtime_trace_view read_runtime_trace(const trace_data& d, std::size_t workers) {
  runtime_trace_view v;
  v.runs.resize(workers);
  v.wakes.resize(workers);
  // Each fiber's switches, in trace order: +1 a start, -1 a stop.
  struct step {
    std::int64_t t;
    int cpu;
    int dir;
    stop_reason why;
  };
  std::map<std::uint64_t, std::vector<step>> steps;
  for (const trace_record& r : d.records) {
    if (r.cpu < 0 || static_cast<std::size_t>(r.cpu) >= workers) continue;
    const auto c = static_cast<std::size_t>(r.cpu);
    if (r.type == trace_event::switch_to) {
      if (r.fiber != 0) steps[r.fiber].push_back({r.time, r.cpu, -1, static_cast<stop_reason>(r.reason)});
      if (r.other != 0) {
        steps[r.other].push_back({r.time, r.cpu, +1, stop_reason::count});
        ++v.runs[c];
      }
    }
    if (r.type == trace_event::wakeup) {
      ++v.wakes[c].n[r.reason];
      if (r.flags & new_flag) ++v.spawns[r.fiber];
    }
  }
  for (auto& [fiber, list] : steps) {
    // A start on one worker merged just before the stop on another that
    // it follows, within the skew: put them back in order.
    for (std::size_t i = 0; i + 1 < list.size(); ++i) {
      if (list[i].dir == +1 && list[i + 1].dir == -1 && list[i].cpu != list[i + 1].cpu &&
          list[i + 1].t - list[i].t <= clock_skew_ns) {
        std::swap(list[i], list[i + 1]);
        ++i;
      }
    }
    int on = -1;
    for (const step& st : list) {
      const std::string where = "fiber " + std::to_string(fiber) + " at " + std::to_string(st.t) + " on worker " +
                                std::to_string(st.cpu);
      if (st.dir == +1) {
        if (on >= 0) v.problems.push_back(where + ": starts while running on worker " + std::to_string(on));
        on = st.cpu;
      } else {
        if (on != st.cpu) v.problems.push_back(where + ": stops but runs on worker " + std::to_string(on));
        on = -1;
        v.last_stop[fiber] = st.why;
      }
    }
    if (on >= 0) v.problems.push_back("fiber " + std::to_string(fiber) + " still runs on worker " + std::to_string(on) +
                                      " at the end");
  }
  return v;
}

}  // namespace

TEST_CASE("trace recording: the runtime's whole-run trace is written at the end and agrees with its stats",
          "[trace][recording][runtime]") {
  const auto cfg = GENERATE(from_range(usched::test::one_and_two_worker_configs()));
  CAPTURE(usched::test::label(cfg));
  temp_dir dir;
  const std::string path = dir.file("run.txt");
  usched::options o = usched::test::make_options(cfg.policy, cfg.workers);
  o.trace = path;
  std::atomic<unsigned> spawned{0};
  usched::runtime_stats st;
  {
    usched::runtime rt(o);
    rt.run([&spawned] { mixed_workload(spawned); });
    st = rt.stats();
  }
  REQUIRE(std::filesystem::exists(path));
  const trace_data d = usched::detail::read_trace_file(path);
  CHECK(d.policy == cfg.policy);
  CHECK(d.nr_cpus == cfg.workers);
  CHECK_FALSE(d.virtual_time);
  CHECK(d.dropped == 0);
  const runtime_trace_view v = read_runtime_trace(d, cfg.workers);
  for (std::size_t c = 0; c < cfg.workers; ++c) {
    CAPTURE(c);
    CHECK(v.runs[c] == st.workers[c].fibers_run);
    CHECK(v.wakes[c].n == st.workers[c].wakeups.n);
  }
  // Every fiber: made once, and its last switch away is its exit.
  CHECK(v.spawns.size() == spawned.load());
  for (const auto& [fiber, n] : v.spawns) {
    CAPTURE(fiber);
    CHECK(n == 1);
    REQUIRE(v.last_stop.count(fiber) == 1);
    CHECK(v.last_stop.at(fiber) == stop_reason::exit);
  }
  CHECK(v.last_stop.size() == v.spawns.size());
  // The labelled fiber's name is in the trace.
  bool sleeper = false;
  for (const auto& [fiber, text] : usched::detail::trace_names::labels(d)) sleeper = sleeper || text == "sleeper";
  CHECK(sleeper);
}

TEST_CASE("trace recording: a .json trace is Chrome JSON with one slice per switch into a fiber",
          "[trace][recording][runtime]") {
  temp_dir dir;
  const std::string path = dir.file("run.json");
  usched::options o = usched::test::make_options("cfs", 2);
  o.trace = path;
  std::atomic<unsigned> spawned{0};
  std::uint64_t runs = 0;
  {
    usched::runtime rt(o);
    rt.run([&spawned] { mixed_workload(spawned); });
    for (const auto& w : rt.stats().workers) runs += w.fibers_run;
  }
  // Parsed by python's json module: an object whose traceEvents hold one
  // "X" slice per fiber run (parks are "X" slices named "parked"). Debian's
  // python3, which scripts/bootstrap.sh installs, not whichever one PATH
  // finds first.
  const std::string check = dir.file("check.py");
  {
    std::ofstream py(check);
    py << "import json, sys\n"
          "d = json.load(open(sys.argv[1]))\n"
          "ev = d['traceEvents']\n"
          "runs = [e for e in ev if e['ph'] == 'X' and e['name'] != 'parked']\n"
          "print(len(runs))\n";
  }
  const std::string out = dir.file("count.txt");
  REQUIRE(std::system(("/usr/bin/python3 '" + check + "' '" + path + "' > '" + out + "'").c_str()) == 0);
  std::ifstream in(out);
  std::uint64_t slices = 0;
  in >> slices;
  CHECK(slices == runs);
}

TEST_CASE("trace recording: a flight recorder's dump from inside a fiber holds each worker's last events",
          "[trace][recording][runtime]") {
  const auto cfg = GENERATE(from_range(usched::test::one_and_two_worker_configs()));
  CAPTURE(usched::test::label(cfg));
  temp_dir dir;
  const std::string path = dir.file("flight.txt");
  usched::options o = usched::test::make_options(cfg.policy, cfg.workers);
  o.trace_flight = 64;
  {
    usched::runtime rt(o);
    rt.run([&rt, &path] {
      std::atomic<unsigned> spawned{0};
      mixed_workload(spawned);
      rt.dump_trace(path);
    });
  }
  const trace_data d = usched::detail::read_trace_file(path);
  CHECK(d.policy == cfg.policy);
  // At most 64 records of each worker's buffer and 64 of the outside one;
  // a switch is always written by its own worker.
  CHECK(d.records.size() <= 64 * (cfg.workers + 1));
  CHECK(d.records.size() >= 64);
  std::map<int, unsigned> switches;
  for (const trace_record& r : d.records) {
    if (r.type == trace_event::switch_to) ++switches[r.cpu];
  }
  for (const auto& [cpu, n] : switches) CHECK(n <= 64);
}

TEST_CASE("trace recording: dump_trace without a recorder, and an unwritable trace path, are config errors",
          "[trace][recording][runtime][bad-input]") {
  {
    usched::runtime rt(usched::test::make_options("cfs", 1));
    try {
      rt.dump_trace("/tmp/never-written.txt");
      FAIL("dump_trace without a recorder returned");
    } catch (const usched::config_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("USCHED_TRACE"));
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  }
  CHECK_FALSE(std::filesystem::exists("/tmp/never-written.txt"));
  usched::options o = usched::test::make_options("cfs", 1);
  o.trace = "/nonexistent-usched-dir/trace.txt";
  try {
    usched::runtime rt(o);
    FAIL("a runtime with an unwritable trace path started");
  } catch (const usched::config_error& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("options::trace='/nonexistent-usched-dir/trace.txt' cannot be written: "));
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
  }
}

TEST_CASE("trace recording: in the runtime's trace a fiber runs on one worker at a time, and stops where it ran",
          "[trace][recording][runtime]") {
  // A thief's run of a stolen fiber starts after the balance that took it,
  // which is after the fiber stopped where it ran: the idle worker's pick
  // after a balance reads the time again (engine::find_work).
  const auto cfg = GENERATE(from_range(usched::test::one_and_two_worker_configs()));
  CAPTURE(usched::test::label(cfg));
  temp_dir dir;
  const std::string path = dir.file("run.txt");
  usched::options o = usched::test::make_options(cfg.policy, cfg.workers);
  o.trace = path;
  std::atomic<unsigned> spawned{0};
  {
    usched::runtime rt(o);
    rt.run([&spawned] { mixed_workload(spawned); });
  }
  const runtime_trace_view v = read_runtime_trace(usched::detail::read_trace_file(path), cfg.workers);
  for (const std::string& p : v.problems) FAIL_CHECK(p);
}
