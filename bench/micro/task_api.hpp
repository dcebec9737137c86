// task_api.hpp: the workloads of the task API's primitives (futures,
// counting semaphores, shared mutexes, barriers), written once over the
// primitive's type so that usched, Boost.Fiber and std:: on threads run the
// same code. The workloads (workloads/future.cpp, semaphore.cpp, ...)
// supply the runtime: where each side runs, how it is started and joined
// (for the semaphore, shared mutex and barrier, a peer's sides runner,
// sides_on in workload.hpp, which the *_ns() runs below take).
//
// Every workload counts what it did and what went wrong while it runs, and
// check() throws after the sides are joined: an exception thrown inside a
// Boost.Fiber fiber or a std::thread would end the process instead of
// failing one benchmark.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

namespace micro {

// The shapes of the workloads, which usched_micro_compare's titles name
// too. A semaphore with a quarter as many permits as contenders keeps most
// of them waiting; a shared mutex and a barrier get more sides than
// workers, so that some wait while others run.
constexpr long semaphore_fibers = 16;
constexpr long semaphore_permits = 4;
constexpr long shared_mutex_fibers = 16;
constexpr long barrier_parties = 8;
// A barrier phase is barrier_parties arrivals and as many wake-ups, up to
// several microseconds for any peer: --ops over this many phases, for
// threads too.
constexpr long barrier_ops_per_phase = 20;
// Threads do a tenth of the future hand-offs and semaphore pairs: each one
// is a futex wake-up or a kernel switch, microseconds where a fiber's is a
// fraction of one.
constexpr long thread_ops_divisor = 10;

// ---- future_same, future_cross: promise -> future hand-offs ---------------------------

// future_pingpong: two sides, a pinger and a ponger, pass a number back and
// forth `round_trips` times, every one-way hand-off through a fresh
// promise/future pair, so that a hand-off costs what a user's one-shot
// result costs: the shared state made, the value set, the waiter woken, the
// value taken, the state dropped.
//
// How the receiver gets the future of the next pair without any other
// primitive: the sender makes the next pair, leaves its future in the
// direction's slot, and only then sets the current promise; the receiver
// takes the slot's future as soon as its get() returns, before it sends
// anything back. So the hand-off itself publishes the next future, and the
// sender writes the slot again only after the receiver's reply, by which
// time the receiver has emptied it. The first pair of each direction is
// made here, before either side starts.
template <class Promise>
class future_pingpong {
  using future_type = decltype(std::declval<Promise&>().get_future());

 public:
  explicit future_pingpong(long round_trips) : round_trips_(round_trips) {
    ping_now_ = ping_out_.get_future();
    pong_now_ = pong_out_.get_future();
  }

  long round_trips() const noexcept { return round_trips_; }
  long hand_offs() const noexcept { return 2 * round_trips_; }

  // pinger() and ponger() are the two sides; each runs on its own fiber
  // (thread) and touches only its own promises and futures and the slot it
  // is handed the next one through.
  void pinger() {
    for (long i = 0; i < round_trips_; ++i) {
      send(ping_out_, ping_slot_, i);
      if (receive(pong_now_, pong_slot_) != i) ++pinger_wrong_;
    }
  }
  void ponger() {
    for (long i = 0; i < round_trips_; ++i) {
      const long v = receive(ping_now_, ping_slot_);
      if (v != i) ++ponger_wrong_;
      send(pong_out_, pong_slot_, v);
    }
  }

  // check() throws unless every hand-off carried the number expected;
  // call it once both sides have returned.
  void check() const {
    if (pinger_wrong_ + ponger_wrong_ != 0) {
      throw std::runtime_error("future hand-off: " + std::to_string(pinger_wrong_ + ponger_wrong_) +
                               " values arrived out of order or wrong");
    }
  }

  // ns_per_hand_off() is check() and then `elapsed_ns`, the time the two
  // sides took, per hand-off: what a run reports, once it has read the
  // clock after both sides returned.
  double ns_per_hand_off(std::int64_t elapsed_ns) const {
    check();
    return static_cast<double>(elapsed_ns) / static_cast<double>(hand_offs());
  }

 private:
  static void send(Promise& out, future_type& slot, long v) {
    Promise next;
    slot = next.get_future();
    out.set_value(v);
    out = std::move(next);
  }
  static long receive(future_type& now, future_type& slot) {
    const long v = now.get();
    now = std::move(slot);
    return v;
  }

  long round_trips_;
  Promise ping_out_, pong_out_;   // the pinger's, the ponger's: the next hand-off each way
  future_type ping_now_, pong_now_;  // the ponger's, the pinger's: what they wait on next
  future_type ping_slot_, pong_slot_;
  long pinger_wrong_ = 0, ponger_wrong_ = 0;
};

// ---- semaphore: acquire/release pairs under contention ------------------------------

// semaphore_contention: `fibers` sides each take and give back one of
// `permits` permits `per_fiber` times, and hold it across one yield, as a
// fiber holds a permit across the operation it limits (a request, a read)
// that suspends it. Without that, only as many sides as there are workers
// would ever run at once, and with fewer of them than permits no side
// would ever wait. The yield is the peer's own (a fiber's, or
// sched_yield() for threads), so it is part of what each row costs.
//
// The critical section also counts the holders, which is the check: a
// holder that finds more than `permits` of them (itself included) is
// counted. The counter's read-modify-writes are totally ordered, so the
// count each one sees is exact, relaxed or not.
struct semaphore_contention {
  long fibers;
  long permits;
  long per_fiber;
  std::atomic<long> holders{0};
  std::atomic<long> over{0};  // acquisitions that found more than `permits` holders
  std::atomic<long> done{0};  // acquire/release pairs completed

  long operations() const noexcept { return fibers * per_fiber; }

  template <class Semaphore, class Yield>
  void side(Semaphore& sem, Yield yield) {
    for (long k = 0; k < per_fiber; ++k) {
      sem.acquire();
      if (holders.fetch_add(1, std::memory_order_relaxed) + 1 > permits) over.fetch_add(1, std::memory_order_relaxed);
      yield();
      holders.fetch_sub(1, std::memory_order_relaxed);
      sem.release();
    }
    done.fetch_add(per_fiber, std::memory_order_relaxed);
  }

  void check() const {
    if (over.load() != 0) {
      throw std::runtime_error("semaphore: " + std::to_string(over.load()) + " acquisitions beyond the permits");
    }
    if (done.load() != operations()) throw std::runtime_error("semaphore: acquisitions lost");
  }
};

// cv_semaphore: a count under a mutex and a condition variable, the
// semaphore a Boost.Fiber user writes (it has none). A released permit goes
// back to the count and a waiter is only woken to compete for it, so a
// fiber already running may take it first (barging, as
// std::counting_semaphore allows too); usched::counting_semaphore hands it
// to the first waiter instead.
template <class Mutex, class CondVar>
class cv_semaphore {
 public:
  explicit cv_semaphore(long permits) : count_(permits) {}
  void acquire() {
    std::unique_lock<Mutex> lk(m_);
    cv_.wait(lk, [this] { return count_ > 0; });
    --count_;
  }
  void release() {
    {
      std::lock_guard<Mutex> g(m_);
      ++count_;
    }
    cv_.notify_one();
  }

 private:
  Mutex m_;
  CondVar cv_;
  long count_;  // guarded by m_
};

// semaphore_ns() is one run of the workload on a fresh Semaphore (any
// with acquire() and release()) of semaphore_permits permits, the
// semaphore_fibers sides run by `sides` and each holding a permit across
// the peer's `yield`, ops / semaphore_fibers pairs each: ns per
// acquire/release pair, checked.
template <class Semaphore, class Sides, class Yield>
double semaphore_ns(long ops, Sides sides, Yield yield) {
  Semaphore sem(semaphore_permits);
  semaphore_contention c{semaphore_fibers, semaphore_permits, ops / semaphore_fibers};
  const double t = sides(c.fibers, [&](long) { c.side(sem, yield); });
  c.check();
  return t / static_cast<double>(c.operations());
}

// ---- shared_mutex: a readers-heavy mix ----------------------------------------------

// One operation in shared_mutex_write_every takes the lock exclusively.
constexpr long shared_mutex_write_every = 20;  // 95% lock_shared, 5% lock

// shared_mutex_mix: `fibers` sides run `per_fiber` operations each; side i's
// operation j is a write when (i + j) is a multiple of
// shared_mutex_write_every, so the writes of different sides fall at
// different times. A write increments two counters under lock(); a read,
// under lock_shared(), compares them: a reader that sees them differ saw a
// write half done. At the end both must equal the number of writes.
struct shared_mutex_mix {
  long fibers;
  long per_fiber;
  long first = 0, second = 0;  // written under the exclusive lock only
  std::atomic<long> torn{0};
  std::atomic<long> reads{0};

  long operations() const noexcept { return fibers * per_fiber; }
  long writes_expected() const noexcept {
    long n = 0;
    for (long i = 0; i < fibers; ++i) {
      // j in [0, per_fiber) with (i + j) % write_every == 0.
      const long first_j = (shared_mutex_write_every - i % shared_mutex_write_every) % shared_mutex_write_every;
      if (first_j < per_fiber) n += (per_fiber - 1 - first_j) / shared_mutex_write_every + 1;
    }
    return n;
  }

  template <class SharedMutex>
  void side(SharedMutex& m, long index) {
    long my_reads = 0, my_torn = 0;
    for (long j = 0; j < per_fiber; ++j) {
      if ((index + j) % shared_mutex_write_every == 0) {
        m.lock();
        ++first;
        ++second;
        m.unlock();
      } else {
        m.lock_shared();
        if (first != second) ++my_torn;
        m.unlock_shared();
        ++my_reads;
      }
    }
    reads.fetch_add(my_reads, std::memory_order_relaxed);
    torn.fetch_add(my_torn, std::memory_order_relaxed);
  }

  void check() const {
    if (torn.load() != 0) throw std::runtime_error("shared_mutex: a reader saw a write half done");
    const long w = writes_expected();
    if (first != w || second != w || reads.load() + w != operations()) {
      throw std::runtime_error("shared_mutex: writes or reads lost");
    }
  }
};

// shared_mutex_ns() is one run of the mix on a fresh SharedMutex, its
// shared_mutex_fibers sides run by `sides`, ops / shared_mutex_fibers
// operations each: ns per operation, checked.
template <class SharedMutex, class Sides>
double shared_mutex_ns(long ops, Sides sides) {
  SharedMutex m;
  shared_mutex_mix mix{shared_mutex_fibers, ops / shared_mutex_fibers};
  const double t = sides(mix.fibers, [&](long i) { mix.side(m, i); });
  mix.check();
  return t / static_cast<double>(mix.operations());
}

// ---- barrier: phases ----------------------------------------------------------------------

// barrier_phases: `parties` sides each arrive at a barrier `phases` times.
// Each side counts its arrival just before it arrives; when a phase
// completes, every arrival of it has been counted and none of the next
// phase's can have been (no side can arrive again before the phase is
// over, and the phase is not over without the last one), so the count must
// be exactly parties x phases completed. on_phase() is that check, for a
// barrier's completion step (usched, std::barrier) or the one side a
// barrier names per phase (Boost.Fiber's wait() returns true to one);
// a side then released may already have counted its next arrival, so a
// caller after the release passes `after_release` and the check allows
// parties - 1 more.
struct barrier_phases {
  long parties;
  long phases;
  std::atomic<long> arrivals{0};
  std::atomic<long> completed{0};
  std::atomic<long> wrong{0};

  void arriving() noexcept { arrivals.fetch_add(1, std::memory_order_relaxed); }

  // Relaxed is enough: the barrier orders every arrival of the phase before
  // its completion, and the counters are read and written by one phase's
  // completing side at a time.
  void on_phase(bool after_release) noexcept {
    const long c = completed.fetch_add(1, std::memory_order_relaxed) + 1;
    const long a = arrivals.load(std::memory_order_relaxed);
    const long slack = after_release ? parties - 1 : 0;
    if (a < parties * c || a > parties * c + slack) wrong.fetch_add(1, std::memory_order_relaxed);
  }

  void check() const {
    if (wrong.load() != 0) throw std::runtime_error("barrier: a phase completed with the wrong arrivals");
    if (completed.load() != phases || arrivals.load() != parties * phases) {
      throw std::runtime_error("barrier: phases or arrivals lost");
    }
  }
};

// completion_barrier_ns() is one run of the phases on a fresh barrier with
// a completion step, Barrier<Completion> (usched::barrier, std::barrier),
// whose completion checks each phase; the barrier_parties sides run by
// `sides`, ops / barrier_ops_per_phase phases: ns per phase, checked.
template <template <class> class Barrier, class Sides>
double completion_barrier_ns(long ops, Sides sides) {
  barrier_phases b{barrier_parties, ops / barrier_ops_per_phase};
  const auto completion = [&b]() noexcept { b.on_phase(false); };
  Barrier<decltype(completion)> bar(b.parties, completion);
  const double t = sides(b.parties, [&](long) {
    for (long p = 0; p < b.phases; ++p) {
      b.arriving();
      bar.arrive_and_wait();
    }
  });
  b.check();
  return t / static_cast<double>(b.phases);
}

}  // namespace micro
