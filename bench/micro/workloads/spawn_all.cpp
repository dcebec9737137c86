// spawn_all: half of --fibers spawned from one fiber with their handles
// kept (a parallel map), then joined in order: ns per fiber and the peak
// RSS of the run. A finished fiber's stack goes back to the pool before
// its handle is joined, and the spawner cannot run ahead of its children
// by more than the spawn backlog, so the peak is the join states and the
// handles, not a stack per fiber.
#include <stdexcept>
#include <vector>

#include "../workloads.hpp"

namespace micro::spawn_all {

void measure_usched(benchmark::State& state, const env& e) {
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  const long n = e.cfg.fibers / 2;
  const auto run = [n] {
    std::vector<usched::join_handle<long>> hs;
    hs.reserve(static_cast<std::size_t>(n));
    const std::int64_t t0 = now_ns();
    for (long i = 0; i < n; ++i) hs.push_back(usched::spawn([i] { return i; }));
    long sum = 0;
    for (auto& h : hs) sum += h.join();
    const std::int64_t t1 = now_ns();
    if (sum != n * (n - 1) / 2) throw std::runtime_error("spawn_all: wrong sum");
    return static_cast<double>(t1 - t0) / static_cast<double>(n);
  };
  for (auto _ : state) {
    reset_peak_rss();
    const double first = rt->run(run);
    state.counters["peak_rss_mib"] = peak_rss_since_reset_mib();
    state.counters["ns_first"] = first;
    state.counters["ns"] = rt->run(run);
  }
}

}  // namespace micro::spawn_all
