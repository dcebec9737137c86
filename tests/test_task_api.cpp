// The task API around a fiber: cancellation with std::stop_token (as
// std::jthread), timed and non-blocking joins, reference results,
// wait_group's timed waits, task_group, fiber_local, runtime::current() and
// blocking(). The cases that involve scheduling run under every policy with
// 1, 2, 4 and 8 workers.
//
// A case that acts "once the others block" waits for them to be queued
// (wait_probe.hpp), never for a time. The cases whose timed joins and waits
// run on the real clock are tagged [realtime] (tests/CMakeLists.txt says
// what the label means).
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <usched/usched.hpp>

#include "test_support.hpp"
#include "wait_probe.hpp"

using namespace std::chrono_literals;
using usched::test::all_configs;
using usched::test::label;
using usched::test::wait_probe;
using usched::test::yield_until;
using usched::detail::wait_kind;

namespace {

int global_value = 7;

// Counts its live instances: fiber_local's values must all be destroyed.
struct tracked {
  static inline std::atomic<int> alive{0};
  int value = 0;
  tracked() { ++alive; }
  tracked(const tracked& o) : value(o.value) { ++alive; }
  ~tracked() { --alive; }
};

}  // namespace

TEST_CASE("task api: a fiber whose callable takes a stop_token is stopped through its handle",
          "[task_api][cancel]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    std::vector<usched::join_handle<long>> hs;
    for (int i = 0; i < 8; ++i) {
      // The token comes first, then the arguments, as with std::jthread.
      hs.push_back(usched::spawn(
          [](std::stop_token st, long step) {
            long n = 0;
            while (!st.stop_requested()) {
              n += step;
              usched::this_fiber::yield();
            }
            return n;
          },
          1L));
    }
    usched::this_fiber::yield();
    for (auto& h : hs) {
      CHECK(h.get_stop_source().stop_possible());
      CHECK_FALSE(h.get_stop_token().stop_requested());
      CHECK(h.request_stop());
      CHECK_FALSE(h.request_stop());  // only the first call makes the request
      CHECK(h.get_stop_token().stop_requested());
    }
    for (auto& h : hs) CHECK(h.join() >= 0);
    // A callable without a token has no stop state.
    auto plain = usched::spawn([] { return 1; });
    CHECK_FALSE(plain.request_stop());
    CHECK_FALSE(plain.get_stop_source().stop_possible());
    CHECK_FALSE(plain.get_stop_token().stop_possible());
    CHECK(plain.join() == 1);
  });
}

TEST_CASE("task api: a stop request ends every kind of stoppable wait", "[task_api][cancel]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::latch never_zero(1);
    usched::counting_semaphore<4> no_permits(0);
    usched::timed_mutex held;
    usched::shared_mutex written;
    usched::condition_variable_any cv;
    usched::mutex cv_mutex;
    usched::wait_group busy(1);
    held.lock();
    written.lock();
    // Each fiber blocks in one kind of wait, with its own stop token, and
    // reports how the wait ended: false means "given up on a stop". Every
    // one of them is blocked before the stops are requested.
    std::vector<usched::join_handle<bool>> hs;
    std::array<wait_probe, 12> probes;
    std::vector<wait_kind> kinds;
    // watch(): a fiber that blocks in `wait`, a wait of `kind`, with a
    // probe that sees it blocked there.
    const auto watch = [&](wait_kind kind, auto wait) {
      wait_probe& probe = probes[kinds.size()];
      kinds.push_back(kind);
      hs.push_back(usched::spawn([&probe, wait](std::stop_token st) {
        probe.attach();
        return wait(st);
      }));
    };
    watch(wait_kind::latch, [&](std::stop_token st) { return never_zero.wait(st); });
    watch(wait_kind::semaphore, [&](std::stop_token st) { return no_permits.acquire(st); });
    watch(wait_kind::mutex, [&](std::stop_token st) { return held.lock(st); });
    watch(wait_kind::shared_mutex, [&](std::stop_token st) { return written.lock(st); });
    watch(wait_kind::shared_mutex, [&](std::stop_token st) { return written.lock_shared(st); });
    watch(wait_kind::condition_variable_any, [&](std::stop_token st) {
      std::unique_lock<usched::mutex> lk(cv_mutex);
      return cv.wait(lk, st, [] { return false; });
    });
    watch(wait_kind::wait_group, [&](std::stop_token st) { return busy.wait(st); });
    usched::barrier<> two(2);  // this fiber never arrives
    watch(wait_kind::barrier, [&](std::stop_token st) { return two.arrive_and_wait(st); });
    usched::recursive_mutex rec;
    usched::recursive_timed_mutex rec_timed;
    rec.lock();
    rec_timed.lock();
    watch(wait_kind::mutex, [&](std::stop_token st) { return rec.lock(st); });
    watch(wait_kind::mutex, [&](std::stop_token st) { return rec_timed.lock(st); });
    usched::promise<int> never_set;
    auto pending = never_set.get_future().share();
    watch(wait_kind::future, [&](std::stop_token st) { return pending.wait(st); });
    auto blocked_joinee = usched::spawn([&] { return busy.wait_for(10s); });
    watch(wait_kind::join, [&](std::stop_token st) { return blocked_joinee.join(st).has_value(); });
    REQUIRE(kinds.size() == probes.size());
    REQUIRE(yield_until([&] {
      for (std::size_t i = 0; i < probes.size(); ++i) {
        if (!probes[i].blocked_in(kinds[i])) return false;
      }
      return true;
    }));
    for (auto& h : hs) h.request_stop();
    for (auto& h : hs) CHECK_FALSE(h.join());
    held.unlock();
    written.unlock();
    rec.unlock();
    rec_timed.unlock();
    busy.done();
    // The stopped arrival still counts: the phase completes with ours.
    two.arrive_and_wait();
    CHECK(blocked_joinee.join());
    never_set.set_value(1);
    CHECK(pending.wait(std::stop_token{}));
  });
}

TEST_CASE("task api: try_join, join_for and join_until wait at most until their time",
          "[task_api][join][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::channel<int> go(1);
    auto h = usched::spawn([&] { return go.recv().value() * 2; });
    CHECK_FALSE(h.try_join().has_value());
    CHECK_FALSE(h.join_for(1ms).has_value());
    CHECK_FALSE(h.join_until(std::chrono::system_clock::now() + 1ms).has_value());
    CHECK_FALSE(h.join_until(std::chrono::steady_clock::now() - 1h).has_value());
    CHECK(h.joinable());
    go.send(21);
    const auto r = h.join_for(10s);
    REQUIRE(r.has_value());
    CHECK(*r == 42);
    CHECK_FALSE(h.joinable());

    // void: whether it finished; an exception rethrows from the timed join.
    auto v = usched::spawn([&] { (void)go.recv(); });
    CHECK_FALSE(v.try_join());
    go.send(1);
    CHECK(v.join_until(std::chrono::steady_clock::now() + 10s));
    auto thrower = usched::spawn([] { throw std::runtime_error("late"); });
    CHECK_THROWS_WITH(thrower.join_for(10s), "late");
    CHECK_FALSE(thrower.joinable());

    // Many fibers watching one joinee while it finishes: each sees it
    // finished or not, and the last join gets the value.
    auto slow = usched::spawn([&] { return go.recv().value(); });
    std::atomic<int> timeouts{0};
    std::vector<usched::join_handle<void>> tries;
    for (int i = 0; i < 4; ++i) {
      tries.push_back(usched::spawn([&] {
        // Only one handle may join: the others watch with done().
        for (int k = 0; k < 10 && !slow.done(); ++k) {
          usched::this_fiber::yield();
          ++timeouts;
        }
      }));
    }
    go.send(5);
    for (auto& t : tries) t.join();
    CHECK(slow.join_for(10s).value() == 5);
  });
}

TEST_CASE("task api: a fiber may return a reference", "[task_api][join]") {
  usched::runtime rt(usched::test::make_options("cfs", 2));
  int& r = rt.run([]() -> int& { return global_value; });
  CHECK(&r == &global_value);
  auto h = rt.spawn([]() -> int& { return global_value; });
  auto got = h.join_for(10s);
  REQUIRE(got.has_value());
  CHECK(&got->get() == &global_value);
}

TEST_CASE("task api: wait_group's timed and stoppable waits", "[task_api][wait_group][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::wait_group wg(1);
    CHECK_FALSE(wg.wait_for(1ms));
    CHECK_FALSE(wg.wait_until(std::chrono::system_clock::now() + 1ms));
    std::stop_source stop;
    stop.request_stop();
    CHECK_FALSE(wg.wait(stop.get_token()));
    std::vector<usched::join_handle<bool>> waiters;
    for (int i = 0; i < 8; ++i) waiters.push_back(usched::spawn([&] { return wg.wait_for(10s); }));
    usched::this_fiber::yield();
    wg.done();
    for (auto& w : waiters) CHECK(w.join());
    CHECK(wg.wait_for(0ms));  // zero already: no wait at all
    // The usual pattern: the group on the waiter's stack, destroyed as soon
    // as the wait returns, while the last done() may still be returning.
    for (int round = 0; round < 50; ++round) {
      usched::wait_group local(4);
      for (int i = 0; i < 4; ++i) usched::spawn([&local] { local.done(); }).detach();
      local.wait();
    }
  });
}

TEST_CASE("task api: task_group joins everything it started and rethrows the first exception",
          "[task_api][task_group]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    std::atomic<long> sum{0};
    {
      usched::task_group g;
      for (long i = 1; i <= 100; ++i) {
        g.spawn([&sum](long k) { sum += k; }, i);
      }
      g.wait();
      CHECK(sum.load() == 5050);
      // Reusable after a wait; nested groups; spawning from the group's tasks.
      g.spawn([&] {
        usched::task_group inner;
        for (int i = 0; i < 10; ++i) inner.spawn([&] { sum += 1; });
        inner.wait();
      });
      g.wait();
      CHECK(sum.load() == 5060);
    }

    // The first exception is rethrown by wait(), once, and the others are
    // asked to stop through the group's token.
    usched::task_group g;
    std::atomic<int> stopped{0};
    for (int i = 0; i < 6; ++i) {
      g.spawn([&](std::stop_token st) {
        if (!yield_until([&] { return st.stop_requested(); })) return;
        ++stopped;
      });
    }
    g.spawn([] { throw std::runtime_error("first"); });
    CHECK_THROWS_WITH(g.wait(), "first");
    CHECK(stopped.load() == 6);
    CHECK(g.stop_requested());
    g.wait();  // seen once: nothing to rethrow now

    // The destructor waits: nothing the group started outlives the scope.
    // The tasks finish only once this fiber is blocked in the destructor's
    // joins, so every one of them is still running when it begins.
    std::atomic<int> finished{0};
    wait_probe self;
    self.attach();
    std::atomic<bool> opened{false};
    auto opener = usched::spawn([&] { opened = yield_until([&] { return self.blocked_in(wait_kind::task_group); }); });
    {
      usched::task_group scoped;
      for (int i = 0; i < 20; ++i) {
        scoped.spawn([&] {
          if (yield_until([&] { return opened.load(); })) ++finished;
        });
      }
    }
    opener.join();
    CHECK(opened.load());
    CHECK(finished.load() == 20);

    // Leaving the scope by an exception requests stop, then waits.
    std::atomic<bool> saw_stop{false};
    try {
      usched::task_group unwinding;
      unwinding.spawn([&](std::stop_token st) { saw_stop = yield_until([&] { return st.stop_requested(); }); });
      throw std::logic_error("leaving");
    } catch (const std::logic_error&) {
    }
    CHECK(saw_stop.load());
  });
}

TEST_CASE("task api: task_group used from a plain thread", "[task_api][task_group]") {
  usched::runtime rt(usched::test::make_options("cfs", 2));
  std::atomic<int> n{0};
  usched::task_group g(rt);
  for (int i = 0; i < 50; ++i) g.spawn([&] { ++n; });
  g.wait();
  CHECK(n.load() == 50);
  CHECK_THROWS_AS(usched::task_group(), std::logic_error);  // no current runtime here
}

TEST_CASE("task api: fiber_local gives every fiber its own value, destroyed when it returns",
          "[task_api][fiber_local]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  static usched::fiber_local<tracked> local;
  static usched::fiber_local<std::string> named(std::string("unnamed"));
  // This thread's own value (made below, in an earlier run of this case)
  // stays until the thread exits.
  const int before = tracked::alive.load();
  rt.run([] {
    std::vector<usched::join_handle<bool>> hs;
    for (int i = 0; i < 64; ++i) {
      hs.push_back(usched::spawn([i] {
        local->value = i;
        bool ok = *named == "unnamed";
        *named = "fiber " + std::to_string(i);
        for (int k = 0; k < 20; ++k) {
          usched::this_fiber::yield();  // may resume on another worker
          ok = ok && local->value == i && *named == "fiber " + std::to_string(i);
        }
        return ok;
      }));
    }
    for (auto& h : hs) CHECK(h.join());
  });
  // Each fiber's value was destroyed as it returned (the runner's too).
  CHECK(tracked::alive.load() == before);
  // On a plain thread: per thread.
  local->value = 99;
  std::thread([] { CHECK(local->value == 0); }).join();
  CHECK(local->value == 99);
}

TEST_CASE("task api: runtime::current() is the calling fiber's runtime", "[task_api]") {
  usched::runtime a(usched::test::make_options("cfs", 1));
  usched::runtime b(usched::test::make_options("steal", 1));
  CHECK(usched::runtime::current() == nullptr);
  CHECK(a.run([] { return usched::runtime::current(); }) == &a);
  CHECK(b.run([] { return usched::runtime::current(); }) == &b);
  // Library code can spawn without being handed the runtime.
  CHECK(a.run([] { return usched::runtime::current()->spawn([] { return 3; }).join(); }) == 3);
}

TEST_CASE("task api: blocking() runs more calls than pool threads, and the worker keeps running fibers",
          "[task_api][blocking]") {
  usched::options o = usched::test::make_options("cfs", 1);
  o.blocking_threads = 2;
  usched::runtime rt(o);
  std::atomic<int> in_pool{0}, most_in_pool{0};
  std::atomic<long> ticks{0};
  const auto call = [&](int i) {
    const int now = ++in_pool;
    int seen = most_in_pool.load();
    while (now > seen && !most_in_pool.compare_exchange_weak(seen, now)) {
    }
    // A call that blocks its OS thread until the worker has run the ticker
    // again: a worker held by the call would never return from it.
    const long ticks_before = ticks.load();
    while (ticks.load() == ticks_before) std::this_thread::yield();
    --in_pool;
    return i * 10;
  };
  const bool ok = rt.run([&] {
    // A fiber on the same (only) worker keeps running while calls block.
    std::atomic<bool> calls_done{false};
    auto ticker = usched::spawn([&] {
      while (!calls_done) {
        ++ticks;
        usched::this_fiber::yield();
      }
    });
    std::vector<usched::join_handle<int>> hs;
    for (int i = 0; i < 8; ++i) hs.push_back(usched::spawn([&, i] { return usched::blocking(call, i); }));
    int sum = 0;
    for (auto& h : hs) sum += h.join();
    calls_done = true;
    ticker.join();
    return sum == 280 && ticks.load() > 0;
  });
  CHECK(ok);
  CHECK(most_in_pool.load() <= 2);
  CHECK(most_in_pool.load() >= 1);
  // Exceptions and references come back; outside a fiber it runs inline.
  CHECK_THROWS_WITH(rt.run([] { return usched::blocking([]() -> int { throw std::runtime_error("io"); }); }),
                    "io");
  CHECK(&rt.run([]() -> int& { return usched::blocking([]() -> int& { return global_value; }); }) ==
        &global_value);
  const auto caller = std::this_thread::get_id();
  CHECK(usched::blocking([&] { return std::this_thread::get_id() == caller; }));
}

// The pool thread runs the call with the calling fiber's fiber_local table
// in effect: it reads the fiber's values, and a value it makes first is
// the fiber's, there after the call returns and destroyed when the fiber
// returns (none is left on the pool's threads, which outlive the fibers).
TEST_CASE("task api: fiber_local inside blocking() is the calling fiber's", "[task_api][fiber_local][blocking]") {
  const std::string policy = GENERATE(from_range(usched::policy_names()));
  const unsigned workers = GENERATE(1u, 2u);
  INFO("policy=" << policy << " workers=" << workers);
  usched::options o = usched::test::make_options(policy, workers);
  o.blocking_threads = 2;  // fewer threads than fibers: each serves several
  usched::runtime rt(o);
  static usched::fiber_local<tracked> set_before;
  static usched::fiber_local<tracked> made_inside;
  const int before = tracked::alive.load();
  constexpr int fibers = 8;
  const int ok = rt.run([] {
    std::vector<usched::join_handle<bool>> hs;
    for (int i = 0; i < fibers; ++i) {
      hs.push_back(usched::spawn([i] {
        set_before->value = i + 1;
        // Read inside: the fiber's value, not the pool thread's.
        const int seen = usched::blocking([] { return set_before->value; });
        // Written inside: the fiber's value again.
        usched::blocking([i] { set_before->value = 10 * (i + 1); });
        // Made inside (its first use), read after the call returns.
        const int made = usched::blocking([i] {
          const int fresh = made_inside->value;
          made_inside->value = 100 + i;
          return fresh;
        });
        usched::this_fiber::yield();  // may resume on another worker
        return seen == i + 1 && set_before->value == 10 * (i + 1) && made == 0 && made_inside->value == 100 + i;
      }));
    }
    int n = 0;
    for (auto& h : hs) n += h.join() ? 1 : 0;
    return n;
  });
  CHECK(ok == fibers);
  // Both values of every fiber, the one made on a pool thread too, ended
  // with their fiber, while the pool's threads are still running.
  CHECK(tracked::alive.load() == before);
}

TEST_CASE("task api: outside a fiber, each call that needs one throws, naming its own fix", "[task_api]") {
  CHECK_THROWS_WITH(usched::spawn([] {}), "usched::spawn called outside a fiber; use runtime::spawn");
  CHECK_THROWS_WITH(usched::spawn(usched::spawn_options{}, [] {}),
                    "usched::spawn called outside a fiber; use runtime::spawn");
  CHECK_THROWS_WITH((void)usched::async([] { return 1; }), "usched::async called outside a fiber; use async(rt, f)");
  CHECK_THROWS_WITH((void)usched::async(usched::launch::async, [] { return 1; }),
                    "usched::async called outside a fiber; use async(rt, f)");
  CHECK_THROWS_WITH(usched::task_group(), "usched::task_group() constructed outside a fiber; use task_group(rt)");
}

namespace {

// Counts destructions of the copies a callable's capture leaves behind;
// moved-from copies count too, since they are destroyed as well.
struct destroy_counter {
  std::atomic<int>* live;
  explicit destroy_counter(std::atomic<int>* l) : live(l) { ++*live; }
  destroy_counter(const destroy_counter& o) : live(o.live) { ++*live; }
  destroy_counter(destroy_counter&& o) noexcept : live(o.live) { ++*live; }
  ~destroy_counter() { --*live; }
};

}  // namespace

TEST_CASE("task api: nothing of a task outlives task_group::wait(), nor of an async call its get()",
          "[task_api][task_group]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    static usched::fiber_local<destroy_counter*> local_marker;
    std::atomic<int> live{0};
    {
      usched::task_group g;
      for (int i = 0; i < 16; ++i) {
        g.spawn([d = destroy_counter(&live)](destroy_counter arg) {
          (void)d;
          (void)arg;
          usched::this_fiber::yield();
        }, destroy_counter(&live));
      }
      g.wait();
      // Every capture and argument of every task is gone (only moved-from
      // originals in the frames could be left, and those count too).
      CHECK(live.load() == 0);
    }
    for (int i = 0; i < 16; ++i) {
      auto f = usched::async([d = destroy_counter(&live)] {
        (void)d;
        usched::this_fiber::yield();
        return 1;
      });
      CHECK(f.get() == 1);
      // As if joined: the callable's captures are destroyed before get()
      // returns. The fiber's moved-from frame may remain: it holds none.
      CHECK(live.load() <= 1);
    }
  });
}
