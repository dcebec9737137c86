// engine_test_access.hpp: the engine tests' way into the engine's
// internals (engine.hpp names it a friend). The tests build runqueue
// states by hand and drive the balance driver's steps one at a time,
// which no backend does; the backends see only the events and queries.
#pragma once

#include <cstddef>
#include <vector>

#include "engine.hpp"

namespace usched::detail {

struct engine_test_access {
  static runqueue& rq(engine& e, int cpu) noexcept { return e.rq(cpu); }
  static const runqueue& rq(const engine& e, int cpu) noexcept { return e.rq(cpu); }
  static bool overloaded(const engine& e) noexcept { return e.overloaded(); }
  static unsigned sched_nr_latency(const engine& e) noexcept { return e.sched_nr_latency(); }
  static bool lifo(const engine& e) noexcept { return e.lifo(); }
  static void snapshot(const engine& e, std::vector<cpu_snapshot>& out, const now_source& now) {
    e.snapshot(out, now);
  }
  static sd_balance_state& balance_state(engine& e, int cpu, std::size_t level) noexcept {
    return e.balance_state(cpu, level);
  }
  static std::int64_t balance_interval(const engine& e, const sd_balance_state& st, bool busy) noexcept {
    return e.balance_interval(st, busy);
  }
  static bool wake_running(engine& e, sched_entity* se, wake_reason why = wake_reason::other) {
    return e.wake_running(se, why, 0);
  }
  static sched_entity* yield_fifo(engine& e, int cpu, sched_entity* prev, const now_source& now, int* pushed_to) {
    return e.yield_fifo(cpu, prev, now, pushed_to);
  }
  static unsigned idle_balance(engine& e, int cpu, const now_source& now, std::uint64_t random,
                               std::vector<cpu_snapshot>& scratch, bool kicked = false) {
    return e.idle_balance(cpu, now, random, scratch, kicked);
  }
  static unsigned newidle_balance(engine& e, int cpu, const now_source& now, std::uint64_t random,
                                  std::vector<cpu_snapshot>& scratch, bool kicked = false) {
    return e.newidle_balance(cpu, now, random, scratch, kicked);
  }
  static unsigned detach_fibers(engine& e, int dst, const balance_decision& decision, cpu_idle_type idle,
                                const sched_domain* sd, unsigned nr_balance_failed, const now_source& now,
                                sched_entity** out, unsigned max) {
    return e.detach_fibers(dst, decision, idle, sd, nr_balance_failed, now, out, max);
  }
  static void attach_fibers(engine& e, int dst, sched_entity* const* list, unsigned n, const now_source& now) {
    e.attach_fibers(dst, list, n, now);
  }
};

}  // namespace usched::detail
