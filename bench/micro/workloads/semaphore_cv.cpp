// semaphore_cv: the semaphore workload with the stand-in a Boost.Fiber user
// writes, a count under a mutex and a condition variable (task_api.hpp),
// on each runtime's own: the Boost.Fiber rows' like for like and, beside
// usched's semaphore row, what FIFO hand-off costs there.
#include "../task_api.hpp"
#include "../workloads.hpp"

namespace micro::semaphore_cv {

void measure_usched(benchmark::State& state, const env& e) {
  time_usched(state, e, [ops = e.cfg.ops] {
    return semaphore_ns<cv_semaphore<usched::mutex, usched::condition_variable>>(
        ops, usched_sides(), [] { usched::this_fiber::yield(); });
  });
}

void measure_boost(benchmark::State& state, const env& e) {
  time_ns(state, [&e] {
    return semaphore_ns<cv_semaphore<boost::fibers::mutex, boost::fibers::condition_variable>>(
        e.cfg.ops, boost_roomy_sides(*e.pool), [] { boost::this_fiber::yield(); });
  });
}

}  // namespace micro::semaphore_cv
