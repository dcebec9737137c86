// spawn_join: fibers spawned and joined in batches of spawn_batch from a
// fiber: ns per fiber, the first run (stacks made and faulted in) and a
// warm one.
#include <atomic>
#include <thread>

#include "../workloads.hpp"

namespace micro::spawn_join {

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
