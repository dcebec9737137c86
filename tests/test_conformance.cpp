// Conformance: every registered policy, with 1, 2, 4 and 8 workers, must run
// every fiber exactly once, keep every primitive's contract, and give every
// fiber and stack back to its pool by the time the runtime is destroyed.
// The cases that wait on timers are tagged [realtime] (tests/CMakeLists.txt
// says what the label means); no other case waits for a time.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <deque>
#include <exception>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <usched/usched.hpp>

#include "engine.hpp"
#include "policy.hpp"
#include "runtime_impl.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;

namespace {

using usched::test::all_configs;
using usched::test::label;

// pool_books is the check every configuration ends with: every fiber and
// every stack the runtime handed out is back in its pool when it is
// destroyed (marl's tracked allocator, applied to fibers). Made just before
// the runtime it watches, it is destroyed just after it: the runtime's
// destructor writes the stack pool's ledger once its workers have stopped
// and returned their fiber caches, and this destructor checks it.
class pool_books {
 public:
  pool_books() = default;
  pool_books(const pool_books&) = delete;
  pool_books& operator=(const pool_books&) = delete;

  // watch() asks `rt` for its ledger at teardown; the runtime's internals
  // are reached from one of its own fibers.
  void watch(usched::runtime& rt) {
    usched::detail::runtime_impl* impl = rt.run([] { return &usched::detail::worker_of_this_thread()->rt(); });
    impl->record_books_at_teardown(&books_);
    watching_ = true;
  }

  ~pool_books() {
    // A test already failing with an exception has said what went wrong.
    if (!watching_ || std::uncaught_exceptions() > 0) return;
    INFO("stacks mapped " << books_.mapped << ", pooled " << books_.pooled << "; handed out "
                          << books_.handed_out << ", returned " << books_.returned);
    CHECK(books_.handed_out > 0);  // the ledger was written (watch() itself ran a fiber)
    CHECK(books_.handed_out == books_.returned);
    CHECK(books_.pooled == books_.mapped);
  }

 private:
  usched::detail::stack_pool::ledger books_;
  bool watching_ = false;
};

}  // namespace

TEST_CASE("conformance: 200000 spawned and joined fibers give the exact sum", "[conformance]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  pool_books books;
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  books.watch(rt);
  constexpr std::uint64_t total = 200'000 / usched::test::volume_divisor;
  constexpr std::uint64_t batch = 1'000;
  const std::uint64_t sum = rt.run([] {
    std::uint64_t s = 0;
    std::vector<usched::join_handle<std::uint64_t>> hs;
    hs.reserve(batch);
    for (std::uint64_t base = 0; base < total; base += batch) {
      for (std::uint64_t i = base; i < base + batch; ++i) {
        hs.push_back(usched::spawn([i] { return i; }));
      }
      for (auto& h : hs) s += h.join();
      hs.clear();
    }
    return s;
  });
  CHECK(sum == total * (total - 1) / 2);
}

TEST_CASE("conformance: spawning from a plain thread and from fibers", "[conformance]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  pool_books books;
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  books.watch(rt);
  std::vector<usched::join_handle<int>> hs;
  for (int i = 0; i < 1000; ++i) {
    hs.push_back(rt.spawn([i] {
      auto inner = usched::spawn([i] { return 2 * i; });
      return inner.join() + 1;
    }));
  }
  long sum = 0;
  for (auto& h : hs) sum += h.join();
  CHECK(sum == 999L * 1000 + 1000);
}

TEST_CASE("conformance: ping-pong between fibers on different workers", "[conformance]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  pool_books books;
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  books.watch(rt);
  const int last = static_cast<int>(c.workers) - 1;
  usched::channel<int> ping(0), pong(0);
  constexpr int rounds = 5'000 / usched::test::volume_divisor;
  auto a = rt.spawn(usched::spawn_options{0}, [&] {
    int bad = 0;
    for (int i = 0; i < rounds; ++i) {
      ping.send(i);
      bad += pong.recv().value() != i + 1;
      bad += usched::this_fiber::worker_index() != 0;
    }
    ping.close();
    return bad;
  });
  auto b = rt.spawn(usched::spawn_options{last}, [&] {
    int n = 0;
    while (auto v = ping.recv()) {
      pong.send(*v + 1);
      n += usched::this_fiber::worker_index() == last;
    }
    return n;
  });
  CHECK(a.join() == 0);
  CHECK(b.join() == rounds);
}

TEST_CASE("conformance: 1000 fibers x 1000 increments under usched::mutex", "[conformance]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  pool_books books;
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  books.watch(rt);
  usched::mutex m;
  long counter = 0;
  rt.run([&] {
    std::vector<usched::join_handle<void>> hs;
    for (int f = 0; f < 1000; ++f) {
      hs.push_back(usched::spawn([&] {
        for (int i = 0; i < 1000; ++i) {
          std::lock_guard<usched::mutex> g(m);
          ++counter;
          if (i % 100 == 0) usched::this_fiber::yield();
        }
      }));
    }
    for (auto& h : hs) h.join();
  });
  CHECK(counter == 1'000'000);
}

TEST_CASE("conformance: condition-variable producer/consumer", "[conformance]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  pool_books books;
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  books.watch(rt);
  usched::mutex m;
  usched::condition_variable not_empty, not_full;
  std::deque<int> q;
  constexpr std::size_t bound = 8;
  constexpr int producers = 4, consumers = 3, per_producer = 5'000;
  int producers_left = producers;
  std::vector<int> seen(producers * per_producer, 0);
  rt.run([&] {
    std::vector<usched::join_handle<void>> hs;
    for (int p = 0; p < producers; ++p) {
      hs.push_back(usched::spawn([&, p] {
        for (int i = 0; i < per_producer; ++i) {
          std::unique_lock<usched::mutex> lk(m);
          not_full.wait(lk, [&] { return q.size() < bound; });
          q.push_back(p * per_producer + i);
          not_empty.notify_one();
        }
        std::lock_guard<usched::mutex> lk(m);
        if (--producers_left == 0) not_empty.notify_all();
      }));
    }
    for (int k = 0; k < consumers; ++k) {
      hs.push_back(usched::spawn([&] {
        for (;;) {
          std::unique_lock<usched::mutex> lk(m);
          not_empty.wait(lk, [&] { return !q.empty() || producers_left == 0; });
          if (q.empty()) return;
          ++seen[static_cast<std::size_t>(q.front())];
          q.pop_front();
          not_full.notify_one();
        }
      }));
    }
    for (auto& h : hs) h.join();
  });
  CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
}

TEST_CASE("conformance: MPMC channel delivers every item exactly once", "[conformance]") {
  const auto c = GENERATE(from_range(all_configs()));
  const std::size_t capacity = GENERATE(0u, 1u, 64u);
  INFO(label(c) << " capacity=" << capacity);
  pool_books books;
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  books.watch(rt);
  usched::channel<int> ch(capacity);
  constexpr int producers = 4, consumers = 4, per_producer = 5'000;
  std::vector<std::atomic<int>> seen(producers * per_producer);
  rt.run([&] {
    usched::wait_group sent;
    std::vector<usched::join_handle<void>> hs;
    for (int p = 0; p < producers; ++p) {
      sent.add();
      hs.push_back(usched::spawn([&, p] {
        for (int i = 0; i < per_producer; ++i) ch.send(p * per_producer + i);
        sent.done();
      }));
    }
    for (int k = 0; k < consumers; ++k) {
      hs.push_back(usched::spawn([&] {
        while (auto v = ch.recv()) seen[static_cast<std::size_t>(*v)].fetch_add(1);
      }));
    }
    sent.wait();
    ch.close();
    for (auto& h : hs) h.join();
  });
  CHECK(std::all_of(seen.begin(), seen.end(), [](const std::atomic<int>& n) { return n.load() == 1; }));
  CHECK_FALSE(ch.send(1));
  CHECK_FALSE(ch.recv().has_value());
}

// Timers live in their worker's heap and fire in deadline order. With a FIFO
// runqueue, fibers sleeping on one worker therefore run in deadline order
// whatever the OS does to the worker thread. A fair runqueue runs fibers that
// became runnable together by vruntime (as CFS does), so if the worker thread
// was held off past several deadlines their order may differ; for every
// policy, no fiber ever wakes before its deadline.
TEST_CASE("conformance: sleeping fibers wake in deadline order, never early", "[conformance][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  pool_books books;
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  books.watch(rt);
  const bool fifo = c.policy == "none" || c.policy == "steal";
  usched::mutex m;
  std::vector<int> order;
  std::atomic<int> early{0};
  // Absolute deadlines, fixed before anything is spawned: how late a fiber
  // starts does not change when it is due.
  const auto base = std::chrono::steady_clock::now() + std::chrono::milliseconds(5);
  // A fiber that starts after its deadline (a loaded machine) does not sleep
  // at all; only the ones that did sleep are ordered by their timers.
  auto sleeper = [&](std::chrono::steady_clock::time_point deadline, int k) {
    const bool will_sleep = std::chrono::steady_clock::now() < deadline;
    usched::this_fiber::sleep_until(deadline);
    if (std::chrono::steady_clock::now() < deadline) early.fetch_add(1);
    if (k >= 0 && will_sleep) {
      std::lock_guard<usched::mutex> g(m);
      order.push_back(k);
    }
  };
  rt.run([&] {
    std::vector<usched::join_handle<void>> hs;
    const int last = static_cast<int>(c.workers) - 1;
    for (int k : {4, 1, 3, 0, 2}) {
      hs.push_back(usched::spawn(usched::spawn_options{last}, sleeper,
                                 base + std::chrono::milliseconds(3 * k), k));
    }
    for (int k = 0; k < 16; ++k) {
      hs.push_back(usched::spawn(sleeper, base + std::chrono::microseconds(700 * k), -1));
    }
    for (auto& h : hs) h.join();
  });
  if (fifo) CHECK(std::is_sorted(order.begin(), order.end()));
  CHECK(early.load() == 0);
}

TEST_CASE("conformance: an exception propagates through join", "[conformance]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  pool_books books;
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  books.watch(rt);
  auto h = rt.spawn([]() -> int { throw std::runtime_error("boom"); });
  CHECK_THROWS_WITH(h.join(), "boom");
  CHECK_THROWS_WITH(rt.run([] {
                      auto inner = usched::spawn([] { throw std::out_of_range("inner"); });
                      inner.join();
                    }),
                    "inner");
}

// A pinned fiber comes back to its worker from each way of leaving it: a
// yield, a block on a mutex and a sleep (its timer's wake-up), which is why
// the case runs on the real clock.
TEST_CASE("conformance: pinned fibers only ever run on their worker", "[conformance][realtime]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  pool_books books;
  usched::runtime rt(usched::test::make_options(c.policy, c.workers));
  books.watch(rt);
  std::atomic<int> wrong{0};
  std::atomic<int> runs{0};
  usched::mutex m;
  rt.run([&] {
    std::vector<usched::join_handle<void>> hs;
    for (int f = 0; f < 64; ++f) {
      const int w = f % static_cast<int>(c.workers);
      hs.push_back(usched::spawn(usched::spawn_options{w}, [&, w] {
        for (int i = 0; i < 200; ++i) {
          if (usched::this_fiber::worker_index() != w) wrong.fetch_add(1);
          runs.fetch_add(1);
          switch (i % 3) {
            case 0: usched::this_fiber::yield(); break;
            case 1: { std::lock_guard<usched::mutex> g(m); } break;
            default: usched::this_fiber::sleep_for(std::chrono::microseconds(50)); break;
          }
        }
      }));
    }
    // Unpinned load, so balancing policies have something to move around.
    for (int f = 0; f < 64; ++f) {
      hs.push_back(usched::spawn([] {
        for (int i = 0; i < 100; ++i) usched::this_fiber::yield();
      }));
    }
    for (auto& h : hs) h.join();
  });
  CHECK(wrong.load() == 0);
  CHECK(runs.load() == 64 * 200);
}

namespace {

// A callable whose move constructor blocks: it asks a fiber pinned to one of
// two workers, in turn, for a reply. A spawn moves the callable into its
// fiber between taking the fiber from the pool and starting it, so the
// spawning fiber can go to sleep on one worker there and be woken on
// another, where the spawn must carry on as that worker's.
struct blocking_move {
  usched::channel<int>* req = nullptr;
  usched::channel<int>* rep = nullptr;
  int* moved_across = nullptr;
  std::vector<int>* runs = nullptr;
  int id = 0;

  blocking_move(usched::channel<int>* q, usched::channel<int>* p, int* across, std::vector<int>* r, int i)
      : req(q), rep(p), moved_across(across), runs(r), id(i) {}
  blocking_move(blocking_move&& o) noexcept
      : req(o.req), rep(o.rep), moved_across(o.moved_across), runs(o.runs), id(o.id) {
    const int before = usched::this_fiber::worker_index();
    (void)req->send(id);
    (void)rep->recv();
    if (usched::this_fiber::worker_index() != before) ++*moved_across;
  }
  void operator()() const { ++(*runs)[static_cast<std::size_t>(id)]; }
};

}  // namespace

TEST_CASE("conformance: a spawn whose callable blocks while it is moved into the fiber",
          "[conformance]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  constexpr int n = 200;
  std::vector<int> runs(n, 0);
  int moved_across = 0;
  {
    pool_books books;
    usched::runtime rt(usched::test::make_options(c.policy, c.workers));
    books.watch(rt);
    rt.run([&] {
      usched::channel<int> req[2] = {usched::channel<int>(0), usched::channel<int>(0)};
      usched::channel<int> rep[2] = {usched::channel<int>(0), usched::channel<int>(0)};
      std::vector<usched::join_handle<void>> helpers;
      for (int k = 0; k < 2; ++k) {
        const int w = k == 0 ? 0 : static_cast<int>(c.workers) - 1;
        helpers.push_back(usched::spawn(usched::spawn_options{w}, [&, k] {
          while (auto v = req[k].recv()) (void)rep[k].send(*v);
        }));
      }
      std::vector<usched::join_handle<void>> hs;
      for (int i = 0; i < n; ++i) {
        hs.push_back(usched::spawn(blocking_move(&req[i % 2], &rep[i % 2], &moved_across, &runs, i)));
      }
      for (auto& h : hs) h.join();
      for (auto& q : req) q.close();
      for (auto& h : helpers) h.join();
    });
  }
  // Every fiber ran exactly once, and the runtime's count of live fibers
  // (kept per worker, by the worker that spawned) let it shut down.
  CHECK(std::count(runs.begin(), runs.end(), 1) == n);
  // Under the steal policies a woken fiber continues on its waker's
  // worker: with two workers or more, the spawns did carry on elsewhere.
  if (c.workers > 1 && c.policy.rfind("steal", 0) == 0) CHECK(moved_across > 0);
}

TEST_CASE("conformance: the destructor waits for detached fibers", "[conformance]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  std::atomic<int> finished{0};
  {
    usched::latch go(1);
    pool_books books;
    usched::runtime rt(usched::test::make_options(c.policy, c.workers));
    books.watch(rt);
    // The fibers stay blocked until the scope ends: the latch is counted
    // down on the way out, right before the runtime's destructor, so all
    // of their work (and all of their children) is left for it to wait for.
    struct open_on_exit {
      usched::latch& go;
      ~open_on_exit() { go.count_down(); }
    } opener{go};
    for (int i = 0; i < 100; ++i) {
      rt.spawn([&] {
        go.wait();
        auto child = usched::spawn([&] { finished.fetch_add(1); });
        child.detach();
        finished.fetch_add(1);
      }).detach();
    }
  }
  CHECK(finished.load() == 200);
}

namespace {
// Each link spawns the next and returns at once: at any moment about one
// fiber is alive, and it is always a different one, on any worker.
void spawn_chain(std::atomic<int>& ran, int left) {
  ran.fetch_add(1);
  if (left > 1) usched::spawn([&ran, left] { spawn_chain(ran, left - 1); }).detach();
}
}  // namespace

TEST_CASE("conformance: the destructor waits for a chain of fibers each spawning the next",
          "[conformance]") {
  const auto c = GENERATE(from_range(all_configs()));
  INFO(label(c));
  std::atomic<int> ran{0};
  {
    pool_books books;
    usched::runtime rt(usched::test::make_options(c.policy, c.workers));
    books.watch(rt);
    rt.spawn([&] { spawn_chain(ran, 5000); }).detach();
  }
  CHECK(ran.load() == 5000);
}

// ---- what one worker does with a burst of local spawns (docs/architecture.md) ----

namespace {

// The order in which one worker first runs `n` fibers that the fiber running
// there spawns in a burst before it joins them, derived from the policy's
// queue discipline (usched::policy_traits::discipline):
//  - LIFO: every spawn goes to the front of the queue: newest first.
//  - FIFO: the newest local spawn takes the runnext slot at the head and the
//    one that held it goes to the back: the last spawn first, then the others
//    in spawn order.
//  - fair (CFS): a new fiber starts one slice behind min_vruntime
//    (START_DEBIT), its slice being sched_latency / nr_running while
//    nr_running <= sched_nr_latency, and min_granularity above (nr_running
//    counts the spawner, the fibers already queued and the new one). The
//    slice shrinks as the queue grows, so a smaller debit runs earlier; the
//    spawner's vruntime, and with it min_vruntime, only grows between
//    spawns, so equal debits run in spawn order.
//  - EEVDF: a new fiber has no lag, so it is placed at the queue's
//    average V, with its first deadline half a slice later. V only grows
//    while the spawner runs (it is the one fiber that runs), so each
//    spawn's deadline is at or after the one before: spawn order, equal
//    deadlines first in first out.
// The disciplines that order by virtual time: CFS's fair queue and EEVDF.
bool virtual_time(usched::queue_discipline d) noexcept {
  return d == usched::queue_discipline::fair || d == usched::queue_discipline::eevdf;
}

std::vector<int> expected_spawn_order(const usched::policy& p, const usched::options& o, int n) {
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (p.traits().discipline == usched::queue_discipline::eevdf) return order;
  if (virtual_time(p.traits().discipline)) {
    const auto debit = [&](int i) {
      const auto nr = static_cast<unsigned>(i) + 2;
      const long nr_latency = (o.cfs_latency.count() + o.cfs_min_granularity.count() - 1) / o.cfs_min_granularity.count();
      return nr > nr_latency
                 ? o.cfs_min_granularity.count()
                 : o.cfs_latency.count() / static_cast<long>(nr);
    };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return debit(a) < debit(b); });
  } else if (p.traits().discipline == usched::queue_discipline::lifo) {
    std::reverse(order.begin(), order.end());
  } else {
    std::rotate(order.begin(), order.end() - 1, order.end());
  }
  return order;
}

}  // namespace

TEST_CASE("conformance: one worker runs a burst of local spawns in its discipline's order",
          "[conformance]") {
  const std::string policy = GENERATE(from_range(usched::policy_names()));
  INFO("policy=" << policy);
  usched::options o = usched::test::make_options(policy, 1);
  // Ten times the default CFS period and granularity (same ratio, so the
  // same slices relative to each other): the debits then differ by at least
  // 4 ms, far more than the spawner runs between two spawns, even in a
  // sanitizer build.
  o.cfs_latency = std::chrono::microseconds(240'000);
  o.cfs_min_granularity = std::chrono::microseconds(30'000);
  // The discipline alone: the spawner joins the first fiber, and without
  // the hand-off it only blocks there.
  o.join_handoff = false;
  // Enough fibers for both CFS regimes: debits that shrink, then equal ones.
  constexpr int n = 12;
  pool_books books;
  usched::runtime rt(o);
  books.watch(rt);
  std::vector<int> order;
  rt.run([&] {
    std::vector<usched::join_handle<void>> hs;
    for (int i = 0; i < n; ++i) hs.push_back(usched::spawn([&order, i] { order.push_back(i); }));
    for (auto& h : hs) h.join();
  });
  CHECK(order == expected_spawn_order(*usched::make_policy(policy), o, n));
}

TEST_CASE("conformance: with the join hand-off, one worker runs joined fibers in join order", "[conformance]") {
  const std::string policy = GENERATE(from_range(usched::policy_names()));
  INFO("policy=" << policy);
  usched::options o = usched::test::make_options(policy, 1);
  REQUIRE(o.join_handoff);
  constexpr int n = 12;
  pool_books books;
  usched::runtime rt(o);
  books.watch(rt);
  // -1 marks the joiner running between two joins: each join hands the
  // worker to the joined fiber, its exit hands it back.
  std::vector<int> events;
  rt.run([&] {
    std::vector<usched::join_handle<void>> hs;
    for (int i = 0; i < n; ++i) hs.push_back(usched::spawn([&events, i] { events.push_back(i); }));
    // Joined last first, then the rest in spawn order.
    hs[n - 1].join();
    events.push_back(-1);
    for (int i = 0; i < n - 1; ++i) {
      hs[static_cast<std::size_t>(i)].join();
      events.push_back(-1);
    }
  });
  std::vector<int> expected{n - 1, -1};
  for (int i = 0; i < n - 1; ++i) {
    expected.push_back(i);
    expected.push_back(-1);
  }
  CHECK(events == expected);
  const usched::runtime_stats st = rt.stats();
  CHECK(st.workers.at(0).handoffs == 2 * n);  // a hand-off into each joinee and one back from it
}

TEST_CASE("conformance: a fork-join tree keeps few fibers alive with the join hand-off", "[conformance]") {
  // A 10-ary tree of 10,000 leaves (1,000 under TSan, which counts every
  // live fiber as a thread and stops at 8,128), each level spawning its ten
  // children before joining the first (skynet's shape). Depth-first, each
  // level keeps at most its ten children alive: 10 per level, plus the
  // root. Breadth-first, every leaf would be alive at once.
  const long leaves = 10'000 / static_cast<long>(usched::test::volume_divisor);
  long levels = 0;
  for (long n = leaves; n > 1; n /= 10) ++levels;
  const std::string policy = GENERATE(from_range(usched::policy_names()));
  INFO("policy=" << policy);
  for (const bool handoff : {true, false}) {
    INFO("join_handoff=" << handoff);
    usched::options o = usched::test::make_options(policy, 1);
    o.join_handoff = handoff;
    pool_books books;
    usched::runtime rt(o);
    books.watch(rt);
    // Alive from its spawn to its end: what holds a stack.
    std::atomic<long> live{1};
    std::atomic<long> peak{1};
    struct tree {
      std::atomic<long>& live;
      std::atomic<long>& peak;
      long operator()(long leaves) const {
        long sum = 1;
        if (leaves > 1) {
          std::vector<usched::join_handle<long>> hs;
          for (int i = 0; i < 10; ++i) {
            const long now = live.fetch_add(1) + 1;
            long seen = peak.load();
            while (now > seen && !peak.compare_exchange_weak(seen, now)) {
            }
            hs.push_back(usched::spawn(tree{live, peak}, leaves / 10));
          }
          for (auto& h : hs) sum += h.join();
        }
        live.fetch_sub(1);
        return sum;
      }
    };
    const long fibers = rt.run([&] { return tree{live, peak}(leaves); });
    CHECK(fibers == (leaves * 10 - 1) / 9);  // 1 + 10 + ... + leaves
    if (handoff) {
      CHECK(peak.load() <= 1 + levels * 10);
    } else if (const auto d = usched::make_policy(policy)->traits().discipline; d == usched::queue_discipline::fair) {
      // A fair queue runs the tree breadth-first without it: at least half
      // the leaves are spawned before they run (9,011 with 10,000 leaves,
      // the shrinking START_DEBIT runs some early). The spawn backlog's
      // yield does not change that: each fiber spawns only ten, and a
      // yield under CFS keeps the CPU while the queued fibers' vruntime
      // is more than the wake-up granularity ahead of the yielder's.
      INFO("peak=" << peak.load());
      CHECK(peak.load() >= leaves / 2);
    } else if (d == usched::queue_discipline::fifo) {
      // So does a FIFO queue, as far as the spawn backlog lets it: a
      // spawn that finds 1,024 fibers queued yields to them, so the live
      // fibers are the queue's 1,024 and the parents blocked in their
      // joins, about one for nine queued.
      INFO("peak=" << peak.load());
      CHECK(peak.load() >= std::min(leaves / 2, 1024L));
      CHECK(peak.load() <= 2 * 1024);
    } else if (d == usched::queue_discipline::eevdf) {
      // EEVDF runs it in spawn order (new fibers at V, deadlines half a
      // slice on), breadth-first, and its yield gives the worker away (the
      // yielder's vruntime jumps to its deadline): the spawn backlog caps
      // the queue as FIFO's. The parents blocked in their joins may stay
      // queued a while longer (DELAY_DEQUEUE), so no upper bound here.
      INFO("peak=" << peak.load());
      CHECK(peak.load() >= std::min(leaves / 2, 1024L));
    }
  }
}

TEST_CASE("conformance: a rendezvous send returns once the receiver has the value, before it runs",
          "[conformance]") {
  const std::string policy = GENERATE(from_range(usched::policy_names()));
  INFO("policy=" << policy);
  pool_books books;
  usched::runtime rt(usched::test::make_options(policy, 1));
  books.watch(rt);
  rt.run([] {
    usched::channel<int> ch(0);
    usched::channel<int> ready(1);
    SECTION("the receiver was waiting") {
      bool receiver_ran = false;
      int got = 0;
      auto r = usched::spawn([&] {
        ready.send(1);
        got = *ch.recv();
        receiver_ran = true;
      });
      ready.recv();  // the receiver now waits in ch.recv()
      CHECK(ch.send(42));
      CHECK_FALSE(receiver_ran);
      r.join();
      CHECK(receiver_ran);
      CHECK(got == 42);
    }
    SECTION("the sender was waiting") {
      bool send_returned = false;
      auto s = usched::spawn([&] {
        ready.send(1);
        send_returned = ch.send(42);
      });
      ready.recv();  // the sender now waits in ch.send()
      CHECK(ch.recv() == 42);
      CHECK_FALSE(send_returned);
      s.join();
      CHECK(send_returned);
    }
  });
}

TEST_CASE("conformance: mutex::try_lock does not yield, and a try_lock loop that yields gets the lock",
          "[conformance]") {
  const std::string policy = GENERATE(from_range(usched::policy_names()));
  INFO("policy=" << policy);
  pool_books books;
  usched::runtime rt(usched::test::make_options(policy, 1));
  books.watch(rt);
  rt.run([] {
    usched::mutex m;
    SECTION("failing try_lock runs nothing else") {
      m.lock();
      bool other_ran = false;
      auto h = usched::spawn([&] { other_ran = true; });
      int failures = 0;
      for (int i = 0; i < 1000; ++i) failures += m.try_lock() ? 0 : 1;
      CHECK(failures == 1000);
      CHECK_FALSE(other_ran);
      m.unlock();
      h.join();
      CHECK(other_ran);
    }
    SECTION("yield between attempts lets the holder run and unlock") {
      usched::channel<int> locked(1);
      // The holder is runnable, not running, while this fiber loops: on one
      // worker only a yield in the loop lets it run to its unlock.
      auto holder = usched::spawn([&] {
        m.lock();
        locked.send(1);
        usched::this_fiber::yield();
        m.unlock();
      });
      locked.recv();
      long attempts = 1;
      while (!m.try_lock()) {
        usched::this_fiber::yield();
        ++attempts;
      }
      CHECK(attempts > 1);
      m.unlock();
      holder.join();
    }
  });
}
