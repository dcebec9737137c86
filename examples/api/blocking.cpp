// blocking(): a call that blocks its OS thread (here a sleep standing for a
// read() or a database client) runs on the blocking pool, and the worker
// keeps running the other fibers meanwhile.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include <usched/usched.hpp>

using namespace std::chrono_literals;

namespace {

int slow_lookup(int key) {
  std::this_thread::sleep_for(20ms);  // blocks the thread it runs on
  return key * 2;
}

}  // namespace

int main() {
  usched::options o = usched::options::from_env();
  o.workers = 1;  // one worker: a blocked worker would stop everything
  usched::runtime rt(o);
  const bool ok = rt.run([] {
    std::atomic<long> ticks{0};
    std::atomic<bool> done{false};
    auto ticker = usched::spawn([&] {
      while (!done) {
        ++ticks;
        usched::this_fiber::yield();
      }
    });
    const int v = usched::blocking(slow_lookup, 21);
    done = true;
    ticker.join();
    std::printf("lookup gave %d; the worker ran the ticker %ld times meanwhile\n", v, ticks.load());
    return v == 42 && ticks.load() > 0;
  });
  return ok ? 0 : 1;
}
