// blocking_pool.cpp: usched::blocking's pool of OS threads, which run the
// calls that would block a worker, while the calling fiber waits.
#include <mutex>
#include <thread>

#include <usched/blocking.hpp>

#include "runtime_impl.hpp"

namespace usched::detail {

void runtime_impl::submit_blocking(blocking_job* job) {
  std::unique_lock<std::mutex> lk(blocking_.mutex);
  job->next = nullptr;
  (blocking_.tail ? blocking_.tail->next : blocking_.head) = job;
  blocking_.tail = job;
  ++blocking_.queued;
  // A thread per call while the pool may grow, so that a call never waits
  // behind another blocking one: a new thread when the queue holds more
  // calls than there are idle threads to take them. Once it is full,
  // calls queue.
  if (blocking_.queued > blocking_.idle && blocking_.threads.size() < opts_.blocking_threads) {
    try {
      blocking_.threads.emplace_back([this] { blocking_thread_main(); });
      return;
    } catch (...) {
      // No thread to be had (no memory, or the system's limit): the call
      // waits for one that is running; with none running it cannot run,
      // and leaves the queue before its frame does.
      if (blocking_.threads.empty()) {
        blocking_.head = blocking_.tail = nullptr;
        blocking_.queued = 0;
        throw;
      }
    }
  }
  lk.unlock();
  blocking_.ready.notify_one();
}

void runtime_impl::blocking_thread_main() noexcept {
  std::unique_lock<std::mutex> lk(blocking_.mutex);
  for (;;) {
    while (!blocking_.head && !blocking_.stopping) {
      ++blocking_.idle;
      blocking_.ready.wait(lk);
      --blocking_.idle;
    }
    if (!blocking_.head) return;  // stopping, and nothing left to run
    blocking_job* job = blocking_.head;
    blocking_.head = job->next;
    if (!blocking_.head) blocking_.tail = nullptr;
    --blocking_.queued;
    lk.unlock();
    // The call runs as its fiber would: a fiber_local read there is the
    // fiber's, and one made there is the fiber's too, destroyed when it
    // returns, not left behind on a pool thread that serves other fibers
    // next. Taken back before the wake, after which the fiber runs again.
    lend_fiber_locals(job->who->is_fiber ? static_cast<fiber*>(job->who) : nullptr);
    job->run(job);
    lend_fiber_locals(nullptr);
    // Last: the job is on the caller's stack, which may unwind once it runs.
    wake(*job->who, job->token, wake_reason::blocking);
    lk.lock();
  }
}

void runtime_impl::stop_blocking_pool() noexcept {
  {
    std::lock_guard<std::mutex> lk(blocking_.mutex);
    blocking_.stopping = true;
  }
  blocking_.ready.notify_all();
  for (std::thread& t : blocking_.threads) t.join();
  blocking_.threads.clear();
}

void run_blocking(runtime_impl& rt, blocking_job& job) {
  waitable& me = current_waitable();
  job.who = &me;
  job.token = prepare_wait(me, wait_kind::blocking, &job);
  try {
    rt.submit_blocking(&job);
  } catch (...) {
    (void)claim_wait(me, job.token);  // disarm: nobody will end this wait
    throw;
  }
  block(me, job.token, no_deadline);
}

}  // namespace usched::detail
