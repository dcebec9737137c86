// workloads.hpp: every workload of usched_micro, one namespace each, with one
// measure_<peer>() per peer that runs it (workloads/<workload>.cpp). Within
// a workload every peer's function has the same signature and reports the
// same counters, so a row of usched_micro_compare's tables is the same
// measurement on each runtime. What each workload measures is said above
// its namespace; the peers are those of peers.hpp.
//
// Each measure_<peer>() runs the workload once per benchmark iteration and
// sets its counters on `state`; a failed check throws (main.cpp turns that
// into the benchmark's error). usched's functions make their own runtime
// from e.cfg; Boost.Fiber's run on e.pool, which must be set.
#pragma once

#include <benchmark/benchmark.h>

#include "workload.hpp"

namespace micro {

// yield: two fibers on one worker yielding to each other, the same loop in
// both: ns per switch. Threads: two threads pinned to one CPU calling
// sched_yield(); context: one raw Boost.Context resume, the floor.
namespace yield {
void measure_usched(benchmark::State& state, const env& e);
void measure_boost(benchmark::State& state, const env& e);
void measure_thread(benchmark::State& state, const env& e);
void measure_context(benchmark::State& state, const env& e);
}  // namespace yield

// yield_apart: the same, the two fibers yielding from different loops.
namespace yield_apart {
void measure_usched(benchmark::State& state, const env& e);
void measure_boost(benchmark::State& state, const env& e);
}  // namespace yield_apart

// spawn_join: --fibers fibers spawned and joined in batches of 1,000 from a
// fiber: ns per fiber, first run and warm run (threads: 20,000 threads).
namespace spawn_join {
void measure_usched(benchmark::State& state, const env& e);
void measure_boost(benchmark::State& state, const env& e);
void measure_thread(benchmark::State& state, const env& e);
}  // namespace spawn_join

// spawn_join_thread: the same, spawned and joined from a non-fiber thread.
namespace spawn_join_thread {
void measure_usched(benchmark::State& state, const env& e);
}  // namespace spawn_join_thread

// live_rss: 100,000 fibers alive at once (blocked): resident bytes per fiber.
namespace live_rss {
void measure_usched(benchmark::State& state, const env& e);
void measure_boost(benchmark::State& state, const env& e);
}  // namespace live_rss

// skynet: --fibers leaves of a 10-ary tree of fibers, sums travelling up
// through joins: total ms, the sum checked.
namespace skynet {
void measure_usched(benchmark::State& state, const env& e);
void measure_boost(benchmark::State& state, const env& e);
}  // namespace skynet

// fanout: one fiber spawns --fanout-tasks tasks of --task-us each (a spin on
// the clock) and joins them: ms of the first and of a warm run, and the
// warm run's efficiency.
namespace fanout {
void measure_usched(benchmark::State& state, const env& e);
void measure_boost(benchmark::State& state, const env& e);
}  // namespace fanout

// timer_late: how late a 1 ms sleep ends when a fiber that never yields
// holds the sleeper's worker. Needs two workers or more.
namespace timer_late {
void measure_usched(benchmark::State& state, const env& e);
}  // namespace timer_late

// mutex/N: `contenders` fibers (threads) increment a counter under a
// mutex: ns per lock+unlock.
namespace mutex {
void measure_usched(benchmark::State& state, const env& e, long contenders);
void measure_boost(benchmark::State& state, const env& e, long contenders);
void measure_thread(benchmark::State& state, const env& e, long contenders);
}  // namespace mutex

// chan_same, chan_cross: unbuffered channel ping-pong between two fibers on
// one worker, or (`cross`) on two: ns per one-way hand-off.
namespace chan {
void measure_usched(benchmark::State& state, const env& e, bool cross);
void measure_boost(benchmark::State& state, const env& e, bool cross);
}  // namespace chan

// future_same, future_cross: ping-pong through a fresh promise/future pair
// per one-way hand-off, on one worker or (`cross`) across two: ns per
// hand-off (task_api.hpp).
namespace future {
void measure_usched(benchmark::State& state, const env& e, bool cross);
void measure_boost(benchmark::State& state, const env& e, bool cross);
void measure_thread(benchmark::State& state, const env& e, bool cross);
}  // namespace future

// semaphore: 16 fibers take one of 4 permits, yield, give it back: ns per
// acquire/release pair. Threads use a count under a mutex and a condition
// variable (see the function).
namespace semaphore {
void measure_usched(benchmark::State& state, const env& e);
void measure_thread(benchmark::State& state, const env& e);
}  // namespace semaphore

// semaphore_cv: the same with a count under a mutex and a condition
// variable on every runtime (Boost.Fiber has no semaphore).
namespace semaphore_cv {
void measure_usched(benchmark::State& state, const env& e);
void measure_boost(benchmark::State& state, const env& e);
}  // namespace semaphore_cv

// shared_mutex: 16 fibers, 95% lock_shared / 5% lock: ns per operation.
namespace shared_mutex {
void measure_usched(benchmark::State& state, const env& e);
void measure_thread(benchmark::State& state, const env& e);
}  // namespace shared_mutex

// barrier: 8 fibers arrive and wait at a barrier: ns per phase.
namespace barrier {
void measure_usched(benchmark::State& state, const env& e);
void measure_boost(benchmark::State& state, const env& e);
void measure_thread(benchmark::State& state, const env& e);
}  // namespace barrier

// select, select_one: 4 producers send on 4 channels and one consumer takes
// every item by a select over them, or (`one_channel`) the same producers
// on one channel and a plain recv: ns per item.
namespace select {
void measure_usched(benchmark::State& state, const env& e, bool one_channel);
}  // namespace select

// wake_cv: a fiber blocked on a condition variable on worker 0 is woken by
// a fiber on worker 1 after a random gap: wake-to-run ns, p50/p99/p99.9.
namespace wake_cv {
void measure_usched(benchmark::State& state, const env& e);
void measure_boost(benchmark::State& state, const env& e);
void measure_thread(benchmark::State& state, const env& e);
}  // namespace wake_cv

// wake_chan: the same with the waiter blocked in a channel receive.
namespace wake_chan {
void measure_usched(benchmark::State& state, const env& e);
void measure_boost(benchmark::State& state, const env& e);
}  // namespace wake_chan

// cacheline: one cache line bounced between threads on two CPUs: ns one
// way, the floor of any cross-worker wake-up or hand-off.
namespace cacheline {
void measure_thread(benchmark::State& state, const env& e);
}  // namespace cacheline

}  // namespace micro
