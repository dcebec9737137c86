// usched::select over futures (on_ready), alone and beside channel cases,
// under every policy with 1 and 2 workers: a future made ready by another
// fiber, by a plain thread and by an async fiber; a channel case taken while
// a future case waits (the future still usable after); exceptions, rethrown
// at the case's get() or in its callback; a future ready at the call; the
// deadline and the stop request.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <usched/usched.hpp>

#include "test_support.hpp"

using namespace std::chrono_literals;

namespace {

using usched::test::config;
using usched::test::label;

using usched::test::one_and_two_worker_configs;

// A channel nobody sends on: its receive case is never ready.
struct silent {
  usched::channel<int> ch{0};
};

// Waits, yielding, until `flag` is set: the setter of a future runs once the
// select has started (on one worker, once it has blocked: a fiber runs only
// when the one before it blocks or yields).
void yield_until_set(const std::atomic<bool>& flag) {
  while (!flag.load(std::memory_order_acquire)) usched::this_fiber::yield();
}

}  // namespace

TEST_CASE("select: a future made ready by another fiber is taken with its value", "[select][future]") {
  const auto c = GENERATE(from_range(one_and_two_worker_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    silent never;
    usched::promise<int> p;
    usched::future<int> f = p.get_future();
    std::atomic<bool> selecting{false};
    auto setter = usched::spawn([&] {
      yield_until_set(selecting);
      p.set_value(42);
    });
    int got = 0;
    selecting.store(true, std::memory_order_release);
    const std::size_t k = usched::select(usched::on_recv(never.ch, [] {}),
                                         usched::on_ready(f, [&](int v) { got = v; }));
    setter.join();
    CHECK(k == 1);
    CHECK(got == 42);
    // The result form called get(): the future is spent.
    CHECK_FALSE(f.valid());
  });
}

TEST_CASE("select: a future made ready by a plain thread wakes a blocked select", "[select][future]") {
  const auto c = GENERATE(from_range(one_and_two_worker_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    silent never;
    usched::promise<std::string> p;
    usched::future<std::string> f = p.get_future();
    std::thread producer([&] { p.set_value("from a thread"); });
    std::string got;
    const std::size_t k = usched::select(usched::on_ready(f, [&](std::string v) { got = std::move(v); }),
                                         usched::on_recv(never.ch, [] {}));
    producer.join();
    CHECK(k == 0);
    CHECK(got == "from a thread");
  });
}

TEST_CASE("select: an async fiber's future, and a shared_future of one, are taken when it returns",
          "[select][future]") {
  const auto c = GENERATE(from_range(one_and_two_worker_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    silent never;
    std::atomic<bool> selecting{false};
    usched::future<int> f = usched::async([&] {
      yield_until_set(selecting);
      return 7;
    });
    selecting.store(true, std::memory_order_release);
    int got = 0;
    CHECK(usched::select(usched::on_recv(never.ch, [] {}), usched::on_ready(f, [&](int v) { got = v; })) == 1);
    CHECK(got == 7);

    // A shared_future gives its result by const reference and stays valid:
    // a second select over it is ready at once.
    const usched::shared_future<std::string> s = usched::async([] { return std::string("shared"); }).share();
    std::string first;
    CHECK(usched::select(usched::on_ready(s, [&](const std::string& v) { first = v; }),
                         usched::on_recv(never.ch, [] {})) == 0);
    CHECK(first == "shared");
    CHECK(s.valid());
    CHECK(usched::select(usched::on_recv(never.ch, [] {}), usched::on_ready(s, [] {}),
                         usched::on_default([] {})) == 1);
    CHECK(s.get() == "shared");
  });
}

TEST_CASE("select: a channel case taken while a future case waits leaves the future usable", "[select][future]") {
  const auto c = GENERATE(from_range(one_and_two_worker_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::channel<int> numbers(0);
    usched::promise<int> p;
    usched::future<int> f = p.get_future();
    std::atomic<bool> selecting{false};
    auto sender = usched::spawn([&] {
      yield_until_set(selecting);
      numbers.send(5);
    });
    std::optional<int> received;
    bool future_case = false;
    selecting.store(true, std::memory_order_release);
    const std::size_t k = usched::select(usched::on_ready(f, [&] { future_case = true; }),
                                         usched::on_recv(numbers, [&](std::optional<int> v) { received = v; }));
    sender.join();
    CHECK(k == 1);
    CHECK(received == 5);
    CHECK_FALSE(future_case);
    // The future case's waiter is gone from the state: the result set now
    // reaches only the future, which is still valid.
    REQUIRE(f.valid());
    p.set_value(9);
    CHECK(f.get() == 9);

    // The same with the value already buffered when the select is made.
    usched::channel<int> buffered(1);
    buffered.send(6);
    usched::promise<int> q;
    usched::future<int> g = q.get_future();
    CHECK(usched::select(usched::on_ready(g, [] {}), usched::on_recv(buffered, [] {})) == 1);
    REQUIRE(g.valid());
    q.set_value(10);
    CHECK(usched::select(usched::on_ready(g, [](int v) { CHECK(v == 10); }), usched::on_recv(buffered, [] {})) == 0);
  });
}

TEST_CASE("select: a future's exception is rethrown by its case's get() or in its callback", "[select][future]") {
  const auto c = GENERATE(from_range(one_and_two_worker_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    silent never;
    // The result form: the case's get() rethrows from select, and the
    // future is spent.
    usched::promise<int> p;
    usched::future<int> f = p.get_future();
    std::atomic<bool> selecting{false};
    auto thrower = usched::spawn([&] {
      yield_until_set(selecting);
      // Made before it is published: the runtime_error temporary (which
      // shares its message with the copy in the exception_ptr) is gone by
      // then, so no copy of the message is released on this fiber while
      // the selecting one reads it (libstdc++'s reference count on the
      // message is not instrumented, and ThreadSanitizer would take the
      // release for a race).
      std::exception_ptr e = std::make_exception_ptr(std::runtime_error("no result"));
      p.set_exception(std::move(e));
    });
    selecting.store(true, std::memory_order_release);
    bool called = false;
    CHECK_THROWS_WITH(usched::select(usched::on_recv(never.ch, [] {}), usched::on_ready(f, [&](int) { called = true; })),
                      "no result");
    thrower.join();
    CHECK_FALSE(called);
    CHECK_FALSE(f.valid());

    // The future form: the callback's own get() rethrows, in the callback.
    usched::future<void> a = usched::async([] { throw std::logic_error("async failed"); });
    std::string caught;
    const std::size_t k = usched::select(usched::on_ready(a,
                                                          [&](usched::future<void>& fut) {
                                                            try {
                                                              fut.get();
                                                            } catch (const std::logic_error& e) {
                                                              caught = e.what();
                                                            }
                                                          }),
                                         usched::on_recv(never.ch, [] {}));
    CHECK(k == 0);
    CHECK(caught == "async failed");

    // The nothing form leaves the exception in the future, for get().
    usched::promise<int> q;
    usched::future<int> g = q.get_future();
    q.set_exception(std::make_exception_ptr(std::runtime_error("later")));
    CHECK(usched::select(usched::on_ready(g, [] {})) == 0);
    REQUIRE(g.valid());
    CHECK_THROWS_WITH(g.get(), "later");
  });
}

TEST_CASE("select: a future ready at the call is taken at once, before the default", "[select][future]") {
  const auto c = GENERATE(from_range(one_and_two_worker_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    silent never;
    usched::promise<int> p;
    usched::future<int> f = p.get_future();
    p.set_value(3);
    int got = 0;
    CHECK(usched::select(usched::on_recv(never.ch, [] {}), usched::on_default([] {}),
                         usched::on_ready(f, [&](int v) { got = v; })) == 2);
    CHECK(got == 3);

    // A deferred call counts as ready: the case runs it on the caller.
    int runs = 0;
    usched::future<int> d = usched::async(usched::launch::deferred, [&] {
      ++runs;
      return 11;
    });
    CHECK(usched::select(usched::on_ready(d, [&](int v) { got = v; }), usched::on_default([] {})) == 0);
    CHECK(runs == 1);
    CHECK(got == 11);

    // Not ready, with a default: the default, and the future untouched.
    usched::promise<int> q;
    usched::future<int> g = q.get_future();
    CHECK(usched::select(usched::on_ready(g, [] {}), usched::on_default([] {})) == 1);
    CHECK(g.valid());
    q.set_value(4);
    CHECK(g.get() == 4);
  });
}

TEST_CASE("select: a pending future case gives way to a deadline or a stop request", "[select][future]") {
  const auto c = GENERATE(from_range(one_and_two_worker_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::promise<int> p;
    usched::future<int> f = p.get_future();
    // A deadline already passed: the timeout, without suspending.
    CHECK(usched::select(usched::on_ready(f, [] {}), usched::on_timeout(-1ms, [] {})) == 1);
    REQUIRE(f.valid());

    // A stop requested while the select waits: the stop case, and the
    // waiter it left in the future's state is unlinked (the value set after
    // reaches the future alone).
    std::stop_source stop;
    std::atomic<bool> selecting{false};
    auto stopper = usched::spawn([&] {
      yield_until_set(selecting);
      stop.request_stop();
    });
    selecting.store(true, std::memory_order_release);
    CHECK(usched::select(usched::on_stop(stop.get_token(), [] {}), usched::on_ready(f, [] {})) == 0);
    stopper.join();
    p.set_value(8);
    CHECK(f.get() == 8);
  });
}
