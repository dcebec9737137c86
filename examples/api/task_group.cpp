// task_group: structured concurrency. Nothing started in the group outlives
// it; the first failure is rethrown by wait() and stops the rest.
#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <stop_token>

#include <usched/usched.hpp>

int main() {
  usched::runtime rt;
  const bool ok = rt.run([] {
    std::atomic<int> checked{0};
    std::atomic<int> gave_up{0};
    usched::task_group g;
    for (int part = 0; part < 8; ++part) {
      g.spawn([&](std::stop_token stop, int p) {
        // Part 3 is bad at its 10th item; the others are too long to finish
        // before it gets there.
        for (int i = 0; i < 10'000'000; ++i) {
          if (stop.stop_requested()) {  // a sibling failed: no point going on
            ++gave_up;
            return;
          }
          if (p == 3 && i == 10) throw std::runtime_error("part 3 is corrupt");
          ++checked;
          usched::this_fiber::yield();
        }
      }, part);
    }
    try {
      g.wait();
      return false;
    } catch (const std::runtime_error& e) {
      std::printf("wait() rethrew: %s (%d items checked, %d parts gave up)\n", e.what(), checked.load(),
                  gave_up.load());
      return gave_up.load() == 7;
    }
  });
  return ok ? 0 : 1;
}
