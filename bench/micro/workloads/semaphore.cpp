// semaphore: semaphore_fibers fibers (threads) each take one of
// semaphore_permits permits, hold it across a yield and give it back
// (task_api.hpp): ns per acquire/release pair. Threads do a tenth of the
// pairs.
#include <condition_variable>
#include <mutex>
#include <thread>

#include "../task_api.hpp"
#include "../workloads.hpp"

namespace micro::semaphore {

void measure_usched(benchmark::State& state, const env& e) {
  time_usched(state, e, [ops = e.cfg.ops] {
    return semaphore_ns<usched::counting_semaphore<>>(ops, usched_sides(), [] { usched::this_fiber::yield(); });
  });
}

// Threads take a count under std::mutex and std::condition_variable, not
// std::counting_semaphore: libstdc++ 12's (Debian 12's) loses wake-ups under
// contention (GCC bug 98033: a release that finds the count already
// positive skips the notify while an acquire whose compare-exchange failed
// goes to sleep), and this row, 16 threads on 4 permits, left a thread
// asleep in acquire() with a permit free.
void measure_thread(benchmark::State& state, const env& e) {
  time_ns(state, [&e] {
    return semaphore_ns<cv_semaphore<std::mutex, std::condition_variable>>(
        e.cfg.ops / thread_ops_divisor, thread_sides(), [] { std::this_thread::yield(); });
  });
}

}  // namespace micro::semaphore
