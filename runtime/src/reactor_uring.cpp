// reactor_uring.cpp: the io_uring reactor (reactor.hpp, docs/io.md).
//
// One ring per worker, set up by the worker's own thread with the best
// flags the kernel takes (probe_io_support): SINGLE_ISSUER (only this
// thread submits, so the kernel skips its submission locking) with
// DEFER_TASKRUN (completions are posted when this thread asks, not by
// interrupting whatever it runs: a busy worker is never disturbed by its
// I/O) and TASKRUN_FLAG (the kernel raises IORING_SQ_TASKRUN in the ring's
// shared flags when it holds deferred completions, so "anything for me?"
// is one load); else COOP_TASKRUN; else neither.
//
// A fiber's call is one submission queue entry whose user_data is the
// call's frame (an io_op on the fiber's stack, alive until its
// completion), plus a linked timeout when it has a deadline. Entries wait
// in the submission queue until the worker polls: when it goes idle, at a
// preempt point or tick, when a batch has gathered, or when a few switches
// have passed, so a burst of fibers that each make a call costs one system
// call between them. A stop request cannot touch the ring from its own
// thread (only the issuer may submit): it queues the call for cancelling
// and wakes the worker, which submits the cancel at its next poll. Either
// way the call's own completion ends the wait: the fiber returns only once
// the kernel has given its buffer back.
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <system_error>

#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>

#include "clock.hpp"
#include "io_syscall.hpp"
#include "reactor.hpp"
#include "runtime_impl.hpp"

namespace usched::detail {
namespace {

// Submission queue entries per ring; the completion queue is larger, so
// that a worker with thousands of calls in flight rarely overflows it (the
// kernel keeps what overflows, IORING_FEAT_NODROP, and hands it over when
// asked; poll() asks).
constexpr unsigned ring_entries = 256;
constexpr unsigned ring_cq_entries = 4096;
// A worker running fibers submits a batch when this many entries wait, or
// after this many switches since the first of them: a fiber that loops on
// yield() waiting for another's I/O still sees it made.
constexpr unsigned submit_batch = 32;
constexpr unsigned submit_after_switches = 8;

// user_data of the ring's own entries: linked timeouts and cancels (no
// completion to deliver), and the wake-up read of the eventfd.
constexpr std::uint64_t tag_internal = 0;
constexpr std::uint64_t tag_wakeup = 1;

// One call in flight: on the calling fiber's stack until its completion.
struct io_op {
  fiber* who = nullptr;
  std::uint64_t token = 0;
  int res = 0;
  __kernel_timespec deadline{};
  // Queued for cancelling by a stop request (cancel_lock_).
  io_op* cancel_next = nullptr;
  bool cancel_queued = false;
};

bool retries_on_poll(io_opcode op) noexcept {
  switch (op) {
    case io_opcode::read:
    case io_opcode::write:
    case io_opcode::recv:
    case io_opcode::send:
    case io_opcode::recvmsg:
    case io_opcode::sendmsg:
    case io_opcode::accept:
      return true;
    default:
      return false;
  }
}

void prep(io_uring_sqe* sqe, const io_request& r) noexcept {
  switch (r.op) {
    case io_opcode::read:
      io_uring_prep_read(sqe, r.fd, r.buf, static_cast<unsigned>(r.len), static_cast<__u64>(-1));
      break;
    case io_opcode::write:
      io_uring_prep_write(sqe, r.fd, r.buf, static_cast<unsigned>(r.len), static_cast<__u64>(-1));
      break;
    case io_opcode::pread:
      io_uring_prep_read(sqe, r.fd, r.buf, static_cast<unsigned>(r.len), static_cast<__u64>(r.offset));
      break;
    case io_opcode::pwrite:
      io_uring_prep_write(sqe, r.fd, r.buf, static_cast<unsigned>(r.len), static_cast<__u64>(r.offset));
      break;
    case io_opcode::recv:
      io_uring_prep_recv(sqe, r.fd, r.buf, r.len, r.flags);
      break;
    case io_opcode::send:
      io_uring_prep_send(sqe, r.fd, r.buf, r.len, r.flags | MSG_NOSIGNAL);
      break;
    case io_opcode::recvmsg:
      io_uring_prep_recvmsg(sqe, r.fd, r.msg, static_cast<unsigned>(r.flags));
      break;
    case io_opcode::sendmsg:
      io_uring_prep_sendmsg(sqe, r.fd, r.msg, static_cast<unsigned>(r.flags | MSG_NOSIGNAL));
      break;
    case io_opcode::accept:
      io_uring_prep_accept(sqe, r.fd, r.addr, r.addrlen, r.flags);
      break;
    case io_opcode::connect:
      io_uring_prep_connect(sqe, r.fd, r.caddr, r.caddrlen);
      break;
    case io_opcode::poll:
      io_uring_prep_poll_add(sqe, r.fd, static_cast<unsigned>(r.flags));
      break;
    case io_opcode::fsync:
      io_uring_prep_fsync(sqe, r.fd, 0);
      break;
    case io_opcode::openat:
      io_uring_prep_openat(sqe, AT_FDCWD, r.path, r.flags, r.mode);
      break;
  }
}

class uring_reactor final : public reactor {
 public:
  explicit uring_reactor(worker& owner) : reactor(options::io_backend::io_uring), owner_(owner) {
    io_uring_params p{};
    p.flags = probe_io_support().setup_flags | IORING_SETUP_CQSIZE;
    p.cq_entries = ring_cq_entries;
    const int rc = io_uring_queue_init_params(ring_entries, &ring_, &p);
    if (rc < 0) throw std::system_error(-rc, std::generic_category(), "io_uring_setup");
    defer_taskrun_ = (p.flags & IORING_SETUP_DEFER_TASKRUN) != 0;
    event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (event_fd_ < 0) {
      const int e = errno;
      io_uring_queue_exit(&ring_);
      throw std::system_error(e, std::generic_category(), "eventfd");
    }
    arm_wakeup();
  }

  ~uring_reactor() override {
    io_uring_queue_exit(&ring_);
    ::close(event_fd_);
  }

  long call(fiber& self, const io_request& req, std::int64_t deadline_ns,
            const std::stop_token& stop) override {
    if (stop.stop_requested()) return -ECANCELED;
    // A send usually finds room in the socket's buffer: made directly it
    // costs one system call and no switch, where the ring would cost a
    // block and a wake-up of the fiber (and, with a deadline, a linked
    // timeout armed and disarmed). Only a send that would wait goes to the
    // ring.
    if (req.op == io_opcode::send || req.op == io_opcode::sendmsg) {
      const long res = perform_syscall(req, true);
      if (res != -EAGAIN && res != -EWOULDBLOCK) return res;
    }
    io_request r = req;
    long res = 0;
    for (;;) {
      res = issue(self, r, deadline_ns, stop);
      // A descriptor in O_NONBLOCK mode may answer EAGAIN instead of having
      // the ring wait for it: wait for readiness here, then try again.
      if (res == -EAGAIN && retries_on_poll(r.op) && r.op == req.op) {
        io_request p;
        p.op = io_opcode::poll;
        p.fd = req.fd;
        p.flags = wants_write(req.op) ? POLLOUT : POLLIN;
        res = issue(self, p, deadline_ns, stop);
        if (res < 0) break;
        continue;
      }
      // A connect on an O_NONBLOCK socket: wait for it to finish, then ask
      // how it went.
      if (res == -EINPROGRESS && r.op == io_opcode::connect) {
        io_request p;
        p.op = io_opcode::poll;
        p.fd = req.fd;
        p.flags = POLLOUT;
        res = issue(self, p, deadline_ns, stop);
        if (res < 0) break;
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(req.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
        res = err ? -err : 0;
      }
      break;
    }
    if (res == -ECANCELED || res == -ETIME) {
      if (stop.stop_requested()) return -ECANCELED;
      if (has_timer(deadline_ns) && now_ns() >= deadline_ns) return -ETIMEDOUT;
    }
    return res;
  }

  bool ready() const noexcept override {
    if (unsubmitted_ > 0 || cancel_queued_.load(std::memory_order_relaxed)) return true;
    if (!closed_ && owner_.rt().io_closed()) return true;
    if (io_uring_cq_ready(&ring_) > 0) return true;
    const unsigned flags = IO_URING_READ_ONCE(*ring_.sq.kflags);
    return (flags & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) != 0;
  }

  unsigned poll(worker& w, bool eager) override {
    take_cancels();
    close_if_asked();
    if (unsubmitted_ > 0) {
      if (eager || unsubmitted_ >= submit_batch || ++switches_ >= submit_after_switches) submit();
    }
    return reap(w);
  }

  unsigned wait(worker& w, std::int64_t timeout_ns) override {
    take_cancels();
    close_if_asked();
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts{};
    __kernel_timespec* tsp = nullptr;
    if (timeout_ns >= 0) {
      ts.tv_sec = timeout_ns / 1'000'000'000;
      ts.tv_nsec = timeout_ns % 1'000'000'000;
      tsp = &ts;
    }
    // Submits what waits, then sleeps until a completion (the wake-up read
    // of the eventfd is one) or the timeout.
    unsubmitted_ = 0;
    switches_ = 0;
    io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, tsp, nullptr);
    return reap(w);
  }

  void wake() noexcept override {
    const std::uint64_t one = 1;
    // A full counter (never, at one write per wake) would only make this
    // write fail; the read it ends is pending anyway.
    [[maybe_unused]] const ssize_t n = ::write(event_fd_, &one, sizeof one);
  }

  void drain(worker& w) noexcept override {
    // Cancel everything the ring still holds (only the ring's own entries
    // are left: every fiber has finished), then reap until nothing is owed.
    if (io_uring_sqe* sqe = sqe_for(1)) {
      io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
      io_uring_sqe_set_data64(sqe, tag_internal);
      ++in_flight_;
    }
    wakeup_armed_ = false;
    submit();
    while (in_flight_ > 0) {
      io_uring_cqe* cqe = nullptr;
      if (io_uring_wait_cqe(&ring_, &cqe) < 0) break;
      reap(w);
    }
  }

 private:
  // issue(): one submission and the wait for its completion.
  long issue(fiber& self, const io_request& r, std::int64_t deadline_ns, const std::stop_token& stop) {
    if (owner_.rt().io_closed()) return -ECANCELED;
    io_op op;
    op.who = &self;
    op.token = prepare_wait(self, wait_kind::io, &op);
    const bool timed = has_timer(deadline_ns);
    io_uring_sqe* sqe = sqe_for(timed ? 2 : 1);
    if (!sqe) {
      (void)claim_wait(self, op.token);
      return -EAGAIN;
    }
    prep(sqe, r);
    io_uring_sqe_set_data(sqe, &op);
    ++in_flight_;
    ++unsubmitted_;
    if (timed) {
      // The deadline is absolute on CLOCK_MONOTONIC (the steady clock's),
      // so time spent waiting in the submission queue counts against it.
      sqe->flags |= IOSQE_IO_LINK;
      op.deadline.tv_sec = deadline_ns / 1'000'000'000;
      op.deadline.tv_nsec = deadline_ns % 1'000'000'000;
      io_uring_sqe* t = io_uring_get_sqe(&ring_);  // sqe_for() made room for both
      io_uring_prep_link_timeout(t, &op.deadline, IORING_TIMEOUT_ABS);
      io_uring_sqe_set_data64(t, tag_internal);
      ++in_flight_;
      ++unsubmitted_;
    }
    outstanding_.fetch_add(1, std::memory_order_relaxed);
    {
      std::optional<std::stop_callback<cancel_request>> on_stop;
      if (stop.stop_possible()) on_stop.emplace(stop, cancel_request{this, &op});
      block(self, op.token, no_deadline);
    }
    // The stop callback has run or never will. A cancel it queued that the
    // worker has not taken yet must not outlive this frame.
    if (cancel_queued_.load(std::memory_order_acquire)) {
      std::lock_guard<spinlock> g(cancel_lock_);
      if (op.cancel_queued) unlink_cancel(op);
    }
    return op.res;
  }

  struct cancel_request {
    uring_reactor* r;
    io_op* op;
    void operator()() noexcept { r->queue_cancel(*op); }
  };

  // A stop request, from any thread: queue the call for the worker to
  // cancel, and wake the worker if it sleeps in its ring.
  void queue_cancel(io_op& op) noexcept {
    {
      std::lock_guard<spinlock> g(cancel_lock_);
      op.cancel_next = cancel_head_;
      op.cancel_queued = true;
      cancel_head_ = &op;
      cancel_queued_.store(true, std::memory_order_release);
    }
    owner_wake();
  }

  void unlink_cancel(io_op& op) noexcept {
    for (io_op** p = &cancel_head_; *p; p = &(*p)->cancel_next) {
      if (*p == &op) {
        *p = op.cancel_next;
        break;
      }
    }
    op.cancel_queued = false;
    if (!cancel_head_) {
      cancel_queued_.store(false, std::memory_order_relaxed);
    }
  }

  // The owning worker's thread: turn queued cancels into cancel entries,
  // submitted at once. The call they name is still in flight, or its
  // completion waits in the ring unreaped (its fiber is still blocked: this
  // thread reaps it): its user_data names no other call yet.
  void take_cancels() noexcept {
    if (!cancel_queued_.load(std::memory_order_relaxed)) return;
    bool any = false;
    {
      std::lock_guard<spinlock> g(cancel_lock_);
      while (io_op* op = cancel_head_) {
        io_uring_sqe* sqe = sqe_for(1);
        if (!sqe) break;
        cancel_head_ = op->cancel_next;
        op->cancel_queued = false;
        io_uring_prep_cancel(sqe, op, 0);
        io_uring_sqe_set_data64(sqe, tag_internal);
        ++in_flight_;
        ++unsubmitted_;
        any = true;
      }
      if (!cancel_head_) {
        cancel_queued_.store(false, std::memory_order_relaxed);
      }
    }
    if (any) submit();
  }

  // close_if_asked(): once the runtime's destructor has begun, cancel
  // every call this ring holds (once: a call made after the flag fails
  // before it reaches the ring, and one prepared before it is ahead of
  // this cancel in the submission queue, which the kernel takes in order).
  void close_if_asked() noexcept {
    if (closed_ || !owner_.rt().io_closed()) return;
    io_uring_sqe* sqe = sqe_for(1);
    if (!sqe) return;
    closed_ = true;
    io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
    io_uring_sqe_set_data64(sqe, tag_internal);
    ++in_flight_;
    submit();
    // The wake-up read is cancelled with the rest; its completion arms it
    // again (reap()).
  }

  // Room for `n` consecutive entries (a call and its linked timeout must
  // not be split by a submission in between): submit first if needed.
  io_uring_sqe* sqe_for(unsigned n) noexcept {
    if (io_uring_sq_space_left(&ring_) < n) submit();
    if (io_uring_sq_space_left(&ring_) < n) return nullptr;
    return io_uring_get_sqe(&ring_);
  }

  void submit() noexcept {
    unsubmitted_ = 0;
    switches_ = 0;
    for (;;) {
      const int rc = io_uring_submit(&ring_);
      // EBUSY/EAGAIN: the completion queue is over-full; reaping makes room
      // (the caller reaps right after), and what is left is submitted at
      // the next poll.
      if (rc == -EINTR) continue;
      if (rc < 0) unsubmitted_ = io_uring_sq_ready(&ring_);
      break;
    }
  }

  void arm_wakeup() noexcept {
    io_uring_sqe* sqe = sqe_for(1);
    if (!sqe) return;
    io_uring_prep_read(sqe, event_fd_, &wakeup_value_, sizeof wakeup_value_, 0);
    io_uring_sqe_set_data64(sqe, tag_wakeup);
    ++in_flight_;
    ++unsubmitted_;
    wakeup_armed_ = true;
  }

  unsigned reap(worker& w) noexcept {
    // Completions the kernel deferred to this thread are posted now.
    if (defer_taskrun_ || (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_CQ_OVERFLOW)) {
      const unsigned flags = IO_URING_READ_ONCE(*ring_.sq.kflags);
      if (flags & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) io_uring_get_events(&ring_);
    }
    unsigned woken = 0;
    bool rearm = false;
    for (;;) {
      io_uring_cqe* cqes[64];
      const unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, 64);
      if (n == 0) break;
      for (unsigned i = 0; i < n; ++i) {
        const std::uint64_t tag = io_uring_cqe_get_data64(cqes[i]);
        const int res = cqes[i]->res;
        --in_flight_;
        if (tag == tag_internal) continue;
        if (tag == tag_wakeup) {
          rearm = wakeup_armed_;
          continue;
        }
        auto* op = reinterpret_cast<io_op*>(tag);
        op->res = res;
        fiber* f = op->who;
        outstanding_.fetch_sub(1, std::memory_order_relaxed);
        // Nobody else claims an I/O wait: its completion is its only end.
        if (claim_wait(*f, op->token)) {
          w.rt().try_to_wake_up(f, placement_kind::wake, wake_reason::io, &w, w.index());
          ++woken;
        }
      }
      io_uring_cq_advance(&ring_, n);
    }
    if (rearm) arm_wakeup();
    return woken;
  }

  // Wake this reactor's worker if it sleeps (in its ring or on its futex);
  // a running one takes the cancel at its next poll.
  void owner_wake() noexcept { owner_.notify(); }

  worker& owner_;
  mutable io_uring ring_{};
  bool closed_ = false;  // close_if_asked() has cancelled everything
  bool defer_taskrun_ = false;
  int event_fd_ = -1;
  std::uint64_t wakeup_value_ = 0;
  bool wakeup_armed_ = false;
  // Entries the kernel still owes a completion for, and entries prepared
  // but not yet submitted; this thread's only.
  int in_flight_ = 0;
  unsigned unsubmitted_ = 0;
  unsigned switches_ = 0;
  // Calls a stop request asked to cancel: a list under cancel_lock_, and
  // a flag the worker (and a returning call) reads without it.
  spinlock cancel_lock_;
  io_op* cancel_head_ = nullptr;
  std::atomic<bool> cancel_queued_{false};
};

}  // namespace

std::unique_ptr<reactor> make_uring_reactor(worker& owner) { return std::make_unique<uring_reactor>(owner); }

}  // namespace usched::detail
