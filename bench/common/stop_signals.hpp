// stop_signals.hpp: SIGINT/SIGTERM as an orderly stop, without a handler or
// a global flag, for the schbench clone (-r 0 runs until one comes) and the
// drivers, usched_schbench_compare and usched_micro_compare (one ends the
// current child early, process.hpp, and skips the rest).
#pragma once

#include <chrono>
#include <csignal>
#include <ctime>
#include <pthread.h>

namespace bench {

// stop_signals blocks SIGINT and SIGTERM in the calling thread for its
// lifetime, so that threads started meanwhile inherit the mask and the
// signals queue for wait_until() instead of killing the process.
class stop_signals {
 public:
  stop_signals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~stop_signals() {
    // A signal that came during shutdown asked for what is already
    // happening; drop it rather than let it kill the process on unblock.
    // Only signals the caller had not blocked itself are ours to drop.
    timespec zero{};
    for (int sig : {SIGINT, SIGTERM}) {
      if (sigismember(&old_, sig)) continue;
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      while (sigtimedwait(&one, nullptr, &zero) == sig) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  stop_signals(const stop_signals&) = delete;
  stop_signals& operator=(const stop_signals&) = delete;

  // wait_until() sleeps until `deadline`; true if a stop signal came first.
  bool wait_until(std::chrono::steady_clock::time_point deadline) const {
    return wait_for_signal(deadline) != 0;
  }

  // wait_for() sleeps up to `d`; the signal number if one came, else 0.
  int wait_for(std::chrono::nanoseconds d) const {
    return wait_for_signal(std::chrono::steady_clock::now() + d);
  }

  // take() is the signal number of a stop signal already queued, taken off
  // the queue, or 0 without waiting.
  int take() const {
    timespec zero{};
    const int sig = sigtimedwait(&set_, nullptr, &zero);
    return sig > 0 ? sig : 0;
  }

  // The signals this object blocks and waits for.
  const sigset_t& signals() const noexcept { return set_; }

 private:
  int wait_for_signal(std::chrono::steady_clock::time_point deadline) const {
    for (;;) {
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) return 0;
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timespec ts{};
      ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
      ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
      const int sig = sigtimedwait(&set_, nullptr, &ts);
      if (sig > 0) return sig;
      // EAGAIN (timed out) or EINTR: re-check the clock.
    }
  }

  sigset_t set_{};
  sigset_t old_{};
};

}  // namespace bench
