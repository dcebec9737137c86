// semaphore_cv: the semaphore workload with the stand-in a Boost.Fiber user
// writes, a count under a mutex and a condition variable (task_api.hpp),
// on each runtime's own: the Boost.Fiber rows' like for like and, beside
// usched's semaphore row, what FIFO hand-off costs there.
#include "../task_api.hpp"
#include "../workloads.hpp"

namespace micro::semaphore_cv {

void measure_usched(benchmark::State& state, const env& e) {
  const long ops = e.cfg.ops;
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([ops] {
      cv_semaphore<usched::mutex, usched::condition_variable> sem(semaphore_permits);
      semaphore_contention c{semaphore_fibers, semaphore_permits, ops / semaphore_fibers};
      const double t = us_sides(c.fibers, [&](long) { c.side(sem, [] { usched::this_fiber::yield(); }); });
      c.check();
      return t / static_cast<double>(c.operations());
    });
    state.counters["ns"] = ns;
  }
}

void measure_boost(benchmark::State& state, const env& e) {
  for (auto _ : state) {
    cv_semaphore<boost::fibers::mutex, boost::fibers::condition_variable> sem(semaphore_permits);
    semaphore_contention c{semaphore_fibers, semaphore_permits, e.cfg.ops / semaphore_fibers};
    const double t =
        bf_sides(*e.pool, c.fibers, [&](long) { c.side(sem, [] { boost::this_fiber::yield(); }); });
    c.check();
    state.counters["ns"] = t / static_cast<double>(c.operations());
  }
}

}  // namespace micro::semaphore_cv
