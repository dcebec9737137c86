// wakeup.cpp: the backend's half of a wake-up (the kernel's try_to_wake_up):
// the engine's wake-up event places and queues the fiber, and the backend
// carries out what it returns: notify the worker it queued on, kick an idle
// one to balance.
#include <vector>

#include "runtime_impl.hpp"

namespace usched::detail {

void runtime_impl::try_to_wake_up(fiber* f, placement_kind kind, wake_reason why) noexcept {
  try_to_wake_up(f, kind, why, local_worker());
}

void runtime_impl::try_to_wake_up(fiber* f, placement_kind kind, wake_reason why, worker* w) noexcept {
  try_to_wake_up(f, kind, why, w, w ? w->index() : -1);
}

void runtime_impl::try_to_wake_up(fiber* f, placement_kind kind, wake_reason why, worker* w, int waker) noexcept {
  // The engine places and queues the fiber; the backend wakes whom it says.
  wake_result r;
  if (w) {
    r = engine_.wake_up(f, kind, why, waker, w->next_random(), w->scratch(), engine_clock(), waker == w->index());
    carry_out(r, w);
    return;
  }
  // A thread outside the runtime (a plain thread, or a fiber of another
  // runtime) places with its own scratch space and the shared generator.
  // It is counted while it works here: once the fiber is queued it may run
  // and finish, and the runtime's destructor, finding every fiber done,
  // must still wait for this waker to leave the workers it notifies.
  external_wakers_.fetch_add(1, std::memory_order_seq_cst);
  thread_local std::vector<cpu_snapshot> scratch;
  r = engine_.wake_up(f, kind, why, -1, external_random(), scratch, engine_clock());
  carry_out(r, w);
  external_wakers_.fetch_sub(1, std::memory_order_release);
}

void runtime_impl::carry_out(const wake_result& r, worker* w) noexcept {
  if (r.cpu < 0) return;
  // Publish (the enqueue's seq_cst store of the queue count), then check the
  // park word: paired with the parker's announce-then-check in
  // worker::idle_wait().
  if (r.notify) worker_at(r.cpu).notify();
  // A wake-up that asked cpu's running fiber to yield (the engine's
  // check_preempt set need_resched) asks its next preempt point to look:
  // the preempt point reads only its worker's request word. The fiber's
  // own need_resched line was just written by the enqueue, so the load is
  // cheap; a request left over from an older one costs a look, no more.
  if (engine_.resched_asked(r.cpu)) worker_at(r.cpu).request_preempt(request_look);
  if (r.kick) kick_idle(r.cpu, w, r.pull);
}

// kick_idle(): carries out the engine's kick decision (engine::kick) over
// this runtime's idle workers: the spin word of a spinning one, the park
// word of a parked one. The search's start is random: the caller's
// worker's generator, or the shared one (an atomic every caller would
// write) from a thread outside the runtime.
void runtime_impl::kick_idle(int busy_cpu, worker* w, bool pull) noexcept {
  struct idle_workers {
    runtime_impl& rt;
    worker* w;
    unsigned nr_spinning() const noexcept {
      return static_cast<unsigned>(rt.nr_spinning.load(std::memory_order_seq_cst));
    }
    unsigned nr_parked() const noexcept { return static_cast<unsigned>(rt.nr_parked.load(std::memory_order_seq_cst)); }
    std::uint64_t random() const noexcept { return w ? w->next_random() : rt.external_random(); }
    bool tell_spinning(int cpu) const noexcept { return rt.worker_at(cpu).kick_spinning(); }
    bool parked(int cpu) const noexcept { return rt.worker_at(cpu).parked(); }
  };
  const kick_result k = engine_.kick(busy_cpu, pull, idle_workers{*this, w});
  if (k.cpu < 0) return;
  if (engine_.tracing()) [[unlikely]] engine_.trace_idle(k.cpu, idle_kind::kick, engine_clock(), busy_cpu);
  if (k.pull) worker_at(k.cpu).mark_pull();
  worker_at(k.cpu).notify();
}

std::uint64_t runtime_impl::external_random() noexcept {
  return splitmix64_mix(external_seq_.fetch_add(splitmix64_increment, std::memory_order_relaxed));
}

}  // namespace usched::detail
