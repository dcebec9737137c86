// channel's timed, stoppable and status-reporting operations, range-for,
// move-only and throwing-move element types, and usched::select, each
// multi-fiber case under every policy with 1, 2, 4 and 8 workers. Catch2's
// assertions are not thread-safe: fibers record what happened and the
// run() fiber (one at a time with the test's thread) checks it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <usched/usched.hpp>

#include "test_support.hpp"

using namespace std::chrono_literals;
using usched::channel_status;
using usched::test::all_configs;
using usched::test::label;

namespace {

using clock_type = std::chrono::steady_clock;

// Yields until `done()` or `limit` has passed; returns done(). Bounds a
// wait for something another fiber does, so a bug fails the check instead
// of hanging the suite; it orders nothing.
template <class Done>
bool yield_until(Done done, std::chrono::milliseconds limit = 10s) {
  const auto end = clock_type::now() + limit;
  while (!done()) {
    if (clock_type::now() > end) return false;
    usched::this_fiber::yield();
  }
  return true;
}

// A value whose move constructor throws when told to: always for a
// `poisoned` one (it never leaves its sender), or for the n-th move from
// now anywhere (`fail_move_in`, for single-fiber tests only).
struct fragile {
  static inline std::atomic<int> fail_move_in{0};

  int id = 0;
  bool poisoned = false;

  fragile() = default;
  explicit fragile(int i, bool p = false) : id(i), poisoned(p) {}
  fragile(const fragile&) = delete;
  fragile& operator=(const fragile&) = delete;
  fragile(fragile&& o) : id(o.id), poisoned(o.poisoned) {
    if (o.poisoned) throw std::runtime_error("poisoned move");
    if (fail_move_in.load(std::memory_order_relaxed) > 0 && fail_move_in.fetch_sub(1) == 1) {
      throw std::runtime_error("armed move");
    }
    o.id = -1;  // moved from
  }
  fragile& operator=(fragile&& o) noexcept {
    id = o.id;
    poisoned = o.poisoned;
    o.id = -1;
    return *this;
  }
};

template <class F>
std::chrono::nanoseconds timed(F&& f) {
  const auto t0 = clock_type::now();
  f();
  return clock_type::now() - t0;
}

}  // namespace

static_assert(std::input_iterator<usched::channel<int>::iterator>);
static_assert(std::input_iterator<usched::channel<std::unique_ptr<int>>::iterator>);
static_assert(std::sentinel_for<std::default_sentinel_t, usched::channel<int>::iterator>);

TEST_CASE("channel: timed send and recv time out on a full or empty channel and succeed when they can",
          "[channel][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    for (std::size_t cap : {0u, 1u, 4u}) {
      INFO("capacity=" << cap);
      usched::channel<int> ch(cap);
      // Nothing to receive: the wait lasts at least its time, then gives up.
      usched::recv_result<int> r;
      const auto waited = timed([&] { r = ch.recv_for(2ms); });
      CHECK(r.status() == channel_status::timeout);
      CHECK_FALSE(r);
      CHECK(waited >= 2ms);
      CHECK(ch.recv_until(clock_type::now() + 1ms).status() == channel_status::timeout);
      CHECK(ch.recv_until(std::chrono::system_clock::now() + 1ms).status() == channel_status::timeout);
      // A deadline already past gives up without blocking.
      CHECK(ch.recv_for(-1s).status() == channel_status::timeout);
      CHECK(ch.recv_until(clock_type::time_point::min()).status() == channel_status::timeout);
      // Fill the buffer; one more send has no room and nobody to take it.
      for (std::size_t i = 0; i < cap; ++i) CHECK(ch.send_for(static_cast<int>(i), 1s) == channel_status::ok);
      const auto send_waited = timed([&] { CHECK(ch.send_for(99, 2ms) == channel_status::timeout); });
      CHECK(send_waited >= 2ms);
      CHECK(ch.send_until(99, std::chrono::system_clock::now() + 1ms) == channel_status::timeout);
      CHECK(ch.size() == cap);
      // The timed-out sends left nothing behind: exactly what was sent.
      for (std::size_t i = 0; i < cap; ++i) {
        auto v = ch.recv_for(0s);  // ready now: a zero timeout still takes it
        REQUIRE(v);
        CHECK(*v == static_cast<int>(i));
      }
      CHECK(ch.try_recv_status().status() == channel_status::empty);

      // Succeeding: a receiver blocked with a long timeout gets a value sent
      // while it waits; a sender blocked on a full channel gets room.
      std::optional<usched::recv_result<int>> got;
      auto receiver = usched::spawn([&] { got = ch.recv_for(10s); });
      CHECK(ch.send_for(7, 10s) == channel_status::ok);
      receiver.join();
      REQUIRE(got.has_value());
      CHECK(got->status() == channel_status::ok);
      CHECK(**got == 7);
      for (std::size_t i = 0; i < cap; ++i) CHECK(ch.try_send(100));
      channel_status sent = channel_status::empty;
      auto sender = usched::spawn([&] { sent = ch.send_until(8, clock_type::now() + 10s); });
      std::vector<int> drained;
      for (std::size_t i = 0; i <= cap; ++i) drained.push_back(*ch.recv_for(10s));
      sender.join();
      CHECK(sent == channel_status::ok);
      CHECK(drained.back() == 8);
      CHECK(ch.size() == 0);
    }
  });
}

// Boost.Fiber's buffered_channel and unbuffered_channel tests for the
// timed operations: push_wait_for / push_wait_until on a full or closed
// channel, pop_wait_for / value_pop_wait_for on an empty or closed one, and
// a pop_wait_for that a push from another fiber satisfies.
TEST_CASE("channel: Boost.Fiber's push_wait_for and pop_wait_for cases", "[channel][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    for (std::size_t cap : {0u, 2u}) {
      INFO("capacity=" << cap);
      {  // test_push_wait_for: room (or a receiver) within the time
        usched::channel<int> ch(cap);
        auto r = usched::spawn([&] { return ch.recv_for(10s).value(); });
        CHECK(ch.send_for(1, 10s) == channel_status::ok);
        CHECK(r.join() == 1);
      }
      {  // test_push_wait_for_closed / test_push_wait_until_closed
        usched::channel<int> ch(cap);
        ch.close();
        CHECK(ch.send_for(1, 1ms) == channel_status::closed);
        CHECK(ch.send_until(1, clock_type::now() + 1ms) == channel_status::closed);
      }
      {  // test_push_wait_for_timeout: full (or nobody receiving)
        usched::channel<int> ch(cap);
        for (std::size_t i = 0; i < cap; ++i) CHECK(ch.try_send(1));
        CHECK(ch.send_for(2, 1ms) == channel_status::timeout);
        CHECK(ch.send_until(2, clock_type::now() + 1ms) == channel_status::timeout);
      }
      {  // test_pop_wait_for / test_value_pop_wait_for: a push arrives
        usched::channel<int> ch(cap);
        auto s = usched::spawn([&] { return ch.send_for(3, 10s); });
        auto v = ch.recv_for(10s);
        CHECK(v.status() == channel_status::ok);
        CHECK(v.value() == 3);
        CHECK(s.join() == channel_status::ok);
      }
      {  // test_pop_wait_for_closed: closed while waiting, and closed after a buffered value
        usched::channel<int> ch(cap);
        auto r = usched::spawn([&] { return ch.recv_for(10s).status(); });
        // The receiver ends with closed whether it blocked before the close or not.
        ch.close();
        CHECK(r.join() == channel_status::closed);
        if (cap > 0) {
          usched::channel<int> b(cap);
          CHECK(b.try_send(4));
          b.close();
          auto v = b.recv_for(1ms);  // drains before it reports closed
          CHECK(v.status() == channel_status::ok);
          CHECK(*v == 4);
          CHECK(b.recv_for(1ms).status() == channel_status::closed);
          CHECK(b.recv_until(clock_type::now() + 1ms).status() == channel_status::closed);
        }
      }
      {  // test_pop_wait_for_timeout / test_value_pop_wait_until_timeout
        usched::channel<int> ch(cap);
        CHECK(ch.recv_for(1ms).status() == channel_status::timeout);
        CHECK(ch.recv_until(clock_type::now() + 1ms).status() == channel_status::timeout);
      }
    }
  });
}

TEST_CASE("channel: the status tells full and empty from closed", "[channel]") {
  // No blocking here: the calls work the same on a plain thread.
  usched::channel<int> ch(2);
  CHECK(ch.try_recv_status().status() == channel_status::empty);
  CHECK(ch.try_send_status(1) == channel_status::ok);
  CHECK(ch.try_send_status(2) == channel_status::ok);
  CHECK(ch.try_send_status(3) == channel_status::full);
  CHECK_FALSE(ch.try_send(3));
  ch.close();
  CHECK(ch.try_send_status(3) == channel_status::closed);
  CHECK(ch.send_for(3, 1s) == channel_status::closed);
  CHECK_FALSE(ch.send(3));
  // Closed but not drained: the values are still there, then closed.
  auto a = ch.try_recv_status();
  CHECK(a.status() == channel_status::ok);
  CHECK(*a == 1);
  CHECK(ch.recv_for(1s).value() == 2);
  CHECK(ch.try_recv_status().status() == channel_status::closed);
  CHECK(ch.recv_for(1s).status() == channel_status::closed);
  CHECK_FALSE(ch.try_recv().has_value());
  CHECK_FALSE(ch.recv().has_value());

  usched::channel<int> rendezvous(0);
  CHECK(rendezvous.try_send_status(1) == channel_status::full);  // nobody receiving
  CHECK(rendezvous.try_recv_status().status() == channel_status::empty);
}

TEST_CASE("channel: a value that was not sent stays with the caller", "[channel][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::channel<std::unique_ptr<int>> ch(1);
    auto p = std::make_unique<int>(1);
    CHECK(ch.send(std::move(p)));
    CHECK(p == nullptr);  // delivered: moved from
    auto q = std::make_unique<int>(2);
    // Full: timeout, try, and stop all leave q where it was.
    CHECK(ch.send_for(std::move(q), 1ms) == channel_status::timeout);
    REQUIRE(q != nullptr);
    CHECK(ch.send_until(std::move(q), clock_type::now()) == channel_status::timeout);
    REQUIRE(q != nullptr);
    CHECK_FALSE(ch.try_send(std::move(q)));
    CHECK(ch.try_send_status(std::move(q)) == channel_status::full);
    REQUIRE(q != nullptr);
    std::stop_source stop;
    channel_status st = channel_status::ok;
    usched::wait_group about_to_block(1);
    auto s = usched::spawn([&] {
      about_to_block.done();
      st = ch.send(std::move(q), stop.get_token());
    });
    // Mostly while it blocks (always with one worker), at times just
    // before: stopped either way.
    about_to_block.wait();
    stop.request_stop();
    s.join();
    CHECK(st == channel_status::stopped);
    REQUIRE(q != nullptr);
    CHECK(*q == 2);
    // The retry with the same value succeeds once there is room.
    CHECK(*ch.recv().value() == 1);
    CHECK(ch.send_for(std::move(q), 1s) == channel_status::ok);
    CHECK(q == nullptr);
    // Closed: a blocked sender gets closed and keeps its value.
    auto r = std::make_unique<int>(3);
    bool sent = true;
    auto blocked = usched::spawn([&] { sent = ch.send(std::move(r)); });
    ch.close();
    blocked.join();
    CHECK_FALSE(sent);
    REQUIRE(r != nullptr);
    CHECK(*r == 3);
    CHECK(*ch.recv().value() == 2);
    CHECK_FALSE(ch.recv().has_value());
    // An lvalue is copied, so the caller always keeps it.
    usched::channel<std::string> strings(1);
    std::string s1 = "kept";
    CHECK(strings.send(s1));
    CHECK(s1 == "kept");
  });
}

TEST_CASE("channel: a stop request ends a blocked send or recv, and only that one", "[channel]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::channel<int> empty(0), full(1);
    CHECK(full.try_send(0));
    std::stop_source stop;
    std::atomic<int> stopped{0};
    std::array<channel_status, 4> status{};
    usched::wait_group about_to_block(4);
    std::vector<usched::join_handle<void>> hs;
    for (int i = 0; i < 4; ++i) {
      hs.push_back(usched::spawn([&, i] {
        about_to_block.done();
        status[static_cast<std::size_t>(i)] =
            i % 2 == 0 ? empty.recv(stop.get_token()).status() : full.send(i, stop.get_token());
        stopped.fetch_add(1);
      }));
    }
    // An unstoppable receiver on the same channel is not ended by the stop.
    auto plain = usched::spawn([&] { return empty.recv(); });
    // With one worker they are all blocked by now; with more, most are.
    about_to_block.wait();
    stop.request_stop();
    REQUIRE(yield_until([&] { return stopped.load() == 4; }));
    for (auto& h : hs) h.join();
    for (channel_status s : status) CHECK(s == channel_status::stopped);
    // The stopped senders left nothing behind: only the first value.
    CHECK(full.size() == 1);
    CHECK(empty.send(5));
    CHECK(plain.join() == 5);
    // Stop requested already: a value that is there is still taken.
    CHECK(full.recv(stop.get_token()).value() == 0);
    CHECK(full.recv(stop.get_token()).status() == channel_status::stopped);
    CHECK(full.send(1, stop.get_token()) == channel_status::ok);
    CHECK(full.send(2, stop.get_token()) == channel_status::stopped);
  });
}

TEST_CASE("channel: range-for receives every value until the channel is closed and drained", "[channel]") {
  const auto c = GENERATE(from_range(all_configs()));
  const std::size_t cap = GENERATE(0u, 8u);
  INFO(label(c) << " capacity=" << cap);
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr int producers = 4, consumers = 3;
  const int per_producer = 1000 / static_cast<int>(usched::test::volume_divisor);
  std::vector<std::atomic<int>> seen(static_cast<std::size_t>(producers * per_producer));
  rt.run([&] {
    usched::channel<std::unique_ptr<int>> ch(cap);
    usched::wait_group sent;
    std::vector<usched::join_handle<void>> hs;
    for (int p = 0; p < producers; ++p) {
      sent.add();
      hs.push_back(usched::spawn([&, p] {
        for (int i = 0; i < per_producer; ++i) ch.send(std::make_unique<int>(p * per_producer + i));
        sent.done();
      }));
    }
    std::vector<usched::join_handle<long>> counts;
    for (int k = 0; k < consumers; ++k) {
      counts.push_back(usched::spawn([&] {
        long n = 0;
        for (std::unique_ptr<int> v : ch) {  // a move-only T: the loop owns each one
          seen[static_cast<std::size_t>(*v)].fetch_add(1);
          ++n;
        }
        return n;
      }));
    }
    sent.wait();
    ch.close();
    for (auto& h : hs) h.join();
    long total = 0;
    for (auto& h : counts) total += h.join();
    CHECK(total == producers * per_producer);
    // A closed, drained channel is an empty range.
    CHECK((ch.begin() == ch.end()));
  });
  CHECK(std::all_of(seen.begin(), seen.end(), [](const std::atomic<int>& n) { return n.load() == 1; }));

  // A copyable T, and a range that ends only once what was buffered is out.
  usched::channel<int> ints(4);
  for (int i = 0; i < 4; ++i) ints.send(i);
  ints.close();
  std::vector<int> got;
  for (int v : ints) got.push_back(v);
  CHECK(got == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("channel: a move that throws into or out of the buffer leaves the channel as it was", "[channel]") {
  {
    usched::channel<fragile> ch(2);
    CHECK(ch.try_send(fragile(1)));
    fragile bad(2, true);
    CHECK_THROWS_WITH(ch.try_send(std::move(bad)), "poisoned move");
    CHECK_THROWS_WITH(ch.send(std::move(bad)), "poisoned move");
    CHECK_THROWS_WITH(ch.send_for(std::move(bad), 1ms), "poisoned move");
    CHECK(bad.id == 2);  // still the caller's
    CHECK(ch.size() == 1);
    CHECK(ch.try_send(fragile(3)));
    // The move of the front value out to the receiver throws: it stays at
    // the front, and the next receive gets it.
    fragile::fail_move_in = 1;
    CHECK_THROWS_WITH(ch.try_recv(), "armed move");
    CHECK(ch.size() == 2);
    fragile::fail_move_in = 1;
    CHECK_THROWS_WITH(ch.recv_for(1ms), "armed move");
    fragile::fail_move_in = 1;
    CHECK_THROWS_WITH(ch.begin(), "armed move");
    CHECK(ch.size() == 2);
    auto a = ch.try_recv();
    REQUIRE(a);
    CHECK(a->id == 1);
    CHECK(ch.recv()->id == 3);
    CHECK(ch.size() == 0);
    fragile::fail_move_in = 0;
  }
}

TEST_CASE("channel: a move that throws between blocked fibers throws to the sender, who keeps the value",
          "[channel]") {
  {
    const auto c = GENERATE(from_range(all_configs()));
    INFO(label(c));
    usched::runtime rt(usched::test::make_options(c.policy, c.workers));
    rt.run([] {
      for (std::size_t cap : {0u, 1u}) {
        INFO("capacity=" << cap);
        usched::channel<fragile> ch(cap);
        // A sender blocked behind a full buffer (or waiting for a receiver)
        // with a value that throws: the receiver that frees the slot (or
        // takes from it) gets the next good value; the sender gets the
        // exception and keeps its value. (If the receiver comes first, the
        // sender's own move throws: the outcome is the same.)
        if (cap > 0) CHECK(ch.try_send(fragile(1)));
        std::atomic<bool> threw{false};
        int kept = 0;
        auto bad_sender = usched::spawn([&] {
          fragile bad(2, true);
          try {
            ch.send(std::move(bad));
          } catch (const std::runtime_error&) {
            threw = true;
          }
          kept = bad.id;
        });
        if (cap > 0) {
          CHECK(ch.recv()->id == 1);
        } else {
          // A rendezvous: try until the sender is there and has thrown.
          bool got_one = false;
          REQUIRE(yield_until([&] {
            if (ch.try_recv().has_value()) got_one = true;
            return threw.load();
          }));
          CHECK_FALSE(got_one);
        }
        bad_sender.join();
        CHECK(threw.load());
        CHECK(kept == 2);
        CHECK(ch.size() == 0);
        // A receiver blocked while a bad value is sent: the sender throws,
        // the receiver waits on and gets the next good value.
        auto receiver = usched::spawn([&] { return ch.recv_for(10s)->id; });
        fragile bad(3, true);
        CHECK_THROWS_WITH(ch.send(std::move(bad)), "poisoned move");
        CHECK(bad.id == 3);
        CHECK(ch.send(fragile(4)));
        CHECK(receiver.join() == 4);
        CHECK(ch.size() == 0);
      }
    });
  }
}

TEST_CASE("channel: with throwing moves, every good value is received once and every bad one thrown once",
          "[channel]") {
  {
    const auto c = GENERATE(from_range(all_configs()));
    const std::size_t cap = GENERATE(0u, 1u, 8u);
    INFO(label(c) << " capacity=" << cap);
    usched::runtime rt(usched::test::make_options(c.policy, c.workers));
    constexpr int producers = 4, consumers = 4;
    const int per_producer = 600 / static_cast<int>(usched::test::volume_divisor);
    const auto bad = [](int id) { return id % 7 == 3; };
    std::vector<std::atomic<int>> received(static_cast<std::size_t>(producers * per_producer));
    std::vector<std::atomic<int>> thrown(received.size());
    std::atomic<int> wrong{0};
    rt.run([&] {
      usched::channel<fragile> ch(cap);
      usched::wait_group sent;
      std::vector<usched::join_handle<void>> hs;
      for (int p = 0; p < producers; ++p) {
        sent.add();
        hs.push_back(usched::spawn([&, p] {
          for (int i = 0; i < per_producer; ++i) {
            const int id = p * per_producer + i;
            fragile v(id, bad(id));
            try {
              if (!ch.send(std::move(v))) wrong.fetch_add(1);
            } catch (const std::runtime_error&) {
              if (v.id != id) wrong.fetch_add(1);  // not kept
              thrown[static_cast<std::size_t>(id)].fetch_add(1);
            }
          }
          sent.done();
        }));
      }
      for (int k = 0; k < consumers; ++k) {
        hs.push_back(usched::spawn([&] {
          for (;;) {
            auto r = ch.recv_for(10s);
            if (r.status() == channel_status::closed) break;
            if (!r) {
              wrong.fetch_add(1);  // a timeout: a value went missing
              break;
            }
            received[static_cast<std::size_t>(r->id)].fetch_add(1);
          }
        }));
      }
      sent.wait();
      ch.close();
      for (auto& h : hs) h.join();
      CHECK(ch.size() == 0);
    });
    CHECK(wrong.load() == 0);
    int mismatches = 0;
    for (std::size_t id = 0; id < received.size(); ++id) {
      const bool is_bad = bad(static_cast<int>(id));
      if (received[id].load() != (is_bad ? 0 : 1) || thrown[id].load() != (is_bad ? 1 : 0)) ++mismatches;
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("select: 8 producers and 8 consumers over 4 channels deliver every item exactly once", "[select]") {
  const auto c = GENERATE(from_range(all_configs()));
  const std::size_t cap = GENERATE(0u, 2u);
  INFO(label(c) << " capacity=" << cap);
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr int producers = 8, consumers = 8, channels = 4;
  const int per_producer = 400 / static_cast<int>(usched::test::volume_divisor);
  std::vector<std::atomic<int>> seen(static_cast<std::size_t>(producers * per_producer));
  std::atomic<int> wrong{0};
  std::array<std::atomic<long>, channels> via{};
  rt.run([&] {
    std::array<usched::channel<int>, channels> ch = {usched::channel<int>(cap), usched::channel<int>(cap),
                                                     usched::channel<int>(cap), usched::channel<int>(cap)};
    usched::wait_group sent;
    std::vector<usched::join_handle<void>> hs;
    for (int p = 0; p < producers; ++p) {
      sent.add();
      hs.push_back(usched::spawn([&, p] {
        auto& a = ch[static_cast<std::size_t>(p % channels)];
        auto& b = ch[static_cast<std::size_t>((p + 1) % channels)];
        for (int i = 0; i < per_producer; ++i) {
          // Both cases refer to the one value; only the case taken moves it.
          int v = p * per_producer + i;
          bool ok = false;
          const std::size_t k = usched::select(usched::on_send(a, std::move(v), [&](bool s) { ok = s; }),
                                               usched::on_send(b, std::move(v), [&](bool s) { ok = s; }));
          if (!ok || k > 1) wrong.fetch_add(1);
        }
        sent.done();
      }));
    }
    for (int k = 0; k < consumers; ++k) {
      hs.push_back(usched::spawn([&] {
        // Until every channel has been seen closed (and so drained).
        std::array<bool, channels> done{};
        while (!std::all_of(done.begin(), done.end(), [](bool d) { return d; })) {
          auto on = [&](std::size_t j) {
            return usched::on_recv(ch[j], [&, j](std::optional<int> v) {
              if (!v) {
                done[j] = true;
                return;
              }
              via[j].fetch_add(1);
              seen[static_cast<std::size_t>(*v)].fetch_add(1);
            });
          };
          usched::select(on(0), on(1), on(2), on(3));
        }
      }));
    }
    sent.wait();
    for (auto& x : ch) x.close();
    for (auto& h : hs) h.join();
  });
  CHECK(wrong.load() == 0);
  CHECK(std::all_of(seen.begin(), seen.end(), [](const std::atomic<int>& n) { return n.load() == 1; }));
  long total = 0;
  for (auto& n : via) total += n.load();
  CHECK(total == producers * per_producer);
  // Every channel carried some: each is one of the two of two producers.
  for (auto& n : via) CHECK(n.load() > 0);
}

TEST_CASE("select: two cases always ready are both taken a fair share", "[select]") {
  usched::runtime rt(usched::test::make_options("cfs", 2));
  auto share = [] {
    usched::channel<int> a(1), b(1);
    a.send(0);
    b.send(0);
    constexpr int rounds = 1000;
    std::array<int, 3> taken{};
    for (int i = 0; i < rounds; ++i) {
      // Both buffered: both ready; refill the one taken.
      const std::size_t k = usched::select(usched::on_recv(a, [&](std::optional<int>) { a.send(0); }),
                                           usched::on_recv(b, [&](std::optional<int>) { b.send(0); }),
                                           usched::on_default([] {}));
      ++taken[k];
    }
    return taken;
  };
  // Uniform choice: each of the two is a Binomial(1000, 1/2); below 250 is
  // beyond 15 standard deviations. The default is never taken while a case
  // is ready.
  for (const auto& taken : {rt.run(share), share()}) {  // from a fiber and from this thread
    CHECK(taken[0] >= 250);
    CHECK(taken[1] >= 250);
    CHECK(taken[2] == 0);
  }
}

TEST_CASE("select: timeout, default, and a case that becomes ready while it waits", "[select][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::channel<int> ints(0);
    usched::channel<std::string> strings(1);
    CHECK(strings.try_send("full"));
    // Nothing ready: the timeout is taken, after its time.
    bool timed_out = false;
    std::size_t k = 9;
    const auto waited = timed([&] {
      k = usched::select(usched::on_recv(ints, [](std::optional<int>) {}),
                         usched::on_send(strings, std::string("x")), usched::on_timeout(2ms, [&] { timed_out = true; }));
    });
    CHECK(k == 2);
    CHECK(timed_out);
    CHECK(waited >= 2ms);
    CHECK(strings.size() == 1);  // the send case did not send
    // The same with a time point of another clock, and one already past.
    CHECK(usched::select(usched::on_recv(ints, [] {}),
                         usched::on_timeout(std::chrono::system_clock::now() + 1ms, [] {})) == 1);
    CHECK(usched::select(usched::on_recv(ints, [] {}), usched::on_timeout(-1ms, [] {})) == 1);
    // A default is taken at once when nothing is ready, never otherwise.
    bool dflt = false;
    CHECK(usched::select(usched::on_recv(ints, [] {}), usched::on_default([&] { dflt = true; })) == 1);
    CHECK(dflt);
    std::string got;
    CHECK(usched::select(usched::on_default([] {}),
                         usched::on_recv(strings, [&](std::optional<std::string> s) { got = s.value(); })) == 1);
    CHECK(got == "full");
    // A case that becomes ready while the select waits: a value sent by
    // another fiber, and room made by another fiber, of different types.
    CHECK(strings.try_send("again"));
    auto sender = usched::spawn([&] { return ints.send(42); });
    int v = 0;
    k = usched::select(usched::on_recv(ints, [&](std::optional<int> x) { v = x.value_or(-1); }),
                       usched::on_timeout(10s, [] {}));
    CHECK(k == 0);
    CHECK(v == 42);
    CHECK(sender.join());
    auto receiver = usched::spawn([&] {
      std::string first = *strings.recv();
      return first + *strings.recv();
    });
    std::string mine = "mine";
    bool sent = false;
    k = usched::select(usched::on_send(strings, std::move(mine), [&](bool s) { sent = s; }),
                       usched::on_recv(ints, [] {}), usched::on_timeout(10s, [] {}));
    CHECK(k == 0);
    CHECK(sent);
    CHECK(receiver.join() == "againmine");
    // A select with only a timeout sleeps.
    CHECK(timed([] { usched::select(usched::on_timeout(1ms, [] {})); }) >= 1ms);
  });
}

TEST_CASE("select: closed channels make their cases ready", "[select]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    usched::channel<int> open(0), closed(0);
    closed.close();
    std::optional<int> got = 5;
    CHECK(usched::select(usched::on_recv(open, [] {}),
                         usched::on_recv(closed, [&](std::optional<int> v) { got = v; })) == 1);
    CHECK_FALSE(got.has_value());
    bool sent = true;
    auto p = std::make_unique<int>(1);
    usched::channel<std::unique_ptr<int>> closed_ptrs(1);
    closed_ptrs.close();
    CHECK(usched::select(usched::on_recv(open, [] {}),
                         usched::on_send(closed_ptrs, std::move(p), [&](bool s) { sent = s; })) == 1);
    CHECK_FALSE(sent);
    CHECK(p != nullptr);  // not sent: still ours
    // One channel in two receive cases, then in a send and a receive case:
    // one case taken each time, with what it found.
    usched::channel<int> one(1);
    CHECK(one.try_send(7));
    int first = 0, second = 0;
    const std::size_t k = usched::select(usched::on_recv(one, [&](std::optional<int> v) { first = v.value_or(-1); }),
                                         usched::on_recv(one, [&](std::optional<int> v) { second = v.value_or(-1); }));
    CHECK(first + second == 7);
    CHECK((k == 0 ? first : second) == 7);
    CHECK(usched::select(usched::on_send(one, 8), usched::on_recv(one, [] {}), usched::on_default([] {})) == 0);
    CHECK(usched::select(usched::on_send(one, 9), usched::on_recv(one, [] {}), usched::on_default([] {})) == 1);
    CHECK(one.size() == 0);
    // Closed while the select waits on it (and on another channel).
    usched::channel<int> a(0), b(0);
    auto waiting = usched::spawn([&] {
      int which = -1;
      bool empty = false;
      usched::select(usched::on_recv(a, [&](std::optional<int> v) { which = 0;
        empty = !v; }),
                     usched::on_recv(b, [&](std::optional<int> v) { which = 1;
        empty = !v; }));
      return empty ? which : -1;
    });
    b.close();
    CHECK(waiting.join() == 1);
    // A send case blocked on a full channel when it is closed: not sent,
    // and the value is still the sender's.
    usched::channel<std::unique_ptr<int>> full(1);
    CHECK(full.try_send(std::make_unique<int>(0)));
    usched::wait_group about_to_block(1);
    auto blocked_sender = usched::spawn([&] {
      auto mine = std::make_unique<int>(6);
      int result = -1;
      about_to_block.done();
      usched::select(usched::on_send(full, std::move(mine), [&](bool s) { result = s ? 1 : 0; }),
                     usched::on_recv(a, [&] { result = 2; }));
      return result == 0 && mine != nullptr && *mine == 6;
    });
    about_to_block.wait();
    full.close();
    CHECK(blocked_sender.join());
    CHECK(*full.recv().value() == 0);  // what was buffered is still received
    CHECK_FALSE(full.recv().has_value());
    // The waiter it left on `a` is gone: a send there finds nobody.
    CHECK(a.try_send_status(1) == channel_status::full);
  });
}

TEST_CASE("select: a stop request ends a blocked select, and it works from plain threads", "[select]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  usched::channel<int> ch(0);
  usched::channel<long> longs(0);
  std::stop_source stop;
  std::size_t fiber_took = 9;
  usched::wait_group about_to_block(1);
  auto stopped = rt.spawn([&] {
    about_to_block.done();
    fiber_took = usched::select(usched::on_recv(ch, [] {}), usched::on_recv(longs, [] {}),
                                usched::on_stop(stop.get_token(), [] {}));
  });
  about_to_block.wait();
  stop.request_stop();
  stopped.join();
  CHECK(fiber_took == 2);
  // Nothing it left behind takes a value: a rendezvous send finds nobody.
  CHECK(ch.try_send_status(1) == channel_status::full);
  // A plain thread selecting against fibers sending on two channels.
  constexpr int n = 200;
  auto senders = rt.spawn([&] {
    auto a = usched::spawn([&] {
      for (int i = 0; i < n; ++i) ch.send(i);
    });
    auto b = usched::spawn([&] {
      for (int i = 0; i < n; ++i) longs.send(i);
    });
    a.join();
    b.join();
  });
  long sum = 0;
  int received = 0;
  std::thread t([&] {
    while (received < 2 * n) {
      usched::select(usched::on_recv(ch, [&](std::optional<int> v) { sum += v.value_or(-1000000); }),
                     usched::on_recv(longs, [&](std::optional<long> v) { sum += v.value_or(-1000000); }));
      ++received;
    }
  });
  t.join();
  senders.join();
  CHECK(sum == 2L * (n * (n - 1) / 2));
}

// Timers race with hand-offs here on purpose: producers retry short timed
// sends with the value they kept, consumers select with short timeouts, and
// the channels are closed while some of them wait. A waker that loses the
// claim to a timer must pass the item on, and close() must pass over a
// waiter a timer already ended: every item arrives exactly once.
TEST_CASE("select and timed operations racing with timeouts and close lose and duplicate nothing",
          "[channel][select][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  const std::size_t cap = GENERATE(0u, 1u);
  INFO(label(c) << " capacity=" << cap);
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  constexpr int producers = 4, consumers = 4;
  const int per_producer = 300 / static_cast<int>(usched::test::volume_divisor);
  std::vector<std::atomic<int>> seen(static_cast<std::size_t>(producers * per_producer));
  std::atomic<int> wrong{0};
  std::atomic<long> timeouts{0};
  rt.run([&] {
    usched::channel<std::unique_ptr<int>> a(cap), b(cap);
    usched::wait_group sent;
    std::vector<usched::join_handle<void>> hs;
    for (int p = 0; p < producers; ++p) {
      sent.add();
      hs.push_back(usched::spawn([&, p] {
        auto& ch = p % 2 == 0 ? a : b;
        for (int i = 0; i < per_producer; ++i) {
          auto v = std::make_unique<int>(p * per_producer + i);
          channel_status s;
          while ((s = ch.send_for(std::move(v), 20us)) == channel_status::timeout) {
            if (v == nullptr) wrong.fetch_add(1);  // a timed-out send consumed it
            timeouts.fetch_add(1, std::memory_order_relaxed);
          }
          if (s != channel_status::ok || v != nullptr) wrong.fetch_add(1);
        }
        sent.done();
      }));
    }
    for (int k = 0; k < consumers; ++k) {
      hs.push_back(usched::spawn([&] {
        bool a_done = false, b_done = false;
        auto take = [&](bool& done) {
          return [&](std::optional<std::unique_ptr<int>> v) {
            if (!v) {
              done = true;
            } else {
              seen[static_cast<std::size_t>(**v)].fetch_add(1);
            }
          };
        };
        while (!a_done || !b_done) {
          usched::select(usched::on_recv(a, take(a_done)), usched::on_recv(b, take(b_done)),
                         usched::on_timeout(15us, [&] { timeouts.fetch_add(1, std::memory_order_relaxed); }));
        }
      }));
    }
    // Plain timed receivers that the close ends, racing their own timers.
    std::atomic<int> ended{0};
    for (int k = 0; k < 4; ++k) {
      hs.push_back(usched::spawn([&] {
        usched::channel<int> never(0);
        for (;;) {
          const auto r = never.recv_for(10us);
          if (r.status() != channel_status::timeout) wrong.fetch_add(1);
          if (a.closed()) break;
        }
        ended.fetch_add(1);
      }));
    }
    sent.wait();
    a.close();
    b.close();
    for (auto& h : hs) h.join();
    CHECK(ended.load() == 4);
  });
  CHECK(wrong.load() == 0);
  CHECK(std::all_of(seen.begin(), seen.end(), [](const std::atomic<int>& n) { return n.load() == 1; }));
}

TEST_CASE("channel: close ends timed and stoppable waits that race their own timers", "[channel][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  const int rounds = 40 / static_cast<int>(usched::test::volume_divisor);
  std::atomic<int> wrong{0};
  rt.run([&] {
    for (int round = 0; round < rounds; ++round) {
      // Receivers on an empty channel, senders on a full one: nothing ever
      // completes, so every wait ends by its timer, the close or the stop.
      usched::channel<int> ch(0), full(1);
      CHECK(full.try_send(0));
      std::stop_source stop;
      std::vector<usched::join_handle<void>> hs;
      for (int k = 0; k < 6; ++k) {
        hs.push_back(usched::spawn([&, k] {
          // Each waits until close (or, for the stoppable ones, the stop
          // that follows it), with timers expiring all along.
          for (;;) {
            channel_status s = k % 3 == 0   ? ch.recv_for(5us).status()
                               : k % 3 == 1 ? full.send_for(k, 5us)
                                            : ch.recv(stop.get_token()).status();
            if (s == channel_status::closed || s == channel_status::stopped) break;
            if (s != channel_status::timeout) wrong.fetch_add(1);
          }
        }));
      }
      usched::this_fiber::yield();
      ch.close();
      full.close();
      stop.request_stop();
      for (auto& h : hs) h.join();
    }
  });
  CHECK(wrong.load() == 0);
}

TEST_CASE("select: a move that throws goes to the value's owner, and a receive case waits on", "[select]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  rt.run([] {
    // A send case whose value throws as it is buffered: select throws, the
    // value is the caller's, the channel unchanged.
    usched::channel<fragile> roomy(1);
    fragile bad(1, true);
    CHECK_THROWS_WITH(usched::select(usched::on_send(roomy, std::move(bad)), usched::on_default([] {})),
                      "poisoned move");
    CHECK(bad.id == 1);
    CHECK(roomy.size() == 0);

    // A blocked send case whose value throws as a receiver takes it: the
    // select rethrows it; the receiver gets nothing.
    usched::channel<fragile> a(0), b(0);
    std::atomic<bool> select_threw{false};
    int kept = 0;
    auto sender = usched::spawn([&] {
      fragile v(2, true);
      try {
        usched::select(usched::on_send(a, std::move(v)), usched::on_timeout(10s, [] {}));
      } catch (const std::runtime_error&) {
        select_threw = true;
      }
      kept = v.id;
    });
    bool got_one = false;
    REQUIRE(yield_until([&] {
      if (a.try_recv().has_value()) got_one = true;
      return select_threw.load();
    }));
    sender.join();
    CHECK_FALSE(got_one);
    CHECK(kept == 2);

    // A receive case claimed by a sender whose value then throws: the
    // sender gets the exception; the select polls again and waits on for
    // the next value, on either channel.
    usched::wait_group about_to_block(1);
    auto receiver = usched::spawn([&] {
      about_to_block.done();
      int id = 0;
      const std::size_t k =
          usched::select(usched::on_recv(a, [&](std::optional<fragile>&& v) { id = v ? v->id : -1; }),
                         usched::on_recv(b, [&](std::optional<fragile>&& v) { id = v ? 100 + v->id : -1; }),
                         usched::on_timeout(10s, [&] { id = -2; }));
      return static_cast<int>(k) * 1000 + id;
    });
    about_to_block.wait();
    fragile poisoned(3, true);
    CHECK_THROWS_WITH(a.send(std::move(poisoned)), "poisoned move");
    CHECK(poisoned.id == 3);
    CHECK(b.send(fragile(4)));
    CHECK(receiver.join() == 1 * 1000 + 104);
  });
}
