// workloads.hpp: every workload of usched_micro, one namespace each, with one
// measure_<peer>() per peer that runs it (workloads/<workload>.cpp). Within
// a workload every peer's function has the same signature and reports the
// same counters, so a row of usched_micro_compare's tables is the same
// measurement on each runtime. What each workload measures is said above
// its namespace; the peers are those of peers.hpp.
#pragma once

#include <benchmark/benchmark.h>

#include "workload.hpp"

namespace micro {

// measure_fn is the signature of a measure_<peer>(): it runs the workload
// once per benchmark iteration and sets its counters on `state`; a failed
// check throws (main.cpp turns that into the benchmark's error). usched's
// functions make their own runtime from e.cfg, oneTBB's their own arena of
// e.cfg.workers threads (tbb_arena); Boost.Fiber's run on e.pool, which
// must be set.
using measure_fn = void(benchmark::State& state, const env& e);
// measure_with<Param> is the same for a workload with one parameter (named
// above its namespace); main.cpp registers one benchmark per value.
template <class Param>
using measure_with = void(benchmark::State& state, const env& e, Param param);

// yield: two fibers on one worker yielding to each other, the same loop in
// both: ns per switch. Threads: two threads pinned to one CPU calling
// sched_yield(); context: one raw Boost.Context resume, the floor.
namespace yield { measure_fn measure_usched, measure_boost, measure_thread, measure_context; }

// preempt_point: one fiber alone on worker 0 calling this_fiber::
// preempt_point() `calls` times: ns per call (usched only: no peer has a
// preempt point to compare).
namespace preempt_point {
constexpr long calls = 20'000'000;
measure_fn measure_usched;
}  // namespace preempt_point

// yield_apart: the same, the two fibers yielding from different loops.
namespace yield_apart { measure_fn measure_usched, measure_boost; }

// spawn_join: --fibers fibers spawned and joined in batches of 1,000 from a
// fiber: ns per fiber, first run and warm run (threads: 20,000 threads;
// oneTBB: tasks run and waited for in a task_group, from inside its arena).
namespace spawn_join { measure_fn measure_usched, measure_boost, measure_tbb, measure_thread; }

// spawn_all: --fibers / 2 fibers spawned from a fiber with their handles
// kept, then joined: ns per fiber (first and warm run), peak RSS (oneTBB:
// one task_group running them all, each result in a preallocated slot).
namespace spawn_all { measure_fn measure_usched, measure_tbb; }

// spawn_join_thread: the same, spawned and joined from a non-fiber thread.
namespace spawn_join_thread { measure_fn measure_usched; }

// live_rss: 100,000 fibers alive at once (blocked): resident bytes per fiber.
namespace live_rss { measure_fn measure_usched, measure_boost; }

// skynet: --fibers leaves of a 10-ary tree of fibers, sums travelling up
// through joins: total ms, the sum checked (oneTBB: a task_group per node).
namespace skynet { measure_fn measure_usched, measure_boost, measure_tbb; }

// fanout: one fiber spawns --fanout-tasks tasks of --task-us each (a spin on
// the clock) and joins them: ms of the first and of a warm run, and the
// warm run's efficiency.
namespace fanout { measure_fn measure_usched, measure_boost; }

// timer_late: how late a 1 ms sleep ends when a fiber that never yields
// holds the sleeper's worker. Needs two workers or more.
namespace timer_late { measure_fn measure_usched; }

// io_late: how late a fiber woken by an I/O completion runs when a fiber
// that runs long (with preempt points) holds its worker. Needs two workers
// or more.
namespace io_late { measure_fn measure_usched; }

// mutex/N: N (the parameter, `contenders`) fibers (threads) increment a
// counter under a mutex: ns per lock+unlock.
namespace mutex { measure_with<long> measure_usched, measure_boost, measure_thread; }

// chan_same, chan_cross: unbuffered channel ping-pong between two fibers on
// one worker, or (the parameter, `cross`) on two: ns per one-way hand-off.
namespace chan { measure_with<bool> measure_usched, measure_boost; }

// future_same, future_cross: ping-pong through a fresh promise/future pair
// per one-way hand-off, on one worker or (`cross`) across two: ns per
// hand-off (task_api.hpp).
namespace future { measure_with<bool> measure_usched, measure_boost, measure_thread; }

// semaphore: 16 fibers take one of 4 permits, yield, give it back: ns per
// acquire/release pair. Threads use a count under a mutex and a condition
// variable (see the function).
namespace semaphore { measure_fn measure_usched, measure_thread; }

// semaphore_cv: the same with a count under a mutex and a condition
// variable on every runtime (Boost.Fiber has no semaphore).
namespace semaphore_cv { measure_fn measure_usched, measure_boost; }

// shared_mutex: 16 fibers, 95% lock_shared / 5% lock: ns per operation.
namespace shared_mutex { measure_fn measure_usched, measure_thread; }

// barrier: 8 fibers arrive and wait at a barrier: ns per phase.
namespace barrier { measure_fn measure_usched, measure_boost, measure_thread; }

// select, select_one: 4 producers send on 4 channels and one consumer takes
// every item by a select over them, or (the parameter, `one_channel`) the
// same producers on one channel and a plain recv: ns per item.
namespace select { measure_with<bool> measure_usched; }

// wake_cv: a fiber blocked on a condition variable on worker 0 is woken by
// a fiber on worker 1 after a random gap: wake-to-run ns, p50/p99/p99.9.
namespace wake_cv { measure_fn measure_usched, measure_boost, measure_thread; }

// wake_chan: the same with the waiter blocked in a channel receive.
namespace wake_chan { measure_fn measure_usched, measure_boost; }

// cacheline: one cache line bounced between threads on two CPUs: ns one
// way, the floor of any cross-worker wake-up or hand-off.
namespace cacheline { measure_fn measure_thread; }

}  // namespace micro
