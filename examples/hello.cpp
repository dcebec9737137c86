// hello: the smallest useful embedding of usched. A runtime configured from
// the USCHED_* environment runs a fan-out of fibers that talk over a channel.
#include <cstdio>
#include <numeric>
#include <vector>

#include <usched/usched.hpp>

int main() try {
  usched::runtime rt;  // workers, policy and topology from USCHED_*

  const long total = rt.run([] {
    usched::channel<long> results(16);
    usched::wait_group wg;
    for (long i = 1; i <= 100; ++i) {
      wg.add();
      usched::spawn([&, i] {
        results.send(i * i);
        wg.done();
      }).detach();
    }
    // Close once every producer has sent; the loop below drains and stops.
    auto closer = usched::spawn([&] {
      wg.wait();
      results.close();
    });
    long sum = 0;
    while (auto v = results.recv()) sum += *v;
    closer.join();
    return sum;
  });

  std::printf("sum of squares 1..100 = %ld on %u workers\n", total, rt.workers());
  return total == 338350 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "hello: %s\n", e.what());
  return 2;
}
