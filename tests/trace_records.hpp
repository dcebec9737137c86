// trace_records.hpp: trace records built by hand, one field per argument,
// for the tests of the recorder and of the exporters (trace.hpp lists what
// each field means for each type).
#pragma once

#include <cstdint>

#include <usched/wake_reason.hpp>

#include "trace.hpp"

namespace usched::test {

inline detail::trace_record switch_record(std::int64_t t, int cpu, std::uint64_t prev, std::uint64_t next,
                                          detail::stop_reason why, std::uint16_t depth, std::uint8_t flags = 0,
                                          std::uint8_t on = 0) {
  detail::trace_record r;
  r.time = t;
  r.type = detail::trace_event::switch_to;
  r.cpu = static_cast<std::int16_t>(cpu);
  r.fiber = prev;
  r.other = next;
  r.reason = static_cast<std::uint8_t>(why);
  r.detail = on;
  r.flags = flags;
  r.depth = depth;
  return r;
}

// A wake-up: `fiber` placed on `cpu`, its last worker `last`, woken by
// `waker` (0: no fiber) running on `waker_cpu` (-1: outside).
inline detail::trace_record wakeup_record(std::int64_t t, std::uint64_t fiber, int cpu, int last,
                                          std::uint64_t waker, int waker_cpu, wake_reason why, std::uint8_t flags,
                                          std::uint16_t depth) {
  detail::trace_record r;
  r.time = t;
  r.type = detail::trace_event::wakeup;
  r.fiber = fiber;
  r.cpu = static_cast<std::int16_t>(cpu);
  r.from = static_cast<std::int16_t>(last);
  r.other = waker;
  r.aux = static_cast<std::int16_t>(waker_cpu);
  r.reason = static_cast<std::uint8_t>(why);
  r.flags = flags;
  r.depth = depth;
  return r;
}

// A migration by `mover`'s worker; a level below 0 is none (255).
inline detail::trace_record migrate_record(std::int64_t t, std::uint64_t fiber, int from, int to,
                                           detail::migrate_cause why, int level, int mover, std::uint16_t depth) {
  detail::trace_record r;
  r.time = t;
  r.type = detail::trace_event::migrate;
  r.fiber = fiber;
  r.from = static_cast<std::int16_t>(from);
  r.cpu = static_cast<std::int16_t>(to);
  r.reason = static_cast<std::uint8_t>(why);
  r.detail = static_cast<std::uint8_t>(level < 0 ? 0xff : level);
  r.aux = static_cast<std::int16_t>(mover);
  r.depth = depth;
  return r;
}

}  // namespace usched::test
