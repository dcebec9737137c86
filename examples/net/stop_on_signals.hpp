// stop_on_signals.hpp: SIGINT and SIGTERM as a stop request, for programs
// whose work runs on fibers.
//
// A signal handler may run on any thread, in the middle of any fiber, and
// may call almost nothing; a fiber blocked in accept() would not even see a
// flag it set. So no handler: the signals are blocked in every thread, and
// one thread waits for them in sigwait(2), where it may do anything. It
// requests stop on a std::stop_source whose token the fibers' blocking
// calls carry (io::bound), and each of those calls then returns
// std::errc::operation_canceled.
#pragma once

#include <csignal>
#include <stop_token>
#include <thread>

#include <pthread.h>

namespace usched::examples {

class stop_on_signals {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread, which every thread it
  // starts afterwards inherits: construct it first in main(), before the
  // runtime starts its workers, or a worker could take the signal and die.
  stop_on_signals() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
    waiter_ = std::thread([this] {
      int signal = 0;
      sigwait(&signals_, &signal);
      source_.request_stop();
    });
  }
  // Ends the waiting thread: if no signal came, it is sent one of its own
  // (blocked, so it only ends the sigwait).
  ~stop_on_signals() {
    if (!source_.stop_requested()) pthread_kill(waiter_.native_handle(), SIGTERM);
    waiter_.join();
  }
  stop_on_signals(const stop_on_signals&) = delete;
  stop_on_signals& operator=(const stop_on_signals&) = delete;

  // The token a signal requests stop on.
  std::stop_token token() const noexcept { return source_.get_token(); }

 private:
  sigset_t signals_{};
  std::stop_source source_;
  std::thread waiter_;
};

}  // namespace usched::examples
