// sleep_probe: sleeps that must never end, or must end at once, in fibers and
// on plain threads, checked by ctest from the output (tests/CMakeLists.txt).
// A sleep cannot be interrupted, so one that never ends cannot be joined and
// the runtime holding it cannot be destroyed: the probe reports what it saw
// and ends the process with _Exit.
//
//   forever  every way of sleeping for ever; after a short while, prints
//            "asleep: N of M" (N still asleep, of M sleepers).
//   past     every way of sleeping until a time already past; prints
//            "returned: N of M" as soon as all have returned (or after 5 s).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include <usched/usched.hpp>

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using sys_clock = std::chrono::system_clock;

// How long the sleepers of `forever` run before the probe looks: far past
// what a deadline wrapped into the past took (0.3 ms).
constexpr auto still_asleep_after = 50ms;
// How long the probe waits for its sleepers to start, and `past` for them
// to return, before it gives up on them.
constexpr auto give_up_after = 5s;

std::vector<std::function<void()>> forever_sleeps() {
  return {
      [] { usched::this_fiber::sleep_for(std::chrono::seconds::max()); },
      [] { usched::this_fiber::sleep_for(std::chrono::hours::max()); },
      [] { usched::this_fiber::sleep_for(std::chrono::nanoseconds::max()); },
      [] { usched::this_fiber::sleep_for(std::chrono::duration<double>(1e300)); },
      [] { usched::this_fiber::sleep_until(steady::time_point::max()); },
      [] { usched::this_fiber::sleep_until(std::chrono::time_point<steady, std::chrono::seconds>::max()); },
  };
}

std::vector<std::function<void()>> past_sleeps() {
  return {
      [] { usched::this_fiber::sleep_for(-1ms); },
      [] { usched::this_fiber::sleep_for(std::chrono::seconds::min()); },
      [] { usched::this_fiber::sleep_for(std::chrono::hours::min()); },
      [] { usched::this_fiber::sleep_for(std::chrono::duration<double>(-1e300)); },
      [] { usched::this_fiber::sleep_until(steady::time_point::min()); },
      [] { usched::this_fiber::sleep_until(steady::time_point{}); },
      [] { usched::this_fiber::sleep_until(sys_clock::time_point::min()); },
  };
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  const bool forever = std::strcmp(mode, "forever") == 0;
  if (!forever && std::strcmp(mode, "past") != 0) {
    std::fprintf(stderr, "usage: sleep_probe forever|past\n");
    return 2;
  }
  // Leaked on purpose: a fiber that sleeps for ever keeps its destructor
  // waiting; _Exit below ends the process without it.
  auto* rt = new usched::runtime(usched::options::from_env());
  const auto sleeps = forever ? forever_sleeps() : past_sleeps();
  const int total = static_cast<int>(2 * sleeps.size());
  std::atomic<int> started{0};
  std::atomic<int> returned{0};
  for (const auto& s : sleeps) {
    rt->spawn([&started, &returned, s] {
      started.fetch_add(1);
      s();
      returned.fetch_add(1);
    }).detach();
    std::thread([&started, &returned, s] {
      started.fetch_add(1);
      s();
      returned.fetch_add(1);
    }).detach();
  }
  const auto give_up = steady::now() + give_up_after;
  while (started.load() < total && steady::now() < give_up) std::this_thread::sleep_for(100us);
  if (forever) {
    // Every sleeper is in its sleep (or past it): none may come back.
    std::this_thread::sleep_for(still_asleep_after);
    std::printf("asleep: %d of %d\n", total - returned.load(), total);
  } else {
    while (returned.load() < total && steady::now() < give_up) std::this_thread::sleep_for(100us);
    std::printf("returned: %d of %d\n", returned.load(), total);
  }
  std::fflush(stdout);
  std::_Exit(0);
}
