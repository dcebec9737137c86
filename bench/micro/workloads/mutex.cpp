// mutex/N: N fibers (threads) increment a counter under a mutex, mutex_ops
// increments in all: ns per lock+unlock, the count checked.
#include <mutex>
#include <stdexcept>

#include "../workloads.hpp"

namespace micro::mutex {

namespace {

constexpr long mutex_ops = 1'000'000;

// contend_ns() is one run: `n` sides, run by `sides` (workload.hpp), each
// incrementing one counter under one Mutex mutex_ops / n times: ns per
// lock+unlock, the count checked.
template <class Mutex, class Sides>
double contend_ns(long n, Sides sides) {
  Mutex m;
  long counter = 0;
  const long per = mutex_ops / n;
  const double t = sides(n, [&](long) {
    for (long k = 0; k < per; ++k) {
      std::lock_guard<Mutex> g(m);
      ++counter;
    }
  });
  if (counter != per * n) throw std::runtime_error("mutex: lost increments");
  return t / static_cast<double>(per * n);
}

}  // namespace

void measure_usched(benchmark::State& state, const env& e, long contenders) {
  time_usched(state, e, [n = contenders] { return contend_ns<usched::mutex>(n, usched_sides()); });
}

void measure_boost(benchmark::State& state, const env& e, long contenders) {
  time_ns(state, [&e, n = contenders] { return contend_ns<boost::fibers::mutex>(n, boost_sides(*e.pool)); });
}

void measure_thread(benchmark::State& state, const env&, long contenders) {
  time_ns(state, [n = contenders] { return contend_ns<std::mutex>(n, thread_sides()); });
}

}  // namespace micro::mutex
