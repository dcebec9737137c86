// usched/wait_group.hpp: wait for a set of fibers to finish (Go's WaitGroup).
#pragma once

#include <cstdint>

#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>

namespace usched {

// wait_group counts outstanding work: add(n) before starting n pieces, done()
// as each finishes, wait() blocks until the count is zero. The count must not
// go negative (std::logic_error). wait() on a zero count returns at once.
class wait_group {
 public:
  explicit wait_group(std::int64_t initial = 0);
  wait_group(const wait_group&) = delete;
  wait_group& operator=(const wait_group&) = delete;

  void add(std::int64_t n = 1);
  void done() { add(-1); }
  void wait();
  // The current count (a snapshot).
  std::int64_t count() const noexcept;

 private:
  mutable detail::spinlock lock_;
  std::int64_t count_ = 0;
  detail::wait_list waiters_;
};

}  // namespace usched
