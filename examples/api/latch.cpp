// latch: a start gate and a finish line. Eight fibers wait at `start` until
// the main thread opens it, each fills its slot, and the main thread waits
// at `done` until all eight have counted down.
#include <cstdio>
#include <vector>

#include <usched/usched.hpp>

int main() {
  usched::runtime rt;
  constexpr int fibers = 8;
  usched::latch start(1);
  usched::latch done(fibers);
  std::vector<int> squares(fibers, 0);
  for (int i = 0; i < fibers; ++i) {
    rt.spawn([&, i] {
      start.wait();  // blocks this fiber, not its worker
      squares[i] = i * i;
      done.count_down();
    });  // the handle, dropped, detaches the fiber
  }
  start.count_down();  // open the gate
  done.wait();         // a plain thread waits in the kernel
  // The latch orders every write before a count_down() before the return
  // of wait(): the slots can be read without a lock.
  int sum = 0;
  for (int s : squares) sum += s;
  std::printf("sum of squares 0..7 = %d\n", sum);
  return sum == 140 && done.try_wait() ? 0 : 1;
}
