// reactor_epoll.cpp: the epoll reactor (reactor.hpp, docs/io.md), for
// where an io_uring cannot be had or is not wanted.
//
// The fiber makes its system call itself, non-blocking; only when the
// kernel answers EAGAIN does it wait, in the epoll instance of the worker
// it runs on, for the descriptor to become ready, and then tries again (the
// readiness model of Go's netpoller and of every epoll server). Waits are
// the wait protocol's (usched/detail/wait.hpp), so a deadline is an
// ordinary timer and a stop request an ordinary claim, and nothing of the
// kernel's holds the caller's buffer while it waits: the call is made only
// once the descriptor is ready. Regular files, which epoll cannot wait
// for, go to the blocking pool.
//
// Registrations are one-shot: a descriptor is armed for the directions its
// waiters want when one starts waiting, and re-armed after an event for
// those still waiting. Only the owning worker's thread calls epoll_wait and
// arms; the waiters' lists are under lock_, which a fiber that gave up (a
// deadline, a stop) takes from whichever worker it then runs on.
#include <cerrno>
#include <cstring>
#include <mutex>
#include <system_error>
#include <unordered_map>

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <usched/blocking.hpp>
#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>

#include "clock.hpp"
#include "io_syscall.hpp"
#include "reactor.hpp"
#include "runtime_impl.hpp"

namespace usched::detail {
namespace {

// A worker running fibers looks at its epoll at most this often from its
// switch paths (it costs a system call); idle, it looks whenever it is.
constexpr std::int64_t switch_poll_interval_ns = 20'000;
constexpr int events_per_wait = 128;

class epoll_reactor final : public reactor {
 public:
  explicit epoll_reactor(worker& owner) : reactor(options::io_backend::epoll), owner_(owner) {
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
    event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (event_fd_ < 0) {
      const int e = errno;
      ::close(epfd_);
      throw std::system_error(e, std::generic_category(), "eventfd");
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = event_fd_;
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, event_fd_, &ev) < 0) {
      const int e = errno;
      ::close(event_fd_);
      ::close(epfd_);
      throw std::system_error(e, std::generic_category(), "epoll_ctl");
    }
    interval_cycles_ = static_cast<std::uint64_t>(static_cast<double>(switch_poll_interval_ns) *
                                                  owner.rt().cycles_per_ns());
  }

  ~epoll_reactor() override {
    ::close(event_fd_);
    ::close(epfd_);
  }

  long call(fiber& self, const io_request& req, std::int64_t deadline_ns,
            const std::stop_token& stop) override {
    if (stop.stop_requested()) return -ECANCELED;
    if (is_file_call(req.op)) {
      // epoll cannot wait for a regular file: a pool thread makes the
      // call, and the fiber waits for it (no deadline or stop can
      // interrupt a disk read in progress; they are checked before).
      if (has_timer(deadline_ns) && now_ns() >= deadline_ns) return -ETIMEDOUT;
      return usched::blocking([&req]() noexcept { return perform_syscall(req, false); });
    }
    return by_readiness(req, [&](bool for_write) {
      return wait_ready(self, req.fd, for_write ? EPOLLOUT : EPOLLIN, deadline_ns, stop);
    });
  }

  bool ready() const noexcept override {
    return cycles() >= next_poll_cycles_ || (!closed_ && owner_.rt().io_closed());
  }

  unsigned poll(worker&, bool) override {
    return close_if_asked() + harvest(0);
  }

  unsigned wait(worker&, std::int64_t timeout_ns) override {
    const unsigned closed = close_if_asked();
    return closed + harvest(closed ? 0 : timeout_ns);
  }

  void wake() noexcept override {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(event_fd_, &one, sizeof one);
  }

  void drain(worker&) noexcept override {}

 private:
  struct fd_watch {
    wait_list readers;
    wait_list writers;
    bool registered = false;  // in the epoll set (armed or spent)
  };

  // close_if_asked(): once the runtime's destructor has begun, end every
  // readiness wait (the waiters find io_closed() and fail with ECANCELED);
  // a wait that starts later sees the flag under lock_ and does not begin.
  unsigned close_if_asked() noexcept {
    if (closed_ || !owner_.rt().io_closed()) return 0;
    closed_ = true;
    unsigned woken = 0;
    std::lock_guard<spinlock> g(lock_);
    for (auto& [fd, fw] : watches_) {
      woken += notify_all(fw.readers);
      woken += notify_all(fw.writers);
    }
    return woken;
  }

  // wait_ready(): block the calling fiber until `fd` is ready for `dir`
  // (EPOLLIN or EPOLLOUT): 0, or -ETIMEDOUT / -ECANCELED, or -errno when
  // epoll refuses the descriptor (EPERM for a regular file, which is always
  // ready: 0).
  long wait_ready(fiber& self, int fd, std::uint32_t dir, std::int64_t deadline_ns, const std::stop_token& stop) {
    (void)self;
    std::unique_lock<spinlock> lk(lock_);
    if (owner_.rt().io_closed()) return -ECANCELED;
    fd_watch& fw = watches_[fd];
    const std::uint32_t mask = EPOLLONESHOT | dir | armed_for(fw);
    const int rc = arm(fd, fw, mask);
    if (rc != 0) {
      if (fw.readers.empty() && fw.writers.empty()) watches_.erase(fd);
      return rc == -EPERM ? 0 : rc;
    }
    waiter node;
    outstanding_.fetch_add(1, std::memory_order_relaxed);
    const bool ok = wait_in(lk, dir == EPOLLIN ? fw.readers : fw.writers, node, wait_kind::io, &fw,
                            deadline_ns, stop);
    outstanding_.fetch_sub(1, std::memory_order_relaxed);
    if (ok) return owner_.rt().io_closed() ? -ECANCELED : 0;
    return stop.stop_requested() ? -ECANCELED : -ETIMEDOUT;
  }

  static std::uint32_t armed_for(const fd_watch& fw) noexcept {
    std::uint32_t m = 0;
    if (!fw.readers.empty()) m |= EPOLLIN | EPOLLRDHUP;
    if (!fw.writers.empty()) m |= EPOLLOUT;
    return m;
  }

  // arm(): (re)register `fd` for `mask`; lock_ held. The kernel's set and
  // ours can disagree (a descriptor closed and its number reused drops out
  // of the set; a spent one-shot stays in it), so a refusal of one verb is
  // answered with the other.
  int arm(int fd, fd_watch& fw, std::uint32_t mask) noexcept {
    epoll_event ev{};
    ev.events = mask;
    ev.data.fd = fd;
    int op = fw.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(epfd_, op, fd, &ev) < 0) {
      const int e = errno;
      if (e != ENOENT && e != EEXIST) return -e;
      op = e == ENOENT ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
      if (epoll_ctl(epfd_, op, fd, &ev) < 0) return -errno;
    }
    fw.registered = true;
    return 0;
  }

  // harvest(): one epoll_wait (`timeout_ns` 0: a look), waking the waiters
  // of every ready descriptor; the owning worker's thread.
  unsigned harvest(std::int64_t timeout_ns) noexcept {
    epoll_event evs[events_per_wait];
    int n = 0;
    if (timeout_ns == 0) {
      n = epoll_wait(epfd_, evs, events_per_wait, 0);
    } else {
      timespec ts{};
      timespec* tsp = nullptr;
      if (timeout_ns > 0) {
        ts.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000);
        ts.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000);
        tsp = &ts;
      }
      n = epoll_pwait2(epfd_, evs, events_per_wait, tsp, nullptr);
      if (n < 0 && errno == ENOSYS) {
        // Before Linux 5.11: milliseconds, rounded up so a timer is never
        // looked at early.
        const int ms = timeout_ns < 0 ? -1 : static_cast<int>((timeout_ns + 999'999) / 1'000'000);
        n = epoll_wait(epfd_, evs, events_per_wait, ms);
      }
    }
    next_poll_cycles_ = cycles() + interval_cycles_;
    unsigned woken = 0;
    for (int i = 0; i < n; ++i) {
      const int fd = evs[i].data.fd;
      if (fd == event_fd_) {
        std::uint64_t v = 0;
        [[maybe_unused]] const ssize_t r = ::read(event_fd_, &v, sizeof v);
        continue;
      }
      const std::uint32_t e = evs[i].events;
      std::lock_guard<spinlock> g(lock_);
      const auto it = watches_.find(fd);
      if (it == watches_.end()) continue;
      fd_watch& fw = it->second;
      if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) woken += notify_all(fw.readers);
      if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) woken += notify_all(fw.writers);
      const std::uint32_t still = armed_for(fw);
      if (still != 0) {
        (void)arm(fd, fw, EPOLLONESHOT | still);
      } else {
        // Spent and unwanted: forget it (a later waiter re-arms it, with
        // MOD when the kernel still has it).
        watches_.erase(it);
      }
    }
    return woken;
  }

  worker& owner_;
  bool closed_ = false;  // close_if_asked() has ended every wait
  int epfd_ = -1;
  int event_fd_ = -1;
  std::uint64_t interval_cycles_ = 0;
  std::uint64_t next_poll_cycles_ = 0;
  spinlock lock_;
  std::unordered_map<int, fd_watch> watches_;
};

}  // namespace

std::unique_ptr<reactor> make_epoll_reactor(worker& owner) { return std::make_unique<epoll_reactor>(owner); }

}  // namespace usched::detail
