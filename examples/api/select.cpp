// select: one fiber serving channels of different types until a third is
// closed, giving up after a timeout, and a send that does not block.
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include <usched/usched.hpp>

using namespace std::chrono_literals;

int main() {
  usched::runtime rt;
  const bool ok = rt.run([] {
    usched::channel<int> numbers(0);
    usched::channel<std::string> words(0);
    usched::channel<int> quit(0);
    auto producer = usched::spawn([&] {
      for (int i = 1; i <= 10; ++i) {
        numbers.send(i);
        if (i % 5 == 0) words.send(std::to_string(i));
      }
      quit.close();  // a closed channel's receive case is ready: the signal to stop
    });

    int sum = 0;
    std::string heard;
    bool quitting = false;
    while (!quitting) {
      usched::select(usched::on_recv(numbers, [&](std::optional<int> n) { sum += *n; }),
                     usched::on_recv(words, [&](std::optional<std::string>&& w) { heard += w.value() + " "; }),
                     usched::on_recv(quit, [&] { quitting = true; }),
                     usched::on_timeout(10s, [&] { quitting = true; }));
    }
    producer.join();

    // Nothing ready: the timeout case (index 1) is taken.
    const std::size_t idle = usched::select(usched::on_recv(numbers, [] {}), usched::on_timeout(1ms, [] {}));

    // A send that does not block: on_default is taken when the mailbox is full.
    usched::channel<int> mailbox(1);
    int dropped = 0;
    for (int i = 0; i < 3; ++i) {
      usched::select(usched::on_send(mailbox, i), usched::on_default([&] { ++dropped; }));
    }

    std::printf("sum %d, words \"%s\", idle case %zu, dropped %d\n", sum, heard.c_str(), idle, dropped);
    return sum == 55 && heard == "5 10 " && idle == 1 && dropped == 2 && *mailbox.recv() == 0;
  });
  return ok ? 0 : 1;
}
