// spawn_join: fibers spawned and joined in batches of spawn_batch from a
// fiber: ns per fiber, the first run (stacks made and faulted in) and a
// warm one.
#include <atomic>
#include <stdexcept>
#include <thread>

#include <oneapi/tbb/task_group.h>

#include "../workloads.hpp"

namespace micro::spawn_join {

namespace {

// tbb_run() is spawn_join_run() as a oneTBB user writes it: a oneTBB task
// has no handle to join one by one, so a batch is spawn_batch tasks run in
// a task_group and one wait() for them all, the group reused batch after
// batch. Call it inside the arena: the calling thread is then one of the
// arena's, and its wait() runs tasks of the batch, as the spawning fiber's
// joins let its worker run the batch's fibers. ns per task; throws unless
// every task ran. The count may be relaxed: wait() returns only after every
// task of the group has finished, and orders what they did before it.
double tbb_run(long n) {
  std::atomic<long> count{0};
  oneapi::tbb::task_group g;
  const std::int64_t t0 = now_ns();
  for (long done = 0; done < n; done += spawn_batch) {
    for (long i = 0; i < spawn_batch; ++i) g.run([&count] { count.fetch_add(1, std::memory_order_relaxed); });
    g.wait();
  }
  const std::int64_t t1 = now_ns();
  if (count.load() != n) throw std::runtime_error("spawn_join: tasks lost");
  return static_cast<double>(t1 - t0) / static_cast<double>(n);
}

}  // namespace

void measure_usched(benchmark::State& state, const env& e) {
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  const long n = e.cfg.fibers;
  const auto spawn = [](std::atomic<long>& c) {
    return usched::spawn([&c] { c.fetch_add(1, std::memory_order_relaxed); });
  };
  const auto join = [](usched::join_handle<void>& h) { h.join(); };
  for (auto _ : state) {
    const double first = rt->run([&] { return spawn_join_run(n, spawn, join); });
    const double warm = rt->run([&] { return spawn_join_run(n, spawn, join); });
    state.counters["ns_first"] = first;
    state.counters["ns"] = warm;
    state.counters["peak_rss_mib"] = peak_rss_mib();
  }
}

void measure_boost(benchmark::State& state, const env& e) {
  boost_pool& pool = *e.pool;
  const auto spawn = [&pool](std::atomic<long>& c) {
    return pool.spawn([&c] { c.fetch_add(1, std::memory_order_relaxed); });
  };
  const auto join = [](boost::fibers::fiber& f) { f.join(); };
  for (auto _ : state) {
    state.counters["ns_first"] = spawn_join_run(e.cfg.fibers, spawn, join);
    state.counters["ns"] = spawn_join_run(e.cfg.fibers, spawn, join);
    state.counters["peak_rss_mib"] = peak_rss_mib();
  }
}

void measure_tbb(benchmark::State& state, const env& e) {
  tbb_arena arena(e.cfg.workers);
  const long n = e.cfg.fibers;
  for (auto _ : state) {
    state.counters["ns_first"] = arena.execute([n] { return tbb_run(n); });
    state.counters["ns"] = arena.execute([n] { return tbb_run(n); });
    state.counters["peak_rss_mib"] = peak_rss_mib();
  }
}

void measure_thread(benchmark::State& state, const env&) {
  // Thread creation costs tens of microseconds: 20,000 are enough.
  constexpr long n = 20'000;
  auto spawn = [](std::atomic<long>& c) { return std::thread([&c] { c.fetch_add(1); }); };
  auto join = [](std::thread& t) { t.join(); };
  for (auto _ : state) {
    state.counters["ns_first"] = spawn_join_run(n, spawn, join);
    state.counters["ns"] = spawn_join_run(n, spawn, join);
  }
}

}  // namespace micro::spawn_join
