// future, shared_future, promise, packaged_task and async: std's contract,
// with fibers and plain threads on either side, under every policy with 1,
// 2, 4 and 8 workers.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <usched/usched.hpp>

#include "test_support.hpp"

using namespace std::chrono_literals;

namespace {

using usched::test::all_configs;
using usched::test::label;

// The error code of the future_error `f` throws; a test failure if it
// throws anything else or nothing.
template <class F>
std::error_code future_error_of(F&& f) {
  try {
    f();
  } catch (const std::future_error& e) {
    return e.code();
  }
  FAIL("no std::future_error thrown");
  return {};
}

// A value whose move constructor throws while `fail` is set.
struct fragile {
  static inline bool fail = false;
  int v = 0;
  explicit fragile(int x) : v(x) {}
  fragile(const fragile&) = delete;
  fragile(fragile&& o) : v(o.v) {
    if (fail) throw std::runtime_error("fragile move");
  }
};

}  // namespace

TEST_CASE("future: value, reference, void and move-only results cross fibers", "[future]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::promise<int> pv;
    usched::promise<int&> pr;
    usched::promise<void> pn;
    usched::promise<std::unique_ptr<int>> pm;
    usched::future<int> fv = pv.get_future();
    usched::future<int&> fr = pr.get_future();
    usched::future<void> fn = pn.get_future();
    usched::future<std::unique_ptr<int>> fm = pm.get_future();
    int target = 0;
    // Consumers first, so that most of them block before the producer runs.
    auto cv = usched::spawn([&] { return fv.get(); });
    auto cr = usched::spawn([&] { return &fr.get(); });
    auto cn = usched::spawn([&] {
      fn.get();
      return 1;
    });
    auto cm = usched::spawn([&] { return *fm.get(); });
    auto producer = usched::spawn([&] {
      pv.set_value(42);
      pr.set_value(target);
      pn.set_value();
      pm.set_value(std::make_unique<int>(7));
    });
    producer.join();
    CHECK(cv.join() == 42);
    CHECK(cr.join() == &target);
    CHECK(cn.join() == 1);
    CHECK(cm.join() == 7);
    CHECK_FALSE(fv.valid());
    CHECK_FALSE(fm.valid());
  });
}

TEST_CASE("future: exceptions and broken promises reach get()", "[future]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::promise<int> pe;
    auto fe = pe.get_future();
    auto waiter = usched::spawn([&]() -> std::string {
      try {
        fe.get();
      } catch (const std::runtime_error& e) {
        return e.what();
      }
      return "no exception";
    });
    usched::spawn([&] {
      // The temporary runtime_error shares its message with the stored copy
      // (libstdc++'s refcounted string): it is gone before the waiter runs.
      std::exception_ptr e = std::make_exception_ptr(std::runtime_error("boom"));
      pe.set_exception(std::move(e));
    }).join();
    CHECK(waiter.join() == "boom");

    // A promise destroyed unset, on another fiber, while this one waits.
    auto pb = std::make_unique<usched::promise<std::string>>();
    auto fb = pb->get_future();
    auto dropper = usched::spawn([p = std::move(pb)]() mutable { p.reset(); });
    CHECK(future_error_of([&] { fb.get(); }) == usched::future_errc::broken_promise);
    dropper.join();

    // The same through a shared_future, and a packaged_task never run.
    usched::shared_future<void> sb;
    {
      usched::promise<void> p;
      sb = p.get_future().share();
    }
    CHECK(future_error_of([&] { sb.get(); }) == std::future_errc::broken_promise);
    CHECK(future_error_of([&] { sb.get(); }) == std::future_errc::broken_promise);
    usched::future<int> ft;
    {
      usched::packaged_task<int()> t([] { return 1; });
      ft = t.get_future();
    }
    CHECK(future_error_of([&] { ft.get(); }) == usched::future_errc::broken_promise);
  });
}

TEST_CASE("future: std's error codes for misuse", "[future]") {
  usched::promise<int> p;
  auto f = p.get_future();
  CHECK(future_error_of([&] { (void)p.get_future(); }) == usched::future_errc::future_already_retrieved);
  p.set_value(5);
  CHECK(future_error_of([&] { p.set_value(6); }) == usched::future_errc::promise_already_satisfied);
  CHECK(future_error_of([&] { p.set_exception(std::make_exception_ptr(1)); }) ==
        usched::future_errc::promise_already_satisfied);
  CHECK(f.valid());
  CHECK(f.get() == 5);
  CHECK_FALSE(f.valid());
  CHECK(future_error_of([&] { f.get(); }) == usched::future_errc::no_state);
  CHECK(future_error_of([&] { f.wait(); }) == usched::future_errc::no_state);

  // valid() is false after a get() that threw, too.
  usched::promise<void> pe;
  auto fe = pe.get_future();
  pe.set_exception(std::make_exception_ptr(std::logic_error("x")));
  CHECK_THROWS_AS(fe.get(), std::logic_error);
  CHECK_FALSE(fe.valid());

  // A moved-from promise has no state.
  usched::promise<int> moved = std::move(p);
  CHECK(future_error_of([&] { p.set_value(1); }) == usched::future_errc::no_state);  // NOLINT: use after move is the test
  CHECK(future_error_of([&] { (void)moved.get_future(); }) == usched::future_errc::future_already_retrieved);
  CHECK_FALSE(usched::future<int>().valid());
  CHECK_FALSE(usched::shared_future<int>().valid());

  // The shared state from an allocator.
  static_assert(std::uses_allocator_v<usched::promise<int>, std::allocator<int>>);
  usched::promise<int> pa(std::allocator_arg, std::allocator<int>{});
  auto fpa = pa.get_future();
  pa.set_value(3);
  CHECK(fpa.get() == 3);

  // swap exchanges the states.
  usched::promise<int> a, b;
  auto fa = a.get_future();
  swap(a, b);
  b.set_value(9);
  CHECK(fa.get() == 9);
  CHECK(a.get_future().valid());
}

TEST_CASE("future: a value whose move throws leaves the promise unset", "[future]") {
  usched::promise<fragile> p;
  auto f = p.get_future();
  fragile v(3);
  fragile::fail = true;
  CHECK_THROWS_WITH(p.set_value(std::move(v)), "fragile move");
  fragile::fail = false;
  CHECK(f.wait_for(0s) == usched::future_status::timeout);
  p.set_value(fragile(4));
  CHECK(f.wait_for(0s) == usched::future_status::ready);
  CHECK(f.get().v == 4);
}

TEST_CASE("future: wait_for and wait_until time out, then see the value", "[future][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::promise<int> p;
    auto f = p.get_future();
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(f.wait_for(1ms) == usched::future_status::timeout);
    // A wait never ends early.
    CHECK(std::chrono::steady_clock::now() - t0 >= 1ms);
    CHECK(f.wait_until(std::chrono::system_clock::now() + 1ms) == usched::future_status::timeout);
    CHECK(f.wait_until(std::chrono::system_clock::now() - 1h) == usched::future_status::timeout);
    CHECK(f.wait_for(-1s) == usched::future_status::timeout);
    // The value is set while we wait with a long timeout: ready, not a timeout.
    auto setter = usched::spawn([&] { p.set_value(11); });
    CHECK(f.wait_until(std::chrono::system_clock::now() + 1h) == usched::future_status::ready);
    CHECK(f.wait_for(0s) == usched::future_status::ready);
    CHECK(f.wait_for(std::chrono::seconds::max()) == usched::future_status::ready);
    CHECK(f.get() == 11);
    setter.join();
  });
  // On a plain thread too.
  usched::promise<int> p;
  auto f = p.get_future();
  CHECK(f.wait_for(1ms) == usched::future_status::timeout);
  auto setter = rt.spawn([&] { p.set_value(12); });
  CHECK(f.wait_for(1h) == usched::future_status::ready);
  CHECK(f.get() == 12);
  setter.join();
}

TEST_CASE("shared_future: many fiber and thread waiters each get the value once", "[future]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr int fibers = 64, threads = 3;
  usched::promise<std::string> p;
  const usched::shared_future<std::string> sf = p.get_future().share();
  usched::wait_group arrived(fibers + threads);
  std::vector<std::atomic<int>> got(fibers + threads);
  std::atomic<const std::string*> where{nullptr};
  std::atomic<int> elsewhere{0};
  // (Catch's assertions are for the test's own thread: the waiters count.)
  auto waiter = [&](int i, usched::shared_future<std::string> mine) {
    arrived.add(-1);
    const std::string& v = mine.get();
    const std::string* expected = nullptr;
    // Every copy refers to the same value in the one state.
    if (!where.compare_exchange_strong(expected, &v) && expected != &v) elsewhere.fetch_add(1);
    if (v == "hello" && &v == &mine.get()) got[i].fetch_add(1);
  };
  std::vector<usched::join_handle<void>> fs;
  for (int i = 0; i < fibers; ++i) fs.push_back(rt.spawn(waiter, i, sf));
  std::vector<std::thread> ts;
  for (int i = fibers; i < fibers + threads; ++i) ts.emplace_back(waiter, i, sf);
  // The value is set from a fiber once every waiter is about to wait.
  rt.spawn([&] {
     arrived.wait();
     p.set_value("hello");
   }).join();
  for (auto& h : fs) h.join();
  for (auto& t : ts) t.join();
  for (int i = 0; i < fibers + threads; ++i) {
    INFO("waiter " << i);
    CHECK(got[i].load() == 1);
  }
  CHECK(elsewhere.load() == 0);
  CHECK(&sf.get() == where.load());
}

TEST_CASE("future: a thread sets what fibers wait for, a thread waits for a fiber", "[future]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr int waiters = 16;
  usched::promise<int> from_thread;
  usched::shared_future<int> sf = from_thread.get_future().share();
  std::vector<usched::join_handle<int>> hs;
  for (int i = 0; i < waiters; ++i) hs.push_back(rt.spawn([sf, i] { return sf.get() + i; }));
  std::thread setter([&] { from_thread.set_value(100); });
  int sum = 0;
  for (auto& h : hs) sum += h.join();
  setter.join();
  CHECK(sum == waiters * 100 + waiters * (waiters - 1) / 2);

  // The other way: a plain thread blocks on a promise a fiber sets.
  usched::promise<std::unique_ptr<int>> from_fiber;
  auto f = from_fiber.get_future();
  int seen = 0;
  std::thread waiter([&] { seen = *f.get(); });
  rt.spawn([&] { from_fiber.set_value(std::make_unique<int>(5)); }).join();
  waiter.join();
  CHECK(seen == 5);
  CHECK_FALSE(f.valid());
}

TEST_CASE("packaged_task: results, exceptions, reset, misuse", "[future]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::packaged_task<int(int, int)> add([](int a, int b) { return a + b; });
    CHECK(add.valid());
    auto f1 = add.get_future();
    CHECK(future_error_of([&] { (void)add.get_future(); }) == usched::future_errc::future_already_retrieved);
    // Run on another fiber; the result comes back here.
    usched::spawn([&] { add(2, 3); }).join();
    CHECK(f1.get() == 5);
    CHECK(future_error_of([&] { add(1, 1); }) == usched::future_errc::promise_already_satisfied);
    add.reset();
    CHECK(add.valid());
    auto f2 = add.get_future();
    auto runner = usched::spawn([&] { add(10, 20); });
    CHECK(f2.get() == 30);
    runner.join();

    // A reset before the task ran breaks the old future.
    add.reset();
    auto f3 = add.get_future();
    add.reset();
    CHECK(future_error_of([&] { f3.get(); }) == usched::future_errc::broken_promise);

    // Exceptions go to the future; a move-only callable; a reference result.
    usched::packaged_task<void(bool)> thrower([](bool t) {
      if (t) throw std::out_of_range("thrown by the task");
    });
    auto ft = thrower.get_future();
    thrower(true);
    CHECK_THROWS_AS(ft.get(), std::out_of_range);
    auto owned = std::make_unique<int>(8);
    int* raw = owned.get();
    usched::packaged_task<int&()> ref([o = std::move(owned)]() -> int& { return *o; });
    auto fr = ref.get_future();
    usched::spawn([t = std::move(ref)]() mutable { t(); }).join();
    CHECK(&fr.get() == raw);

    // The deduction guides, and a task moved and swapped.
    usched::packaged_task deduced([](long x) { return x * 2; });
    static_assert(std::is_same_v<decltype(deduced), usched::packaged_task<long(long)>>);
    usched::packaged_task<long(long)> other;
    CHECK_FALSE(other.valid());
    CHECK(future_error_of([&] { other(1); }) == usched::future_errc::no_state);
    other.swap(deduced);
    CHECK_FALSE(deduced.valid());
    auto fd = other.get_future();
    other(21);
    CHECK(fd.get() == 42);
  });
}

TEST_CASE("async: values, move-only values, void and exceptions", "[future]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    const usched::fiber_id me = usched::this_fiber::get_id();
    auto fv = usched::async([](int a, int b) { return a * b; }, 6, 7);
    auto fm = usched::async([](std::unique_ptr<int> p) { return p; }, std::make_unique<int>(3));
    std::atomic<int> ran{0};
    auto fn = usched::async(std::launch::async, [&] { ran.fetch_add(1); });
    auto fe = usched::async([]() -> int { throw std::invalid_argument("from async"); });
    // A fiber of its own, not the caller.
    auto fid = usched::async([] { return usched::this_fiber::get_id(); });
    CHECK(fv.get() == 42);
    CHECK(*fm.get() == 3);
    fn.get();
    CHECK(ran.load() == 1);
    CHECK_THROWS_WITH(fe.get(), "from async");
    const usched::fiber_id other = fid.get();
    CHECK(other != me);
    CHECK(other != usched::fiber_id{});
    // shared_future of an async result.
    usched::shared_future<std::string> sf = usched::async([] { return std::string("shared"); }).share();
    CHECK(usched::async([sf] { return sf.get().size(); }).get() == 6);
    CHECK(sf.get() == "shared");
  });
  // From a plain thread: async on a runtime; the plain form has no runtime.
  auto f = usched::async(rt, [](int x) { return x + 1; }, 1);
  CHECK(f.get() == 2);
  CHECK_THROWS_AS((void)usched::async([] { return 1; }), std::logic_error);
}

TEST_CASE("async: launch::deferred runs on the first wait, on the waiter", "[future]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    std::atomic<int> runs{0};
    auto f = usched::async(std::launch::deferred, [&](int x) {
      runs.fetch_add(1);
      return std::make_pair(x, usched::this_fiber::get_id());
    }, 4);
    usched::this_fiber::yield();
    CHECK(runs.load() == 0);
    CHECK(f.wait_for(1ms) == usched::future_status::deferred);
    CHECK(f.wait_until(std::chrono::steady_clock::now()) == usched::future_status::deferred);
    const auto [x, who] = f.get();
    CHECK(x == 4);
    CHECK(who == usched::this_fiber::get_id());
    CHECK(runs.load() == 1);

    // Shared by many fibers: one of them runs it, once; all see the result.
    runs = 0;
    usched::shared_future<int> sf = usched::async(std::launch::deferred, [&] {
      runs.fetch_add(1);
      return 9;
    }).share();
    std::vector<usched::join_handle<int>> hs;
    for (int i = 0; i < 8; ++i) hs.push_back(usched::spawn([sf] { return sf.get(); }));
    int sum = 0;
    for (auto& h : hs) sum += h.join();
    CHECK(sum == 72);
    CHECK(runs.load() == 1);
    CHECK(sf.wait_for(0s) == usched::future_status::ready);

    // Never waited on: never run.
    runs = 0;
    { auto dropped = usched::async(std::launch::deferred, [&] { runs.fetch_add(1); }); }
    CHECK(runs.load() == 0);
  });
}

TEST_CASE("async: dropping the future waits for the fiber, which runs once", "[future]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::promise<void> dropping;
    usched::promise<void> gate;
    std::atomic<bool> done{false};
    // Opens the gate only once we have started to drop the future: if the
    // drop did not wait, it would return with the fiber still at the gate.
    auto opener = usched::spawn([&, d = dropping.get_future()]() mutable {
      d.get();
      gate.set_value();
    });
    {
      auto f = usched::async([&, g = gate.get_future()]() mutable {
        g.get();
        done = true;
      });
      dropping.set_value();
    }
    CHECK(done.load());
    opener.join();

    // Futures discarded at once: each fiber still runs exactly once.
    constexpr int n = 200;
    std::vector<std::atomic<int>> runs(n);
    for (int i = 0; i < n; ++i) {
      (void)usched::async([&runs, i] { runs[i].fetch_add(1); });
    }
    int once = 0;
    for (auto& r : runs) once += r.load() == 1;
    CHECK(once == n);
  });
}

TEST_CASE("async: a fan-out of 1000 calls sums exactly", "[future]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr std::uint64_t n = 1000 / usched::test::volume_divisor;
  const std::uint64_t sum = rt.run([] {
    std::vector<usched::future<std::uint64_t>> fs;
    fs.reserve(n);
    for (std::uint64_t i = 0; i < n; ++i) fs.push_back(usched::async([i] { return i * i; }));
    std::uint64_t s = 0;
    for (auto& f : fs) s += f.get();
    return s;
  });
  CHECK(sum == (n - 1) * n * (2 * n - 1) / 6);
}

TEST_CASE("promise: racing setters, exactly one wins and its value is the result", "[future]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr int rounds = 50 / usched::test::volume_divisor, setters = 8;
  for (int r = 0; r < rounds; ++r) {
    usched::promise<int> p;
    auto f = p.get_future();
    std::atomic<int> winner{-1};
    std::atomic<int> refused{0};
    std::vector<usched::join_handle<void>> hs;
    for (int i = 0; i < setters; ++i) {
      hs.push_back(rt.spawn([&, i] {
        try {
          p.set_value(i);
          winner = i;
        } catch (const usched::future_error& e) {
          if (e.code() == usched::future_errc::promise_already_satisfied) refused.fetch_add(1);
        }
      }));
    }
    const int v = f.get();
    for (auto& h : hs) h.join();
    INFO("round " << r);
    CHECK(refused.load() == setters - 1);
    CHECK(v == winner.load());
  }
}

TEST_CASE("future: timed waiters racing the setter all see the value", "[future][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr int rounds = 20 / usched::test::volume_divisor, waiters = 16;
  for (int r = 0; r < rounds; ++r) {
    usched::promise<int> p;
    const usched::shared_future<int> sf = p.get_future().share();
    std::vector<usched::join_handle<int>> hs;
    for (int i = 0; i < waiters; ++i) {
      // Short timed waits, some ending in a timeout, some in the value, some
      // at the same moment as it; then the value, exactly once.
      hs.push_back(rt.spawn([sf, i] {
        while (sf.wait_for(std::chrono::microseconds(1 + i * 7)) != usched::future_status::ready) {
        }
        return sf.get();
      }));
    }
    rt.spawn([&, r] {
      usched::this_fiber::yield();
      p.set_value(r);
    }).join();
    int sum = 0;
    for (auto& h : hs) sum += h.join();
    INFO("round " << r);
    CHECK(sum == waiters * r);
  }
}
