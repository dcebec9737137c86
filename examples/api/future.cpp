// future: an async fan-out, a promise another fiber keeps, and a wait
// with a timeout.
#include <chrono>
#include <cstdio>
#include <vector>

#include <usched/usched.hpp>

int main() {
  usched::runtime rt;
  return rt.run([] {
    // Fan out: each call is a fiber; get() blocks this fiber, not its worker.
    std::vector<usched::future<long>> parts;
    for (long i = 1; i <= 100; ++i) {
      parts.push_back(usched::async([i] { return i * i; }));
    }
    long sum = 0;
    for (auto& f : parts) sum += f.get();

    // A promise kept by another fiber once it has the answer.
    usched::promise<long> answer;
    usched::future<long> later = answer.get_future();
    usched::promise<void> go;
    auto worker = usched::spawn([&answer, started = go.get_future()]() mutable {
      started.wait();
      answer.set_value(42);
    });

    // Nobody has said go: the wait times out, and the value is not there.
    const bool timed_out = later.wait_for(std::chrono::milliseconds(1)) == usched::future_status::timeout;
    go.set_value();
    const long value = later.get();
    worker.join();

    std::printf("sum of squares %ld, answer %ld, timed out first: %s\n", sum, value, timed_out ? "yes" : "no");
    return sum == 338350 && value == 42 && timed_out ? 0 : 1;
  });
}
