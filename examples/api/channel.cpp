// channel: workers fed through a bounded channel of move-only jobs, a
// timed send that gives up and keeps its value, statuses that tell a full
// or empty channel from a closed one, and range-for until it is closed.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <usched/usched.hpp>

using namespace std::chrono_literals;
using usched::channel_status;

int main() {
  usched::runtime rt;
  const bool ok = rt.run([] {
    usched::channel<std::unique_ptr<std::string>> jobs(2);

    // Nobody receives yet: two jobs fit, the third times out and stays ours.
    jobs.send(std::make_unique<std::string>("resize"));
    jobs.send(std::make_unique<std::string>("crop"));
    auto third = std::make_unique<std::string>("rotate");
    const bool timed_out = jobs.send_for(std::move(third), 1ms) == channel_status::timeout;
    const bool kept = third != nullptr;
    const bool full = jobs.try_send_status(std::move(third)) == channel_status::full;

    // Workers take jobs until the channel is closed and drained.
    usched::channel<std::size_t> done(0);
    std::vector<usched::join_handle<void>> workers;
    for (int i = 0; i < 3; ++i) {
      workers.push_back(usched::spawn([&] {
        for (std::unique_ptr<std::string> job : jobs) done.send(job->size());
      }));
    }
    auto collector = usched::spawn([&] {
      std::size_t letters = 0;
      for (std::size_t n : done) letters += n;
      return letters;
    });
    jobs.send(std::move(third));  // the same job again: now there is room
    jobs.close();
    for (auto& w : workers) w.join();
    done.close();
    const std::size_t letters = collector.join();

    // Closed, not merely full or empty: nothing will ever be sent or come.
    const bool send_closed = jobs.try_send_status(std::make_unique<std::string>("late")) == channel_status::closed;
    const bool recv_closed = jobs.recv_for(1s).status() == channel_status::closed;

    std::printf("timed out %d, kept %d, full %d, letters %zu, closed %d %d\n", timed_out, kept, full, letters,
                send_closed, recv_closed);
    return timed_out && kept && full && letters == 6 + 4 + 6 && send_closed && recv_closed;
  });
  return ok ? 0 : 1;
}
