// counting_semaphore: at most 3 of 20 fibers inside a section at once (a
// connection pool, say), and try_acquire_for giving up when nothing is
// released.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <vector>

#include <usched/usched.hpp>

int main() {
  usched::runtime rt;
  usched::counting_semaphore<3> slots(3);
  std::atomic<int> inside{0}, most{0}, served{0};
  rt.run([&] {
    std::vector<usched::join_handle<void>> hs;
    for (int i = 0; i < 20; ++i) {
      hs.push_back(usched::spawn([&] {
        slots.acquire();
        const int now = inside.fetch_add(1) + 1;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        usched::this_fiber::sleep_for(std::chrono::milliseconds(1));  // the work
        inside.fetch_sub(1);
        served.fetch_add(1);
        slots.release();
      }));
    }
    for (auto& h : hs) h.join();
  });

  // No permit left and nobody to release one: the wait times out.
  usched::binary_semaphore signal(0);
  const bool got = signal.try_acquire_for(std::chrono::milliseconds(5));

  std::printf("served %d, at most %d at once, timed out: %s\n", served.load(), most.load(), got ? "no" : "yes");
  return served == 20 && most >= 1 && most <= 3 && !got ? 0 : 1;
}
