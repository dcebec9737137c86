// usched/wake_reason.hpp: why a fiber was made runnable, the one list of
// reasons and their printed names. Its own header, as worker_unit.hpp is:
// runtime::stats() reports wake-ups counted by reason (worker_stats), the
// engine counts them and the backends name them, so the list lives where
// all three can see it, and nowhere else.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace usched {

// Why a fiber became runnable. The engine's wake-up event takes one with
// every wake-up and spawn and counts it on the worker the fiber is queued
// on; it is accounting only: placement never reads it (the kernel's
// try_to_wake_up() has no such argument, and no policy is told).
enum class wake_reason : std::uint8_t {
  spawn,     // a new fiber
  join,      // the fiber it joined finished
  sync,      // mutex, condition_variable(_any), shared_mutex, semaphore, latch, barrier, wait_group
  channel,   // a channel send, recv or select
  future,    // a future or shared_future became ready
  timer,     // a sleep ended, or a timed wait's deadline fired
  stop,      // a std::stop_token request ended the wait
  blocking,  // a usched::blocking call returned from the blocking pool
  io,        // an I/O operation completed
  other,     // none of the above
};

// The number of reasons: the size of every array indexed by wake_reason.
inline constexpr std::size_t wake_reason_count = static_cast<std::size_t>(wake_reason::other) + 1;

// to_string() is the reason's name as stats print it ("spawn", "join", ...).
constexpr std::string_view to_string(wake_reason r) noexcept {
  constexpr std::array<std::string_view, wake_reason_count> names = {
      "spawn", "join", "sync", "channel", "future", "timer", "stop", "blocking", "io", "other"};
  const auto i = static_cast<std::size_t>(r);
  return i < names.size() ? names[i] : std::string_view("?");
}
static_assert(to_string(wake_reason::other) == "other", "one name per reason, in the enum's order");

// wake_counts: a count per reason, indexed by the reason itself
// (counts[wake_reason::timer]).
struct wake_counts {
  std::array<std::uint64_t, wake_reason_count> n{};

  std::uint64_t& operator[](wake_reason r) noexcept { return n[static_cast<std::size_t>(r)]; }
  std::uint64_t operator[](wake_reason r) const noexcept { return n[static_cast<std::size_t>(r)]; }
  // total() is the sum over every reason.
  std::uint64_t total() const noexcept {
    std::uint64_t t = 0;
    for (const std::uint64_t c : n) t += c;
    return t;
  }
};

}  // namespace usched
