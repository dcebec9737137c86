// chan_same, chan_cross: unbuffered channel ping-pong, pingpong_round_trips
// round trips between two fibers on one worker, or across two: ns per
// one-way hand-off.
#include "../workloads.hpp"

namespace micro::chan {

namespace {
constexpr long pingpong_round_trips = 200'000;
}  // namespace

void measure_usched(benchmark::State& state, const env& e, bool cross) {
  // The ponger's worker: the pinger's own, or the next.
  time_usched(state, e, [other = cross ? 1 : 0] {
    usched::channel<long> ping(0), pong(0);
    const std::int64_t t0 = now_ns();
    auto a = usched::spawn(on_worker(0), [&] {
      for (long i = 0; i < pingpong_round_trips; ++i) {
        ping.send(i);
        (void)pong.recv();
      }
    });
    auto b = usched::spawn(on_worker(other), [&] {
      for (long i = 0; i < pingpong_round_trips; ++i) pong.send(*ping.recv());
    });
    a.join();
    b.join();
    return static_cast<double>(now_ns() - t0) / (2.0 * pingpong_round_trips);
  });
}

void measure_boost(benchmark::State& state, const env& e, bool cross) {
  time_ns(state, [&e, cross] {
    boost::fibers::unbuffered_channel<long> ping, pong;
    auto pinger = [&] {
      for (long i = 0; i < pingpong_round_trips; ++i) {
        ping.push(i);
        long v = 0;
        pong.pop(v);
      }
    };
    auto ponger = [&] {
      for (long i = 0; i < pingpong_round_trips; ++i) {
        long v = 0;
        ping.pop(v);
        pong.push(v);
      }
    };
    const std::int64_t t0 = now_ns();
    if (cross) {
      e.pool->run_pair(1, pinger, ponger);
    } else {
      auto f = e.pool->spawn(ponger);
      pinger();
      f.join();
    }
    return static_cast<double>(now_ns() - t0) / (2.0 * pingpong_round_trips);
  });
}

}  // namespace micro::chan
