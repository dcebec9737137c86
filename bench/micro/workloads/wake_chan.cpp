// wake_chan: wake_cv with the waiter blocked in an unbuffered channel's
// receive instead (wake_protocol.hpp).
#include <atomic>
#include <vector>

#include "../workloads.hpp"
#include "wake_protocol.hpp"

namespace micro::wake_chan {

namespace {

// The sides on each runtime's unbuffered channel (time_wake_usched() makes
// usched's on the runtime).
struct usched_chan {
  usched::channel<std::int64_t> ch{0};
  std::atomic<bool> armed{false};

  void waiter(std::vector<std::int64_t>& lat) {
    chan_waiter(armed, lat, [&] { return *ch.recv(); });
  }
  void waker(const std::vector<std::int64_t>& gaps) {
    chan_waker(armed, gaps, [&](std::int64_t v) { ch.send(v); });
  }
};

struct boost_chan {
  boost::fibers::unbuffered_channel<std::int64_t> ch;
  std::atomic<bool> armed{false};

  void waiter(std::vector<std::int64_t>& lat) {
    chan_waiter(armed, lat, [&] {
      std::int64_t v = 0;
      ch.pop(v);
      return v;
    });
  }
  void waker(const std::vector<std::int64_t>& gaps) {
    chan_waker(armed, gaps, [&](std::int64_t v) { ch.push(v); });
  }
};

}  // namespace

void measure_usched(benchmark::State& state, const env& e) { time_wake_usched<usched_chan>(state, e); }

void measure_boost(benchmark::State& state, const env& e) { time_wake_boost<boost_chan>(state, e); }

}  // namespace micro::wake_chan
