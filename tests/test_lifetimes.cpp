// test_lifetimes.cpp: what outlives what. A join_handle or an async future
// outlives its runtime and still gives the result; a finished fiber costs
// its join state, not its stack; a fiber that spawns without waiting
// cannot run ahead of its children by more than the spawn backlog. Every
// policy at 1 and 2 workers.
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <usched/usched.hpp>

#include "runtime_impl.hpp"
#include "test_support.hpp"
#include "worker.hpp"

namespace {

// A result too big for the cached join state block: the state is a heap
// allocation of its own size.
struct big_result {
  char bytes[200];
  int value;
};

}  // namespace

TEST_CASE("lifetimes: join handles declared before their runtime give the results after it is gone",
          "[runtime][join]") {
  const auto c = GENERATE(from_range(usched::test::one_and_two_worker_configs()));
  INFO(usched::test::label(c));
  constexpr int n = 300;
  std::vector<usched::join_handle<int>> values;
  std::vector<usched::join_handle<std::string>> strings;
  std::vector<usched::join_handle<void>> voids;
  usched::join_handle<big_result> big;
  usched::join_handle<int> thrower;
  usched::join_handle<int&> ref;
  usched::join_handle<int> stoppable;
  usched::join_handle<int> unjoined_detach;
  std::vector<usched::fiber_id> ids;
  int target = 41;
  std::atomic<int> voids_ran{0};
  {
    usched::runtime rt(usched::test::make_options(c.policy, c.workers));
    for (int i = 0; i < n; ++i) {
      values.push_back(rt.spawn([i] {
        usched::this_fiber::yield();
        return i;
      }));
      ids.push_back(values.back().id());
      strings.push_back(rt.spawn([i] { return std::string(100, static_cast<char>('a' + i % 26)); }));
      voids.push_back(rt.spawn([&voids_ran] { voids_ran++; }));
    }
    big = rt.spawn([] {
      big_result r{};
      r.bytes[199] = 'z';
      r.value = 7;
      return r;
    });
    thrower = rt.spawn([]() -> int { throw std::runtime_error("from a fiber of a runtime now gone"); });
    ref = rt.spawn([&target]() -> int& { return target; });
    stoppable = rt.spawn([](std::stop_token st) { return st.stop_requested() ? 1 : 2; });
    unjoined_detach = rt.spawn([] { return 3; });
    // Some are joined while the runtime lives, some after.
    for (int i = 0; i < n; i += 2) CHECK(values[static_cast<std::size_t>(i)].join() == i);
  }
  CHECK(voids_ran.load() == n);
  for (int i = 1; i < n; i += 2) {
    auto& h = values[static_cast<std::size_t>(i)];
    REQUIRE(h.joinable());
    CHECK(h.done());
    CHECK(h.id() == ids[static_cast<std::size_t>(i)]);
    CHECK(h.try_join() == std::optional<int>(i));
    CHECK_FALSE(h.joinable());
  }
  for (int i = 0; i < n; ++i) {
    auto& s = strings[static_cast<std::size_t>(i)];
    CHECK(s.done());
    CHECK(s.join() == std::string(100, static_cast<char>('a' + i % 26)));
    CHECK(voids[static_cast<std::size_t>(i)].join_for(std::chrono::seconds(0)));
  }
  const big_result b = big.join();
  CHECK(b.value == 7);
  CHECK(b.bytes[199] == 'z');
  CHECK_THROWS_WITH(thrower.join(), "from a fiber of a runtime now gone");
  CHECK(&ref.join() == &target);
  // The stop state lives in the join state: asking a finished fiber to stop
  // is allowed, and changes nothing.
  CHECK(stoppable.get_stop_token().stop_possible());
  CHECK(stoppable.request_stop());
  CHECK(stoppable.join() == 2);
  unjoined_detach.detach();
  CHECK_FALSE(unjoined_detach.joinable());
}

TEST_CASE("lifetimes: a class whose handle member is declared before its runtime member", "[runtime][join]") {
  const auto c = GENERATE(from_range(usched::test::one_and_two_worker_configs()));
  INFO(usched::test::label(c));
  struct service {
    usched::join_handle<int> worker;  // destroyed after rt: detaches a finished fiber's state
    usched::runtime rt;
    explicit service(const usched::test::config& cfg) : rt(usched::test::make_options(cfg.policy, cfg.workers)) {
      worker = rt.spawn([] { return 5; });
    }
  };
  auto s = std::make_unique<service>(c);
  CHECK(s->worker.join() == 5);
  s->worker = s->rt.spawn([] { return 6; });
  s.reset();  // rt goes first; the handle, joinable, detaches after it
  SUCCEED();
}

TEST_CASE("lifetimes: an async future outlives its runtime", "[runtime][future]") {
  const auto c = GENERATE(from_range(usched::test::one_and_two_worker_configs()));
  INFO(usched::test::label(c));
  usched::future<int> plain;
  usched::future<std::string> text;
  usched::shared_future<int> shared;
  usched::future<int> failing;
  {
    usched::runtime rt(usched::test::make_options(c.policy, c.workers));
    plain = usched::async(rt, [] { return 11; });
    text = usched::async(rt, [] { return std::string("after the runtime"); });
    shared = usched::async(rt, [] { return 12; }).share();
    failing = usched::async(rt, []() -> int { throw std::logic_error("async, runtime gone"); });
  }
  CHECK(plain.valid());
  CHECK(plain.wait_for(std::chrono::seconds(0)) == usched::future_status::ready);
  CHECK(plain.get() == 11);
  CHECK(text.get() == "after the runtime");
  CHECK(shared.get() == 12);
  CHECK_THROWS_WITH(failing.get(), "async, runtime gone");
}

TEST_CASE("lifetimes: a finished fiber gives its stack back before it is joined", "[runtime][join]") {
  // 20000 fibers spawned with their handles kept, then joined: their stacks
  // go back to the pool as each returns, so the pool maps what the spawn
  // backlog (1,024 queued) and the workers' caches (64 each) hold, at most
  // 1,152 here, not a stack per handle (20,000 before).
  const auto c = GENERATE(from_range(usched::test::one_and_two_worker_configs()));
  INFO(usched::test::label(c));
  constexpr long n = 20'000;
  usched::detail::stack_pool::ledger books;
  long sum = 0;
  {
    usched::runtime rt(usched::test::make_options(c.policy, c.workers));
    usched::detail::runtime_impl* impl = rt.run([] { return &usched::detail::worker_of_this_thread()->rt(); });
    impl->record_books_at_teardown(&books);
    sum = rt.run([] {
      std::vector<usched::join_handle<long>> hs;
      hs.reserve(n);
      for (long i = 0; i < n; ++i) hs.push_back(usched::spawn([i] { return i; }));
      long s = 0;
      for (auto& h : hs) s += h.join();
      return s;
    });
  }
  CHECK(sum == n * (n - 1) / 2);
  INFO("stacks mapped " << books.mapped);
  CHECK(books.handed_out == books.returned);
  CHECK(books.mapped <= 2048);
}
