// barrier: fibers that advance a computation in lock-step. Each round every
// fiber doubles its own cell; the completion function, run once per round
// by the last fiber to arrive, before any is released, adds up the cells.
#include <cstdio>
#include <vector>

#include <usched/usched.hpp>

int main() {
  usched::runtime rt;
  constexpr int fibers = 4, rounds = 5;
  std::vector<long> cells(fibers, 1);
  std::vector<long> totals;  // one per round
  usched::barrier sync(fibers, [&]() noexcept {
    long total = 0;
    for (long c : cells) total += c;
    totals.push_back(total);
  });
  rt.run([&] {
    std::vector<usched::join_handle<void>> hs;
    for (int i = 0; i < fibers; ++i) {
      hs.push_back(usched::spawn([&, i] {
        for (int r = 0; r < rounds; ++r) {
          cells[i] *= 2;
          sync.arrive_and_wait();
        }
      }));
    }
    for (auto& h : hs) h.join();
  });
  // 4 cells of 1, doubled each round: 8, 16, 32, 64, 128.
  bool ok = totals.size() == rounds;
  for (int r = 0; ok && r < rounds; ++r) ok = totals[r] == fibers * (2L << r);
  for (long t : totals) std::printf("%ld ", t);
  std::printf("\n");
  return ok ? 0 : 1;
}
