// The mutex family beyond usched::mutex: timed_mutex, recursive_mutex,
// recursive_timed_mutex, shared_mutex and condition_variable_any, each under
// every policy with 1, 2, 4 and 8 workers, as std specifies them, plus
// what usched adds (stop tokens) and what its wait protocol promises (a
// wait that times out never swallows the wake-up meant for another).
//
// A case that stops, unlocks or releases "once the others block" waits for
// them to be queued (wait_probe.hpp), never for a time. The cases whose
// timed attempts and waits run on the real clock are tagged [realtime]
// (tests/CMakeLists.txt says what the label means).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <stop_token>
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

TEST_CASE("timed_mutex: exclusion, timed attempts that fail while held and succeed once free",
          "[mutex][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::timed_mutex m;
    long counter = 0;  // not atomic: the mutex is the only guard
    constexpr int fibers = 32;
    constexpr int rounds = 200 / static_cast<int>(usched::test::volume_divisor);
    std::vector<usched::join_handle<void>> hs;
    for (int f = 0; f < fibers; ++f) {
      hs.push_back(usched::spawn([&, f] {
        for (int i = 0; i < rounds; ++i) {
          if (f % 2 == 0) {
            std::lock_guard<usched::timed_mutex> g(m);
            ++counter;
          } else {
            // Short timed attempts, retried: timeouts race with unlocks.
            while (!m.try_lock_for(20us)) {
            }
            ++counter;
            m.unlock();
          }
          if (i % 16 == 0) usched::this_fiber::yield();
        }
      }));
    }
    for (auto& h : hs) h.join();
    CHECK(counter == static_cast<long>(fibers) * rounds);

    // Held by another fiber: timed attempts on any clock time out.
    std::atomic<bool> held{false}, release{false};
    // (Checks are made by the test's own fiber only: Catch2's assertions
    // are not thread-safe, and fibers on other workers run concurrently.)
    auto holder = usched::spawn([&] {
      m.lock();
      held = true;
      const bool released = yield_until([&] { return release.load(); });
      m.unlock();
      return released;
    });
    REQUIRE(yield_until([&] { return held.load(); }));
    CHECK_FALSE(m.try_lock());
    CHECK_FALSE(m.try_lock_for(1ms));
    CHECK_FALSE(m.try_lock_until(std::chrono::system_clock::now() + 1ms));
    CHECK_FALSE(m.try_lock_until(std::chrono::steady_clock::now() - 1s));
    release = true;
    CHECK(m.try_lock_for(10s));
    m.unlock();
    CHECK(holder.join());
  });
}

TEST_CASE("timed_mutex: a stop request ends lock(stop_token), and an unlock still wakes the others",
          "[mutex]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::timed_mutex m;
    m.lock();
    std::stop_source stop;
    std::atomic<int> stopped{0}, locked{0};
    std::vector<usched::join_handle<void>> hs;
    std::array<wait_probe, 8> probes;
    // Half wait with the stop token, half without: the stop ends only the
    // first half, and the unlock then goes to the second. Both halves are
    // queued on the mutex before the stop.
    for (int i = 0; i < 8; ++i) {
      hs.push_back(usched::spawn([&, i] {
        probes[static_cast<std::size_t>(i)].attach();
        if (i % 2 == 0) {
          if (m.lock(stop.get_token())) {
            ++locked;
            m.unlock();
          } else {
            ++stopped;
          }
        } else {
          m.lock();
          ++locked;
          m.unlock();
        }
      }));
    }
    REQUIRE(yield_until([&] {
      return std::all_of(probes.begin(), probes.end(),
                         [](const wait_probe& p) { return p.blocked_in(wait_kind::mutex); });
    }));
    stop.request_stop();
    REQUIRE(yield_until([&] { return stopped.load() == 4; }));
    CHECK(locked.load() == 0);
    m.unlock();
    for (auto& h : hs) h.join();
    CHECK(locked.load() == 4);
    CHECK(stopped.load() == 4);
    // A stop already requested gives up at once on a held lock.
    m.lock();
    auto late = usched::spawn([&] { return m.lock(stop.get_token()); });
    CHECK_FALSE(late.join());
    m.unlock();
  });
}

TEST_CASE("timed_mutex: shared by fibers and plain threads", "[mutex][realtime]") {
  usched::runtime rt(usched::test::make_options("cfs", 2));
  usched::timed_mutex m;
  long counter = 0;
  constexpr int per = 2000 / static_cast<int>(usched::test::volume_divisor);
  std::vector<usched::join_handle<void>> fibers;
  for (int f = 0; f < 4; ++f) {
    fibers.push_back(rt.spawn([&] {
      for (int i = 0; i < per; ++i) {
        std::lock_guard<usched::timed_mutex> g(m);
        ++counter;
      }
    }));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < per; ++i) {
        while (!m.try_lock_for(50us)) {
        }
        ++counter;
        m.unlock();
      }
    });
  }
  for (auto& h : fibers) h.join();
  for (auto& t : threads) t.join();
  CHECK(counter == 6L * per);
}

TEST_CASE("recursive_mutex: the owning fiber relocks across switches and migrations, others wait",
          "[mutex]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::recursive_mutex m;
    long counter = 0;
    std::atomic<int> inside{0}, overlap{0};
    constexpr int fibers = 16;
    constexpr int rounds = 100 / static_cast<int>(usched::test::volume_divisor);
    std::vector<usched::join_handle<void>> hs;
    for (int f = 0; f < fibers; ++f) {
      hs.push_back(usched::spawn([&] {
        for (int i = 0; i < rounds; ++i) {
          std::lock_guard<usched::recursive_mutex> outer(m);
          if (inside.fetch_add(1) != 0) ++overlap;
          // A switch between the two locks: the fiber may resume on another
          // worker and must still be the owner.
          usched::this_fiber::yield();
          {
            std::lock_guard<usched::recursive_mutex> inner(m);
            if (!m.try_lock()) ++overlap;  // the owner's try_lock must succeed
            ++counter;
            m.unlock();
          }
          inside.fetch_sub(1);
        }
      }));
    }
    for (auto& h : hs) h.join();
    CHECK(counter == static_cast<long>(fibers) * rounds);
    CHECK(overlap.load() == 0);

    // Held twice by one fiber: another cannot take it until both unlocks.
    std::atomic<int> stage{0};
    auto owner = usched::spawn([&] {
      m.lock();
      m.lock();
      stage = 1;
      bool ok = yield_until([&] { return stage.load() == 2; });
      m.unlock();
      stage = 3;
      ok = yield_until([&] { return stage.load() == 4; }) && ok;
      m.unlock();
      return ok;
    });
    REQUIRE(yield_until([&] { return stage.load() == 1; }));
    CHECK_FALSE(m.try_lock());
    stage = 2;
    REQUIRE(yield_until([&] { return stage.load() == 3; }));
    CHECK_FALSE(m.try_lock());  // one level still held
    stage = 4;
    m.lock();  // blocks until the second unlock
    m.unlock();
    CHECK(owner.join());
  });
}

TEST_CASE("recursive_timed_mutex: the owner's timed attempts succeed at once, another's time out",
          "[mutex][realtime]") {
  usched::runtime rt(usched::test::make_options("cfs", 2));
  rt.run([] {
    usched::recursive_timed_mutex m;
    CHECK(m.try_lock_for(1ms));
    CHECK(m.try_lock_until(std::chrono::system_clock::now() - 1h));  // the owner: no wait at all
    auto other = usched::spawn([&] {
      const bool a = m.try_lock_for(1ms);
      const bool b = m.try_lock_until(std::chrono::steady_clock::now() + 1ms);
      return !a && !b;
    });
    CHECK(other.join());
    m.unlock();
    m.unlock();
    auto later = usched::spawn([&] {
      if (!m.try_lock_for(10s)) return false;
      m.unlock();
      return true;
    });
    CHECK(later.join());
  });
}

TEST_CASE("shared_mutex: readers hold it together, a writer alone", "[mutex][shared_mutex]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::shared_mutex m;
    // Readers in parallel: each one stays in until all of them are in,
    // which a lock that excluded readers from each other would never allow
    // (the bound turns that into a failed check).
    constexpr int readers = 8;
    std::atomic<int> in{0};
    std::atomic<bool> all_in{true};
    std::vector<usched::join_handle<void>> hs;
    for (int r = 0; r < readers; ++r) {
      hs.push_back(usched::spawn([&] {
        std::shared_lock<usched::shared_mutex> g(m);
        ++in;
        if (!yield_until([&] { return in.load() == readers; })) all_in = false;
      }));
    }
    for (auto& h : hs) h.join();
    hs.clear();
    CHECK(all_in.load());

    // Writers alone: no reader or other writer ever sees a writer inside.
    std::atomic<int> readers_inside{0}, writers_inside{0}, violations{0};
    long written = 0;
    constexpr int rounds = 100 / static_cast<int>(usched::test::volume_divisor);
    for (int f = 0; f < 16; ++f) {
      hs.push_back(usched::spawn([&, f] {
        for (int i = 0; i < rounds; ++i) {
          if (f % 4 == 0) {
            std::unique_lock<usched::shared_mutex> g(m);
            if (writers_inside.fetch_add(1) != 0 || readers_inside.load() != 0) ++violations;
            ++written;
            usched::this_fiber::yield();
            writers_inside.fetch_sub(1);
          } else {
            std::shared_lock<usched::shared_mutex> g(m);
            readers_inside.fetch_add(1);
            if (writers_inside.load() != 0) ++violations;
            usched::this_fiber::yield();
            readers_inside.fetch_sub(1);
          }
        }
      }));
    }
    for (auto& h : hs) h.join();
    CHECK(violations.load() == 0);
    CHECK(written == 4L * rounds);
  });
}

TEST_CASE("shared_mutex: a waiting writer holds back new readers, and lets them go when it times out",
          "[mutex][shared_mutex][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::shared_mutex m;
    // Whether a writer waits (or holds it): a new reader is then refused.
    const auto writer_waits = [&m] {
      if (!m.try_lock_shared()) return true;
      m.unlock_shared();
      return false;
    };
    m.lock_shared();  // this fiber reads throughout
    // A writer that waits: new readers queue behind it.
    std::atomic<bool> writer_done{false};
    auto writer = usched::spawn([&] {
      m.lock();
      m.unlock();
      writer_done = true;
    });
    REQUIRE(yield_until(writer_waits));
    CHECK_FALSE(m.try_lock());
    m.unlock_shared();  // the last reader out hands it to the writer
    writer.join();
    CHECK(writer_done.load());

    // A writer whose attempt times out lets the readers that queued behind
    // it go, while the first reader still holds the lock.
    m.lock_shared();
    auto timed_writer = usched::spawn([&] { return m.try_lock_for(20ms); });
    REQUIRE(yield_until(writer_waits));
    std::atomic<bool> reader_in{false};
    auto reader = usched::spawn([&] {
      m.lock_shared();  // queued behind the waiting writer
      reader_in = true;
      m.unlock_shared();
    });
    CHECK_FALSE(timed_writer.join());
    reader.join();
    CHECK(reader_in.load());
    CHECK(m.try_lock_shared());
    m.unlock_shared();
    m.unlock_shared();
    CHECK(m.try_lock());
    m.unlock();

    // Timed shared attempts time out while a writer holds it.
    m.lock();
    auto shared_try = usched::spawn([&] {
      return !m.try_lock_shared_for(1ms) && !m.try_lock_shared_until(std::chrono::system_clock::now() + 1ms);
    });
    CHECK(shared_try.join());
    m.unlock();

    // Stop requests end both kinds of wait.
    m.lock();
    std::stop_source stop;
    wait_probe writing, reading;
    auto w = usched::spawn([&] {
      writing.attach();
      return m.lock(stop.get_token());
    });
    auto r = usched::spawn([&] {
      reading.attach();
      return m.lock_shared(stop.get_token());
    });
    REQUIRE(yield_until([&] {
      return writing.blocked_in(wait_kind::shared_mutex) && reading.blocked_in(wait_kind::shared_mutex);
    }));
    stop.request_stop();
    CHECK_FALSE(w.join());
    CHECK_FALSE(r.join());
    m.unlock();
    CHECK(m.try_lock_shared());  // nothing was left holding it
    m.unlock_shared();
  });
}

TEST_CASE("condition_variable_any: any lock, timed waits, and notifications never lost to a timeout",
          "[mutex][condition_variable_any][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::condition_variable_any cv;
    usched::timed_mutex m;
    // Tokens produced one at a time with notify_one, taken by consumers
    // that wait with short timeouts: every token is taken (a notification
    // that went to a consumer whose wait had timed out would strand one).
    constexpr int consumers = 8;
    const int tokens = 400 / static_cast<int>(usched::test::volume_divisor);
    int available = 0;  // under m
    int taken = 0;
    std::atomic<int> timeouts{0};
    std::vector<usched::join_handle<int>> hs;
    for (int i = 0; i < consumers; ++i) {
      hs.push_back(usched::spawn([&] {
        int mine = 0;
        std::unique_lock<usched::timed_mutex> lk(m);
        for (;;) {
          if (!cv.wait_for(lk, 50us, [&] { return available > 0 || taken == tokens; })) {
            ++timeouts;
            continue;
          }
          if (taken == tokens) return mine;
          --available;
          ++taken;
          ++mine;
          if (taken == tokens) cv.notify_all();
        }
      }));
    }
    for (int t = 0; t < tokens; ++t) {
      {
        std::lock_guard<usched::timed_mutex> g(m);
        ++available;
      }
      cv.notify_one();
      if (t % 8 == 0) usched::this_fiber::yield();
    }
    int sum = 0;
    for (auto& h : hs) sum += h.join();
    CHECK(sum == tokens);
    CHECK(available == 0);

    // With a shared_mutex held shared (std::shared_lock is a lock too).
    usched::shared_mutex sm;
    bool flag = false;
    auto waiter = usched::spawn([&] {
      std::shared_lock<usched::shared_mutex> lk(sm);
      cv.wait(lk, [&] { return flag; });
      return flag;
    });
    usched::this_fiber::yield();
    {
      std::unique_lock<usched::shared_mutex> g(sm);
      flag = true;
    }
    cv.notify_all();
    CHECK(waiter.join());

    // A wait nobody notifies times out, on any clock.
    std::unique_lock<usched::timed_mutex> lk(m);
    CHECK(cv.wait_for(lk, 1ms) == std::cv_status::timeout);
    CHECK(cv.wait_until(lk, std::chrono::system_clock::now() + 1ms) == std::cv_status::timeout);
    CHECK_FALSE(cv.wait_until(lk, std::chrono::steady_clock::now() + 1ms, [] { return false; }));
  });
}

TEST_CASE("condition_variable_any: the stop-token waits return when stop is requested", "[mutex][condition_variable_any]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::condition_variable_any cv;
    usched::mutex m;
    std::stop_source stop;
    std::vector<usched::join_handle<bool>> hs;
    // The timed waits' deadlines are an hour away: only the stop ends them.
    std::array<wait_probe, 3> probes;
    hs.push_back(usched::spawn([&] {
      probes[0].attach();
      std::unique_lock<usched::mutex> lk(m);
      return cv.wait(lk, stop.get_token(), [] { return false; });
    }));
    hs.push_back(usched::spawn([&] {
      probes[1].attach();
      std::unique_lock<usched::mutex> lk(m);
      return cv.wait_for(lk, stop.get_token(), 1h, [] { return false; });
    }));
    hs.push_back(usched::spawn([&] {
      probes[2].attach();
      std::unique_lock<usched::mutex> lk(m);
      return cv.wait_until(lk, stop.get_token(), std::chrono::system_clock::now() + 1h, [] { return false; });
    }));
    REQUIRE(yield_until([&] {
      return std::all_of(probes.begin(), probes.end(),
                         [](const wait_probe& p) { return p.blocked_in(wait_kind::condition_variable_any); });
    }));
    // From a plain thread, as std::jthread's owner would.
    std::thread([&] { stop.request_stop(); }).join();
    for (auto& h : hs) CHECK_FALSE(h.join());
    // The predicate's value is returned: true when it holds.
    std::unique_lock<usched::mutex> lk(m);
    CHECK(cv.wait(lk, stop.get_token(), [] { return true; }));
  });
}

// Boost.Fiber's own mutex cases (test/test_mutex*.cpp, after Boost.Thread's),
// for the four std mutex types, without their wall-clock margins: a lock's
// states through std::unique_lock; two fibers excluding each other across
// yields; a recursive type locked twice by one owner; and a timed attempt
// that fails while another fiber holds the lock (never before its time)
// and succeeds when the lock is released before its deadline.
namespace {

template <class M>
constexpr bool is_recursive_v =
    std::is_same_v<M, usched::recursive_mutex> || std::is_same_v<M, usched::recursive_timed_mutex>;
template <class M>
constexpr bool is_timed_v = std::is_same_v<M, usched::timed_mutex> || std::is_same_v<M, usched::recursive_timed_mutex>;

}  // namespace

TEMPLATE_TEST_CASE("mutexes: Boost.Fiber's lock, exclusion, recursion and timed cases",
                   "[mutex][boost_fiber][realtime]",
                   usched::mutex, usched::timed_mutex, usched::recursive_mutex, usched::recursive_timed_mutex) {
  using M = TestType;
  usched::runtime rt(usched::test::make_options("cfs", 2));
  rt.run([] {
    M m;
    {
      std::unique_lock<M> lk(m, std::defer_lock);
      CHECK_FALSE(lk.owns_lock());
      lk.lock();
      CHECK(lk.owns_lock());
      lk.unlock();
      CHECK_FALSE(lk.owns_lock());
      CHECK(lk.try_lock());
    }
    // Exclusion: the second fiber's increment under the lock waits for the
    // first's yields to end.
    // value2's first increment is outside the lock, on another worker
    // perhaps: atomic, so that reading it under the lock is no race.
    int value1 = 0;
    std::atomic<int> value2{0};
    auto f1 = usched::spawn([&] {
      std::unique_lock<M> lk(m);
      ++value1;
      for (int i = 0; i < 3; ++i) usched::this_fiber::yield();
      return value2.load() <= 1;  // f2 may have started, not entered
    });
    auto f2 = usched::spawn([&] {
      ++value2;
      std::unique_lock<M> lk(m);
      ++value2;
    });
    CHECK(f1.join());
    f2.join();
    CHECK(value1 == 1);
    CHECK(value2 == 2);
    if constexpr (is_recursive_v<M>) {
      std::unique_lock<M> a(m);
      std::unique_lock<M> b(m);  // the owner again
      CHECK(b.owns_lock());
    }
    if constexpr (is_timed_v<M>) {
      usched::channel<int> locked(1), release(1);
      auto holder = usched::spawn([&] {
        std::lock_guard<M> g(m);
        locked.send(1);
        (void)release.recv();
      });
      (void)locked.recv();
      const auto t0 = std::chrono::steady_clock::now();
      CHECK_FALSE(m.try_lock_for(5ms));
      CHECK(std::chrono::steady_clock::now() - t0 >= 5ms);  // never early
      CHECK_FALSE(m.try_lock_until(std::chrono::steady_clock::now() + 2ms));
      // Released while the timed attempt waits: it takes the lock.
      wait_probe waiting;
      auto waiter = usched::spawn([&] {
        waiting.attach();
        if (!m.try_lock_until(std::chrono::steady_clock::now() + 10s)) return false;
        m.unlock();
        return true;
      });
      REQUIRE(yield_until([&] { return waiting.blocked_in(wait_kind::mutex); }));
      release.send(1);
      CHECK(waiter.join());
      holder.join();
    }
  });
}

TEMPLATE_TEST_CASE("mutexes: a mutex may be destroyed by the fiber an unlock handed it to", "[mutex][stress]",
                   usched::mutex, usched::timed_mutex) {
  // std's rule (and POSIX's): the last user may destroy a mutex right after
  // its own unlock, even while the unlock that handed it the lock is still
  // returning. Under AddressSanitizer a use after free in unlock() fails.
  usched::runtime rt(usched::test::make_options("cfs", 2));
  rt.run([] {
    const int rounds = 2000 / static_cast<int>(usched::test::volume_divisor);
    int done = 0;
    for (int i = 0; i < rounds; ++i) {
      auto* m = new TestType;
      m->lock();
      auto last = usched::spawn([m] {
        m->lock();  // contended: the unlock below has to wake this one
        m->unlock();
        delete m;
      });
      if (i % 2 == 0) usched::this_fiber::yield();
      m->unlock();
      last.join();
      ++done;
    }
    CHECK(done == rounds);
  });
}
