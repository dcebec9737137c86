// reactor.hpp: a worker's I/O reactor (docs/io.md): where a fiber's I/O
// call waits, and how its worker learns that it may go on.
//
// Each worker has one, made the first time a fiber on it makes an I/O call
// (a runtime that does no I/O never makes one). Two backends keep one
// contract:
//   reactor_uring.cpp  an io_uring: the call itself is submitted to the
//                      ring, batched with the other fibers' until the worker
//                      polls, and its completion wakes the fiber;
//   reactor_epoll.cpp  an epoll instance: the fiber makes the call itself,
//                      non-blocking, and waits in the epoll for readiness
//                      when the kernel says EAGAIN.
// The worker polls its reactor on its scheduling path (worker.cpp): at
// every switch when it has ops in flight (a look that is a load or two when
// nothing is ready), at preempt points and ticks, before it spins, and it
// parks in the reactor's wait instead of on its futex while ops are in
// flight. A completion is a wake-up like any other (wait_kind::io): the
// polling worker is the waker, and the policy places the fiber.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>

#include <sys/socket.h>
#include <sys/types.h>

#include <usched/options.hpp>

namespace usched::detail {

class worker;
struct fiber;

// What an I/O call asks of the kernel: one system call's arguments.
enum class io_opcode : std::uint8_t {
  read,      // fd, buf, len
  write,     // fd, buf, len
  pread,     // fd, buf, len, offset
  pwrite,    // fd, buf, len, offset
  recv,      // fd, buf, len, flags
  send,      // fd, buf, len, flags (MSG_NOSIGNAL added)
  recvmsg,   // fd, msg, flags
  sendmsg,   // fd, msg, flags (MSG_NOSIGNAL added)
  accept,    // fd, addr, addrlen, flags (accept4's)
  connect,   // fd, caddr, caddrlen
  poll,      // fd, flags (POLLIN / POLLOUT); the result is the revents
  fsync,     // fd
  openat,    // path, flags, mode (AT_FDCWD)
};

const char* to_string(io_opcode op) noexcept;

struct io_request {
  io_opcode op = io_opcode::read;
  int fd = -1;
  void* buf = nullptr;
  std::size_t len = 0;
  off_t offset = 0;
  int flags = 0;
  sockaddr* addr = nullptr;
  socklen_t* addrlen = nullptr;
  const sockaddr* caddr = nullptr;
  socklen_t caddrlen = 0;
  struct msghdr* msg = nullptr;
  const char* path = nullptr;
  mode_t mode = 0;
};

// io_call() makes `req` on behalf of the caller: a fiber waits in its
// worker's reactor, a plain thread in poll(2). Returns the system call's
// result, or -errno; -ETIMEDOUT when `deadline_ns` (deadline.hpp;
// far_deadline_ns for none) passed first, -ECANCELED when `stop` was
// requested first. It returns only once the kernel is done with every
// buffer the request names.
long io_call(const io_request& req, std::int64_t deadline_ns, const std::stop_token& stop) noexcept;

// The backend and features the kernel gives, found once per process (the
// runtime's constructor asks; describe() prints it).
struct io_support {
  bool uring = false;         // an io_uring could be set up
  std::string why_not;        // ... and if not, why (the errno's text)
  unsigned setup_flags = 0;   // the IORING_SETUP_* flags the rings use
  std::string features;       // what describe() lists
};
const io_support& probe_io_support() noexcept;

class reactor {
 public:
  virtual ~reactor() = default;
  reactor(const reactor&) = delete;
  reactor& operator=(const reactor&) = delete;

  options::io_backend backend() const noexcept { return backend_; }

  // ---- the calling fiber's side: `self` runs on the worker that owns
  // this reactor (after a migration it may resume elsewhere) ----
  virtual long call(fiber& self, const io_request& req, std::int64_t deadline_ns,
                    const std::stop_token& stop) = 0;

  // ---- the owning worker's side ----
  // busy(): the worker has something in this reactor to look after (ops in
  // flight or to submit, fibers waiting for readiness): it polls at its
  // switches and parks in wait() rather than on its futex. A plain load.
  bool busy() const noexcept { return outstanding_.load(std::memory_order_relaxed) > 0; }
  // ready(): something would be found by poll() now (a completion posted,
  // work the kernel deferred to this thread, a submission or a cancel
  // waiting): a load or two of the ring's shared memory, no system call.
  // Always true for epoll, which learns nothing without one.
  virtual bool ready() const noexcept = 0;
  // poll(): submit what waits to be submitted, reap what has completed,
  // and wake the fibers it finishes (placed by the policy, `w` the waker);
  // never blocks. `eager`: submit even a batch the worker would otherwise
  // keep for its next idle moment. Returns the fibers woken.
  virtual unsigned poll(worker& w, bool eager) = 0;
  // wait(): park until a completion, wake(), or `timeout_ns` (< 0: no
  // limit); then poll(). The owning worker's thread, with its park word set.
  virtual unsigned wait(worker& w, std::int64_t timeout_ns) = 0;
  // wake(): end a wait() in progress (or the next one); any thread.
  virtual void wake() noexcept = 0;
  // drain(): before the worker's thread ends: every op of the reactor's own
  // (a wake-up read, a linked timeout, a cancel) is cancelled and reaped,
  // so nothing the kernel holds points into memory about to be freed.
  virtual void drain(worker& w) noexcept = 0;

 protected:
  explicit reactor(options::io_backend b) noexcept : backend_(b) {}
  // What busy() counts; each backend says what it is.
  std::atomic<int> outstanding_{0};

 private:
  options::io_backend backend_;
};

// make_reactor(): the reactor of backend `b` for the calling worker's
// thread (an io_uring is tied to the thread that submits to it). Throws
// std::system_error when the kernel refuses.
std::unique_ptr<reactor> make_uring_reactor(worker& owner);
std::unique_ptr<reactor> make_epoll_reactor(worker& owner);

}  // namespace usched::detail
