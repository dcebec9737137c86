// recursive_mutex: a fiber that holds the lock may take it again, in a
// call it makes, even after it has moved to another worker in between.
#include <cstdio>
#include <mutex>
#include <vector>

#include <usched/usched.hpp>

namespace {

usched::recursive_mutex account_lock;
long balance = 0;

void deposit(long amount) {
  std::lock_guard<usched::recursive_mutex> g(account_lock);
  balance += amount;
}

// Holds the lock across both deposits: nobody sees the first without the
// second.
void transfer_in(long a, long b) {
  std::lock_guard<usched::recursive_mutex> g(account_lock);
  deposit(a);
  usched::this_fiber::yield();  // may resume on another worker: still the owner
  deposit(b);
}

}  // namespace

int main() {
  usched::runtime rt;
  rt.run([] {
    std::vector<usched::join_handle<void>> hs;
    for (int i = 0; i < 100; ++i) hs.push_back(usched::spawn(transfer_in, 1, 2));
    for (auto& h : hs) h.join();
  });
  std::printf("balance %ld (expected 300)\n", balance);
  return balance == 300 ? 0 : 1;
}
