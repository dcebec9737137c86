// Cancellation the C++20 way: a fiber whose callable takes a
// std::stop_token is given one; its join_handle asks it to stop, and every
// stoppable wait returns when it does.
#include <chrono>
#include <cstdio>
#include <stop_token>

#include <usched/usched.hpp>

using namespace std::chrono_literals;

int main() {
  usched::runtime rt;
  const bool ok = rt.run([] {
    usched::channel<int> requests(16);
    // A server loop: serves until asked to stop, even while it waits.
    auto server = usched::spawn([&](std::stop_token stop) {
      int served = 0;
      while (auto r = requests.recv(stop)) {  // returns empty on a stop request
        ++served;
        (void)*r;
      }
      return served;
    });
    for (int i = 0; i < 5; ++i) requests.send(i);
    while (requests.size() > 0) usched::this_fiber::yield();  // let it drain the queue
    server.request_stop();  // as std::jthread::request_stop()
    return server.join() == 5;
  });
  std::printf("server stopped after serving every request: %s\n", ok ? "yes" : "no");
  return ok ? 0 : 1;
}
