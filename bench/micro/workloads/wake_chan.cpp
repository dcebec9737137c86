// wake_chan: wake_cv with the waiter blocked in an unbuffered channel's
// receive instead (wake_protocol.hpp).
#include <atomic>
#include <vector>

#include "../workloads.hpp"
#include "wake_protocol.hpp"

namespace micro::wake_chan {

void measure_usched(benchmark::State& state, const env& e) {
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  const auto gaps = make_gaps(e.cfg.samples);
  for (auto _ : state) {
    std::vector<std::int64_t> lat(gaps.size());
    rt->run([&] {
      usched::channel<std::int64_t> ch(0);
      std::atomic<bool> armed{false};
      auto w = usched::spawn(on_worker(0), [&] { chan_waiter(armed, lat, [&] { return *ch.recv(); }); });
      auto k = usched::spawn(on_worker(1), [&] { chan_waker(armed, gaps, [&](std::int64_t v) { ch.send(v); }); });
      w.join();
      k.join();
    });
    report_latency(state, lat);
  }
}

void measure_boost(benchmark::State& state, const env& e) {
  const auto gaps = make_gaps(e.cfg.samples);
  for (auto _ : state) {
    std::vector<std::int64_t> lat(gaps.size());
    boost::fibers::unbuffered_channel<std::int64_t> ch;
    std::atomic<bool> armed{false};
    e.pool->run_pair(
        1,
        [&] {
          chan_waiter(armed, lat, [&] {
            std::int64_t v = 0;
            ch.pop(v);
            return v;
          });
        },
        [&] { chan_waker(armed, gaps, [&](std::int64_t v) { ch.push(v); }); });
    report_latency(state, lat);
  }
}

}  // namespace micro::wake_chan
