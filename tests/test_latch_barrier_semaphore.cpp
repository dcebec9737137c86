// latch, barrier, counting_semaphore and binary_semaphore: std's behaviour
// (the cases the standard libraries' own tests check), from fibers and from
// plain threads, under every policy with 1, 2, 4 and 8 workers; usched's
// extensions (stop_token waits, precondition checks that throw); and the
// semaphore's permit accounting while timeouts and stops race releases.
//
// Catch2's assertions are not thread-safe: fibers and threads count what
// they saw in atomics, checked on the test's thread once they are joined.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <usched/usched.hpp>

#include "test_support.hpp"

using namespace std::chrono_literals;

namespace {

using usched::test::all_configs;
using usched::test::label;
using usched::test::volume_divisor;

// Signatures as std's: code written against <latch>, <barrier> and
// <semaphore> compiles by changing the namespace.
static_assert(!std::is_convertible_v<std::ptrdiff_t, usched::latch>, "latch(ptrdiff_t) is explicit");
static_assert(!std::is_copy_constructible_v<usched::latch> && !std::is_copy_assignable_v<usched::latch>);
static_assert(usched::latch::max() == PTRDIFF_MAX);
static_assert(noexcept(std::declval<const usched::latch&>().try_wait()));
static_assert(std::is_same_v<decltype(std::declval<const usched::latch&>().wait(std::stop_token{})), bool>);
static_assert(!std::is_convertible_v<std::ptrdiff_t, usched::barrier<>>, "barrier(ptrdiff_t) is explicit");
static_assert(!std::is_copy_constructible_v<usched::barrier<>>);
static_assert(usched::barrier<>::max() == PTRDIFF_MAX);
static_assert(std::is_move_constructible_v<usched::barrier<>::arrival_token> &&
              std::is_move_assignable_v<usched::barrier<>::arrival_token>);
static_assert(!std::is_convertible_v<std::ptrdiff_t, usched::counting_semaphore<>>);
static_assert(!std::is_copy_constructible_v<usched::binary_semaphore>);
static_assert(usched::counting_semaphore<>::max() == PTRDIFF_MAX);
static_assert(usched::counting_semaphore<5>::max() == 5);
static_assert(usched::binary_semaphore::max() == 1);
static_assert(std::is_same_v<usched::binary_semaphore, usched::counting_semaphore<1>>);
static_assert(noexcept(std::declval<usched::binary_semaphore&>().try_acquire()));
static_assert(std::is_same_v<decltype(std::declval<usched::binary_semaphore&>().acquire(std::stop_token{})), bool>);

// Constant-initialized, as std's may be (their constructors are constexpr).
constinit usched::latch constant_latch(2);
constinit usched::barrier<> constant_barrier(2);
constinit usched::counting_semaphore<4> constant_semaphore(4);

template <class H>
void join_all(std::vector<H>& hs) {
  for (auto& h : hs) h.join();
}

}  // namespace

// ---- latch -----------------------------------------------------------------

TEST_CASE("latch: count_down, try_wait and wait as std specifies, bad counts throw", "[latch]") {
  CHECK_THROWS_AS(usched::latch(-1), std::logic_error);

  usched::latch zero(0);
  CHECK(zero.try_wait());
  zero.wait();                            // at zero: returns at once
  CHECK(zero.wait(std::stop_token{}));
  zero.count_down(0);                     // 0 <= the count left: allowed
  CHECK_THROWS_AS(zero.count_down(), std::logic_error);
  CHECK(zero.try_wait());

  usched::latch l(3);
  CHECK_FALSE(l.try_wait());
  l.count_down(2);
  CHECK_FALSE(l.try_wait());
  // What std leaves undefined throws, and leaves the count as it was.
  CHECK_THROWS_AS(l.count_down(2), std::logic_error);
  CHECK_THROWS_AS(l.count_down(-1), std::logic_error);
  CHECK_THROWS_AS(l.arrive_and_wait(2), std::logic_error);
  CHECK_FALSE(l.try_wait());
  l.count_down(0);
  CHECK_FALSE(l.try_wait());
  l.arrive_and_wait();                    // the last arrival: does not block
  CHECK(l.try_wait());
  CHECK_THROWS_AS(l.count_down(), std::logic_error);
  CHECK(l.try_wait());

  CHECK_FALSE(constant_latch.try_wait());
  constant_latch.arrive_and_wait(2);
  CHECK(constant_latch.try_wait());
}

TEST_CASE("latch: counted down by fibers and threads at once, waiters released exactly at zero", "[latch]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr int counting_fibers = 24, counting_threads = 3, fiber_waiters = 8, thread_waiters = 2;
  // Each thread counts down by 2, each fiber by 1.
  constexpr int total = counting_fibers + 2 * counting_threads;
  usched::latch done(total);
  // Each counter-downer adds its share here before its count_down(): a
  // waiter that wakes with less than `total` was released early.
  std::atomic<int> arrived{0};
  std::atomic<int> early{0}, woken{0};
  auto check_released = [&] {
    woken.fetch_add(1);
    if (arrived.load() != total) early.fetch_add(1);
  };
  auto waiter = [&] {
    done.wait();
    check_released();
  };

  std::vector<std::thread> threads;
  std::vector<usched::join_handle<void>> hs;
  for (int t = 0; t < thread_waiters; ++t) threads.emplace_back(waiter);
  for (int f = 0; f < fiber_waiters; ++f) hs.push_back(rt.spawn(waiter));
  for (int f = 0; f < counting_fibers; ++f) {
    hs.push_back(rt.spawn([&, f] {
      if (f % 3 == 0) usched::this_fiber::yield();
      arrived.fetch_add(1);
      if (f % 2 == 0) {
        done.count_down();
      } else {
        done.arrive_and_wait();
        check_released();
      }
    }));
  }
  for (int t = 0; t < counting_threads; ++t) {
    threads.emplace_back([&] {
      arrived.fetch_add(2);
      done.count_down(2);
    });
  }
  join_all(hs);
  for (auto& t : threads) t.join();
  CHECK(early.load() == 0);
  CHECK(woken.load() == fiber_waiters + thread_waiters + counting_fibers / 2);
  CHECK(done.try_wait());
}

TEST_CASE("latch: try_wait turns true at the last count_down, not before", "[latch]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr int fibers = 16;
  usched::latch l(fibers);
  std::atomic<int> arrived{0};
  // A poller that sees try_wait() true must see every arrival.
  auto poller = rt.spawn([&] {
    int polls = 0;
    while (!l.try_wait()) {
      ++polls;
      usched::this_fiber::yield();
    }
    return arrived.load();
  });
  std::vector<usched::join_handle<void>> hs;
  for (int f = 0; f < fibers; ++f) {
    hs.push_back(rt.spawn([&] {
      arrived.fetch_add(1);
      l.count_down();
    }));
  }
  join_all(hs);
  CHECK(poller.join() == fibers);
  CHECK(l.try_wait());
}

// stop_some_waits(): `stopped` fibers and a plain thread block in
// wait(token of one stop source), `kept` fibers in wait(token of another);
// the first source's stop is requested, and every one of its waits must
// end with false. Returns the kept fibers' handles, their waits still
// blocked (the caller ends them and checks what they return).
template <class Wait>
std::vector<usched::join_handle<bool>> stop_some_waits(usched::runtime& rt, int stopped, int kept, Wait wait) {
  std::stop_source stop, never;
  usched::latch entered(stopped + kept + 1);
  std::vector<usched::join_handle<bool>> stopped_hs, kept_hs;
  for (int f = 0; f < stopped; ++f) {
    stopped_hs.push_back(rt.spawn([&] {
      entered.count_down();
      return wait(stop.get_token());
    }));
  }
  for (int f = 0; f < kept; ++f) {
    // These waits outlive this call: they hold copies of the wait and of
    // a token (which keeps its stop state alive).
    kept_hs.push_back(rt.spawn([&entered, wait, token = never.get_token()] {
      entered.count_down();
      return wait(token);
    }));
  }
  bool thread_result = true;
  std::thread stopped_thread([&] {
    entered.count_down();
    thread_result = wait(stop.get_token());
  });
  entered.wait();
  stop.request_stop();
  int stopped_false = 0;
  for (auto& h : stopped_hs) stopped_false += h.join() ? 0 : 1;
  stopped_thread.join();
  CHECK(stopped_false == stopped);
  CHECK_FALSE(thread_result);
  return kept_hs;
}

TEST_CASE("latch: wait(stop_token) ends with false on a stop, true once the count is zero", "[latch]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  usched::latch gate(1);
  constexpr int stopped_fibers = 6, kept_fibers = 4;

  // A stop already requested: returns at once, the count untouched.
  std::stop_source already;
  already.request_stop();
  CHECK_FALSE(rt.run([&] { return gate.wait(already.get_token()); }));
  CHECK_FALSE(gate.try_wait());

  // Fibers (and a thread) blocked in wait(stop): the stop ends each wait
  // with false while the count is still 1; the fibers that share no stop
  // stay blocked and are released, with true, by the count_down() only.
  auto kept = stop_some_waits(rt, stopped_fibers, kept_fibers,
                              [&](const std::stop_token& st) { return gate.wait(st); });
  CHECK_FALSE(gate.try_wait());
  for (auto& h : kept) CHECK_FALSE(h.done());

  gate.count_down();
  int kept_true = 0;
  for (auto& h : kept) kept_true += h.join() ? 1 : 0;
  CHECK(kept_true == kept_fibers);
  // Zero already: true, stop requested or not.
  CHECK(rt.run([&] { return gate.wait(already.get_token()); }));
}

// ---- barrier ---------------------------------------------------------------

TEST_CASE("barrier: tokens name their phase, bad arrivals and tokens throw", "[barrier]") {
  CHECK_THROWS_AS(usched::barrier<>(-1), std::logic_error);

  int completions = 0;
  auto on_phase = [&completions]() noexcept { ++completions; };
  usched::barrier b(2, on_phase);
  auto first = b.arrive();
  CHECK(completions == 0);
  CHECK_THROWS_AS(b.arrive(0), std::logic_error);
  CHECK_THROWS_AS(b.arrive(-1), std::logic_error);
  CHECK_THROWS_AS(b.arrive(2), std::logic_error);  // one arrival left
  CHECK(completions == 0);
  auto second = b.arrive();                        // completes phase 0 here
  CHECK(completions == 1);
  // Both tokens name phase 0, which has completed: no wait.
  b.wait(std::move(second));
  b.wait(std::move(first));

  // A token moved from, or of another barrier, is refused.
  auto moved_from = b.arrive();
  auto taken = std::move(moved_from);
  CHECK_THROWS_AS(b.wait(std::move(moved_from)), std::logic_error);
  decltype(b) other(2, on_phase);
  auto foreign = other.arrive();
  CHECK_THROWS_AS(b.wait(std::move(foreign)), std::logic_error);

  // Phase 1 has one arrival in (`taken`): the next completes it.
  auto last = b.arrive();
  CHECK(completions == 2);
  b.wait(std::move(taken));
  b.wait(std::move(last));
  auto both = b.arrive(2);  // a whole phase in one call
  CHECK(completions == 3);
  b.wait(std::move(both));

  constant_barrier.wait(constant_barrier.arrive(2));
}

TEST_CASE("barrier: N fibers and a thread over K phases, one completion per phase that sees every arrival",
          "[barrier]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr int fibers = 8, threads = 1, n = fibers + threads;
  constexpr int phases = 24;
  std::atomic<int> arrived{0};
  std::atomic<int> bad_completion{0}, bad_release{0};
  // Plain data, written by each participant before it arrives and read by
  // the completion function: the barrier must order them (TSan checks).
  std::vector<int> slot(n, -1);
  int completions = 0;  // written by the completion function only
  auto on_phase = [&]() noexcept {
    const int p = completions;
    // Every arrival of phase p, and none of phase p+1.
    if (arrived.load() != n * (p + 1)) bad_completion.fetch_add(1);
    for (int s : slot) {
      if (s != p) bad_completion.fetch_add(1);
    }
    ++completions;
  };
  usched::barrier b(n, on_phase);
  auto participant = [&](int i) {
    for (int p = 0; p < phases; ++p) {
      slot[static_cast<std::size_t>(i)] = p;
      arrived.fetch_add(1);
      switch ((i + p) % 3) {
        case 0: b.arrive_and_wait(); break;
        case 1: b.wait(b.arrive()); break;
        default: {
          auto token = b.arrive();
          usched::this_fiber::yield();  // the phase may complete meanwhile
          b.wait(std::move(token));
        } break;
      }
      // Released only after the completion step of phase p, and before
      // anyone's arrival for p+1 (which needs this participant too).
      if (completions != p + 1) bad_release.fetch_add(1);
    }
  };
  std::vector<usched::join_handle<void>> hs;
  for (int f = 0; f < fibers; ++f) hs.push_back(rt.spawn(participant, f));
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) ts.emplace_back(participant, fibers + t);
  join_all(hs);
  for (auto& t : ts) t.join();
  CHECK(completions == phases);
  CHECK(arrived.load() == n * phases);
  CHECK(bad_completion.load() == 0);
  CHECK(bad_release.load() == 0);
}

TEST_CASE("barrier: the completion step runs before any waiter is released, arrivals during it throw",
          "[barrier]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  usched::latch in_completion(1), resume(1);
  std::atomic<bool> completion_done{false};
  int phase = 0;
  // Phase 0's completion function blocks (it may: it runs outside the
  // barrier's lock) until an outsider has tried to arrive during it.
  auto on_phase = [&]() noexcept {
    if (phase++ != 0) return;
    in_completion.count_down();
    resume.wait();
    completion_done.store(true);
  };
  usched::barrier b(2, on_phase);
  auto waiter = rt.spawn([&] {
    b.arrive_and_wait();
    return completion_done.load();
  });
  auto last = rt.spawn([&] {
    b.wait(b.arrive());
    return completion_done.load();
  });
  auto outsider = rt.spawn([&] {
    in_completion.wait();
    bool threw = false;
    try {
      (void)b.arrive();
    } catch (const std::logic_error&) {
      threw = true;
    }
    const bool waiter_held = !waiter.done();
    resume.count_down();
    return threw && waiter_held;
  });
  CHECK(outsider.join());
  CHECK(waiter.join());
  CHECK(last.join());
  // The next phase expects 2 again, the arrival refused above not counted.
  std::atomic<int> released{0};
  std::vector<usched::join_handle<void>> hs;
  for (int f = 0; f < 2; ++f) {
    hs.push_back(rt.spawn([&] {
      b.arrive_and_wait();
      released.fetch_add(1);
    }));
  }
  join_all(hs);
  CHECK(released.load() == 2);
  CHECK(phase == 2);
}

TEST_CASE("barrier: arrive_and_drop lowers the expected count of the later phases", "[barrier]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  // Participant i waits through phases 0..i-1 and drops at phase i, so
  // phase p has n - p arrivals, the last of them participant n-1's drop.
  constexpr int n = 8;
  std::vector<std::atomic<int>> arrived(n + 1);
  std::atomic<int> bad{0};
  int completions = 0;
  auto on_phase = [&]() noexcept {
    const int p = completions;
    if (arrived[static_cast<std::size_t>(p)].load() != n - p) bad.fetch_add(1);
    if (arrived[static_cast<std::size_t>(p) + 1].load() != 0) bad.fetch_add(1);
    ++completions;
  };
  usched::barrier b(n, on_phase);
  std::vector<usched::join_handle<void>> hs;
  for (int i = 0; i < n; ++i) {
    hs.push_back(rt.spawn([&, i] {
      for (int p = 0; p < i; ++p) {
        arrived[static_cast<std::size_t>(p)].fetch_add(1);
        b.arrive_and_wait();
        if (completions != p + 1) bad.fetch_add(1);
      }
      arrived[static_cast<std::size_t>(i)].fetch_add(1);
      b.arrive_and_drop();
    }));
  }
  join_all(hs);
  CHECK(completions == n);
  CHECK(bad.load() == 0);
  // Everyone has dropped: a phase now expects no arrival at all.
  CHECK_THROWS_AS(b.arrive_and_drop(), std::logic_error);
  CHECK_THROWS_AS((void)b.arrive(), std::logic_error);
}

// ---- counting_semaphore, binary_semaphore ----------------------------------

TEST_CASE("counting_semaphore: counts as std specifies, bad counts throw", "[semaphore]") {
  CHECK_THROWS_AS(usched::counting_semaphore<>(-1), std::logic_error);
  CHECK_THROWS_AS(usched::binary_semaphore(2), std::logic_error);
  CHECK_THROWS_AS(usched::counting_semaphore<3>(4), std::logic_error);

  usched::counting_semaphore<3> s(0);
  CHECK_FALSE(s.try_acquire());
  s.release(2);
  CHECK_THROWS_AS(s.release(2), std::logic_error);  // past max()
  CHECK_THROWS_AS(s.release(-1), std::logic_error);
  s.release(0);
  CHECK(s.try_acquire());
  CHECK(s.try_acquire());
  CHECK_FALSE(s.try_acquire());
  s.release(3);
  for (int i = 0; i < 3; ++i) s.acquire();
  CHECK_FALSE(s.try_acquire());

  for (int i = 0; i < 4; ++i) CHECK(constant_semaphore.try_acquire());
  CHECK_FALSE(constant_semaphore.try_acquire());
  constant_semaphore.release(4);
  CHECK_THROWS_AS(constant_semaphore.release(), std::logic_error);

  usched::binary_semaphore b(1);
  CHECK_THROWS_AS(b.release(), std::logic_error);
  b.acquire();
  CHECK_FALSE(b.try_acquire());
  CHECK_FALSE(b.try_acquire_for(0ms));
  CHECK_FALSE(b.try_acquire_for(-1s));
  CHECK_FALSE(b.try_acquire_until(std::chrono::system_clock::now() - 1h));
  b.release();
  // A free permit is taken even with a deadline already past.
  CHECK(b.try_acquire_for(-1s));
  b.release();
  CHECK(b.try_acquire_until(std::chrono::steady_clock::time_point::min()));
  b.release();
  CHECK(b.try_acquire_until(std::chrono::system_clock::now() + 1h));
}

TEST_CASE("counting_semaphore: concurrent holders never exceed the permits", "[semaphore][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr int permits = 3, fibers = 24, threads = 2;
  constexpr int rounds = 200 / static_cast<int>(volume_divisor);
  usched::counting_semaphore<permits> s(permits);
  std::atomic<int> holders{0}, most{0}, acquisitions{0};
  auto hold = [&] {
    const int now = holders.fetch_add(1) + 1;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    acquisitions.fetch_add(1);
  };
  auto user = [&](int i) {
    for (int r = 0; r < rounds; ++r) {
      switch ((i + r) % 3) {
        case 0: s.acquire(); break;
        case 1:
          while (!s.try_acquire()) usched::this_fiber::yield();
          break;
        default:
          while (!s.try_acquire_for(1ms)) {
          }
          break;
      }
      hold();
      usched::this_fiber::yield();  // hold it across a switch
      holders.fetch_sub(1);
      s.release();
    }
  };
  std::vector<usched::join_handle<void>> hs;
  for (int f = 0; f < fibers; ++f) hs.push_back(rt.spawn(user, f));
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) ts.emplace_back(user, fibers + t);
  join_all(hs);
  for (auto& t : ts) t.join();
  CHECK(most.load() <= permits);
  CHECK(acquisitions.load() == (fibers + threads) * rounds);
  // Every permit back, none more.
  int left = 0;
  while (s.try_acquire()) ++left;
  CHECK(left == permits);
}

TEST_CASE("counting_semaphore: try_acquire_for times out without a permit, succeeds when one is released",
          "[semaphore][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  usched::counting_semaphore<> s(0);
  constexpr auto timeout = 5ms;
  auto timed_out_after = [&] {
    const auto start = std::chrono::steady_clock::now();
    const bool got = s.try_acquire_for(timeout);
    return !got && std::chrono::steady_clock::now() - start >= timeout;
  };
  // Nobody releases: the fiber and the thread both time out, not early.
  CHECK(rt.run(timed_out_after));
  CHECK(timed_out_after());

  // A waiter that a release() finds blocked (or, if it comes first, leaves
  // a permit for): either way it gets the permit, long before its deadline.
  usched::latch entered(1);
  auto waiter = rt.spawn([&] {
    entered.count_down();
    return s.try_acquire_for(1h);
  });
  entered.wait();
  s.release();
  CHECK(waiter.join());
  CHECK_FALSE(s.try_acquire());
}

TEST_CASE("counting_semaphore: try_acquire_until with a system_clock time point", "[semaphore][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  usched::binary_semaphore s(0);
  // Times out at the system clock's deadline, not before.
  const auto expired = rt.run([&] {
    const auto at = std::chrono::system_clock::now() + 5ms;
    const bool got = s.try_acquire_until(at);
    return !got && std::chrono::system_clock::now() >= at;
  });
  CHECK(expired);
  usched::latch entered(1);
  auto waiter = rt.spawn([&] {
    entered.count_down();
    return s.try_acquire_until(std::chrono::system_clock::now() + 1h);
  });
  entered.wait();
  s.release();
  CHECK(waiter.join());
  CHECK_FALSE(s.try_acquire());
}

TEST_CASE("binary_semaphore: a mutex among many fibers and a thread, the plain counter ends exact",
          "[semaphore]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr int fibers = 32, rounds = 300 / static_cast<int>(volume_divisor);
  usched::binary_semaphore lock(1);
  long counter = 0;  // not atomic: only the semaphore orders the increments
  auto add = [&](int i) {
    for (int r = 0; r < rounds; ++r) {
      lock.acquire();
      const long v = counter;
      if ((i + r) % 7 == 0) usched::this_fiber::yield();  // hold it across a switch
      counter = v + 1;
      lock.release();
    }
  };
  std::vector<usched::join_handle<void>> hs;
  for (int f = 0; f < fibers; ++f) hs.push_back(rt.spawn(add, f));
  std::thread t(add, fibers);
  join_all(hs);
  t.join();
  CHECK(counter == static_cast<long>(fibers + 1) * rounds);
  CHECK(lock.try_acquire());
  CHECK_FALSE(lock.try_acquire());
}

TEST_CASE("counting_semaphore: waiters time out and are stopped while releases happen, no permit lost or duplicated",
          "[semaphore][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr int releasers = 2, timed_waiters = 12, stoppable_waiters = 4;
  constexpr int releases_each = 600 / static_cast<int>(volume_divisor);
  constexpr long total_released = static_cast<long>(releasers) * releases_each;
  usched::counting_semaphore<> s(0);
  std::atomic<int> releasers_left{releasers};
  std::atomic<long> acquired{0};
  std::atomic<long> timeouts{0};
  std::stop_source stop;

  std::vector<usched::join_handle<void>> hs;
  for (int r = 0; r < releasers; ++r) {
    hs.push_back(rt.spawn([&, r] {
      // Mostly one permit at a time, now and then two in one release().
      for (int i = 0; i < releases_each;) {
        const int n = (i + r) % 5 == 0 && i + 2 <= releases_each ? 2 : 1;
        s.release(n);
        i += n;
        if (i % 8 == 0) usched::this_fiber::yield();
      }
      releasers_left.fetch_sub(1);
    }));
  }
  // Timed waiters with timeouts from none at all to a few hundred
  // microseconds: many expire exactly while a release() is handing permits
  // to the waiters it found.
  for (int w = 0; w < timed_waiters; ++w) {
    hs.push_back(rt.spawn([&, w] {
      const auto timeout = std::chrono::microseconds(50 * (w % 6));
      while (releasers_left.load() > 0) {
        if (s.try_acquire_for(timeout)) {
          acquired.fetch_add(1);
        } else {
          timeouts.fetch_add(1);
          usched::this_fiber::yield();  // a zero timeout does not switch by itself
        }
      }
    }));
  }
  // Stoppable waiters block until a permit comes or the stop, requested
  // once the releasers are done, races the last hand-offs.
  for (int w = 0; w < stoppable_waiters; ++w) {
    hs.push_back(rt.spawn([&] {
      while (s.acquire(stop.get_token())) acquired.fetch_add(1);
    }));
  }
  rt.run([&] {
    while (releasers_left.load() > 0) usched::this_fiber::yield();
    stop.request_stop();
  });
  join_all(hs);
  long left = 0;
  while (s.try_acquire()) ++left;
  INFO("acquired " << acquired.load() << ", left " << left << ", timeouts " << timeouts.load());
  CHECK(acquired.load() + left == total_released);
}

TEST_CASE("counting_semaphore: acquire(stop_token) ends with false and takes no permit", "[semaphore]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr int stopped_fibers = 6, kept_fibers = 3;
  usched::counting_semaphore<> s(0);

  std::stop_source already;
  already.request_stop();
  CHECK_FALSE(rt.run([&] { return s.acquire(already.get_token()); }));

  auto kept = stop_some_waits(rt, stopped_fibers, kept_fibers,
                              [&](const std::stop_token& st) { return s.acquire(st); });
  for (auto& h : kept) CHECK_FALSE(h.done());

  // The stopped waiters took nothing: the permits released now go to the
  // waiters still blocked, and one more is left over.
  s.release(kept_fibers + 1);
  int kept_true = 0;
  for (auto& h : kept) kept_true += h.join() ? 1 : 0;
  CHECK(kept_true == kept_fibers);
  CHECK(s.try_acquire());
  CHECK_FALSE(s.try_acquire());
  // A free permit is taken even with the stop requested.
  s.release();
  CHECK(rt.run([&] { return s.acquire(already.get_token()); }));
}
