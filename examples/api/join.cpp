// Joining without waiting for ever: try_join(), join_for(), join_until().
#include <chrono>
#include <cstdio>

#include <usched/usched.hpp>

using namespace std::chrono_literals;

int main() {
  usched::runtime rt;
  const bool ok = rt.run([] {
    usched::channel<int> go(1);
    auto h = usched::spawn([&] { return go.recv().value() + 1; });
    const bool early = h.try_join().has_value();   // still running: empty
    const bool timed = h.join_for(1ms).has_value();  // still waiting: empty
    go.send(41);
    const std::optional<int> r = h.join_for(1s);    // finishes: the result
    return !early && !timed && r == 42;
  });
  std::printf("timed joins: %s\n", ok ? "ok" : "wrong");
  return ok ? 0 : 1;
}
