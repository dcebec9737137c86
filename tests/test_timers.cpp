// Timed waits: deadlines that saturate instead of wrapping, timers that
// fire while their own worker is busy, and sleeps a stop request ends.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <usched/usched.hpp>

#include "clock.hpp"
#include "test_support.hpp"
#include "wait_probe.hpp"

using namespace std::chrono_literals;
using usched::detail::deadline_after;
using usched::detail::deadline_at;
using usched::detail::far_deadline_ns;
using usched::detail::saturating_ns;

namespace {

using steady = std::chrono::steady_clock;
using sys_clock = std::chrono::system_clock;

// How long the tests below let a wait that must not end run before they
// look: long enough that a deadline wrapped into the past has long fired
// (that took 0.3 ms), short enough to keep the suite fast. Nothing is
// asserted about it taking this long; the waits are ended by notifications.
constexpr auto still_blocked_after = 20ms;

// The bound on waiting for something that must happen at once: only a
// broken runtime comes near it, and the test then unblocks what it left.
constexpr auto generous = 5s;

// One timed condition-variable wait, in every way the API spells it.
using timed_wait = std::function<std::cv_status(usched::condition_variable&, std::unique_lock<usched::mutex>&)>;

struct named_wait {
  const char* name;
  timed_wait wait;
};

std::vector<named_wait> forever_waits() {
  return {
      {"wait_for(seconds::max())", [](auto& cv, auto& lk) { return cv.wait_for(lk, std::chrono::seconds::max()); }},
      {"wait_for(hours::max())", [](auto& cv, auto& lk) { return cv.wait_for(lk, std::chrono::hours::max()); }},
      {"wait_for(nanoseconds::max())",
       [](auto& cv, auto& lk) { return cv.wait_for(lk, std::chrono::nanoseconds::max()); }},
      {"wait_for(1e300 s as double)",
       [](auto& cv, auto& lk) { return cv.wait_for(lk, std::chrono::duration<double>(1e300)); }},
      {"wait_until(steady time_point::max())",
       [](auto& cv, auto& lk) { return cv.wait_until(lk, steady::time_point::max()); }},
      {"wait_until(steady seconds time_point max)",
       [](auto& cv, auto& lk) {
         return cv.wait_until(lk, std::chrono::time_point<steady, std::chrono::seconds>::max());
       }},
      {"wait_until(system time_point::max())",
       [](auto& cv, auto& lk) { return cv.wait_until(lk, sys_clock::time_point::max()); }},
      {"wait_for(seconds::max(), pred)",
       [](auto& cv, auto& lk) {
         // The predicate is false until the test's notification; with it the
         // wait reports no timeout.
         bool first = true;
         const bool ok = cv.wait_for(lk, std::chrono::seconds::max(), [&] { return !std::exchange(first, false); });
         return ok ? std::cv_status::no_timeout : std::cv_status::timeout;
       }},
  };
}

std::vector<named_wait> past_waits() {
  return {
      {"wait_for(-1ms)", [](auto& cv, auto& lk) { return cv.wait_for(lk, -1ms); }},
      {"wait_for(seconds::min())", [](auto& cv, auto& lk) { return cv.wait_for(lk, std::chrono::seconds::min()); }},
      {"wait_for(hours::min())", [](auto& cv, auto& lk) { return cv.wait_for(lk, std::chrono::hours::min()); }},
      {"wait_for(-1e300 s as double)",
       [](auto& cv, auto& lk) { return cv.wait_for(lk, std::chrono::duration<double>(-1e300)); }},
      {"wait_until(steady time_point::min())",
       [](auto& cv, auto& lk) { return cv.wait_until(lk, steady::time_point::min()); }},
      {"wait_until(steady epoch)", [](auto& cv, auto& lk) { return cv.wait_until(lk, steady::time_point{}); }},
      {"wait_until(system time_point::min())",
       [](auto& cv, auto& lk) { return cv.wait_until(lk, sys_clock::time_point::min()); }},
  };
}

// Runs `w` in a fiber of `rt` and on a plain thread at once, each waiting on
// `cv` under `m`. `started` counts the waiters that hold the lock and are
// about to wait; `returned` those whose wait has ended.
struct waiters {
  usched::mutex m;
  usched::condition_variable cv;
  int started = 0;  // under m
  std::atomic<int> returned{0};
  std::cv_status fiber_status = std::cv_status::no_timeout;
  std::cv_status thread_status = std::cv_status::no_timeout;

  void body(const timed_wait& w, std::cv_status& status) {
    std::unique_lock<usched::mutex> lk(m);
    ++started;
    status = w(cv, lk);
    returned.fetch_add(1);
  }
  int started_now() {
    std::lock_guard<usched::mutex> g(m);
    return started;
  }
  // Waits until both waiters have reached their wait (or `generous`).
  void until_both_started() {
    const auto give_up = steady::now() + generous;
    while (started_now() < 2 && steady::now() < give_up) std::this_thread::sleep_for(100us);
  }
  void notify() {
    std::lock_guard<usched::mutex> g(m);
    cv.notify_all();
  }
};

}  // namespace

TEST_CASE("deadlines saturate at the ends of the clock instead of wrapping", "[timers][deadline]") {
  const std::int64_t now = usched::detail::steady_now_ns();
  CHECK(saturating_ns(std::chrono::seconds::max()) == std::numeric_limits<std::int64_t>::max());
  CHECK(saturating_ns(std::chrono::seconds::min()) == std::numeric_limits<std::int64_t>::min());
  CHECK(saturating_ns(std::chrono::duration<double>(1e300)) == std::numeric_limits<std::int64_t>::max());
  CHECK(saturating_ns(std::chrono::duration<double>(std::numeric_limits<double>::quiet_NaN())) == 0);
  // Rounded up, so that a wait never ends early: 1.5 ns is 2, -1.5 ns is -1.
  CHECK(saturating_ns(std::chrono::duration<long long, std::pico>(1500)) == 2);
  CHECK(saturating_ns(std::chrono::duration<long long, std::pico>(-1500)) == -1);
  CHECK(saturating_ns(std::chrono::duration<double, std::micro>(0.0015)) == 2);
  CHECK(saturating_ns(std::chrono::duration<unsigned long long>(std::numeric_limits<unsigned long long>::max())) ==
        std::numeric_limits<std::int64_t>::max());
  CHECK(saturating_ns(3s) == 3'000'000'000);
  // Just under 2^63 ns, not whole: rounding up must not wrap to the minimum.
  CHECK(saturating_ns(std::chrono::duration<long double, std::nano>(9223372036854775807.5L)) ==
        std::numeric_limits<std::int64_t>::max());

  CHECK(deadline_after(std::chrono::seconds::max()) == far_deadline_ns);
  CHECK(deadline_after(std::chrono::nanoseconds::max()) == far_deadline_ns);
  CHECK(deadline_after(std::chrono::seconds::min()) == 0);
  CHECK(deadline_after(-1ms) <= now);
  const std::int64_t in_a_second = deadline_after(1s);
  CHECK(in_a_second >= now + 1'000'000'000);
  CHECK(in_a_second < far_deadline_ns);

  CHECK(deadline_at(steady::time_point::max()) == far_deadline_ns);
  CHECK(deadline_at(std::chrono::time_point<steady, std::chrono::seconds>::max()) == far_deadline_ns);
  CHECK(deadline_at(steady::time_point::min()) == 0);
  // The system clock's end is no deadline either, not a timer some 230
  // years away (nor wrapped into the past); a time short of it is far but
  // finite.
  CHECK(deadline_at(sys_clock::time_point::max()) == far_deadline_ns);
  const std::int64_t two_centuries = deadline_at(sys_clock::now() + std::chrono::hours(24 * 365 * 200));
  CHECK(two_centuries > now + std::chrono::nanoseconds(std::chrono::hours(24 * 365 * 199)).count());
  CHECK(two_centuries < far_deadline_ns);
  CHECK(deadline_at(sys_clock::time_point::min()) == 0);
  // Another clock's time point is the time left until it, from now.
  const std::int64_t sys = deadline_at(sys_clock::now() + 10s);
  CHECK(sys >= now + 9'000'000'000);
  CHECK(sys <= usched::detail::steady_now_ns() + 10'000'000'000);
}

TEST_CASE("a wait for ever, in a fiber and on a thread, ends only when notified", "[timers][deadline][realtime]") {
  usched::runtime rt(usched::test::make_options("cfs", 2));
  for (const named_wait& w : forever_waits()) {
    INFO(w.name);
    waiters ws;
    auto fiber = rt.spawn([&] { ws.body(w.wait, ws.fiber_status); });
    std::thread thread([&] { ws.body(w.wait, ws.thread_status); });
    ws.until_both_started();
    std::this_thread::sleep_for(still_blocked_after);
    // Neither has timed out: the deadline is at the end of the clock.
    CHECK(ws.returned.load() == 0);
    ws.notify();
    fiber.join();
    thread.join();
    CHECK(ws.returned.load() == 2);
    CHECK(ws.fiber_status == std::cv_status::no_timeout);
    CHECK(ws.thread_status == std::cv_status::no_timeout);
  }
}

TEST_CASE("a wait whose deadline is past, in a fiber and on a thread, times out at once", "[timers][deadline][realtime]") {
  usched::runtime rt(usched::test::make_options("cfs", 2));
  for (const named_wait& w : past_waits()) {
    INFO(w.name);
    waiters ws;
    auto fiber = rt.spawn([&] { ws.body(w.wait, ws.fiber_status); });
    std::thread thread([&] { ws.body(w.wait, ws.thread_status); });
    const auto give_up = steady::now() + generous;
    while (ws.returned.load() < 2 && steady::now() < give_up) std::this_thread::sleep_for(100us);
    CHECK(ws.returned.load() == 2);
    // Release whatever is wrongly still waiting, so the test ends either way.
    while (ws.returned.load() < 2) {
      ws.notify();
      std::this_thread::sleep_for(1ms);
    }
    fiber.join();
    thread.join();
    CHECK(ws.fiber_status == std::cv_status::timeout);
    CHECK(ws.thread_status == std::cv_status::timeout);
  }
}

// A fiber sleeps 20 ms on worker 0 while another fiber on worker 0 spins.
// Worker 0 never gets to its timers while the spinner runs; worker 1 is idle
// and must fire them. The spinner spins until the sleeper has run after its
// sleep, or for `generous`, and says which; it never blocks or yields.
TEST_CASE("a timer whose worker runs a fiber that does not yield fires on an idle worker", "[timers][steal][realtime]") {
  const std::string policy = GENERATE(from_range(usched::policy_names()));
  const auto spin = GENERATE(20us, 0us);
  INFO("policy " << policy << ", spin " << spin.count() << " us");
  auto opts = usched::test::make_options(policy, 2);
  opts.spin = spin;
  usched::runtime rt(opts);
  std::atomic<bool> woke{false};
  usched::spawn_options on0;
  on0.pin = 0;
  // Pinned to worker 0, the woken sleeper is queued there, behind the
  // spinner, which lets it run at its preempt points: those yield only when
  // a fiber is queued, and run no timers.
  auto sleeper = rt.spawn(on0, [&] {
    usched::this_fiber::sleep_for(20ms);
    woke.store(true);
  });
  auto spinner = rt.spawn(on0, [&] {
    const auto give_up = steady::now() + generous;
    while (!woke.load() && steady::now() < give_up) usched::this_fiber::preempt_point();
    return woke.load();
  });
  CHECK(spinner.join());
  sleeper.join();
}

// The same with neither fiber pinned and a spinner that has no preempt
// points: the woken sleeper must run on the idle worker. Every policy whose
// wake placement or newly-idle pull moves a fiber off a busy worker does
// that; `none` keeps a fiber where it last ran, by design.
TEST_CASE("a fiber woken by the timer of a busy worker runs on an idle one", "[timers][steal][realtime]") {
  std::vector<std::string> policies;
  for (const std::string& p : usched::policy_names()) {
    if (p != "none") policies.push_back(p);
  }
  const std::string policy = GENERATE_COPY(from_range(policies));
  const auto spin = GENERATE(20us, 0us);
  INFO("policy " << policy << ", spin " << spin.count() << " us");
  auto opts = usched::test::make_options(policy, 2);
  opts.spin = spin;
  usched::runtime rt(opts);
  std::atomic<int> where{-1};
  std::atomic<bool> woke{false};
  auto sleeper = rt.spawn([&] {
    where.store(usched::this_fiber::worker_index());
    usched::this_fiber::sleep_for(20ms);
    woke.store(true);
  });
  const auto give_up = steady::now() + generous;
  while (where.load() < 0 && steady::now() < give_up) std::this_thread::sleep_for(100us);
  REQUIRE(where.load() >= 0);
  // The sleeper's timer is on worker `where`'s heap (it is running there or
  // already asleep); the spinner, queued there behind it if need be, holds
  // that worker from then on.
  usched::spawn_options there;
  there.pin = where.load();
  auto spinner = rt.spawn(there, [&] {
    const auto until = steady::now() + generous;
    while (!woke.load() && steady::now() < until) {
    }
    return woke.load();
  });
  CHECK(spinner.join());
  sleeper.join();
}

// The engine clock converts counter ticks to ns with a fixed-point multiplier;
// against the calibration's own double, it must agree to within the
// multiplier's truncation (under one tick of 2^-40 ns per tick) and the
// double's own rounding, from the calibration point to 2^62 ticks later
// (decades at GHz rates), and never run backwards.
TEST_CASE("the engine clock's fixed-point conversion follows the calibration", "[clock]") {
  using namespace usched::detail;
  calibrate_tsc();
  const tsc_calibration& k = tsc();
  REQUIRE(k.ns_per_cycle > 0);
  std::int64_t prev = engine_now_ns(k.c0);
  CHECK(prev == k.t0);
  // A counter behind the calibration's reads as a little earlier.
  CHECK(engine_now_ns(k.c0 - 1000) < k.t0);
  CHECK(engine_now_ns(k.c0 - 1000) > k.t0 - 1'000'000);
  for (std::uint64_t ticks = 1; ticks < (std::uint64_t{1} << 62); ticks = ticks * 3 + 7) {
    const std::int64_t got = engine_now_ns(k.c0 + ticks);
    const double want = static_cast<double>(k.t0) + static_cast<double>(ticks) * k.ns_per_cycle;
    const double elapsed = static_cast<double>(ticks) * k.ns_per_cycle;
    CAPTURE(ticks, got, want);
    const double truncation = static_cast<double>(ticks) / static_cast<double>(std::uint64_t{1} << 40);
    CHECK(std::abs(static_cast<double>(got) - want) <= 2.0 + truncation + elapsed * 4e-16);
    CHECK(got >= prev);
    prev = got;
  }
}

namespace {

usched::wake_counts wakeups_of(const usched::runtime& rt) {
  usched::wake_counts sum;
  for (const auto& w : rt.stats().workers) {
    for (std::size_t r = 0; r < usched::wake_reason_count; ++r) sum.n[r] += w.wakeups.n[r];
  }
  return sum;
}

// A one-hour sleep with a stop token, by each spelling: only the stop can
// end it within the test.
using stoppable_sleep = bool (*)(const std::stop_token&);
struct named_sleep {
  const char* name;
  stoppable_sleep sleep;
};
std::vector<named_sleep> hour_sleeps() {
  return {
      {"sleep_for(1h, st)", [](const std::stop_token& st) { return usched::this_fiber::sleep_for(1h, st); }},
      {"sleep_until(steady now + 1h, st)",
       [](const std::stop_token& st) { return usched::this_fiber::sleep_until(steady::now() + 1h, st); }},
      {"sleep_until(system now + 1h, st)",
       [](const std::stop_token& st) {
         return usched::this_fiber::sleep_until(sys_clock::now() + 1h, st);
       }},
      {"sleep_for(seconds::max(), st)",
       [](const std::stop_token& st) { return usched::this_fiber::sleep_for(std::chrono::seconds::max(), st); }},
  };
}

// Waits on this plain thread until `probe` sees its caller asleep, for
// `generous` at most.
bool until_asleep(const usched::test::wait_probe& probe) {
  const auto give_up = steady::now() + generous;
  while (!probe.blocked_in(usched::detail::wait_kind::sleep)) {
    if (steady::now() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

// The sleeping fiber is seen asleep (its wait armed, in a sleep) before the
// stop is requested, so the request is what ends it: one wake-up of reason
// stop, none of reason timer.
TEST_CASE("stoppable sleep: a stop from another fiber ends a one-hour sleep", "[timers][cancel]") {
  const auto c = GENERATE(from_range(usched::test::one_and_two_worker_configs()));
  INFO(usched::test::label(c));
  for (const named_sleep& s : hour_sleeps()) {
    INFO(s.name);
    usched::runtime rt(usched::test::make_options(c.policy, c.workers));
    rt.run([&s] {
      usched::test::wait_probe probe;
      auto sleeper = usched::spawn([&probe, &s](std::stop_token st) {
        probe.attach();
        return s.sleep(st);
      });
      const auto asleep = [&probe] { return probe.blocked_in(usched::detail::wait_kind::sleep); };
      REQUIRE(usched::test::yield_until(asleep));
      CHECK(sleeper.request_stop());
      CHECK_FALSE(sleeper.join());
    });
    const usched::wake_counts w = wakeups_of(rt);
    CHECK(w[usched::wake_reason::stop] == 1);
    CHECK(w[usched::wake_reason::timer] == 0);
  }
}

TEST_CASE("stoppable sleep: a stop from a plain thread ends a fiber's one-hour sleep", "[timers][cancel]") {
  const auto c = GENERATE(from_range(usched::test::one_and_two_worker_configs()));
  INFO(usched::test::label(c));
  for (const named_sleep& s : hour_sleeps()) {
    INFO(s.name);
    usched::runtime rt(usched::test::make_options(c.policy, c.workers));
    std::stop_source stop;
    usched::test::wait_probe probe;
    auto sleeper = rt.spawn([&] {
      probe.attach();
      return s.sleep(stop.get_token());
    });
    REQUIRE(until_asleep(probe));
    CHECK(stop.request_stop());
    CHECK_FALSE(sleeper.join());
    const usched::wake_counts w = wakeups_of(rt);
    CHECK(w[usched::wake_reason::stop] == 1);
    CHECK(w[usched::wake_reason::timer] == 0);
  }
}

// On a plain thread the sleep is a wait on the thread's parker: a fiber's
// stop request unparks it. A thread's wake-up is not a fiber's, and is not
// counted.
TEST_CASE("stoppable sleep: a stop from a fiber ends a plain thread's one-hour sleep", "[timers][cancel]") {
  const auto c = GENERATE(from_range(usched::test::one_and_two_worker_configs()));
  INFO(usched::test::label(c));
  for (const named_sleep& s : hour_sleeps()) {
    INFO(s.name);
    usched::runtime rt(usched::test::make_options(c.policy, c.workers));
    std::stop_source stop;
    usched::test::wait_probe probe;
    std::atomic<int> slept{-1};
    std::thread thread([&] {
      probe.attach();
      slept = s.sleep(stop.get_token()) ? 1 : 0;
    });
    const bool asleep = rt.run([&] {
      const bool seen = usched::test::yield_until([&] { return probe.blocked_in(usched::detail::wait_kind::sleep); });
      stop.request_stop();  // also when not seen: the thread must end
      return seen;
    });
    thread.join();
    CHECK(asleep);
    CHECK(slept.load() == 0);
    CHECK(wakeups_of(rt)[usched::wake_reason::stop] == 0);
  }
}

// A stop requested before the call: false at once, without blocking (no
// wake-up at all), whatever the time, even one already past.
TEST_CASE("stoppable sleep: a token already stopped returns false at once", "[timers][cancel]") {
  const auto c = GENERATE(from_range(usched::test::one_and_two_worker_configs()));
  INFO(usched::test::label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  std::stop_source stop;
  stop.request_stop();
  const std::stop_token st = stop.get_token();
  const auto all_false = [&st] {
    int returned_true = 0;
    for (const named_sleep& s : hour_sleeps()) returned_true += s.sleep(st) ? 1 : 0;
    returned_true += usched::this_fiber::sleep_for(-1s, st) ? 1 : 0;
    returned_true += usched::this_fiber::sleep_for(0s, st) ? 1 : 0;
    returned_true += usched::this_fiber::sleep_until(steady::time_point::min(), st) ? 1 : 0;
    return returned_true;
  };
  CHECK(rt.run(all_false) == 0);
  CHECK(all_false() == 0);  // on this plain thread
  const usched::wake_counts w = wakeups_of(rt);
  CHECK(w[usched::wake_reason::stop] == 0);
  CHECK(w[usched::wake_reason::timer] == 0);
  // A token that can never be stopped is the plain sleep: its time comes.
  CHECK(rt.run([] { return usched::this_fiber::sleep_for(-1s, std::stop_token{}); }));
  CHECK(usched::this_fiber::sleep_until(steady::time_point::min(), std::stop_token{}));
}

// A sleep whose time comes while its token is never stopped returns true:
// the timer ended it (timer wake-ups only), and the stop callback it
// registered is gone (a later request changes nothing). The times are
// short; only the test's own timeout bounds them.
TEST_CASE("stoppable sleep: a sleep whose time comes first returns true", "[timers][cancel][realtime]") {
  const auto c = GENERATE(from_range(usched::test::one_and_two_worker_configs()));
  INFO(usched::test::label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  std::stop_source stop;
  const std::stop_token st = stop.get_token();
  const int came = rt.run([&st] {
    int n = 0;
    n += usched::this_fiber::sleep_for(200us, st) ? 1 : 0;
    n += usched::this_fiber::sleep_until(steady::now() + 200us, st) ? 1 : 0;
    n += usched::this_fiber::sleep_until(sys_clock::now() + 200us, st) ? 1 : 0;
    return n;
  });
  CHECK(came == 3);
  const usched::wake_counts w = wakeups_of(rt);
  CHECK(w[usched::wake_reason::timer] == 3);
  CHECK(w[usched::wake_reason::stop] == 0);
  // On a plain thread, the parker's timeout ends it.
  CHECK(usched::this_fiber::sleep_for(200us, st));
  CHECK(usched::this_fiber::sleep_until(steady::now() + 200us, st));
  CHECK(stop.request_stop());
  CHECK(wakeups_of(rt)[usched::wake_reason::stop] == 0);
}
