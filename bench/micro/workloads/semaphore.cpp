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
  const long ops = e.cfg.ops;
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([ops] {
      usched::counting_semaphore<> sem(semaphore_permits);
      semaphore_contention c{semaphore_fibers, semaphore_permits, ops / semaphore_fibers};
      const double t = us_sides(c.fibers, [&](long) { c.side(sem, [] { usched::this_fiber::yield(); }); });
      c.check();
      return t / static_cast<double>(c.operations());
    });
    state.counters["ns"] = ns;
  }
}

// Threads take a count under std::mutex and std::condition_variable, not
// std::counting_semaphore: libstdc++ 12's (Debian 12's) loses wake-ups under
// contention (GCC bug 98033: a release that finds the count already
// positive skips the notify while an acquire whose compare-exchange failed
// goes to sleep), and this row, 16 threads on 4 permits, left a thread
// asleep in acquire() with a permit free.
void measure_thread(benchmark::State& state, const env& e) {
  for (auto _ : state) {
    cv_semaphore<std::mutex, std::condition_variable> sem(semaphore_permits);
    semaphore_contention c{semaphore_fibers, semaphore_permits,
                           e.cfg.ops / thread_ops_divisor / semaphore_fibers};
    const double t = th_sides(c.fibers, [&](long) { c.side(sem, [] { std::this_thread::yield(); }); });
    c.check();
    state.counters["ns"] = t / static_cast<double>(c.operations());
  }
}

}  // namespace micro::semaphore
