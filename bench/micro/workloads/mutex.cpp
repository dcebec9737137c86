// mutex/N: N fibers (threads) increment a counter under a mutex, mutex_ops
// increments in all: ns per lock+unlock, the count checked.
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "../workloads.hpp"

namespace micro::mutex {

namespace {
constexpr long mutex_ops = 1'000'000;
}  // namespace

void measure_usched(benchmark::State& state, const env& e, long contenders) {
  const long n = contenders;
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([n] {
      usched::mutex m;
      long counter = 0;
      const long per = mutex_ops / n;
      std::vector<usched::join_handle<void>> hs;
      hs.reserve(static_cast<std::size_t>(n));
      const std::int64_t t0 = now_ns();
      for (long i = 0; i < n; ++i) {
        hs.push_back(usched::spawn([&] {
          for (long k = 0; k < per; ++k) {
            std::lock_guard<usched::mutex> g(m);
            ++counter;
          }
        }));
      }
      for (auto& h : hs) h.join();
      const std::int64_t t1 = now_ns();
      if (counter != per * n) throw std::runtime_error("mutex: lost increments");
      return static_cast<double>(t1 - t0) / static_cast<double>(per * n);
    });
    state.counters["ns"] = ns;
  }
}

void measure_boost(benchmark::State& state, const env& e, long contenders) {
  const long n = contenders;
  for (auto _ : state) {
    boost::fibers::mutex m;
    long counter = 0;
    const long per = mutex_ops / n;
    std::vector<boost::fibers::fiber> fs;
    fs.reserve(static_cast<std::size_t>(n));
    const std::int64_t t0 = now_ns();
    for (long i = 0; i < n; ++i) {
      fs.push_back(e.pool->spawn([&] {
        for (long k = 0; k < per; ++k) {
          std::lock_guard<boost::fibers::mutex> g(m);
          ++counter;
        }
      }));
    }
    for (auto& f : fs) f.join();
    const std::int64_t t1 = now_ns();
    if (counter != per * n) throw std::runtime_error("mutex: lost increments");
    state.counters["ns"] = static_cast<double>(t1 - t0) / static_cast<double>(per * n);
  }
}

void measure_thread(benchmark::State& state, const env&, long contenders) {
  const long n = contenders;
  for (auto _ : state) {
    std::mutex m;
    long counter = 0;
    const long per = mutex_ops / n;
    std::vector<std::thread> ts;
    const std::int64_t t0 = now_ns();
    for (long i = 0; i < n; ++i) {
      ts.emplace_back([&] {
        for (long k = 0; k < per; ++k) {
          std::lock_guard<std::mutex> g(m);
          ++counter;
        }
      });
    }
    for (auto& t : ts) t.join();
    const std::int64_t t1 = now_ns();
    if (counter != per * n) throw std::runtime_error("mutex: lost increments");
    state.counters["ns"] = static_cast<double>(t1 - t0) / static_cast<double>(per * n);
  }
}

}  // namespace micro::mutex
