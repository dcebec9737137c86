// io_late: the I/O counterpart of timer_late. A fiber blocks in a read of a
// socket on a worker that a long-running fiber then holds (it calls
// this_fiber::preempt_point() as it spins, as a well-behaved computation
// does, for up to 20 ms); a fiber on another worker writes one byte. The
// delay is from the write to the reader running: the completion must be
// reaped on the held worker (its reactor is its own: docs/io.md, "Who
// reaps") and the woken reader placed by the policy, on the idle worker if
// the policy moves it. p50 and max over io_samples reads, in microseconds.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

#include <usched/io.hpp>

#include "../workloads.hpp"

namespace micro::io_late {

namespace {
constexpr long io_samples = 200;
constexpr std::int64_t io_hold_max_ns = 20'000'000;
}  // namespace

void measure_usched(benchmark::State& state, const env& e) {
  if (e.cfg.workers < 2) throw std::runtime_error("io_late needs --workers=2 or more");
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw std::runtime_error("socketpair failed");
  for (auto _ : state) {
    std::vector<std::int64_t> late(static_cast<std::size_t>(io_samples));
    rt->run([&] {
      for (auto& l : late) {
        std::atomic<std::int64_t> written{0};
        std::atomic<bool> holding{false};
        std::atomic<bool> woke{false};
        std::atomic<int> reader_at{-1};
        auto reader = usched::spawn([&] {
          // Queued behind the reader, the holder starts when the reader
          // blocks in its read and keeps its worker from then; the reader
          // is free to be moved.
          const int here = usched::this_fiber::worker_index();
          reader_at.store(here);
          auto holder = usched::spawn(on_worker(here), [&] {
            holding.store(true);
            const std::int64_t until = now_ns() + io_hold_max_ns;
            while (!woke.load(std::memory_order_relaxed) && now_ns() < until) usched::this_fiber::preempt_point();
          });
          char byte = 0;
          if (usched::io::read(sv[0], &byte, 1) != 1) throw std::runtime_error("io_late: short read");
          l = now_ns() - written.load();
          woke.store(true, std::memory_order_relaxed);
          holder.join();
        });
        while (reader_at.load() < 0) usched::this_fiber::yield();
        const int other = (reader_at.load() + 1) % static_cast<int>(e.cfg.workers);
        auto writer = usched::spawn(on_worker(other), [&] {
          while (!holding.load()) usched::this_fiber::yield();
          written.store(now_ns());
          if (::write(sv[1], "x", 1) != 1) throw std::runtime_error("io_late: short write");
        });
        writer.join();
        reader.join();
      }
    });
    std::sort(late.begin(), late.end());
    state.counters["p50_us"] = static_cast<double>(late[late.size() / 2]) / 1e3;
    state.counters["max_us"] = static_cast<double>(late.back()) / 1e3;
  }
  ::close(sv[0]);
  ::close(sv[1]);
}

}  // namespace micro::io_late
