// futex.hpp: thin wrappers over the Linux futex syscall on a 32-bit atomic.
#pragma once

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <ctime>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace usched::detail {

// futex_wait() blocks while *word == expected, until futex_wake() or until
// `timeout_ns` (relative, < 0 = forever) has passed. Spurious returns are
// allowed; callers re-check their condition.
inline void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                       long long timeout_ns = -1) noexcept {
  timespec ts{};
  timespec* tsp = nullptr;
  if (timeout_ns >= 0) {
    ts.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000);
    tsp = &ts;
  }
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, tsp,
          nullptr, 0);
}

// futex_wake() wakes up to `count` threads blocked in futex_wait on `word`.
inline void futex_wake(std::atomic<std::uint32_t>& word, int count = 1) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr,
          nullptr, 0);
}

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

}  // namespace usched::detail
