// shared_mutex: shared_mutex_fibers fibers (threads), 95% lock_shared / 5%
// lock (task_api.hpp): ns per operation. Boost.Fiber has no shared mutex.
#include <shared_mutex>

#include "../task_api.hpp"
#include "../workloads.hpp"

namespace micro::shared_mutex {

void measure_usched(benchmark::State& state, const env& e) {
  time_usched(state, e, [ops = e.cfg.ops] { return shared_mutex_ns<usched::shared_mutex>(ops, usched_sides()); });
}

void measure_thread(benchmark::State& state, const env& e) {
  time_ns(state, [&e] { return shared_mutex_ns<std::shared_mutex>(e.cfg.ops, thread_sides()); });
}

}  // namespace micro::shared_mutex
