// timed_mutex: give up on a lock that is held too long, instead of
// blocking behind it.
#include <chrono>
#include <cstdio>
#include <mutex>

#include <usched/usched.hpp>

using namespace std::chrono_literals;

int main() {
  usched::runtime rt;
  const bool ok = rt.run([] {
    usched::timed_mutex m;
    usched::channel<int> held(1), release(1);
    auto holder = usched::spawn([&] {
      std::lock_guard<usched::timed_mutex> g(m);
      held.send(1);
      (void)release.recv();  // keeps the lock until told
    });
    (void)held.recv();
    const bool got_it_early = m.try_lock_for(2ms);  // held: times out
    release.send(1);
    const bool got_it_later = m.try_lock_for(1s);   // free soon: succeeds
    if (got_it_later) m.unlock();
    holder.join();
    return !got_it_early && got_it_later;
  });
  std::printf("try_lock_for: timed out while held, succeeded once free: %s\n", ok ? "yes" : "no");
  return ok ? 0 : 1;
}
