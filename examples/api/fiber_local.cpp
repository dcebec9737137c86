// fiber_local: one value per fiber, as thread_local is one per thread; it
// follows the fiber from worker to worker and ends with it.
#include <cstdio>
#include <string>
#include <vector>

#include <usched/usched.hpp>

namespace {

// The request a fiber is serving, for its log lines.
usched::fiber_local<std::string> request_id;

void log_line(const char* what, std::vector<std::string>& out) { out.push_back(*request_id + ": " + what); }

}  // namespace

int main() {
  usched::runtime rt;
  const bool ok = rt.run([] {
    std::vector<usched::join_handle<bool>> hs;
    for (int i = 0; i < 4; ++i) {
      hs.push_back(usched::spawn([i] {
        *request_id = "req-" + std::to_string(i);
        std::vector<std::string> lines;
        log_line("parsed", lines);
        usched::this_fiber::yield();  // may resume on another worker
        log_line("answered", lines);
        return lines[1] == "req-" + std::to_string(i) + ": answered";
      }));
    }
    bool all = true;
    for (auto& h : hs) all = h.join() && all;
    return all && request_id->empty();  // this fiber's own value was never set
  });
  std::printf("every fiber saw its own request id: %s\n", ok ? "yes" : "no");
  return ok ? 0 : 1;
}
