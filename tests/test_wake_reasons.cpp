// Wake-ups counted by reason (usched/wake_reason.hpp, worker_stats::wakeups)
// in the real backend: each case runs one protocol on a single worker,
// where the order of every switch is fixed (a spawn waits in the queue
// until its spawner blocks or yields; nothing preempts a fiber that calls
// no preempt point), so the count of every reason is exact, and says
// where the reason was passed from: a spawn, a primitive's notify (by what
// its waiter waited in), a timer, a stop callback, the blocking pool, an
// exit to its joiner. The simulator's counts are checked in test_sim.cpp;
// the engine's (where a wake-up is counted, and that placement ignores
// the reason) in test_engine.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <initializer_list>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include <usched/usched.hpp>

#include "test_support.hpp"

using namespace std::chrono_literals;
using usched::wake_reason;

namespace {

// One worker; the join hand-off on (its default, made explicit: a join of
// a fiber still queued then runs it at once, in the joiner's place, under
// every policy, so the joiner is always blocked when it exits).
usched::options one_worker(const std::string& policy) {
  auto o = usched::test::make_options(policy, 1);
  o.join_handoff = true;
  return o;
}

usched::wake_counts wakeups_of(const usched::runtime& rt) {
  usched::wake_counts sum;
  for (const auto& w : rt.stats().workers) {
    for (std::size_t r = 0; r < usched::wake_reason_count; ++r) sum.n[r] += w.wakeups.n[r];
  }
  return sum;
}

// check_counts(): every reason's count is the one given, 0 for those not
// named.
void check_counts(const usched::wake_counts& got, std::initializer_list<std::pair<wake_reason, std::uint64_t>> want) {
  usched::wake_counts expected;
  for (const auto& [why, n] : want) expected[why] = n;
  for (std::size_t r = 0; r < usched::wake_reason_count; ++r) {
    const auto why = static_cast<wake_reason>(r);
    CAPTURE(to_string(why));
    CHECK(got[why] == expected[why]);
  }
}

// The policies whose yield always hands a single worker to the other
// runnable fiber (FIFO and LIFO; CFS's yield keeps the worker when the
// other fiber's vruntime is more than a wake-up granularity ahead), for
// the protocols that take turns by yielding.
const std::vector<std::string> yielding_policies = {"none", "steal", "steal-lifo"};

}  // namespace

TEST_CASE("wake reasons: the names, as the stats print them, in the enum's order", "[runtime][stats]") {
  std::vector<std::string> got;
  for (std::size_t r = 0; r < usched::wake_reason_count; ++r) {
    got.emplace_back(to_string(static_cast<wake_reason>(r)));
  }
  CHECK(got == std::vector<std::string>{"spawn", "join", "sync", "channel", "future", "timer", "stop",
                                         "blocking", "io", "other"});
}

TEST_CASE("wake reasons: K spawns and their joins count spawn K + 1 and join K, in the table and the JSON",
          "[runtime][stats]") {
  const std::string policy = GENERATE(from_range(usched::policy_names()));
  CAPTURE(policy);
  constexpr int k = 7;
  usched::runtime rt(one_worker(policy));
  rt.run([] {
    // Each child waits in the queue until its join, which hands it the
    // worker; its exit wakes the joiner, blocked in the join.
    std::vector<usched::join_handle<void>> hs;
    for (int i = 0; i < k; ++i) hs.push_back(usched::spawn([] {}));
    for (auto& h : hs) h.join();
  });
  // The spawns of the K children and of run()'s fiber, from outside. run()
  // joins on a thread, which is unparked without a wake-up of a fiber.
  check_counts(wakeups_of(rt), {{wake_reason::spawn, k + 1}, {wake_reason::join, k}});
  const usched::runtime_stats st = rt.stats();
  CHECK_THAT(st.to_table(), Catch::Contains("worker wake-ups by reason\n     0 spawn=8 join=7\n"));
  CHECK_THAT(st.to_json(), Catch::Contains("\"wakeups\":{\"spawn\":8,\"join\":7,\"sync\":0,\"channel\":0,"
                                           "\"future\":0,\"timer\":0,\"stop\":0,\"blocking\":0,\"io\":0,"
                                           "\"other\":0},"));
}

TEST_CASE("wake reasons: five mutex hand-offs between two fibers count sync 5", "[runtime][stats][mutex]") {
  const std::string policy = GENERATE(from_range(yielding_policies));
  CAPTURE(policy);
  constexpr int rounds = 5;
  usched::runtime rt(one_worker(policy));
  rt.run([] {
    // Each round the main fiber takes the mutex and yields with it held;
    // the other fiber blocks in lock(), and the unlock wakes it (one sync
    // wake-up); it takes the mutex, gives it back uncontended, and yields
    // the worker back for the next round.
    usched::mutex m;
    auto other = usched::spawn([&m] {
      for (int i = 0; i < rounds; ++i) {
        m.lock();
        m.unlock();
        usched::this_fiber::yield();
      }
    });
    for (int i = 0; i < rounds; ++i) {
      m.lock();
      usched::this_fiber::yield();
      m.unlock();
      usched::this_fiber::yield();
    }
    // The other fiber is queued after its last yield: the join hands it the
    // worker, and its exit wakes this one.
    other.join();
  });
  check_counts(wakeups_of(rt), {{wake_reason::spawn, 2}, {wake_reason::sync, rounds}, {wake_reason::join, 1}});
}

TEST_CASE("wake reasons: a ping-pong of N over two rendezvous channels counts channel 2N",
          "[runtime][stats][channel]") {
  const std::string policy = GENERATE(from_range(usched::policy_names()));
  CAPTURE(policy);
  constexpr int n = 8;
  usched::runtime rt(one_worker(policy));
  rt.run([] {
    // The main fiber's send always finds no receiver (the other fiber is
    // queued, not yet in recv) and blocks; the other fiber's recv takes
    // the value and wakes it. The same on the way back: the other fiber's
    // send blocks, the main fiber's recv wakes it. Two wake-ups a round.
    usched::channel<int> ping(0), pong(0);
    auto other = usched::spawn([&] {
      for (int i = 0; i < n; ++i) {
        const auto v = ping.recv();
        REQUIRE(v == i);
        pong.send(i);
      }
    });
    for (int i = 0; i < n; ++i) {
      ping.send(i);
      REQUIRE(pong.recv() == i);
    }
    // Woken by the last recv, the other fiber is queued: the join blocks.
    other.join();
  });
  check_counts(wakeups_of(rt), {{wake_reason::spawn, 2}, {wake_reason::channel, 2 * n}, {wake_reason::join, 1}});
}

TEST_CASE("wake reasons: a joiner blocked on a fiber that has not run counts join 1", "[runtime][stats]") {
  const std::string policy = GENERATE(from_range(usched::policy_names()));
  CAPTURE(policy);
  usched::runtime rt(one_worker(policy));
  rt.run([] { usched::spawn([] {}).join(); });
  check_counts(wakeups_of(rt), {{wake_reason::spawn, 2}, {wake_reason::join, 1}});
}

TEST_CASE("wake reasons: a stop request ending a wait counts stop 1; a future made ready, future 1",
          "[runtime][stats]") {
  const std::string policy = GENERATE(from_range(usched::policy_names()));
  CAPTURE(policy);
  // The waiter counts the latch down (waking the main fiber, blocked in
  // wait(): sync 1) and then blocks in its wait; the main fiber runs only
  // once it has, and ends the wait; the join finds the waiter queued
  // (join 1).
  SECTION("a stop request ends a channel recv") {
    usched::runtime rt(one_worker(policy));
    rt.run([] {
      usched::latch ready(1);
      usched::channel<int> ch(0);
      std::stop_source src;
      auto waiter = usched::spawn([&] {
        ready.count_down();
        return ch.recv(src.get_token()).status();
      });
      ready.wait();
      src.request_stop();
      CHECK(waiter.join() == usched::channel_status::stopped);
    });
    check_counts(wakeups_of(rt),
                 {{wake_reason::spawn, 2}, {wake_reason::sync, 1}, {wake_reason::stop, 1}, {wake_reason::join, 1}});
  }
  SECTION("a promise's value ends a future's get") {
    usched::runtime rt(one_worker(policy));
    rt.run([] {
      usched::latch ready(1);
      usched::promise<int> p;
      usched::future<int> f = p.get_future();
      auto waiter = usched::spawn([&] {
        ready.count_down();
        return f.get();
      });
      ready.wait();
      p.set_value(42);
      CHECK(waiter.join() == 42);
    });
    check_counts(wakeups_of(rt),
                 {{wake_reason::spawn, 2}, {wake_reason::sync, 1}, {wake_reason::future, 1}, {wake_reason::join, 1}});
  }
}

TEST_CASE("wake reasons: a usched::blocking call counts blocking 1", "[runtime][stats]") {
  usched::runtime rt(one_worker("cfs"));
  // Whether the pool's thread ends the wait before the fiber has left its
  // worker or after, the wake-up is counted once, on that worker.
  CHECK(rt.run([] { return usched::blocking([] { return 7; }); }) == 7);
  check_counts(wakeups_of(rt), {{wake_reason::spawn, 1}, {wake_reason::blocking, 1}});
}

TEST_CASE("wake reasons: three sleeps and a timed-out recv count timer 4", "[runtime][stats][realtime]") {
  const std::string policy = GENERATE(as<std::string>{}, "cfs", "none");
  CAPTURE(policy);
  usched::runtime rt(one_worker(policy));
  rt.run([] {
    for (int i = 0; i < 3; ++i) usched::this_fiber::sleep_for(200us);
    // Nobody sends: the deadline's timer ends the wait.
    usched::channel<int> ch(0);
    CHECK(ch.recv_for(200us).status() == usched::channel_status::timeout);
  });
  check_counts(wakeups_of(rt), {{wake_reason::spawn, 1}, {wake_reason::timer, 4}});
}
