// The engine without threads: runqueue order, the running fiber's life
// cycle, two-phase migration and the newly-idle balance walk, driven with
// hand-set queues and an injected clock.
#include <catch2/catch.hpp>

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine.hpp"
#include "random.hpp"
#include "engine_test_access.hpp"
#include "topology.hpp"

namespace {

using test_access = usched::detail::engine_test_access;

using usched::detail::engine;
using usched::detail::enqueue_kind;
using usched::detail::prev_action;
using usched::placement_kind;
using usched::detail::sched_entity;

engine make_engine(const char* synthetic, unsigned workers, const char* policy,
                   usched::detail::engine_config cfg = {}) {
  const auto topo = usched::detail::topology::load(synthetic);
  return engine(usched::build_domains(topo.place_workers(workers, usched::worker_unit::pu)),
                usched::make_policy(policy), cfg);
}

// The index of `se` in `all`, -1 for none (null).
int index_of(const std::deque<sched_entity>& all, const sched_entity* se) {
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (&all[i] == se) return static_cast<int>(i);
  }
  return -1;
}

// Worker 0's timeline, in vruntime order, as indices into `all`.
std::vector<int> tree_of(engine& e, const std::deque<sched_entity>& all) {
  std::vector<int> out;
  for (const sched_entity& se : test_access::rq(e, 0).timeline) out.push_back(index_of(all, &se));
  return out;
}

// Two like sets of fibers for a differential test: weights 1024, 335 and
// 3121 in turn, the sixth pinned to worker 0.
void twin_fibers(std::deque<sched_entity>& a, std::deque<sched_entity>& b) {
  const unsigned weights[] = {1024, 335, 3121};
  for (std::size_t i = 0; i < a.size(); ++i) a[i].weight = b[i].weight = weights[i % 3];
  a[5].pinned = b[5].pinned = 0;
}

std::vector<int> queue_of(engine& e, int cpu, const std::deque<sched_entity>& all) {
  std::vector<int> out;
  for (sched_entity* se = test_access::rq(e, cpu).head; se; se = se->rq_next) {
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (&all[i] == se) out.push_back(static_cast<int>(i));
    }
  }
  return out;
}

// Two engines of a differential test, each with its own like set of
// fibers, agree on worker 0's state: the running fiber, the timeline and
// the queue, the counts, min_vruntime and the slice, the load signals, and
// every fiber's vruntime, accounting and PELT sums.
void require_same(engine& fast, const std::deque<sched_entity>& fa, engine& full,
                  const std::deque<sched_entity>& fb) {
  const auto& qa = test_access::rq(fast, 0);
  const auto& qb = test_access::rq(full, 0);
  REQUIRE(index_of(fa, qa.curr) == index_of(fb, qb.curr));
  REQUIRE(tree_of(fast, fa) == tree_of(full, fb));
  REQUIRE(queue_of(fast, 0, fa) == queue_of(full, 0, fb));
  REQUIRE(qa.nr_running == qb.nr_running);
  REQUIRE(qa.load_weight == qb.load_weight);
  REQUIRE(qa.nr_queued.load() == qb.nr_queued.load());
  REQUIRE(qa.nr_pinned.load() == qb.nr_pinned.load());
  REQUIRE(qa.idle.load() == qb.idle.load());
  REQUIRE(qa.min_vruntime == qb.min_vruntime);
  REQUIRE(qa.min_vruntime_pub.load() == qb.min_vruntime_pub.load());
  REQUIRE(qa.slice_ns == qb.slice_ns);
  REQUIRE(qa.util_est == qb.util_est);
  REQUIRE(qa.pelt.all.load_sum == qb.pelt.all.load_sum);
  REQUIRE(qa.pelt.all.util_sum == qb.pelt.all.util_sum);
  REQUIRE(qa.pelt.runnable_load_avg == qb.pelt.runnable_load_avg);
  REQUIRE(qa.load_avg_pub.load() == qb.load_avg_pub.load());
  REQUIRE(qa.util_avg_pub.load() == qb.util_avg_pub.load());
  for (std::size_t i = 0; i < fa.size(); ++i) {
    REQUIRE(fa[i].on_rq.load() == fb[i].on_rq.load());
    REQUIRE(fa[i].vruntime == fb[i].vruntime);
    REQUIRE(fa[i].sum_exec == fb[i].sum_exec);
    REQUIRE(fa[i].prev_sum_exec == fb[i].prev_sum_exec);
    REQUIRE(fa[i].exec_start == fb[i].exec_start);
    REQUIRE(fa[i].avg.util_sum == fb[i].avg.util_sum);
    REQUIRE(fa[i].avg.runnable_sum == fb[i].avg.runnable_sum);
    REQUIRE(fa[i].util_est_ewma == fb[i].util_est_ewma);
  }
  REQUIRE(fast.counters(0).handoffs.get() == full.counters(0).handoffs.get());
}


// One CFS worker with `a` and then `b` spawned on it at time 0.
engine cfs_worker_with(sched_entity& a, sched_entity& b) {
  engine e = make_engine("pack:1 core:1 pu:1", 1, "cfs");
  e.enqueue(0, &a, enqueue_kind::spawn, 0);
  e.enqueue(0, &b, enqueue_kind::spawn, 0);
  return e;
}

// Runs the queue of `cpu` dry: each picked fiber exits.
void drain(engine& e, int cpu) {
  sched_entity* c = e.pick_next(cpu, nullptr, prev_action::requeue, 0);
  while (c) c = e.pick_next(cpu, c, prev_action::exit, 0);
}

}  // namespace

TEST_CASE("engine: an engine made without options has the embedder's defaults", "[engine][options]") {
  using usched::detail::engine_config;
  using usched::detail::engine_config_of;
  CHECK(engine_config{} == engine_config_of(usched::options{}));
  // The kernel's preset reaches the engine as fork balancing on and no
  // join hand-off, and nothing else.
  engine_config k = engine_config_of(usched::options::kernel_experiment());
  CHECK(k.fork_balance);
  CHECK_FALSE(k.join_handoff);
  k.fork_balance = false;
  k.join_handoff = true;
  CHECK(k == engine_config{});
}

TEST_CASE("engine: FIFO runqueues run in order and a yield rotates", "[engine]") {
  engine e = make_engine("pack:1 core:2 pu:1", 2, "steal");
  std::deque<sched_entity> f(3);
  for (auto& se : f) e.enqueue(0, &se, enqueue_kind::spawn, 0);
  CHECK(test_access::rq(e, 0).nr_queued.load() == 3);
  CHECK(test_access::rq(e, 0).idle.load());
  CHECK(queue_of(e, 0, f) == std::vector<int>{0, 1, 2});
  sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, 0);
  CHECK(c == &f[0]);
  CHECK_FALSE(test_access::rq(e, 0).idle.load());
  CHECK(test_access::rq(e, 0).curr == &f[0]);
  // yield: the running one goes behind, the head comes out.
  c = e.pick_next(0, c, prev_action::requeue, 0);
  CHECK(c == &f[1]);
  CHECK(queue_of(e, 0, f) == std::vector<int>{2, 0});
  // block: off the queue until woken.
  c = e.pick_next(0, c, prev_action::block, 0);
  CHECK(c == &f[2]);
  CHECK_FALSE(f[1].on_rq.load());
  CHECK(test_access::rq(e, 0).nr_running == 2);
  c = e.pick_next(0, c, prev_action::exit, 0);
  CHECK(c == &f[0]);
  // Alone: a yield keeps running it.
  CHECK(e.pick_next(0, c, prev_action::requeue, 0) == &f[0]);
  CHECK(e.pick_next(0, c, prev_action::exit, 0) == nullptr);
  CHECK(test_access::rq(e, 0).idle.load());
  CHECK(test_access::rq(e, 0).nr_running == 0);
}

TEST_CASE("engine: a wake-up that beats the block keeps the fiber runnable", "[engine]") {
  engine e = make_engine("pack:1 core:2 pu:1", 2, "none");
  sched_entity a, b;
  e.enqueue(0, &a, enqueue_kind::spawn, 0);
  sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, 0);
  REQUIRE(c == &a);
  // a published itself as waiting; a waker claims it before a reaches
  // pick_next(block).
  CHECK(test_access::wake_running(e, &a));
  CHECK(a.wake_pending);
  c = e.pick_next(0, &a, prev_action::block, 0);
  CHECK(c == &a);  // the block became a requeue; nothing else to run
  CHECK(a.on_rq.load());
  CHECK_FALSE(a.wake_pending);
  // Once it really blocked, a wake-up must enqueue it.
  e.enqueue(0, &b, enqueue_kind::spawn, 0);
  c = e.pick_next(0, &a, prev_action::block, 0);
  CHECK(c == &b);
  CHECK_FALSE(test_access::wake_running(e, &a));
}

TEST_CASE("engine: FIFO and LIFO block and exit keep the counts, and a woken block requeues behind",
          "[engine]") {
  const char* policy = GENERATE("none", "steal-lifo");
  INFO(policy);
  engine e = make_engine("pack:1 core:2 pu:1", 2, policy);
  std::deque<sched_entity> f(3);
  f[2].pinned = 0;
  for (auto& se : f) e.enqueue(0, &se, enqueue_kind::spawn, 0);
  const auto& q = test_access::rq(e, 0);
  CHECK(q.nr_running == 3);
  CHECK(q.nr_pinned.load() == 1);
  // LIFO runs the newest first.
  const bool lifo = std::string(policy) == "steal-lifo";
  sched_entity* first = lifo ? &f[2] : &f[0];
  sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, 0);
  REQUIRE(c == first);
  // A wake-up beats the block: it becomes a requeue behind the others.
  CHECK(test_access::wake_running(e, c));
  sched_entity* next = e.pick_next(0, c, prev_action::block, 0);
  CHECK(next == &f[1]);
  CHECK(c->on_rq.load());
  CHECK_FALSE(c->wake_pending);
  CHECK(q.nr_running == 3);
  CHECK(q.nr_queued.load() == 2);
  // A real block and an exit leave the runqueue and its counts.
  sched_entity* after = e.pick_next(0, next, prev_action::block, 0);
  CHECK_FALSE(f[1].on_rq.load());
  CHECK(q.nr_running == 2);
  CHECK(after == (lifo ? &f[0] : &f[2]));
  sched_entity* last = e.pick_next(0, after, prev_action::exit, 0);
  CHECK(q.nr_running == 1);
  CHECK(last == (lifo ? &f[2] : &f[0]));
  // Only queued fibers count as pinned: the last one is running.
  CHECK(q.nr_queued.load() == 0);
  CHECK(q.nr_pinned.load() == 0);
  CHECK(e.pick_next(0, last, prev_action::exit, 0) == nullptr);
  CHECK(q.nr_running == 0);
  CHECK(q.nr_queued.load() == 0);
  CHECK(q.nr_pinned.load() == 0);
  CHECK(q.load_weight == 0);
  CHECK(q.curr == nullptr);
  CHECK(q.idle.load());
}

TEST_CASE("engine: detach skips pinned fibers, honours the amount and the cap", "[engine]") {
  engine e = make_engine("pack:1 core:2 pu:1", 2, "steal");
  std::deque<sched_entity> f(40);
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (i % 4 == 0) f[i].pinned = 0;  // 10 pinned to the source
    e.enqueue(0, &f[i], enqueue_kind::spawn, 0);
  }
  CHECK(test_access::rq(e, 0).nr_pinned.load() == 10);
  sched_entity* out[engine::max_migrate_per_pass];
  usched::balance_decision d;
  d.busiest = 0;
  d.type = usched::migration_type::migrate_task;
  d.imbalance = 3;
  const auto idle = usched::cpu_idle_type::newly_idle;
  REQUIRE(test_access::detach_fibers(e, 1, d, idle, nullptr, 0, 0, out, engine::max_migrate_per_pass) == 3);
  // The oldest movable ones, in order.
  CHECK(out[0] == &f[1]);
  CHECK(out[1] == &f[2]);
  CHECK(out[2] == &f[3]);
  test_access::attach_fibers(e, 1, out, 3, 0);
  CHECK(queue_of(e, 1, f) == std::vector<int>{1, 2, 3});
  CHECK(f[1].cpu == 1);
  // A huge imbalance still moves at most max_migrate_per_pass, never a pinned one.
  d.imbalance = 1000;
  const unsigned n = test_access::detach_fibers(e, 1, d, idle, nullptr, 0, 0, out, engine::max_migrate_per_pass);
  CHECK(n == 27);  // 40 - 10 pinned - 3 already moved
  for (unsigned i = 0; i < n; ++i) CHECK(out[i]->pinned < 0);
  CHECK(test_access::rq(e, 0).nr_queued.load() == 10);
  CHECK(test_access::rq(e, 0).nr_pinned.load() == 10);
  test_access::attach_fibers(e, 1, out, n, 0);
  CHECK(test_access::rq(e, 1).nr_running == 30);
}

TEST_CASE("engine: newly-idle balance prefers the nearest domain", "[engine]") {
  // Two cores of two PUs: worker 0's SMT sibling is 1, its far neighbours 2, 3.
  engine e = make_engine("pack:1 core:2 pu:2", 4, "steal");
  REQUIRE(e.domains().per_cpu[0].size() == 2);
  // Workers 1 and 3 each run a fiber with others queued behind it.
  std::deque<sched_entity> running(2), near(4), far(8);
  e.enqueue(1, &running[0], enqueue_kind::spawn, 0);
  e.enqueue(3, &running[1], enqueue_kind::spawn, 0);
  REQUIRE(e.pick_next(1, nullptr, prev_action::requeue, 0) == &running[0]);
  REQUIRE(e.pick_next(3, nullptr, prev_action::requeue, 0) == &running[1]);
  for (auto& se : near) e.enqueue(1, &se, enqueue_kind::spawn, 0);
  for (auto& se : far) e.enqueue(3, &se, enqueue_kind::spawn, 0);
  std::vector<usched::cpu_snapshot> scratch;
  // Each pass takes half (rounded up) of the nearest non-empty queue: the SMT
  // sibling's 4 go as 2, 1, 1, then the far core's 8 as 4, 2, 1, 1.
  std::vector<unsigned> pulled;
  std::vector<int> from;
  for (std::uint64_t r = 0;; ++r) {
    const unsigned near_before = test_access::rq(e, 1).nr_queued.load();
    const unsigned n = test_access::newidle_balance(e, 0, 0, r, scratch);
    if (n == 0) break;
    pulled.push_back(n);
    from.push_back(test_access::rq(e, 1).nr_queued.load() < near_before ? 1 : 3);
    drain(e, 0);
  }
  CHECK(pulled == std::vector<unsigned>{2, 1, 1, 4, 2, 1, 1});
  CHECK(from == std::vector<int>{1, 1, 1, 3, 3, 3, 3});
  CHECK(e.counters(0).newidle_pulls == 7);
  CHECK(e.counters(0).fibers_pulled == 12);
  CHECK(e.counters(0).newidle_attempts == 8);
  CHECK(e.counters(0, 0).moved[static_cast<int>(usched::migration_type::migrate_task)] == 4);
  CHECK(e.counters(0, 1).moved[static_cast<int>(usched::migration_type::migrate_task)] == 8);
}

TEST_CASE("engine: placement honours pins before asking the policy", "[engine]") {
  // Fork balancing on: a spawn from a worker is the policy's to place.
  usched::detail::engine_config cfg;
  cfg.fork_balance = true;
  engine e = make_engine("pack:1 core:4 pu:1", 4, "steal", cfg);
  std::vector<usched::cpu_snapshot> scratch;
  sched_entity se;
  se.pinned = 2;
  CHECK(e.select_cpu(usched::placement_kind::spawn, se, 0, 0, scratch, 0) == 2);
  se.pinned = -1;
  CHECK(e.select_cpu(usched::placement_kind::spawn, se, 0, 0, scratch, 0) == 0);
}

namespace {

// The seeds/000 situation, driven tick by tick with an injected clock. Three
// workers share an LLC; each ran a CPU-bound fiber alone for half a second
// (every util near 1024). Then worker 1's fiber blocks: worker 1 goes idle
// with its util still near capacity (the blocked fiber's share decays with
// PELT's 32 ms half-life). At the same moment worker 2's fiber is woken onto
// worker 0, behind that worker's own CPU-bound fiber, and worker 2 starts a
// fresh one. Returns the number of 1 ms ticks until worker 1 runs a fiber
// again (or `limit` if it does not within it).
//
// With `busiest_yields`, worker 0's running fiber reaches a preempt point
// every tick and yields when asked to (need_resched), as cooperative code
// calling this_fiber::preempt_point() does; that is what lets an active
// balance push it.
int run_stacking(engine& e, std::deque<sched_entity>& f, int limit, bool busiest_yields = false) {
  constexpr std::int64_t ms = 1'000'000;
  std::vector<usched::cpu_snapshot> scratch;
  std::int64_t now = 0;
  for (int c = 0; c < 3; ++c) {
    e.enqueue(c, &f[static_cast<std::size_t>(c)], enqueue_kind::spawn, now);
    REQUIRE(e.pick_next(c, nullptr, prev_action::requeue, now) == &f[static_cast<std::size_t>(c)]);
  }
  for (; now < 500 * ms; now += ms) {
    for (int c = 0; c < 3; ++c) e.tick(c, now, 1, scratch);
  }
  for (int c = 0; c < 3; ++c) CHECK(f[static_cast<std::size_t>(c)].avg.util_avg > 990);
  REQUIRE(e.pick_next(1, &f[1], prev_action::block, now) == nullptr);
  REQUIRE(e.pick_next(2, &f[2], prev_action::block, now) == nullptr);
  e.enqueue(0, &f[2], enqueue_kind::wakeup, now);
  e.enqueue(2, &f[3], enqueue_kind::spawn, now);
  REQUIRE(e.pick_next(2, nullptr, prev_action::requeue, now) == &f[3]);
  // Worker 1 has just gone idle: newly-idle balance, then its periodic
  // (CPU_IDLE) balance every tick as the intervals allow.
  int tick = 0;
  sched_entity* curr0 = &f[0];
  bool spread = test_access::newidle_balance(e, 1, now, 3, scratch) > 0;
  while (!spread && tick < limit) {
    now += ms;
    ++tick;
    e.tick(0, now, 4, scratch);
    e.tick(2, now, 6, scratch);
    if (busiest_yields && test_access::rq(e, 0).need_resched.load()) {
      int pushed = -1;
      curr0 = e.pick_next(0, curr0, prev_action::requeue, now, &pushed);
      if (pushed == 1) spread = true;
    }
    if (!spread) spread = e.tick(1, now, 5, scratch).pulled > 0;
  }
  return tick;
}

}  // namespace

TEST_CASE("engine: cfs spreads fibers stacked in an LLC, cfs-v5.9 leaves them stacked", "[engine][cfs]") {
  const auto task = static_cast<std::size_t>(usched::migration_type::migrate_task);
  {
    engine e = make_engine("pack:1 l3:1 core:3 pu:1", 3, "cfs");
    std::deque<sched_entity> f(4);
    const int ticks = run_stacking(e, f, 100);
    INFO("cfs spread after " << ticks << " ticks");
    // The newly-idle pass itself moves the waiting fiber (migrate_task).
    CHECK(ticks == 0);
    CHECK(e.counters(1, 0).moved[task] == 1);
    CHECK(test_access::rq(e, 1).nr_running == 1);
    CHECK(test_access::rq(e, 0).nr_running == 1);
  }
  {
    engine e = make_engine("pack:1 l3:1 core:3 pu:1", 3, "cfs-v5.9");
    std::deque<sched_entity> f(4);
    const int ticks = run_stacking(e, f, 400);
    const auto& llc = e.counters(1, 0);
    INFO("cfs-v5.9 spread after " << ticks << " ticks; failures " << llc.failures);
    // migrate_util: the idle worker's spare capacity (1024 minus its util)
    // stays smaller than the queued fiber's util for as long as it takes
    // the idle worker's util to decay to almost nothing: the fiber's util is
    // read as its estimate (task_util_est: about 1000 since it slept), which
    // does not decay while it waits. Every pass fails meanwhile and the
    // fibers stay stacked: 5 to 6 PELT half-lives.
    CHECK(ticks >= 100);
    CHECK(ticks < 400);
    CHECK(llc.failures >= 3);
    CHECK(llc.moved[task] == 0);
    CHECK(llc.moved[static_cast<std::size_t>(usched::migration_type::migrate_util)] == 1);
  }
  {
    // The same with the busy worker's fiber reaching preempt points: after
    // cache_nice_tries + 2 failed periodic passes (3 ms apart at this 3-worker
    // LLC) the idle worker asks for an active balance, and the busy worker
    // gives it the fiber that ran least recently at its next switch. (On the
    // thread's 40-CPU LLC the passes are 40 ms apart or more: its 12 ms
    // tails are the tick's slice, not this.)
    engine e = make_engine("pack:1 l3:1 core:3 pu:1", 3, "cfs-v5.9");
    std::deque<sched_entity> f(4);
    const int ticks = run_stacking(e, f, 100, true);
    INFO("cfs-v5.9 with preempt points spread after " << ticks << " ticks");
    CHECK(ticks >= 9);
    CHECK(ticks <= 15);
    CHECK(e.counters(0).active_pushes == 1);
    CHECK(test_access::rq(e, 1).nr_running == 1);
  }
}

TEST_CASE("engine: the fair discipline orders by vruntime with CFS slices", "[engine][cfs]") {
  constexpr std::int64_t ms = 1'000'000;
  // Eight CPUs: the kernel's granularities scaled by 1 + log2(8), a 24 ms
  // period and 3 ms minimum; the fibers all live on CPU 0.
  engine e = make_engine("pack:1 core:8 pu:1", 8, "cfs");
  REQUIRE(e.config().sched_latency_ns == 24 * ms);
  REQUIRE(e.config().min_granularity_ns == 3 * ms);
  std::vector<usched::cpu_snapshot> scratch;
  std::deque<sched_entity> f(10);
  std::int64_t now = 0;
  // Three fibers: period 24 ms shared by three, 8 ms each.
  for (int i = 0; i < 3; ++i) e.enqueue(0, &f[static_cast<std::size_t>(i)], enqueue_kind::spawn, now);
  // A new fiber starts one slice (of the period shared with the ones already
  // queued) behind min_vruntime: 24, 12 and 8 ms. As in the kernel, the
  // last of a burst has the smallest debit and runs first.
  CHECK(f[0].vruntime == 24 * ms);
  CHECK(f[1].vruntime == 12 * ms);
  CHECK(f[2].vruntime == 8 * ms);
  sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, now);
  CHECK(c == &f[2]);
  CHECK(test_access::rq(e, 0).slice_ns == 8 * ms);
  // The tick ends the slice once the fiber has run longer than it: not at
  // 7 ms (nor by its lead over f[1], 15 - 12 ms, less than the slice) ...
  e.tick(0, now + 7 * ms, 1, scratch);
  CHECK_FALSE(e.should_preempt(0, 7 * ms));
  // ... at the first tick past 8 ms.
  now += 9 * ms;
  e.tick(0, now, 1, scratch);
  CHECK(e.should_preempt(0, 0));
  CHECK(e.counters(0).tick_preemptions == 1);
  // Its vruntime (17 ms) has passed f[1]'s, so the requeue picks f[1].
  c = e.pick_next(0, c, prev_action::requeue, now);
  CHECK(c == &f[1]);
  // Ten fibers: the period stretches to 10 x 3 ms, each slice is 3 ms.
  for (int i = 3; i < 10; ++i) e.enqueue(0, &f[static_cast<std::size_t>(i)], enqueue_kind::spawn, now);
  c = e.pick_next(0, c, prev_action::requeue, now);
  CHECK(test_access::rq(e, 0).slice_ns == 3 * ms);
  // vruntime advances by runtime x 1024 / weight.
  const std::uint64_t before = c->vruntime;
  now += 2 * ms;
  c = e.pick_next(0, c, prev_action::requeue, now);
  const sched_entity* ran = nullptr;
  for (auto& se : f) {
    if (se.vruntime == before + 2 * ms) ran = &se;
  }
  CHECK(ran != nullptr);
}

// sched_slice() of fibers of one weight takes a shortcut (period / n, no
// division by the total weight); it must give the kernel formula's value,
// period x weight / total weight, for every count on both sides of
// sched_nr_latency, and the formula itself for mixed weights.
TEST_CASE("engine: CFS slices of equal and mixed weights follow the kernel formula", "[engine][cfs]") {
  for (const unsigned weight : {1024u, 335u, 88761u}) {
    for (int n = 1; n <= 12; ++n) {
      CAPTURE(weight, n);
      engine e = make_engine("pack:1 core:8 pu:1", 8, "cfs");
      const std::int64_t latency = e.config().sched_latency_ns;
      const std::int64_t gran = e.config().min_granularity_ns;
      const auto nr_latency = static_cast<int>(test_access::sched_nr_latency(e));
      REQUIRE(nr_latency == 8);
      std::deque<sched_entity> f(static_cast<std::size_t>(n));
      for (auto& se : f) {
        se.weight = weight;
        e.enqueue(0, &se, enqueue_kind::spawn, 0);
      }
      e.pick_next(0, nullptr, prev_action::requeue, 0);
      const std::int64_t period = n > nr_latency ? n * gran : latency;
      CHECK(test_access::rq(e, 0).slice_ns == static_cast<std::int64_t>(static_cast<unsigned long>(period) * weight /
                                                           (static_cast<unsigned long>(n) * weight)));
      CHECK(test_access::rq(e, 0).slice_ns == (n > nr_latency ? gran : latency / n));
    }
  }
  // Mixed: 1024, 335 and 3121 on one worker; the leftmost (the last
  // spawned, with the smallest debit) gets its weight's share of 24 ms.
  engine e = make_engine("pack:1 core:8 pu:1", 8, "cfs");
  std::deque<sched_entity> f(3);
  const unsigned weights[] = {1024, 335, 3121};
  for (std::size_t i = 0; i < 3; ++i) {
    f[i].weight = weights[i];
    e.enqueue(0, &f[i], enqueue_kind::spawn, 0);
  }
  sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, 0);
  REQUIRE(c != nullptr);
  CHECK(test_access::rq(e, 0).slice_ns == static_cast<std::int64_t>(static_cast<unsigned long>(e.config().sched_latency_ns) *
                                                       c->weight / (1024ul + 335ul + 3121ul)));
}

TEST_CASE("engine: between SMT siblings a cache-hot fiber moves under cfs (v5.10), not under cfs-v5.9",
          "[engine][cfs]") {
  // task_hot() ignores hotness between SMT siblings since v5.10 (commit
  // ec73240b1627). Worker 0 runs b; a ran until 0.2 ms ago (hot: less than
  // the 0.5 ms migration cost) and waits. Worker 1, its sibling, goes idle.
  // Two CPUs: a 12 ms period.
  constexpr std::int64_t us = 1'000;
  for (const char* policy : {"cfs", "cfs-v5.9"}) {
    INFO(policy);
    engine e = make_engine("pack:1 core:1 pu:2", 2, policy);
    std::vector<usched::cpu_snapshot> scratch;
    sched_entity a, b;
    e.enqueue(0, &a, enqueue_kind::spawn, 0);
    e.enqueue(0, &b, enqueue_kind::spawn, 0);
    // START_DEBIT: b (6 ms of vruntime) runs before a (12 ms) until its
    // vruntime passes a's; then a runs until it passes b's.
    sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, 0);
    REQUIRE(c == &b);
    c = e.pick_next(0, c, prev_action::requeue, 7000 * us);
    REQUIRE(c == &a);
    c = e.pick_next(0, c, prev_action::requeue, 9000 * us);
    REQUIRE(c == &b);  // a ran until 9 ms and is queued
    const unsigned pulled = test_access::newidle_balance(e, 1, 9200 * us, 1, scratch);
    if (std::string(policy) == "cfs") {
      CHECK(pulled == 1);
      CHECK(test_access::rq(e, 1).nr_running == 1);
    } else {
      CHECK(pulled == 0);  // hot, and no failures yet at this level
      CHECK(test_access::rq(e, 0).nr_running == 2);
    }
  }
}

TEST_CASE("engine: the periodic interval is busy_factor times longer on a busy worker, one tick less since v5.10",
          "[engine][cfs]") {
  constexpr std::int64_t ms = 1'000'000;
  engine v5_10 = make_engine("pack:1 l3:1 core:2 pu:1", 2, "cfs");
  engine v5_9 = make_engine("pack:1 l3:1 core:2 pu:1", 2, "cfs-v5.9");
  usched::detail::sd_balance_state st;
  st.balance_interval_ns = 2 * ms;  // the LLC's min_interval: its 2 workers
  CHECK(test_access::balance_interval(v5_10, st, false) == 2 * ms);
  CHECK(test_access::balance_interval(v5_10, st, true) == 2 * 16 * ms - ms);
  CHECK(test_access::balance_interval(v5_9, st, true) == 2 * 32 * ms);
  // max_load_balance_interval: 100 ms per CPU.
  st.balance_interval_ns = 1000 * ms;
  CHECK(test_access::balance_interval(v5_10, st, false) == 200 * ms);
  CHECK(test_access::balance_interval(v5_9, st, true) == 200 * ms);
}

TEST_CASE("engine: a level this worker may not balance counts as balanced and ends the tick's climb",
          "[engine][cfs]") {
  // should_we_balance(): at the package level of "pack:1 core:2 pu:2" the
  // group {0, 1} is balanced by its first idle worker, or by worker 0 when
  // none is idle. Worker 1's tick then takes load_balance()'s balanced exit
  // (failures reset, the interval doubles) and updates last_balance, as
  // rebalance_domains() does, without a pass.
  constexpr std::int64_t ms = 1'000'000;
  engine e = make_engine("pack:1 core:2 pu:2", 4, "cfs");
  std::vector<usched::cpu_snapshot> scratch;
  std::deque<sched_entity> f(4);
  for (int c = 0; c < 4; ++c) {
    e.enqueue(c, &f[static_cast<std::size_t>(c)], enqueue_kind::spawn, 0);
    REQUIRE(e.pick_next(c, nullptr, prev_action::requeue, 0) == &f[static_cast<std::size_t>(c)]);
  }
  REQUIRE(e.domains().per_cpu[1].size() == 2);
  auto& st = test_access::balance_state(e, 1, 1);
  const std::int64_t min_iv = st.balance_interval_ns;
  st.nr_balance_failed = 2;
  const std::uint64_t attempts = e.counters(1, 1).attempts;
  const std::int64_t now = 1000 * ms;
  e.tick(1, now, 1, scratch);
  CHECK(st.last_balance == now);
  CHECK(st.nr_balance_failed == 0);
  CHECK(st.balance_interval_ns == 2 * min_iv);
  CHECK(e.counters(1, 1).attempts == attempts);
  // Worker 0 balances the level itself.
  e.tick(0, now, 1, scratch);
  CHECK(e.counters(0, 1).attempts == 1);
}

TEST_CASE("engine: the CFS family rations the newly-idle balance by the average idle period",
          "[engine][cfs]") {
  // newidle_balance(): no pass when the worker's idle periods average less
  // than the migration cost (0.5 ms). The period starts when the worker
  // finds nothing to run and ends when it picks a fiber up again: avg +=
  // (delta - avg) / 8, at most twice the longest pass, itself at least the
  // migration cost (ttwu_do_wakeup()).
  constexpr std::int64_t us = 1'000;
  engine e = make_engine("pack:1 l3:1 core:2 pu:1", 2, "cfs");
  std::vector<usched::cpu_snapshot> scratch;
  std::deque<sched_entity> f(3);
  // Worker 0 runs f[0] with f[1] queued behind it: movable, overloaded.
  e.enqueue(0, &f[0], enqueue_kind::spawn, 0);
  REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 0) == &f[0]);
  e.enqueue(0, &f[1], enqueue_kind::spawn, 0);
  REQUIRE(test_access::overloaded(e));
  auto& q1 = test_access::rq(e, 1);
  CHECK(q1.avg_idle.load() == 1000 * us);  // 2 x migration cost at start
  CHECK(q1.max_idle_balance_cost.load() == 500 * us);
  SECTION("short idle periods: no pass, and idle_poll never retries") {
    q1.avg_idle = 400 * us;
    CHECK(e.find_work(1, 10'000 * us, 1, scratch) == nullptr);
    CHECK(e.counters(1).newidle_skipped == 1);
    CHECK(e.counters(1).newidle_attempts == 0);
    CHECK(q1.idle_stamp.load() == 10'000 * us);
    CHECK(e.idle_poll(1, 10'002 * us, 1, scratch) == 0);
    CHECK(e.counters(1).newidle_skipped == 1);
    // A fiber woken here 100 us later is picked up: 400 + (100 - 400) / 8.
    e.enqueue(1, &f[2], enqueue_kind::wakeup, 10'100 * us);
    CHECK(e.find_work(1, 10'100 * us, 1, scratch) == &f[2]);
    CHECK(q1.avg_idle.load() == 400 * us + (100 * us - 400 * us) / 8);
    CHECK(q1.idle_stamp.load() == 0);
  }
  SECTION("short idle periods, but sent by a pull kick: the pass runs and pulls") {
    q1.avg_idle = 400 * us;
    CHECK(e.find_work(1, 10'000 * us, 1, scratch, /*kicked=*/true) == &f[1]);
    CHECK(e.counters(1).newidle_skipped == 0);
    CHECK(e.counters(1).newidle_attempts == 1);
    CHECK(e.counters(1).newidle_pulls == 1);
  }
  SECTION("long idle periods: the pass runs and pulls; the average is capped") {
    CHECK(e.find_work(1, 10'000 * us, 1, scratch) == &f[1]);
    CHECK(e.counters(1).newidle_attempts == 1);
    CHECK(q1.idle_stamp.load() == 0);  // it pulled: no idle period
    // Idle again with nothing to pull, then woken 5 ms later: the average
    // would be 1000 + (5000 - 1000) / 8 = 1500 us, capped at 2 x 500.
    CHECK(e.pick_next(1, &f[1], prev_action::block, 10'100 * us) == nullptr);
    CHECK(e.find_work(1, 10'100 * us, 1, scratch) == nullptr);
    e.enqueue(1, &f[1], enqueue_kind::wakeup, 15'100 * us);
    CHECK(e.find_work(1, 15'100 * us, 1, scratch) == &f[1]);
    CHECK(q1.avg_idle.load() == 1000 * us);
  }
}

TEST_CASE("engine: a newly-idle balance climbs only while its cost fits the idle average, and the costs decay",
          "[engine][cfs]") {
  // Two levels (SMT, then the package); a pass costs 100 us a worker of the
  // level's span (the simulator's balance_pass, made large). With an idle
  // average of 700 us the SMT pass (200 us) runs and the package pass is
  // skipped once the SMT level's recorded cost plus the package's exceed
  // the average.
  constexpr std::int64_t us = 1'000;
  usched::detail::engine_config cfg;
  cfg.balance_pass_per_cpu_ns = 100 * us;
  const auto topo = usched::detail::topology::load("pack:1 core:2 pu:2");
  engine e(usched::build_domains(topo.place_workers(4, usched::worker_unit::pu)),
           usched::make_policy("cfs"), cfg);
  std::vector<usched::cpu_snapshot> scratch;
  std::deque<sched_entity> f(2);
  e.enqueue(2, &f[0], enqueue_kind::spawn, 0);
  REQUIRE(e.pick_next(2, nullptr, prev_action::requeue, 0) == &f[0]);
  e.enqueue(2, &f[1], enqueue_kind::spawn, 0);
  REQUIRE(e.domains().per_cpu[0].size() == 2);
  test_access::rq(e, 0).avg_idle = 700 * us;
  // First pass: nothing recorded yet, both levels run (the package pulls).
  CHECK(test_access::idle_balance(e, 0, 1'000 * us, 1, scratch) == 1);
  CHECK(test_access::balance_state(e, 0, 0).max_newidle_lb_cost == 200 * us);
  CHECK(test_access::balance_state(e, 0, 1).max_newidle_lb_cost == 400 * us);
  CHECK(test_access::rq(e, 0).max_idle_balance_cost.load() == 600 * us);
  // Back to idle with f[1] queued on worker 2 again, and an average of
  // 500 us: the SMT pass runs (500 >= 0 + 200) and finds nothing; the
  // package pass would make 200 + 400 > 500, so the climb stops.
  REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 1'000 * us) != nullptr);
  sched_entity* mine = test_access::rq(e, 0).curr;
  CHECK(e.pick_next(0, mine, prev_action::block, 1'100 * us) == nullptr);
  e.enqueue(2, mine, enqueue_kind::wakeup, 1'100 * us);
  test_access::rq(e, 0).avg_idle = 500 * us;
  CHECK(test_access::idle_balance(e, 0, 1'200 * us, 1, scratch) == 0);
  CHECK(e.counters(0, 1).attempts == 1);  // the package level did not run again
  CHECK(e.counters(0, 0).attempts == 2);
  // The tick decays each level's cost by 253/256 once a second.
  e.tick(0, 2'000'000 * us, 1, scratch);
  CHECK(test_access::balance_state(e, 0, 0).max_newidle_lb_cost == 200 * us * 253 / 256);
  CHECK(test_access::balance_state(e, 0, 1).max_newidle_lb_cost == 400 * us * 253 / 256);
  CHECK(test_access::rq(e, 0).max_idle_balance_cost.load() == (200 * us * 253 / 256) + (400 * us * 253 / 256));
}

TEST_CASE("engine: a spawn kept on its busy spawner's worker with fork balancing off asks for a pull kick",
          "[engine][cfs]") {
  // wake_result::pull: the kick stands in for the fork balance, so only a
  // local spawn with fork balancing off makes it; a wake-up, a spawn the
  // fork balance placed, and a work stealer (its spinning workers pull by
  // themselves) make a plain kick or none.
  std::vector<usched::cpu_snapshot> scratch;
  // Both workers busy (so that the fork balance has no idle worker to
  // prefer and the spawn may stay where it is), then worker 0's fiber
  // spawns f[1].
  const auto spawn_on_busy = [&scratch](const char* policy, bool fork_balance, std::deque<sched_entity>& f) {
    usched::detail::engine_config cfg;
    cfg.fork_balance = fork_balance;
    auto e = std::make_unique<engine>(make_engine("pack:1 l3:1 core:2 pu:1", 2, policy, cfg));
    e->enqueue(0, &f[0], enqueue_kind::spawn, 0);
    REQUIRE(e->pick_next(0, nullptr, prev_action::requeue, 0) == &f[0]);
    e->enqueue(1, &f[3], enqueue_kind::spawn, 0);
    REQUIRE(e->pick_next(1, nullptr, prev_action::requeue, 0) == &f[3]);
    const auto r = e->wake_up(&f[1], placement_kind::spawn, usched::wake_reason::spawn, 0, 1, scratch, 1'000);
    return std::make_pair(std::move(e), r);
  };
  for (const bool fork_balance : {false, true}) {
    std::deque<sched_entity> f(4);
    auto [e, spawn] = spawn_on_busy("cfs", fork_balance, f);
    INFO("fork balance " << fork_balance << ", spawn placed on " << spawn.cpu);
    if (!fork_balance) {
      CHECK(spawn.cpu == 0);
      CHECK(spawn.kick);
      CHECK(spawn.pull);
    } else {
      CHECK(!spawn.pull);
    }
    // A wake-up onto a busy worker is a plain kick at most.
    e->enqueue(0, &f[2], enqueue_kind::spawn, 2'000);
    REQUIRE(e->pick_next(0, &f[0], prev_action::block, 3'000) != nullptr);
    const auto wake = e->wake_up(&f[0], placement_kind::wake, usched::wake_reason::other, 0, 1, scratch, 4'000);
    CHECK(!wake.pull);
  }
  // A spawn that did not stay for want of a fork balance: one pinned to its
  // spawner's worker, and one the policy placed for its node preference,
  // make a plain kick at most.
  {
    std::deque<sched_entity> f(4);
    f[1].pinned = 0;
    const auto [e, spawn] = spawn_on_busy("cfs", false, f);
    CHECK(spawn.cpu == 0);
    CHECK(spawn.kick);
    CHECK(!spawn.pull);
  }
  for (const int node : {0, -1}) {
    std::deque<sched_entity> f(4);
    f[1].preferred_node = node;
    const auto [e, spawn] = spawn_on_busy("cfs", false, f);
    INFO("preferred node " << node << ", spawn placed on " << spawn.cpu);
    // Both workers are on node 0 and equally busy: the placement keeps the
    // spawner's, as fork balancing off does without a preference.
    CHECK(spawn.cpu == 0);
    CHECK(spawn.kick);
    CHECK(spawn.pull == (node < 0));
  }
  // A work stealer's spinning worker finds the spawn by itself: a plain kick.
  std::deque<sched_entity> f(4);
  const auto [e, spawn] = spawn_on_busy("steal", false, f);
  CHECK(spawn.cpu == 0);
  CHECK(spawn.kick);
  CHECK(!spawn.pull);
}

TEST_CASE("engine: work stealing does not ration: idle_poll pulls again while spinning", "[engine]") {
  engine e = make_engine("pack:1 core:2 pu:1", 2, "steal");
  std::vector<usched::cpu_snapshot> scratch;
  std::deque<sched_entity> f(2);
  e.enqueue(0, &f[0], enqueue_kind::spawn, 0);
  REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 0) == &f[0]);
  e.enqueue(0, &f[1], enqueue_kind::spawn, 0);
  test_access::rq(e, 1).avg_idle = 0;
  CHECK(e.idle_poll(1, 1'000, 1, scratch) == 1);
  CHECK(e.counters(1).newidle_skipped == 0);
}

TEST_CASE("engine: a snapshot takes a migrated fiber's blocked load off the worker it left",
          "[engine][cfs]") {
  // update_blocked_averages() before a balance: the contribution of a fiber
  // that blocked on worker 0 and woke up on worker 1 leaves worker 0's
  // signals (cfs_rq->removed) even while worker 0 stays idle and nothing
  // updates its runqueue.
  constexpr std::int64_t ms = 1'000'000;
  engine e = make_engine("pack:1 l3:1 core:2 pu:1", 2, "cfs");
  std::vector<usched::cpu_snapshot> scratch;
  sched_entity a;
  e.enqueue(0, &a, enqueue_kind::spawn, 0);
  REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 0) == &a);
  std::int64_t now = 0;
  for (int t = 0; t < 200; ++t) {
    now += ms;
    e.tick(0, now, 1, scratch);
  }
  CHECK(e.pick_next(0, &a, prev_action::block, now) == nullptr);
  test_access::snapshot(e, scratch, now);
  const unsigned long before = scratch[0].util_avg;
  CHECK(before > 900);
  e.enqueue(1, &a, enqueue_kind::wakeup, now);
  test_access::snapshot(e, scratch, now);
  CHECK(scratch[0].util_avg < 5);
  CHECK(scratch[0].load_avg < 5);
  CHECK(scratch[1].util_avg > 900);  // a's estimate, queued there
}

TEST_CASE("engine: v4.11's cpu_load[] follows the tick and catches up the ticks an idle worker missed",
          "[engine][cfs]") {
  // cpu_load_update_active() at each tick of a busy worker,
  // cpu_load_update_nohz_start() as it goes idle, and the catch-up of the
  // missed ticks when it ticks again idle (cpu_load_update_idle()) and when
  // it runs again (cpu_load_update_nohz_stop()).
  constexpr std::int64_t ms = 1'000'000;  // one tick (engine_config::tick_ns)
  engine e = make_engine("pack:1 l3:1 core:2 pu:1", 2, "cfs-runnable-load");
  const auto& q = test_access::rq(e, 0);
  const auto history = [&] {
    std::vector<unsigned long> h;
    for (const auto& v : q.cpu_load) h.push_back(v.load());
    return h;
  };
  std::vector<usched::cpu_snapshot> scratch;
  sched_entity a;
  e.enqueue(0, &a, enqueue_kind::spawn, 0);
  REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 0) == &a);
  std::int64_t now = 0;
  for (int t = 0; t < 300; ++t) {
    const std::vector<unsigned long> before = history();
    now += ms;
    e.tick(0, now, 1, scratch);
    // One periodic step: index i keeps 1 - 1/2^i and takes 1/2^i of the
    // load now, rounded up while it rises.
    const unsigned long load = q.pelt.runnable_load_avg;
    REQUIRE(q.cpu_load[0].load() == load);
    for (std::size_t i = 1; i < before.size(); ++i) {
      const unsigned long scale = 1UL << i;
      const unsigned long in = load > before[i] ? load + scale - 1 : load;
      REQUIRE(q.cpu_load[i].load() == (before[i] * (scale - 1) + in) >> i);
    }
  }
  const std::vector<unsigned long> busy = history();
  CHECK(busy[0] > 1000);
  CHECK(busy[4] > 900);
  // A snapshot carries them, for every worker.
  test_access::snapshot(e, scratch, now);
  for (std::size_t i = 0; i < busy.size(); ++i) CHECK(scratch[0].cpu_load[i] == busy[i]);
  CHECK(scratch[1].cpu_load[1] == 0);

  // a blocks; worker 0 finds nothing and idles: index 0 takes the load it
  // idles with (nohz start), the others stay.
  REQUIRE(e.pick_next(0, &a, prev_action::block, now) == nullptr);
  REQUIRE(e.find_work(0, now, 1, scratch) == nullptr);
  const unsigned long tickless = q.pelt.runnable_load_avg;
  CHECK(q.cpu_load[0].load() == tickless);
  CHECK(q.cpu_load[4].load() == busy[4]);
  REQUIRE(tickless == 0);  // its only fiber took its whole runnable load away
  // Parked for five ticks, nothing updates the history; a balancer
  // elsewhere reads it as it was left.
  test_access::snapshot(e, scratch, now + 5 * ms);
  CHECK(scratch[0].cpu_load[3] == busy[3]);
  // Its next tick, idle, decays the four missed ticks and adds one of load
  // 0: index 1 halves per tick (>> 4); the others by the kernel's
  // degrade_factor[] for 4 missed ticks (128-point scale), then one step.
  now += 5 * ms;
  e.tick(0, now, 1, scratch);
  CHECK(q.cpu_load[0].load() == 0);
  CHECK(q.cpu_load[1].load() == (busy[1] >> 4) >> 1);
  CHECK(q.cpu_load[2].load() == ((busy[2] * 40 >> 7) * 3) >> 2);
  CHECK(q.cpu_load[3].load() == ((busy[3] * 75 >> 7) * 7) >> 3);
  CHECK(q.cpu_load[4].load() == ((busy[4] * 98 >> 7) * 15) >> 4);
  const std::vector<unsigned long> idle = history();
  CHECK(idle[1] > 0);
  // Past degrade_zero_ticks[] a history has decayed to nothing: index 1
  // after 8 missed ticks.
  now += 9 * ms;
  e.tick(0, now, 1, scratch);
  CHECK(q.cpu_load[1].load() == 0);
  CHECK(q.cpu_load[2].load() == ((idle[2] * 12 >> 7) * 3) >> 2);
  const std::vector<unsigned long> later = history();
  // Woken three ticks later, it runs again: one step of the load it wakes
  // with after two missed ticks (index 1: >> 2; index 2: 72 for 2 ticks).
  now += 3 * ms;
  e.enqueue(0, &a, enqueue_kind::wakeup, now);
  REQUIRE(e.find_work(0, now, 1, scratch) == &a);
  const unsigned long woke = q.pelt.runnable_load_avg;
  REQUIRE(woke > 0);
  CHECK(q.cpu_load[0].load() == woke);
  CHECK(q.cpu_load[1].load() == ((later[1] >> 2) + woke + 1) >> 1);
  CHECK(q.cpu_load[2].load() == ((later[2] * 72 >> 7) * 3 + woke + 3) >> 2);
}

TEST_CASE("engine: util_est counts for cfs (v4.17+), not for the v4.11 policies", "[engine][cfs]") {
  // A fiber that ran 200 ms sleeps 100 ms and wakes on worker 1: its
  // util_avg has decayed to about a tenth, its estimate has not.
  constexpr std::int64_t ms = 1'000'000;
  for (const char* policy : {"cfs", "cfs-runnable-load", "cfs-blocked-load"}) {
    engine e = make_engine("pack:1 l3:1 core:2 pu:1", 2, policy);
    std::vector<usched::cpu_snapshot> scratch;
    sched_entity a;
    e.enqueue(0, &a, enqueue_kind::spawn, 0);
    REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 0) == &a);
    std::int64_t now = 0;
    for (int t = 0; t < 200; ++t) {
      now += ms;
      e.tick(0, now, 1, scratch);
    }
    REQUIRE(e.pick_next(0, &a, prev_action::block, now) == nullptr);
    now += 100 * ms;
    e.enqueue(1, &a, enqueue_kind::wakeup, now);
    test_access::snapshot(e, scratch, now);
    INFO(policy);
    if (std::string(policy) == "cfs") {
      CHECK(scratch[1].util_avg > 900);
    } else {
      CHECK(scratch[1].util_avg < 150);
    }
  }
}

TEST_CASE("engine: the LLC's has_idle_cores hint is cleared by a fruitless core scan and set by a worker going idle",
          "[engine][cfs]") {
  // Two 2-way SMT cores in one LLC: {0, 1} and {2, 3}. Workers 0 and 2 run.
  engine e = make_engine("pack:1 l3:1 core:2 pu:2", 4, "cfs");
  std::vector<usched::cpu_snapshot> scratch;
  sched_entity a, b, w;
  e.enqueue(0, &a, enqueue_kind::spawn, 0);
  REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 0) == &a);
  e.enqueue(2, &b, enqueue_kind::spawn, 0);
  REQUIRE(e.pick_next(2, nullptr, prev_action::requeue, 0) == &b);
  test_access::snapshot(e, scratch, 0);
  CHECK(scratch[0].llc_has_idle_cores);
  // w last ran on 0 and is woken from 0: target and prev busy, no whole
  // idle core: the idle PU 1, and the hint goes.
  w.cpu = 0;
  CHECK(e.select_cpu(placement_kind::wake, w, 0, 1, scratch, 1'000) == 1);
  test_access::snapshot(e, scratch, 1'000);
  CHECK_FALSE(scratch[0].llc_has_idle_cores);
  CHECK_FALSE(scratch[3].llc_has_idle_cores);
  // The waker's running fiber now remembers its worker.
  CHECK(a.recent_used_cpu == 0);
  // b blocks: worker 2 goes idle beside an idle 3, so the core is idle.
  CHECK(e.pick_next(2, &b, prev_action::block, 2'000) == nullptr);
  test_access::snapshot(e, scratch, 2'000);
  CHECK(scratch[0].llc_has_idle_cores);
  // A spawn's recent_used_cpu is its spawner's worker.
  sched_entity child;
  e.select_cpu(placement_kind::spawn, child, 0, 1, scratch, 3'000);
  CHECK(child.recent_used_cpu == 0);
}

TEST_CASE("engine: a spawn goes to the idle worker its backend reports shallowest, then most recently idled",
          "[engine][cfs][placement]") {
  // Two packages of two workers; worker 0 runs, so the fork balance sends
  // a spawn from 0 to package 1 (two idle workers against one), and
  // find_idlest_group_cpu() chooses between 2 and 3 by what their backends
  // reported (set_idle_state()).
  usched::detail::engine_config cfg;
  cfg.fork_balance = true;
  engine e = make_engine("pack:2 core:2 pu:1", 4, "cfs", cfg);
  constexpr std::int64_t parked = engine::parked_exit_latency_ns;
  std::vector<usched::cpu_snapshot> scratch;
  sched_entity a, child;
  e.enqueue(0, &a, enqueue_kind::spawn, 0);
  REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 0) == &a);
  e.set_idle_state(0, parked, 7);  // stale: worker 0 runs a fiber
  e.set_idle_state(2, parked, 300);
  e.set_idle_state(3, 0, 100);
  test_access::snapshot(e, scratch, 1'000);
  CHECK(scratch[0].idle_exit_latency_ns == 0);
  CHECK(scratch[0].idle_stamp_ns == 0);
  CHECK(scratch[1].idle_exit_latency_ns == 0);
  CHECK(scratch[1].idle_stamp_ns == 0);
  CHECK(scratch[2].idle_exit_latency_ns == parked);
  CHECK(scratch[2].idle_stamp_ns == 300);
  CHECK(scratch[3].idle_exit_latency_ns == 0);
  CHECK(scratch[3].idle_stamp_ns == 100);
  // 3 spins, 2 is parked: 3, though 2 went idle later.
  CHECK(e.select_cpu(placement_kind::spawn, child, 0, 1, scratch, 1'000) == 3);
  // Both parked: the one idle since later.
  e.set_idle_state(3, parked, 100);
  CHECK(e.select_cpu(placement_kind::spawn, child, 0, 1, scratch, 1'000) == 2);
  // Both spinning, 3 idle since later.
  e.set_idle_state(2, 0, 300);
  e.set_idle_state(3, 0, 400);
  CHECK(e.select_cpu(placement_kind::spawn, child, 0, 1, scratch, 1'000) == 3);
}

TEST_CASE("engine: the tick recomputes the slice: a fiber picked alone yields a slice of two after a wake-up",
          "[engine][cfs]") {
  // Seed 000's stranded wake-up: a hog picked while alone on its worker,
  // and a fiber woken behind it that does not preempt it (it arrives from
  // another worker at min_vruntime, not ahead of the hog by the wake-up
  // granularity). The kernel's check_preempt_tick() recomputes the slice
  // at every tick, so the hog yields after 24 ms / 2 = 12 ms of running,
  // not after the 24 ms it was given when it was picked.
  constexpr std::int64_t ms = 1'000'000;
  engine e = make_engine("pack:1 core:8 pu:1", 8, "cfs");
  std::vector<usched::cpu_snapshot> scratch;
  sched_entity hog, waker;
  e.enqueue(0, &hog, enqueue_kind::spawn, 0);
  REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 0) == &hog);
  CHECK(test_access::rq(e, 0).slice_ns == 24 * ms);
  e.enqueue(1, &waker, enqueue_kind::spawn, 0);
  REQUIRE(e.pick_next(1, nullptr, prev_action::requeue, 0) == &waker);
  CHECK(e.pick_next(1, &waker, prev_action::block, ms) == nullptr);
  e.tick(0, 2 * ms, 1, scratch);
  e.enqueue(0, &waker, enqueue_kind::wakeup, 2 * ms);
  REQUIRE_FALSE(test_access::rq(e, 0).need_resched.load());
  for (int t = 3; t <= 12; ++t) {
    INFO("tick at " << t << " ms");
    e.tick(0, t * ms, 1, scratch);
    CHECK_FALSE(e.should_preempt(0, t * ms));
  }
  CHECK(test_access::rq(e, 0).slice_ns == 12 * ms);
  e.tick(0, 13 * ms, 1, scratch);
  CHECK(e.should_preempt(0, 0));
  CHECK(e.counters(0).tick_preemptions == 1);
  CHECK(e.pick_next(0, &hog, prev_action::requeue, 13 * ms) == &waker);
}

TEST_CASE("engine: the tick ends a slice early when the running fiber leads the queue by more than it",
          "[engine][cfs]") {
  // check_preempt_tick()'s second rule: after min_granularity, a running
  // fiber whose vruntime is ahead of the leftmost queued one by more than
  // its slice yields even if its slice is not used up. A heavy fiber gets
  // a long slice; a light one that woke far behind it in vruntime (its
  // sleeper credit) is not a wake-up preemption when the granularity is
  // large, but the tick sees the lead.
  constexpr std::int64_t ms = 1'000'000;
  usched::detail::engine_config cfg;
  cfg.scaling = usched::detail::tunable_scaling::none;
  cfg.sched_latency_ns = 24 * ms;
  cfg.min_granularity_ns = 3 * ms;
  cfg.wakeup_granularity_ns = 100 * ms;  // no wake-up preemption at all
  const auto topo = usched::detail::topology::load("pack:1 core:1 pu:1");
  engine e(usched::build_domains(topo.place_workers(1, usched::worker_unit::pu)),
           usched::make_policy("cfs"), cfg);
  std::vector<usched::cpu_snapshot> scratch;
  sched_entity runner, sleeper;
  e.enqueue(0, &runner, enqueue_kind::spawn, 0);
  e.enqueue(0, &sleeper, enqueue_kind::spawn, 0);
  sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, 0);
  REQUIRE(c == &sleeper);  // the smaller START_DEBIT
  c = e.pick_next(0, c, prev_action::block, ms);
  REQUIRE(c == &runner);
  // The runner runs alone for 100 ms, then the sleeper wakes 12 ms (half
  // the period) behind min_vruntime.
  std::int64_t now = ms;
  for (int t = 0; t < 100; ++t) {
    now += ms;
    e.tick(0, now, 1, scratch);
  }
  c = e.pick_next(0, c, prev_action::requeue, now);  // a new slice
  REQUIRE(c == &runner);
  e.enqueue(0, &sleeper, enqueue_kind::wakeup, now);
  REQUIRE_FALSE(test_access::rq(e, 0).need_resched.load());
  // The slice of two equal fibers is 12 ms and the lead is 12 ms plus what
  // the runner runs: past min_granularity (3 ms) the lead exceeds the
  // slice, long before the runner has used 12 ms.
  const std::int64_t picked = now;
  for (int t = 1; t <= 2; ++t) {
    e.tick(0, picked + t * ms, 1, scratch);
    CHECK_FALSE(e.should_preempt(0, t * ms));
  }
  e.tick(0, picked + 3 * ms, 1, scratch);
  CHECK(e.should_preempt(0, 0));
  CHECK(e.counters(0).tick_preemptions == 1);
}

TEST_CASE("engine: weights scale vruntime, sleepers get bounded credit, wake-ups preempt", "[engine][cfs]") {
  constexpr std::int64_t ms = 1'000'000;
  engine e = make_engine("pack:1 core:1 pu:1", 1, "cfs");
  sched_entity heavy, light, sleeper;
  heavy.weight = 2048;
  std::int64_t now = 0;
  e.enqueue(0, &heavy, enqueue_kind::spawn, now);
  e.enqueue(0, &light, enqueue_kind::spawn, now);
  e.enqueue(0, &sleeper, enqueue_kind::spawn, now);
  sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, now);
  while (c != &heavy) {
    now += ms;
    c = e.pick_next(0, c, prev_action::requeue, now);
  }
  const std::uint64_t v0 = heavy.vruntime;
  now += 10 * ms;
  c = e.pick_next(0, c, prev_action::requeue, now);
  CHECK(heavy.vruntime - v0 == 5 * ms);  // 10 ms at weight 2048
  // The sleeper runs, blocks, and stays away for a long time while the
  // others run: min_vruntime moves far ahead of its vruntime.
  while (c != &sleeper) {
    now += ms;
    c = e.pick_next(0, c, prev_action::requeue, now);
  }
  now += ms;
  c = e.pick_next(0, c, prev_action::block, now);
  for (int i = 0; i < 200; ++i) {
    now += ms;
    c = e.pick_next(0, c, prev_action::requeue, now);
  }
  REQUIRE(c != nullptr);
  const std::uint64_t min_v = test_access::rq(e, 0).min_vruntime;
  CHECK(static_cast<std::int64_t>(min_v - sleeper.vruntime) > 50 * ms);
  // Woken: placed half a latency period (3 ms on one CPU) behind
  // min_vruntime, not at its old vruntime, and far enough ahead of the
  // running fiber (by more than the 1 ms wake-up granularity) to ask it to
  // yield.
  e.enqueue(0, &sleeper, enqueue_kind::wakeup, now);
  CHECK(sleeper.vruntime == test_access::rq(e, 0).min_vruntime - 3 * ms);
  CHECK(test_access::rq(e, 0).need_resched.load());
  CHECK(e.should_preempt(0, 0));
  CHECK(e.counters(0).wakeup_preemptions == 1);
  c = e.pick_next(0, c, prev_action::requeue, now);
  CHECK(c == &sleeper);
  CHECK_FALSE(test_access::rq(e, 0).need_resched.load());
}

TEST_CASE("engine: a wake-up within the granularity does not preempt", "[engine][cfs]") {
  engine e = make_engine("pack:1 core:1 pu:1", 1, "cfs");
  sched_entity a, b;
  std::int64_t now = 0;
  e.enqueue(0, &a, enqueue_kind::spawn, now);
  e.enqueue(0, &b, enqueue_kind::spawn, now);
  // b (placed 12 ms behind a's 24 ms debit) runs first, 100 us, and blocks.
  sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, now);
  REQUIRE(c == &b);
  now += 100'000;
  c = e.pick_next(0, c, prev_action::block, now);
  REQUIRE(c == &a);
  now += 500'000;
  // b comes back 0.9 ms of vruntime behind the running a: less than the
  // 1 ms wake-up granularity, so a keeps running.
  b.vruntime = a.vruntime + 500'000 - 900'000;
  e.enqueue(0, &b, enqueue_kind::wakeup, now);
  CHECK_FALSE(test_access::rq(e, 0).need_resched.load());
  CHECK(e.counters(0).wakeup_preemptions == 0);
  // 1.1 ms behind: it preempts.
  c = e.pick_next(0, c, prev_action::requeue, now);
  REQUIRE(c == &b);
  c = e.pick_next(0, c, prev_action::block, now);
  REQUIRE(c == &a);
  b.vruntime = a.vruntime - 1'100'000;
  e.enqueue(0, &b, enqueue_kind::wakeup, now);
  CHECK(test_access::rq(e, 0).need_resched.load());
  CHECK(e.counters(0).wakeup_preemptions == 1);
}

TEST_CASE("engine: an active balance moves the fiber that ran least recently, at the next switch",
          "[engine][cfs]") {
  // active_load_balance_cpu_stop(): the stopper runs at once on the busiest
  // worker and detach_one_task() takes the task picked least recently; the
  // one it preempted was picked last. Here the request is served at the
  // running fiber's next switch.
  constexpr std::int64_t ms = 1'000'000;
  engine e = make_engine("pack:1 l3:1 core:2 pu:1", 2, "cfs");
  sched_entity a, b;
  e.enqueue(0, &a, enqueue_kind::spawn, 0);
  e.enqueue(0, &b, enqueue_kind::spawn, 0);
  sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, 0);
  REQUIRE(c == &b);  // the smaller START_DEBIT
  c = e.pick_next(0, c, prev_action::requeue, 6 * ms);
  REQUIRE(c == &a);  // b ran until 6 ms; a never ran before now
  c = e.pick_next(0, c, prev_action::requeue, 12 * ms);
  REQUIRE(c == &b);  // a ran from 6 to 12 ms: b was picked last
  test_access::rq(e, 0).active_balance_dst = 1;
  int pushed = -1;
  // The preemption requeues b; a, picked at 6 ms, ran least recently and
  // moves; b runs on.
  CHECK(e.pick_next(0, &b, prev_action::requeue, 13 * ms, &pushed) == &b);
  CHECK(pushed == 1);
  CHECK(test_access::rq(e, 0).active_balance_dst.load() == -1);
  CHECK(test_access::rq(e, 1).nr_running == 1);
  CHECK(e.counters(0).active_pushes == 1);
  CHECK(e.pick_next(1, nullptr, prev_action::requeue, 13 * ms) == &a);
}

TEST_CASE("engine: v4.19's NUMA migration runs from the tick at the retry time, not at the wake-up",
          "[engine][cfs][numa]") {
  // Workers 0-1 on node 0, 2-3 on node 1; the fiber prefers node 1 and is
  // woken from worker 0, where it last ran.
  constexpr std::int64_t ms = 1'000'000;
  std::vector<usched::cpu_snapshot> scratch;
  SECTION("cfs places it on its node at the wake-up") {
    engine e = make_engine("pack:2 [numa] core:2 pu:1", 4, "cfs");
    sched_entity a;
    a.preferred_node = 1;
    CHECK(e.wake_up(&a, placement_kind::wake, usched::wake_reason::other, 0, 1, scratch, 0).cpu == 2);
  }
  SECTION("cfs-numa-mel and cfs-numa-v4.19-rc1 leave it there until the tick's retry") {
    const std::string policy = GENERATE(as<std::string>{}, "cfs-numa-mel", "cfs-numa-v4.19-rc1");
    INFO(policy);
    engine e = make_engine("pack:2 [numa] core:2 pu:1", 4, policy.c_str());
    sched_entity a;
    a.preferred_node = 1;
    CHECK(e.wake_up(&a, placement_kind::wake, usched::wake_reason::other, 0, 1, scratch, 0).cpu == 0);
    REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 0) == &a);
    // Runqueue 0 counts it as a NUMA fiber away from its node (fbq remote).
    CHECK(test_access::rq(e, 0).nr_numa_running.load() == 1);
    CHECK(test_access::rq(e, 0).nr_preferred_running.load() == 0);
    // Its last try was at 0: the next is 62 ticks of 1 ms later.
    test_access::rq(e, 0).numa_migrate_retry = 62 * ms;
    e.tick(0, 61 * ms, 1, scratch);
    CHECK_FALSE(e.resched_asked(0));
    CHECK(test_access::rq(e, 0).active_balance_dst.load() == -1);
    e.tick(0, 62 * ms, 1, scratch);
    CHECK(e.resched_asked(0));
    CHECK(test_access::rq(e, 0).numa_migrate_retry == 124 * ms);
    // migrate_task_to(): its switch pushes it to node 1's first idle worker.
    int pushed = -1;
    CHECK(e.pick_next(0, &a, prev_action::requeue, 62 * ms, &pushed) == nullptr);
    CHECK(pushed == 2);
    CHECK(a.cpu.load() == 2);
    CHECK(test_access::rq(e, 2).nr_running == 1);
    CHECK(test_access::rq(e, 2).nr_preferred_running.load() == 1);
    CHECK(test_access::rq(e, 0).nr_numa_running.load() == 0);
    CHECK(e.counters(0).active_pushes == 1);
    CHECK(e.pick_next(2, nullptr, prev_action::requeue, 62 * ms) == &a);
    // On its node, the tick finds nothing to do.
    e.tick(2, 200 * ms, 1, scratch);
    CHECK_FALSE(e.resched_asked(2));
  }
}

TEST_CASE("engine: an active balance moves a worker's only fiber, and ends with the running fiber's block",
          "[engine][cfs]") {
  constexpr std::int64_t ms = 1'000'000;
  SECTION("only the running fiber: it goes, and the worker is left idle") {
    // The stopper counts itself in nr_running: a CPU running one task
    // gives that task up (NUMA spreading, misfit and imbalanced groups
    // rely on it).
    engine e = make_engine("pack:1 l3:1 core:2 pu:1", 2, "cfs");
    sched_entity a;
    e.enqueue(0, &a, enqueue_kind::spawn, 0);
    REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 0) == &a);
    test_access::rq(e, 0).active_balance_dst = 1;
    int pushed = -1;
    // The caller must go idle, not switch to a null fiber.
    CHECK(e.pick_next(0, &a, prev_action::requeue, ms, &pushed) == nullptr);
    CHECK(pushed == 1);
    CHECK(test_access::rq(e, 0).idle.load());
    CHECK(test_access::rq(e, 1).nr_running == 1);
    CHECK(e.counters(0).active_pushes == 1);
    CHECK(e.pick_next(1, nullptr, prev_action::requeue, ms) == &a);
  }
  SECTION("the running fiber blocks with nothing queued: the request ends with it") {
    engine e = make_engine("pack:1 l3:1 core:2 pu:1", 2, "cfs");
    sched_entity a;
    e.enqueue(0, &a, enqueue_kind::spawn, 0);
    REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 0) == &a);
    test_access::rq(e, 0).active_balance_dst = 1;
    int pushed = -1;
    CHECK(e.pick_next(0, &a, prev_action::block, ms, &pushed) == nullptr);
    CHECK(pushed == -1);
    CHECK(e.counters(0).active_abandoned == 1);
    CHECK(test_access::rq(e, 0).active_balance_dst.load() == -1);
    // a wakes here again; its next preemption keeps it: nothing is left of
    // the request.
    e.enqueue(0, &a, enqueue_kind::wakeup, 2 * ms);
    REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 2 * ms) == &a);
    CHECK(e.pick_next(0, &a, prev_action::requeue, 3 * ms, &pushed) == &a);
    CHECK(pushed == -1);
    CHECK(e.counters(0).active_pushes == 0);
  }
  SECTION("the running fiber blocks with another queued: that one goes") {
    engine e = make_engine("pack:1 l3:1 core:2 pu:1", 2, "cfs");
    sched_entity a, b;
    e.enqueue(0, &a, enqueue_kind::spawn, 0);
    e.enqueue(0, &b, enqueue_kind::spawn, 0);
    REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 0) == &b);
    test_access::rq(e, 0).active_balance_dst = 1;
    int pushed = -1;
    CHECK(e.pick_next(0, &b, prev_action::block, ms, &pushed) == nullptr);
    CHECK(pushed == 1);
    CHECK(e.pick_next(1, nullptr, prev_action::requeue, ms) == &a);
  }
}

TEST_CASE("engine: a local spawn runs next, one slot deep, and is stolen last", "[engine]") {
  engine e = make_engine("pack:1 core:2 pu:1", 2, "steal");
  std::deque<sched_entity> f(6);
  e.enqueue(0, &f[0], enqueue_kind::spawn, 0);
  e.enqueue(0, &f[1], enqueue_kind::spawn, 0);
  sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, 0);
  REQUIRE(c == &f[0]);
  // The running fiber spawns f[2]: it goes to the head, ahead of f[1].
  e.enqueue(0, &f[2], enqueue_kind::spawn_local, 0);
  CHECK(queue_of(e, 0, f) == std::vector<int>{2, 1});
  CHECK(test_access::rq(e, 0).runnext == &f[2]);
  // A second local spawn takes the slot; the first goes to the tail.
  e.enqueue(0, &f[3], enqueue_kind::spawn_local, 0);
  CHECK(queue_of(e, 0, f) == std::vector<int>{3, 1, 2});
  CHECK(test_access::rq(e, 0).runnext == &f[3]);
  // A thief (worker 1, idle) takes from the head but leaves the runnext
  // while other fibers are queued.
  usched::balance_decision d;
  d.busiest = 0;
  d.type = usched::migration_type::migrate_task;
  d.imbalance = 1;
  sched_entity* out[4] = {};
  REQUIRE(test_access::detach_fibers(e, 1, d, usched::cpu_idle_type::newly_idle, nullptr, 0, 0, out, 4) == 1);
  CHECK(out[0] == &f[1]);
  CHECK(queue_of(e, 0, f) == std::vector<int>{3, 2});
  // The runnext leaves its slot when it is picked; what follows is FIFO.
  c = e.pick_next(0, c, prev_action::block, 0);
  CHECK(c == &f[3]);
  CHECK(test_access::rq(e, 0).runnext == nullptr);
  c = e.pick_next(0, c, prev_action::exit, 0);
  CHECK(c == &f[2]);
  // A spawn that is not local (another worker's fiber, a thread) queues
  // at the tail like any other.
  e.enqueue(0, &f[4], enqueue_kind::spawn, 0);
  e.enqueue(0, &f[5], enqueue_kind::spawn_local, 0);
  CHECK(queue_of(e, 0, f) == std::vector<int>{5, 4});
}

TEST_CASE("engine: the FIFO yield path rotates the queue and keeps its counts", "[engine]") {
  engine e = make_engine("pack:1 core:1 pu:1", 1, "none");
  std::deque<sched_entity> f(3);
  f[1].pinned = 0;
  for (auto& se : f) e.enqueue(0, &se, enqueue_kind::spawn, 0);
  CHECK(test_access::rq(e, 0).nr_pinned.load() == 1);
  sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, 0);
  REQUIRE(c == &f[0]);
  c = test_access::yield_fifo(e, 0, c, 0, nullptr);
  CHECK(c == &f[1]);
  CHECK(test_access::rq(e, 0).curr == &f[1]);
  CHECK(queue_of(e, 0, f) == std::vector<int>{2, 0});
  CHECK(test_access::rq(e, 0).nr_queued.load() == 2);
  CHECK(test_access::rq(e, 0).nr_pinned.load() == 0);  // the pinned one is running
  c = test_access::yield_fifo(e, 0, c, 0, nullptr);
  CHECK(c == &f[2]);
  CHECK(queue_of(e, 0, f) == std::vector<int>{0, 1});
  CHECK(test_access::rq(e, 0).nr_pinned.load() == 1);
  // Alone on the worker, a yield keeps running.
  c = e.pick_next(0, c, prev_action::exit, 0);
  c = e.pick_next(0, c, prev_action::exit, 0);
  REQUIRE(c == &f[1]);
  CHECK(test_access::yield_fifo(e, 0, c, 0, nullptr) == &f[1]);
  CHECK(test_access::rq(e, 0).nr_queued.load() == 0);
}

TEST_CASE("engine: under CFS a yield steps aside unless the next fiber is a granularity ahead",
          "[engine][cfs]") {
  constexpr std::int64_t ms = 1'000'000;
  sched_entity a, b;
  engine e = cfs_worker_with(a, b);
  std::int64_t now = 0;
  // b was spawned last with the smaller START_DEBIT: it runs first.
  sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, now);
  REQUIRE(c == &b);
  // One CPU: the kernel's granularities unscaled, a 6 ms period and a 1 ms
  // wake-up granularity. b has run 1 ms: 3 + 1 = 4 ms, a is at 6 ms. A
  // preemption-style requeue keeps the leftmost (b); a yield would hand
  // over only if a were within the wake-up granularity of b: it is not, b
  // keeps running.
  REQUIRE(e.config().wakeup_granularity_ns == ms);
  now += ms;
  c = e.pick_next(0, c, prev_action::yield, now);
  CHECK(c == &b);
  // b runs on until it is 0.5 ms behind a: now a yield hands over to a ...
  now += ms + ms / 2;
  c = e.pick_next(0, c, prev_action::yield, now);
  CHECK(c == &a);
  // ... and a (0.5 ms ahead of b after 0 ms of running) yields back to b.
  c = e.pick_next(0, c, prev_action::yield, now);
  CHECK(c == &b);
  // A plain requeue picks by vruntime alone: b is leftmost.
  c = e.pick_next(0, c, prev_action::requeue, now);
  CHECK(c == &b);
}

// The fair yield's short path (yield_fair, taken by schedule()) against
// pick_next(yield), the path it shortens: two engines given the same
// events, one yielding through each, must agree on every pick, on the
// tree's and the list's order, and on every number the decisions read
// (vruntimes, min_vruntime, the slice, the counts, the PELT sums), through
// spawns, blocks, wake-ups, exits and fibers of three weights, one pinned.
TEST_CASE("engine: the fair yield's short path decides as pick_next does", "[engine][cfs]") {
  for (const char* policy : {"cfs", "cfs-v5.9", "cfs-blocked-load"}) {
    CAPTURE(policy);
    constexpr int n = 12;
    engine fast = make_engine("pack:1 core:1 pu:1", 1, policy);
    engine full = make_engine("pack:1 core:1 pu:1", 1, policy);
    std::deque<sched_entity> fa(n), fb(n);
    twin_fibers(fa, fb);
    std::vector<int> blocked;
    std::int64_t now = 0;
    int spawned = 0;
    auto same = [&] { require_same(fast, fa, full, fb); };
    auto spawn = [&] {
      fast.enqueue(0, &fa[static_cast<std::size_t>(spawned)], enqueue_kind::spawn, now);
      full.enqueue(0, &fb[static_cast<std::size_t>(spawned)], enqueue_kind::spawn, now);
      ++spawned;
    };
    for (int i = 0; i < 4; ++i) spawn();
    sched_entity* ca = fast.pick_next(0, nullptr, prev_action::requeue, now);
    sched_entity* cb = full.pick_next(0, nullptr, prev_action::requeue, now);
    same();
    std::uint64_t rng = 12345;
    auto rand = [&rng](std::uint64_t m) {
      rng = usched::detail::lcg_next(rng);
      return (rng >> 33) % m;
    };
    int yields_swapped = 0, yields_kept = 0;
    for (int step = 0; step < 20000; ++step) {
      // Runs of 0 to 4 ms, most of them short.
      now += static_cast<std::int64_t>(rand(8) == 0 ? rand(4'000'000) : rand(20'000));
      const std::uint64_t what = rand(20);
      if (ca == nullptr) {
        // Idle: a blocked fiber wakes, or a new one arrives.
        if (!blocked.empty()) {
          const int w = blocked.back();
          blocked.pop_back();
          fast.enqueue(0, &fa[static_cast<std::size_t>(w)], enqueue_kind::wakeup, now);
          full.enqueue(0, &fb[static_cast<std::size_t>(w)], enqueue_kind::wakeup, now);
        } else if (spawned < n) {
          spawn();
        } else {
          break;
        }
        ca = fast.pick_next(0, nullptr, prev_action::requeue, now);
        cb = full.pick_next(0, nullptr, prev_action::requeue, now);
      } else if (what < 14) {
        sched_entity* before = ca;
        ca = fast.schedule(0, ca, prev_action::yield, now).next;
        cb = full.pick_next(0, cb, prev_action::yield, now);
        (ca == before ? yields_kept : yields_swapped) += 1;
      } else if (what < 17) {
        blocked.push_back(index_of(fa, ca));
        ca = fast.pick_next(0, ca, prev_action::block, now);
        cb = full.pick_next(0, cb, prev_action::block, now);
      } else if (what < 19 && !blocked.empty()) {
        const std::size_t k = rand(blocked.size());
        const int w = blocked[k];
        blocked.erase(blocked.begin() + static_cast<std::ptrdiff_t>(k));
        fast.enqueue(0, &fa[static_cast<std::size_t>(w)], enqueue_kind::wakeup, now);
        full.enqueue(0, &fb[static_cast<std::size_t>(w)], enqueue_kind::wakeup, now);
      } else if (spawned < n) {
        spawn();
      }
      same();
    }
    // Both of the short path's outcomes were taken, many times.
    CHECK(yields_swapped > 1000);
    CHECK(yields_kept > 100);
  }
}

// The join hand-off's one-lock paths against its two-step sequences: a
// join's block with the joinee named (schedule(block, joined)) against
// hand_off() and then pick_next(block), and exit_to_joiner() against
// wake_joiner() and then pick_next(exit). Two engines given the same random
// fork-join program, each through one kind of path, must agree on every
// pick, on the queue's and the tree's order, on the counts, on every
// vruntime and on the load signals, under the fair and the FIFO and LIFO
// disciplines, with fibers of three weights, one pinned.
TEST_CASE("engine: the join hand-off's one-lock paths decide as the two-step ones do", "[engine]") {
  for (const char* policy : {"cfs", "cfs-v5.9", "cfs-blocked-load", "steal", "steal-lifo", "none"}) {
    CAPTURE(policy);
    constexpr int n = 16;
    engine fast = make_engine("pack:1 core:1 pu:1", 1, policy);
    engine full = make_engine("pack:1 core:1 pu:1", 1, policy);
    std::deque<sched_entity> fa(n), fb(n);
    twin_fibers(fa, fb);
    // What each fiber is doing. A fiber joins only fibers of higher index,
    // so no two ever wait for each other.
    enum class st { free, runnable, blocked, joining };
    std::vector<st> state(n, st::free);
    std::vector<int> joiner(n, -1);
    std::int64_t now = 0;
    auto same = [&] { require_same(fast, fa, full, fb); };
    std::uint64_t rng = 2024;
    auto rand = [&rng](std::uint64_t m) {
      rng = usched::detail::lcg_next(rng);
      return (rng >> 33) % m;
    };
    auto pick_any = [&](st want, int above) {
      std::vector<int> c;
      for (int i = above + 1; i < n; ++i) {
        if (state[static_cast<std::size_t>(i)] == want) c.push_back(i);
      }
      return c.empty() ? -1 : c[rand(c.size())];
    };
    auto spawn = [&](int i) {
      const auto k = static_cast<std::size_t>(i);
      fa[k].cpu.store(-1);
      fb[k].cpu.store(-1);
      fast.enqueue(0, &fa[k], enqueue_kind::spawn_local, now);
      full.enqueue(0, &fb[k], enqueue_kind::spawn_local, now);
      state[k] = st::runnable;
    };
    std::vector<usched::cpu_snapshot> scratch;
    sched_entity* ca = nullptr;
    sched_entity* cb = nullptr;
    int joins_handed = 0, joins_not = 0, exits_handed = 0;
    for (int step = 0; step < 30000; ++step) {
      now += static_cast<std::int64_t>(rand(8) == 0 ? rand(3'000'000) : rand(30'000));
      if (ca == nullptr) {
        // Idle: a blocked fiber wakes, or a new one starts.
        if (const int b = pick_any(st::blocked, -1); b >= 0 && rand(2) == 0) {
          const auto k = static_cast<std::size_t>(b);
          fast.enqueue(0, &fa[k], enqueue_kind::wakeup, now);
          full.enqueue(0, &fb[k], enqueue_kind::wakeup, now);
          state[k] = st::runnable;
        } else if (const int f = pick_any(st::free, -1); f >= 0) {
          spawn(f);
        } else if (b >= 0) {
          const auto k = static_cast<std::size_t>(b);
          fast.enqueue(0, &fa[k], enqueue_kind::wakeup, now);
          full.enqueue(0, &fb[k], enqueue_kind::wakeup, now);
          state[k] = st::runnable;
        }
        ca = fast.pick_next(0, nullptr, prev_action::requeue, now);
        cb = full.pick_next(0, nullptr, prev_action::requeue, now);
        same();
        continue;
      }
      const int me = index_of(fa, ca);
      const auto mk = static_cast<std::size_t>(me);
      const std::uint64_t what = rand(20);
      if (what < 5) {
        if (const int f = pick_any(st::free, -1); f >= 0) spawn(f);
      } else if (what < 10) {
        // Join a fiber that is not done and has no joiner yet.
        std::vector<int> c;
        for (int i = me + 1; i < n; ++i) {
          const st s = state[static_cast<std::size_t>(i)];
          if (s != st::free && joiner[static_cast<std::size_t>(i)] < 0) c.push_back(i);
        }
        if (!c.empty()) {
          const auto t = static_cast<std::size_t>(c[rand(c.size())]);
          joiner[t] = me;
          state[mk] = st::joining;
          const bool queued = fa[t].on_rq.load();
          (queued ? joins_handed : joins_not) += 1;
          ca = fast.schedule(0, ca, prev_action::block, now, &fa[t]).next;
          full.hand_off(0, &fb[t]);
          cb = full.pick_next(0, cb, prev_action::block, now);
          if (queued) REQUIRE(ca == &fa[t]);
        }
      } else if (what < 14) {
        // Exit, handing the worker back to a joiner.
        const int j = joiner[mk];
        state[mk] = st::free;
        joiner[mk] = -1;
        if (j >= 0) {
          const auto jk = static_cast<std::size_t>(j);
          state[jk] = st::runnable;
          REQUIRE(fast.hands_back(fa[jk], 0));
          ++exits_handed;
          ca = fast.exit_to_joiner(0, ca, &fa[jk], now).next;
          full.wake_joiner(&fb[jk], 0, 1, scratch, now);
          cb = full.pick_next(0, cb, prev_action::exit, now);
          REQUIRE(ca == &fa[jk]);
        } else {
          ca = fast.pick_next(0, ca, prev_action::exit, now);
          cb = full.pick_next(0, cb, prev_action::exit, now);
        }
      } else if (what < 16) {
        state[mk] = st::blocked;
        ca = fast.pick_next(0, ca, prev_action::block, now);
        cb = full.pick_next(0, cb, prev_action::block, now);
      } else if (what < 18) {
        if (const int b = pick_any(st::blocked, -1); b >= 0) {
          const auto k = static_cast<std::size_t>(b);
          fast.enqueue(0, &fa[k], enqueue_kind::wakeup, now);
          full.enqueue(0, &fb[k], enqueue_kind::wakeup, now);
          state[k] = st::runnable;
        }
      } else {
        ca = fast.schedule(0, ca, prev_action::yield, now).next;
        cb = full.schedule(0, cb, prev_action::yield, now).next;
      }
      same();
    }
    // Every path was taken, many times.
    CHECK(joins_handed > 500);
    CHECK(joins_not > 100);
    CHECK(exits_handed > 500);
    // Both paths count each exit's joiner as a join wake-up; the wake-ups
    // made through the enqueue step alone count nothing.
    const auto join = static_cast<std::size_t>(usched::wake_reason::join);
    for (const engine* e : {&fast, &full}) {
      std::uint64_t total = 0;
      for (const auto& c : e->counters(0).wakeups) total += c;
      CHECK(e->counters(0).wakeups[join] == static_cast<std::uint64_t>(exits_handed));
      CHECK(total == static_cast<std::uint64_t>(exits_handed));
    }
  }
}

// The timeline's inserts take shortcuts (the run's tail, the previous insert
// into the tree, the leftmost; timeline.hpp): through
// spawns, wake-ups with sleeper credit, yields, blocks and exits of fibers
// of three weights, the tree must stay in vruntime order and hold exactly
// the queued fibers.
TEST_CASE("engine: the timeline stays in vruntime order through its insert shortcuts", "[engine][cfs]") {
  constexpr int n = 40;
  engine e = make_engine("pack:1 core:1 pu:1", 1, "cfs");
  std::deque<sched_entity> f(n);
  const unsigned weights[] = {1024, 820, 1277};
  for (int i = 0; i < n; ++i) f[static_cast<std::size_t>(i)].weight = weights[i % 3];
  std::vector<int> blocked, fresh;
  for (int i = n - 1; i >= 0; --i) fresh.push_back(i);
  std::uint64_t rng = 77;
  auto rand = [&rng](std::uint64_t m) {
    rng = usched::detail::lcg_next(rng);
    return (rng >> 33) % m;
  };
  std::int64_t now = 0;
  sched_entity* c = nullptr;
  int at_right = 0, elsewhere = 0;
  for (int step = 0; step < 50000; ++step) {
    now += static_cast<std::int64_t>(rand(16) == 0 ? rand(2'000'000) : rand(20'000));
    const std::uint64_t what = rand(10);
    const auto& t = test_access::rq(e, 0).timeline;
    const auto last_is = [&t](const sched_entity& se) { return t.rightmost() == &se; };
    if (what < 3 && !fresh.empty()) {
      // A burst of spawns, as fork-join code makes.
      for (std::uint64_t k = 1 + rand(4); k > 0 && !fresh.empty(); --k) {
        const int i = fresh.back();
        fresh.pop_back();
        const bool before_some = !t.empty();
        e.enqueue(0, &f[static_cast<std::size_t>(i)], enqueue_kind::spawn_local, now);
        if (before_some) (last_is(f[static_cast<std::size_t>(i)]) ? at_right : elsewhere) += 1;
      }
    } else if (what < 5 && !blocked.empty()) {
      const std::size_t k = rand(blocked.size());
      const int i = blocked[k];
      blocked.erase(blocked.begin() + static_cast<std::ptrdiff_t>(k));
      const bool before_some = !t.empty();
      e.enqueue(0, &f[static_cast<std::size_t>(i)], enqueue_kind::wakeup, now);
      if (before_some) (last_is(f[static_cast<std::size_t>(i)]) ? at_right : elsewhere) += 1;
    } else if (c && what < 7) {
      c = e.schedule(0, c, prev_action::yield, now).next;
    } else if (c && what < 9) {
      for (std::size_t i = 0; i < f.size(); ++i) {
        if (&f[i] == c) blocked.push_back(static_cast<int>(i));
      }
      c = e.pick_next(0, c, prev_action::block, now);
    } else if (c) {
      for (std::size_t i = 0; i < f.size(); ++i) {
        if (&f[i] == c) fresh.push_back(static_cast<int>(i));
      }
      c = e.pick_next(0, c, prev_action::exit, now);
    } else {
      c = e.pick_next(0, nullptr, prev_action::requeue, now);
    }
    const auto& q = test_access::rq(e, 0);
    std::size_t size = 0;
    const sched_entity* prev = nullptr;
    for (const sched_entity& se : q.timeline) {
      if (prev) REQUIRE(static_cast<std::int64_t>(se.vruntime - prev->vruntime) >= 0);
      prev = &se;
      ++size;
    }
    REQUIRE(size == q.nr_queued.load());
  }
  // Both kinds of insert were made, many times.
  CHECK(at_right > 50);
  CHECK(elsewhere > 1000);
}

TEST_CASE("engine: the LIFO discipline runs the newest first and is stolen from the oldest",
          "[engine]") {
  engine e = make_engine("pack:1 core:2 pu:1", 2, "steal-lifo");
  REQUIRE(test_access::lifo(e));
  std::deque<sched_entity> f(6);
  for (int i = 0; i < 4; ++i) e.enqueue(0, &f[static_cast<std::size_t>(i)], enqueue_kind::spawn, 0);
  CHECK(queue_of(e, 0, f) == std::vector<int>{3, 2, 1, 0});
  sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, 0);
  REQUIRE(c == &f[3]);
  // A fiber the running one wakes or spawns runs before the older ones.
  e.enqueue(0, &f[4], enqueue_kind::spawn_local, 0);
  CHECK(queue_of(e, 0, f) == std::vector<int>{4, 2, 1, 0});
  CHECK(test_access::rq(e, 0).runnext == nullptr);  // no slot: the whole queue is LIFO
  // A yield goes to the back; the newest runs.
  c = test_access::yield_fifo(e, 0, c, 0, nullptr);
  CHECK(c == &f[4]);
  CHECK(queue_of(e, 0, f) == std::vector<int>{2, 1, 0, 3});
  // A thief takes the oldest first: f[3] (requeued last, but queued at the
  // back, so it counts as waiting longest), then f[0].
  usched::balance_decision d;
  d.busiest = 0;
  d.type = usched::migration_type::migrate_task;
  d.imbalance = 2;
  sched_entity* out[4] = {};
  REQUIRE(test_access::detach_fibers(e, 1, d, usched::cpu_idle_type::newly_idle, nullptr, 0, 0, out, 4) == 2);
  CHECK(out[0] == &f[3]);
  CHECK(out[1] == &f[0]);
  CHECK(queue_of(e, 0, f) == std::vector<int>{2, 1});
  // A fiber blocks; the newest queued runs; a wake-up goes to the front.
  c = e.pick_next(0, c, prev_action::block, 0);
  CHECK(c == &f[2]);
  e.enqueue(0, &f[4], enqueue_kind::wakeup, 0);
  CHECK(queue_of(e, 0, f) == std::vector<int>{4, 1});
}

TEST_CASE("engine: two fibers taking turns each get half the util, the runqueue all of it",
          "[engine][cfs][pelt]") {
  // Two CPU-bound fibers share one worker for a second and yield to each
  // other every 50 us. Each runs half the time: its util_avg is about 512,
  // and the time it waits in the queue counts as runnable, not running
  // (the kernel's set_next_entity() accrues it before the entity runs).
  // The runqueue runs something all the time: util about 1024, runnable
  // about 2 x 1024. The runqueue's own accrual is deferred to period ends
  // on these swaps; its averages must not suffer for it.
  constexpr std::int64_t us = 1'000;
  sched_entity a, b;
  engine e = cfs_worker_with(a, b);
  std::int64_t now = 0;
  sched_entity* c = e.pick_next(0, nullptr, prev_action::requeue, now);
  int switches = 0;
  for (now = 50 * us; now <= 1'000'000 * us; now += 50 * us) {
    sched_entity* n = e.pick_next(0, c, prev_action::yield, now);
    switches += n != c;
    c = n;
  }
  CHECK(switches > 19'000);
  for (const sched_entity* se : {&a, &b}) {
    CHECK(se->avg.util_avg >= 480);
    CHECK(se->avg.util_avg <= 545);
    CHECK(se->avg.runnable_avg >= 1010);
  }
  const auto& rq = test_access::rq(e, 0).pelt;
  CHECK(rq.all.util_avg >= 1010);
  CHECK(rq.all.runnable_avg >= 2020);
  CHECK(rq.all.load_avg >= 2020);
  // Published for lock-free snapshots at least once a period.
  CHECK(test_access::rq(e, 0).util_avg_pub.load() >= 1000);
  CHECK(test_access::rq(e, 0).pelt_update_pub.load() >= 1'000'000 * us - 1024 * 1024);
}

TEST_CASE("engine: an enqueue and a pick under FIFO touch one runqueue cache line", "[engine]") {
  engine e = make_engine("pack:1 core:2 pu:1", 2, "steal");
  const auto& q = test_access::rq(e, 1);
  const auto base = reinterpret_cast<std::uintptr_t>(&q);
  const auto end_of = [&](const auto& field) {
    return reinterpret_cast<std::uintptr_t>(&field) + sizeof(field) - base;
  };
  CHECK(base % 64 == 0);
  for (std::uintptr_t end : {end_of(q.lock), end_of(q.idle), end_of(q.need_resched), end_of(q.nr_running),
                             end_of(q.head), end_of(q.tail), end_of(q.curr), end_of(q.runnext),
                             end_of(q.nr_queued), end_of(q.nr_pinned), end_of(q.active_balance_dst),
                             end_of(q.load_weight)}) {
    CHECK(end <= 64);
  }
}

// ---- the event API: what a backend is told to do ---------------------------------

TEST_CASE("engine: a wake-up says whom to notify and whether to kick an idle worker", "[engine][events]") {
  engine e = make_engine("pack:1 core:2 pu:1", 2, "steal");
  std::vector<usched::cpu_snapshot> scratch;
  std::deque<sched_entity> f(3);
  f[0].pinned = 0;
  f[1].pinned = 0;
  f[2].pinned = 0;
  // A spawn from outside onto an idle worker: notify it, nobody to kick
  // (nothing waits behind a running fiber).
  auto r = e.wake_up(&f[0], usched::placement_kind::spawn, usched::wake_reason::spawn, -1, 1, scratch, 0);
  CHECK(r.cpu == 0);
  CHECK(r.notify);
  CHECK_FALSE(r.kick);
  CHECK(e.schedule(0, nullptr, prev_action::requeue, 0).next == &f[0]);
  // The running fiber spawns onto its own worker: no notify (it runs
  // there), but a fiber now waits behind it: kick an idle worker.
  r = e.wake_up(&f[1], usched::placement_kind::spawn, usched::wake_reason::spawn, 0, 2, scratch, 0);
  CHECK(r.cpu == 0);
  CHECK_FALSE(r.notify);
  CHECK(r.kick);
  // A wake-up of a fiber still on its worker (not yet blocked) only marks it.
  f[2].cpu = 0;
  f[2].on_rq.store(true);
  r = e.wake_up(&f[2], usched::placement_kind::wake, usched::wake_reason::other, 1, 3, scratch, 0);
  CHECK(r.cpu == -1);
  CHECK(f[2].wake_pending);
}

TEST_CASE("engine: a wake-up is counted by its reason on the worker it lands on, and places as any other",
          "[engine][events]") {
  using usched::wake_reason;
  const auto count = [](const engine& e, int cpu, wake_reason why) {
    return e.counters(cpu).wakeups[static_cast<std::size_t>(why)].get();
  };
  const auto total = [](const engine& e, int cpu) {
    std::uint64_t t = 0;
    for (const auto& c : e.counters(cpu).wakeups) t += c;
    return t;
  };
  std::vector<usched::cpu_snapshot> scratch;
  {
    engine e = make_engine("pack:1 core:2 pu:1", 2, "steal");
    std::deque<sched_entity> f(4);
    f[0].pinned = 1;
    f[1].pinned = 1;
    // A spawn from worker 0 onto worker 1 counts on worker 1, the one it
    // lands on, not on the spawner's.
    CHECK(e.wake_up(&f[0], placement_kind::spawn, wake_reason::spawn, 0, 1, scratch, 0).cpu == 1);
    CHECK(count(e, 1, wake_reason::spawn) == 1);
    CHECK(total(e, 0) == 0);
    // A wake-up of a fiber still on worker 1 (not yet blocked) counts there,
    // where it stays.
    f[1].cpu = 1;
    f[1].on_rq.store(true);
    CHECK(e.wake_up(&f[1], placement_kind::wake, wake_reason::channel, 0, 2, scratch, 0).cpu == -1);
    CHECK(count(e, 1, wake_reason::channel) == 1);
    // The enqueue step alone counts nothing; given a reason, it counts it.
    e.enqueue(0, &f[2], enqueue_kind::spawn, 0);
    CHECK(total(e, 0) == 0);
    e.enqueue(0, &f[3], enqueue_kind::spawn, 0, false, wake_reason::spawn);
    CHECK(count(e, 0, wake_reason::spawn) == 1);
    CHECK(total(e, 0) == 1);
    CHECK(total(e, 1) == 2);
  }
  // Placement never reads the reason: the same wake-up in engines alike in
  // everything else lands on the same worker, with the same result, and
  // only the reason's counter differs.
  for (const char* policy : {"cfs", "steal"}) {
    CAPTURE(policy);
    int first_cpu = -2;
    for (std::size_t r = 0; r < usched::wake_reason_count; ++r) {
      const auto why = static_cast<wake_reason>(r);
      CAPTURE(to_string(why));
      engine e = make_engine("pack:1 l3:1 core:4 pu:1", 4, policy);
      std::deque<sched_entity> f(3);
      e.enqueue(2, &f[0], enqueue_kind::spawn, 0);
      REQUIRE(e.pick_next(2, nullptr, prev_action::requeue, 0) == &f[0]);
      e.enqueue(2, &f[1], enqueue_kind::spawn, 0);
      e.enqueue(2, &f[2], enqueue_kind::spawn, 0);
      REQUIRE(e.pick_next(2, &f[0], prev_action::block, 1'000) != nullptr);
      const auto w = e.wake_up(&f[0], placement_kind::wake, why, 2, 7, scratch, 2'000);
      if (first_cpu == -2) first_cpu = w.cpu;
      CHECK(w.cpu == first_cpu);
      CHECK(w.cpu >= 0);
      CHECK(count(e, w.cpu, why) == 1);
      CHECK(total(e, w.cpu) == 1);
    }
  }
}

TEST_CASE("engine: the overload flag follows movable fibers, and gates the idle pull", "[engine][events]") {
  engine e = make_engine("pack:1 core:2 pu:1", 2, "steal");
  std::vector<usched::cpu_snapshot> scratch;
  std::deque<sched_entity> f(3);
  CHECK_FALSE(test_access::overloaded(e));
  e.enqueue(0, &f[0], enqueue_kind::spawn, 0);
  // One runnable fiber on an idle worker is not for taking.
  CHECK_FALSE(test_access::overloaded(e));
  CHECK(e.schedule(0, nullptr, prev_action::requeue, 0).next == &f[0]);
  // Pinned behind the running one: still nothing another worker may take.
  f[1].pinned = 0;
  e.enqueue(0, &f[1], enqueue_kind::wakeup, 0);
  CHECK_FALSE(test_access::overloaded(e));
  CHECK(test_access::idle_balance(e, 1, 0, 1, scratch) == 0);
  CHECK(e.counters(1).newidle_attempts == 0);  // gated: no pass at all
  // An unpinned one behind it: overloaded, and the idle pull takes it.
  e.enqueue(0, &f[2], enqueue_kind::wakeup, 0);
  CHECK(test_access::overloaded(e));
  CHECK(test_access::idle_balance(e, 1, 0, 1, scratch) == 1);
  CHECK(test_access::rq(e, 1).nr_queued.load() == 1);
  // A pass that finds nothing to take clears the flag.
  CHECK(e.find_work(1, 0, 1, scratch) == &f[2]);
  CHECK(test_access::overloaded(e));  // not cleared until a pass looks
  CHECK(test_access::newidle_balance(e, 1, 0, 1, scratch) == 0);
  CHECK_FALSE(test_access::overloaded(e));
}

TEST_CASE("engine: the tick asks for the nohz kick once per interval while fibers wait", "[engine][events]") {
  engine e = make_engine("pack:1 core:2 pu:1", 2, "cfs");
  const std::int64_t kick = e.config().idle_kick_interval_ns;
  std::vector<usched::cpu_snapshot> scratch;
  std::deque<sched_entity> f(2);
  e.enqueue(0, &f[0], enqueue_kind::spawn, 0);
  sched_entity* c = e.schedule(0, nullptr, prev_action::requeue, 0).next;
  CHECK(c == &f[0]);
  // Alone: no kick however long it runs.
  CHECK_FALSE(e.tick(0, kick, 1, scratch).kick);
  f[1].pinned = 0;
  e.enqueue(0, &f[1], enqueue_kind::wakeup, kick);
  CHECK(e.tick(0, 2 * kick, 1, scratch).kick);
  CHECK_FALSE(e.tick(0, 2 * kick + kick / 2, 1, scratch).kick);
  CHECK(e.tick(0, 3 * kick, 1, scratch).kick);
}

TEST_CASE("engine: should_preempt is a wake-up's request or a used-up slice with others waiting",
          "[engine][events]") {
  engine e = make_engine("pack:1 core:1 pu:1", 1, "steal");
  std::deque<sched_entity> f(2);
  const std::int64_t slice = e.config().fifo_slice_ns;
  e.enqueue(0, &f[0], enqueue_kind::spawn, 0);
  CHECK(e.schedule(0, nullptr, prev_action::requeue, 0).next == &f[0]);
  CHECK_FALSE(e.should_preempt(0, 10 * slice));  // nobody waits
  e.enqueue(0, &f[1], enqueue_kind::wakeup, 0);
  CHECK_FALSE(e.should_preempt(0, slice - 1));
  CHECK(e.should_preempt(0, slice));
  test_access::rq(e, 0).need_resched.store(true);
  CHECK(e.should_preempt(0, 0));
}

TEST_CASE("engine: a CFS wake-up placed from its LLCs' snapshots alone chooses as from every worker's",
          "[engine][cfs][placement]") {
  // policy_traits::wake_reads_only_llcs: the engine snapshots only the LLCs of
  // the waker's worker and of the fiber's previous one. Two engines made
  // and loaded alike place the same wake-ups, one with every entry of its
  // snapshot space fresh beforehand and the other with garbage in it: any
  // read of an entry outside those LLCs would show as a different choice
  // or a different effect (the fiber's recent_used_cpu, the waker's scan
  // average, the LLCs' idle-core hints).
  struct topo {
    const char* synthetic;
    unsigned workers;
  };
  // Two NUMA nodes of two SMT LLCs each; one LLC of 8; four packages of 2
  // (a package is the LLC of a topology without caches).
  const topo topos[] = {{"pack:2 [numa] l3:2 core:4 pu:2", 32}, {"pack:1 l3:1 core:8 pu:1", 8}, {"pack:4 core:2 pu:1", 8}};
  std::uint64_t rng = usched::detail::splitmix64_increment;
  const auto next = [&rng](std::uint64_t n) {
    rng = usched::detail::lcg_next(rng);
    return (rng >> 33) % n;
  };
  const std::int64_t us = 1'000;
  unsigned wakes = 0, moved = 0;
  for (const topo& t : topos) {
    for (const char* policy : {"cfs", "cfs-v5.9"}) {
      for (int trial = 0; trial < 40; ++trial) {
        engine a = make_engine(t.synthetic, t.workers, policy);
        engine b = make_engine(t.synthetic, t.workers, policy);
        std::deque<sched_entity> fa, fb;
        // Some workers idle, the others running a fiber with 0-3 queued
        // behind it, spawned at different times so that their loads differ.
        std::int64_t now = 1'000 * us;
        for (unsigned c = 0; c < t.workers; ++c) {
          if (next(3) == 0) continue;
          const auto n = 1 + next(4);
          for (std::uint64_t i = 0; i < n; ++i) {
            now += static_cast<std::int64_t>(next(300)) * us;
            a.enqueue(static_cast<int>(c), &fa.emplace_back(), enqueue_kind::spawn, now);
            b.enqueue(static_cast<int>(c), &fb.emplace_back(), enqueue_kind::spawn, now);
          }
          REQUIRE(a.pick_next(static_cast<int>(c), nullptr, prev_action::requeue, now) != nullptr);
          REQUIRE(b.pick_next(static_cast<int>(c), nullptr, prev_action::requeue, now) != nullptr);
        }
        std::vector<usched::cpu_snapshot> full, garbage;
        for (int w = 0; w < 8; ++w) {
          now += 50 * us;
          const int prev = static_cast<int>(next(t.workers));
          const int origin = next(4) == 0 ? -1 : static_cast<int>(next(t.workers));
          const int recent = next(2) == 0 ? -1 : static_cast<int>(next(t.workers));
          const auto load = static_cast<unsigned long>(next(1024));
          const int node = next(4) == 0 ? static_cast<int>(next(2)) : -1;
          sched_entity wa, wb;
          for (sched_entity* se : {&wa, &wb}) {
            se->cpu.store(prev);
            se->recent_used_cpu = recent;
            se->avg.load_avg = load;
            se->preferred_node = node;
          }
          test_access::snapshot(a, full, now);
          garbage.assign(t.workers, usched::cpu_snapshot{});
          for (usched::cpu_snapshot& s : garbage) {
            s.idle = next(2) == 0;
            s.nr_queued = static_cast<unsigned>(next(5));
            s.nr_running = s.nr_queued + (s.idle ? 0u : 1u);
            s.load_avg = next(4096);
            s.util_avg = next(1024);
            s.runnable_avg = next(4096);
            s.capacity = 1 + next(1024);
            s.numa_node = static_cast<int>(next(2));
            s.llc_has_idle_cores = next(2) == 0;
          }
          const std::uint64_t random = next(1u << 30);
          const int ca = a.select_cpu(placement_kind::wake, wa, origin, random, full, now);
          const int cb = b.select_cpu(placement_kind::wake, wb, origin, random, garbage, now);
          INFO(t.synthetic << " " << policy << " trial " << trial << ": prev " << prev << ", waker " << origin
                           << ", recent " << recent << ", node " << node);
          REQUIRE(ca == cb);
          CHECK(wa.recent_used_cpu == wb.recent_used_cpu);
          if (origin >= 0) CHECK(test_access::rq(a, origin).avg_scan_cost.load() == test_access::rq(b, origin).avg_scan_cost.load());
          test_access::snapshot(a, full, now);
          test_access::snapshot(b, garbage, now);
          for (unsigned c = 0; c < t.workers; ++c) CHECK(full[c].llc_has_idle_cores == garbage[c].llc_has_idle_cores);
          ++wakes;
          if (ca != prev) ++moved;
        }
      }
    }
  }
  // The wake-ups were not all left where they were: the LLC scans chose.
  CHECK(wakes == 3 * 2 * 40 * 8);
  CHECK(moved > wakes / 10);
}

TEST_CASE("engine: latency_histogram's buckets are log-linear, contiguous, and a quarter wide at most",
          "[engine][stats]") {
  using h = usched::latency_histogram;
  // 32 ns buckets below 256 ns, then four to each power of two.
  CHECK(h::bucket_of(0) == 0);
  CHECK(h::bucket_of(31) == 0);
  CHECK(h::bucket_of(32) == 1);
  CHECK(h::bucket_of(255) == 7);
  CHECK(h::bucket_of(256) == 8);
  CHECK(h::bucket_of(319) == 8);
  CHECK(h::bucket_of(320) == 9);
  CHECK(h::bucket_of(511) == 11);
  CHECK(h::bucket_of(512) == 12);
  CHECK(h::bucket_of(1000) == 15);  // [896, 1024)
  CHECK(h::bucket_of(1024) == 16);
  CHECK(h::bucket_lower(16) == 1024);
  CHECK(h::bucket_width(16) == 256);
  // The last bucket, [1.88 s, 2.15 s), takes anything longer.
  CHECK(h::bucket_lower(h::bucket_count - 1) == 7ull << 28);
  CHECK(h::bucket_of((1ull << 31) - 1) == h::bucket_count - 1);
  CHECK(h::bucket_of(~0ull) == h::bucket_count - 1);
  for (std::size_t i = 0; i + 1 < h::bucket_count; ++i) {
    CAPTURE(i);
    CHECK(h::bucket_lower(i) + h::bucket_width(i) == h::bucket_lower(i + 1));
    CHECK(h::bucket_of(h::bucket_lower(i)) == i);
    CHECK(h::bucket_of(h::bucket_lower(i + 1) - 1) == i);
    if (i >= h::linear_buckets) CHECK(h::bucket_width(i) * 4 <= h::bucket_lower(i));
  }
  // Percentiles: the midpoint of the bucket that reaches the rank, capped
  // by the exact maximum.
  h x;
  CHECK(x.percentile(50) == 0);
  for (int i = 0; i < 98; ++i) x.record(1000);
  x.record(5000);
  x.record(1'000'000);
  CHECK(x.count == 100);
  CHECK(x.sum_ns == 98 * 1000 + 5000 + 1'000'000);
  CHECK(x.max_ns == 1'000'000);
  CHECK(x.percentile(50) == 896 + 64);
  CHECK(x.percentile(98) == 896 + 64);
  CHECK(x.percentile(99) == 4096 + 512);
  CHECK(x.percentile(99.9) == 917'504 + 65'536);  // the midpoint of [917504, 1048576)
  CHECK(x.percentile(100) == 917'504 + 65'536);
  h z;
  z.record(1000);
  CHECK(z.percentile(50) == 960);
  z.record(100);
  CHECK(z.percentile(100) == 960);
  h m;
  m.record(900);
  CHECK(m.percentile(50) == 900);  // the midpoint, 960, is past the maximum
  h y;
  y.record(40);
  y.merge(x);
  CHECK(y.count == 101);
  CHECK(y.buckets[1] == 1);
  CHECK(y.max_ns == 1'000'000);
}

TEST_CASE("engine: each pick of a woken fiber records its wake-to-run delay by reason, on the worker that runs it",
          "[engine][events][stats]") {
  using usched::wake_reason;
  std::vector<usched::cpu_snapshot> scratch;
  usched::detail::engine_config no_load;
  no_load.load_tracking = false;
  struct variant {
    const char* policy;
    usched::detail::engine_config cfg;
  };
  for (const variant& v : {variant{"steal", {}}, variant{"steal-lifo", {}}, variant{"cfs", {}}, variant{"cfs", no_load}}) {
    CAPTURE(v.policy, v.cfg.load_tracking);
    engine e = make_engine("pack:1 core:2 pu:1", 2, v.policy, v.cfg);
    const auto lat = [&](int cpu, wake_reason why) {
      usched::worker_stats s;
      e.add_counters(cpu, s);
      return s.wake_latency(why);
    };
    std::deque<sched_entity> f(4);
    f[0].pinned = 0;
    f[1].pinned = 0;
    // A spawn queued at 1000 and picked at 1300: 300 ns, spawn.
    e.enqueue(0, &f[0], enqueue_kind::spawn, 1'000, false, wake_reason::spawn);
    REQUIRE(e.pick_next(0, nullptr, prev_action::requeue, 1'300) == &f[0]);
    // A wake-up at 2000 onto worker 0, run by f[0]'s yield at 2500: 500 ns, sync.
    CHECK(e.wake_up(&f[1], placement_kind::wake, wake_reason::sync, 0, 1, scratch, 2'000).cpu == 0);
    REQUIRE(e.schedule(0, &f[0], prev_action::yield, 2'500).next == &f[1]);
    // f[1] blocks: f[0], requeued by its yield and woken by no one, runs
    // again without a delay recorded.
    REQUIRE(e.schedule(0, &f[1], prev_action::block, 3'000).next == &f[0]);
    // A timer's wake-up at 3500, run when f[0] exits at 4700: 1200 ns.
    CHECK(e.wake_up(&f[1], placement_kind::wake, wake_reason::timer, 0, 2, scratch, 3'500).cpu == 0);
    REQUIRE(e.schedule(0, &f[0], prev_action::exit, 4'700).next == &f[1]);
    // A wake-up that finds f[1] still on its way to block (at 5000) turns
    // the block at 5100 into a requeue, and f[1] runs on: 100 ns, channel.
    CHECK(e.wake_up(&f[1], placement_kind::wake, wake_reason::channel, 1, 3, scratch, 5'000).cpu == -1);
    REQUIRE(e.schedule(0, &f[1], prev_action::block, 5'100).next == &f[1]);
    const auto spawn = lat(0, wake_reason::spawn);
    const auto sync = lat(0, wake_reason::sync);
    const auto timer = lat(0, wake_reason::timer);
    const auto channel = lat(0, wake_reason::channel);
    CHECK((spawn.count == 1 && spawn.sum_ns == 300 && spawn.max_ns == 300));
    CHECK(spawn.buckets[usched::latency_histogram::bucket_of(300)] == 1);
    CHECK((sync.count == 1 && sync.sum_ns == 500));
    CHECK((timer.count == 1 && timer.sum_ns == 1200));
    CHECK((channel.count == 1 && channel.sum_ns == 100));
    usched::worker_stats s0;
    e.add_counters(0, s0);
    CHECK(s0.wake_latency().count == 4);
    CHECK(s0.wake_latency().sum_ns == 2100);
    CHECK(s0.wake_latency().max_ns == 1200);
    // Counted where the fiber runs: a fiber queued on worker 1 and pulled
    // to worker 0 before it runs is worker 0's delay. The enqueue step
    // without a reason stamps nothing.
    e.enqueue(1, &f[3], enqueue_kind::spawn, 5'900);
    REQUIRE(e.pick_next(1, nullptr, prev_action::requeue, 5'950) == &f[3]);
    e.enqueue(1, &f[2], enqueue_kind::spawn, 6'000, false, wake_reason::future);
    sched_entity* moved[1];
    usched::balance_decision d;
    d.type = usched::migration_type::migrate_task;
    d.imbalance = 1;
    d.busiest = 1;
    REQUIRE(test_access::detach_fibers(e, 0, d, usched::cpu_idle_type::newly_idle, nullptr, 0, 6'500, moved, 1) == 1);
    test_access::attach_fibers(e, 0, moved, 1, 6'500);
    REQUIRE(e.schedule(0, &f[1], prev_action::block, 7'000).next == &f[2]);
    CHECK(lat(0, wake_reason::future).sum_ns == 1000);
    CHECK(lat(1, wake_reason::future).count == 0);
    usched::worker_stats s1;
    e.add_counters(1, s1);
    CHECK(s1.wake_latency().count == 0);
  }
}
