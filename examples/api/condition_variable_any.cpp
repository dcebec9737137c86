// condition_variable_any: wait with any lock, and stop waiting when asked
// to (the C++20 stop_token overloads).
#include <cstdio>
#include <deque>
#include <mutex>
#include <stop_token>

#include <usched/usched.hpp>

int main() {
  usched::runtime rt;
  const int handled = rt.run([] {
    usched::timed_mutex m;  // any lock will do
    usched::condition_variable_any cv;
    std::deque<int> jobs;
    std::stop_source stop;
    auto worker = usched::spawn([&] {
      int n = 0;
      std::unique_lock<usched::timed_mutex> lk(m);
      // Returns false once stop is requested and no job is left.
      while (cv.wait(lk, stop.get_token(), [&] { return !jobs.empty(); })) {
        jobs.pop_front();
        ++n;
      }
      return n;
    });
    for (int i = 0; i < 10; ++i) {
      {
        std::lock_guard<usched::timed_mutex> g(m);
        jobs.push_back(i);
      }
      cv.notify_one();
    }
    // Wait until the worker has drained the queue, then stop it.
    {
      std::unique_lock<usched::timed_mutex> lk(m);
      while (!jobs.empty()) {
        lk.unlock();
        usched::this_fiber::yield();
        lk.lock();
      }
    }
    stop.request_stop();
    return worker.join();
  });
  std::printf("handled %d jobs, then stopped\n", handled);
  return handled == 10 ? 0 : 1;
}
