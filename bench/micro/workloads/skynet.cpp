// skynet: the leaves of a 10-ary tree of fibers, each fiber spawning its ten
// children and summing what their joins return: total ms and the peak RSS
// of the run, the sum checked.
#include <cstdint>
#include <functional>
#include <stdexcept>

#include <oneapi/tbb/task_group.h>

#include "../workloads.hpp"

namespace micro::skynet {

namespace {

std::uint64_t expected(long leaves) {
  const auto n = static_cast<std::uint64_t>(leaves);
  return n * (n - 1) / 2;
}

std::uint64_t us_tree(std::uint64_t num, std::uint64_t size) {
  if (size == 1) return num;
  const std::uint64_t child = size / 10;
  usched::join_handle<std::uint64_t> h[10];
  for (std::uint64_t i = 0; i < 10; ++i) h[i] = usched::spawn(us_tree, num + i * child, child);
  std::uint64_t sum = 0;
  for (auto& x : h) sum += x.join();
  return sum;
}

// Boost.Fiber's fibers return nothing: each writes its sum where its parent
// reads it after the join.
void bf_tree(boost_pool& pool, std::uint64_t& out, std::uint64_t num, std::uint64_t size) {
  if (size == 1) {
    out = num;
    return;
  }
  const std::uint64_t child = size / 10;
  std::uint64_t r[10];
  boost::fibers::fiber f[10];
  for (std::uint64_t i = 0; i < 10; ++i) {
    f[i] = pool.spawn(bf_tree, std::ref(pool), std::ref(r[i]), num + i * child, child);
  }
  std::uint64_t sum = 0;
  for (int i = 0; i < 10; ++i) {
    f[i].join();
    sum += r[i];
  }
  out = sum;
}

// oneTBB's tasks return nothing either: a node runs its ten children in a
// task_group of its own, each child writing its sum into the node's array,
// and wait() is the join. A task is stackless, so a waiting node costs no
// stack of its own: wait() runs its children (or steals others) on the
// waiting thread's stack, nested under the node.
std::uint64_t tbb_tree(std::uint64_t num, std::uint64_t size) {
  if (size == 1) return num;
  const std::uint64_t child = size / 10;
  std::uint64_t r[10];
  oneapi::tbb::task_group g;
  for (std::uint64_t i = 0; i < 10; ++i) {
    g.run([&r, i, num, child] { r[i] = tbb_tree(num + i * child, child); });
  }
  g.wait();
  std::uint64_t sum = 0;
  for (const std::uint64_t x : r) sum += x;
  return sum;
}

}  // namespace

void measure_usched(benchmark::State& state, const env& e) {
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  const long leaves = e.cfg.fibers;
  for (auto _ : state) {
    reset_peak_rss();
    const std::int64_t t0 = now_ns();
    const std::uint64_t sum = rt->run([leaves] { return us_tree(0, static_cast<std::uint64_t>(leaves)); });
    const std::int64_t t1 = now_ns();
    if (sum != expected(leaves)) throw std::runtime_error("skynet: wrong sum");
    state.counters["ms"] = static_cast<double>(t1 - t0) / 1e6;
    state.counters["peak_rss_mib"] = peak_rss_since_reset_mib();
  }
}

void measure_boost(benchmark::State& state, const env& e) {
  const long leaves = e.cfg.fibers;
  for (auto _ : state) {
    std::uint64_t sum = 0;
    reset_peak_rss();
    const std::int64_t t0 = now_ns();
    bf_tree(*e.pool, sum, 0, static_cast<std::uint64_t>(leaves));
    const std::int64_t t1 = now_ns();
    if (sum != expected(leaves)) throw std::runtime_error("skynet: wrong sum");
    state.counters["ms"] = static_cast<double>(t1 - t0) / 1e6;
    state.counters["peak_rss_mib"] = peak_rss_since_reset_mib();
  }
}

void measure_tbb(benchmark::State& state, const env& e) {
  tbb_arena arena(e.cfg.workers);
  const long leaves = e.cfg.fibers;
  for (auto _ : state) {
    reset_peak_rss();
    const std::int64_t t0 = now_ns();
    const std::uint64_t sum = arena.execute([leaves] { return tbb_tree(0, static_cast<std::uint64_t>(leaves)); });
    const std::int64_t t1 = now_ns();
    if (sum != expected(leaves)) throw std::runtime_error("skynet: wrong sum");
    state.counters["ms"] = static_cast<double>(t1 - t0) / 1e6;
    state.counters["peak_rss_mib"] = peak_rss_since_reset_mib();
  }
}

}  // namespace micro::skynet
