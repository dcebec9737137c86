// live_rss: live_fibers fibers alive at once, blocked: resident bytes per
// fiber, and the stack size each peer gives them.
#include <mutex>
#include <vector>

#include "../workloads.hpp"

namespace micro::live_rss {

namespace {
constexpr long live_fibers = 100'000;
}  // namespace

void measure_usched(benchmark::State& state, const env& e) {
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  for (auto _ : state) {
    const double per_fiber = rt->run([] {
      usched::wait_group started;
      usched::channel<int> release(0);
      const std::size_t before = rss_now_bytes();
      std::vector<usched::join_handle<void>> hs;
      hs.reserve(live_fibers);
      started.add(live_fibers);
      for (long i = 0; i < live_fibers; ++i) {
        hs.push_back(usched::spawn([&] {
          started.done();
          (void)release.recv();
        }));
      }
      started.wait();
      const std::size_t during = rss_now_bytes();
      release.close();
      for (auto& h : hs) h.join();
      return (static_cast<double>(during) - static_cast<double>(before)) / live_fibers;
    });
    state.counters["bytes_per_fiber"] = per_fiber;
    state.counters["stack_bytes"] = static_cast<double>(rt->config().stack_size);
  }
}

void measure_boost(benchmark::State& state, const env& e) {
  for (auto _ : state) {
    boost::fibers::mutex m;
    boost::fibers::condition_variable cv, all_started;
    bool go = false;
    long started = 0;
    const std::size_t before = rss_now_bytes();
    std::vector<boost::fibers::fiber> fs;
    fs.reserve(live_fibers);
    for (long i = 0; i < live_fibers; ++i) {
      fs.push_back(e.pool->spawn([&] {
        std::unique_lock<boost::fibers::mutex> lk(m);
        if (++started == live_fibers) all_started.notify_one();
        cv.wait(lk, [&] { return go; });
      }));
    }
    {
      std::unique_lock<boost::fibers::mutex> lk(m);
      all_started.wait(lk, [&] { return started == live_fibers; });
    }
    const std::size_t during = rss_now_bytes();
    {
      std::unique_lock<boost::fibers::mutex> lk(m);
      go = true;
    }
    cv.notify_all();
    for (auto& f : fs) f.join();
    state.counters["bytes_per_fiber"] =
        (static_cast<double>(during) - static_cast<double>(before)) / live_fibers;
    state.counters["stack_bytes"] = static_cast<double>(boost_pool::stack_size);
  }
}

}  // namespace micro::live_rss
