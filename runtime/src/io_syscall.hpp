// io_syscall.hpp: an I/O request (reactor.hpp) made as the plain system
// call, for the epoll reactor and for callers that are not fibers.
#pragma once

#include <cerrno>

#include <poll.h>

#include "reactor.hpp"

namespace usched::detail {

// perform_syscall(): the request's system call, once: its result or
// -errno. `nonblocking` adds MSG_DONTWAIT where the call takes flags (recv,
// send, recvmsg, sendmsg); accept always gets SOCK_CLOEXEC besides the
// request's flags, send and sendmsg MSG_NOSIGNAL. A poll request is one
// poll(2) that does not wait.
long perform_syscall(const io_request& r, bool nonblocking) noexcept;

// Whether `fd` is in O_NONBLOCK mode (one fcntl).
bool fd_is_nonblocking(int fd) noexcept;
// set_nonblocking(): puts `fd` in O_NONBLOCK mode; returns its flags
// before (>= 0), or -errno. restore_flags() gives them back.
int set_nonblocking(int fd) noexcept;
void restore_flags(int fd, int flags) noexcept;

// Whether the request waits for a descriptor to be writable, not readable.
bool wants_write(io_opcode op) noexcept;
// Whether the request is a regular file's (pread, pwrite, fsync, open),
// which readiness cannot wait for.
constexpr bool is_file_call(io_opcode op) noexcept {
  return op == io_opcode::pread || op == io_opcode::pwrite || op == io_opcode::fsync || op == io_opcode::openat;
}

// connect_outcome(): the result of a non-blocking connect that has
// finished (SO_ERROR): 0 or -errno.
long connect_outcome(int fd) noexcept;

// by_readiness(): the readiness model, for the epoll reactor and plain
// threads: make the call non-blocking; when the kernel says EAGAIN (or a
// connect is in progress), `wait(for_write)` until the descriptor is ready
// (it returns 0, or -errno to give up with), and make it again. recv and
// send are non-blocking per call (MSG_DONTWAIT); the other calls only on a
// descriptor in O_NONBLOCK mode: on a blocking one the wait comes first and
// the call is made once, blocking (another reader of the descriptor could
// take the data in between). A connect on a blocking socket is made
// non-blocking for the call and given its mode back. A poll request is the
// wait alone; its result is the events asked for.
template <class Wait>
long by_readiness(const io_request& req, Wait&& wait) {
  if (req.op == io_opcode::poll) {
    const long r = wait((req.flags & POLLOUT) != 0);
    return r < 0 ? r : (req.flags & (POLLIN | POLLOUT));
  }
  const bool per_call = req.op == io_opcode::recv || req.op == io_opcode::send || req.op == io_opcode::recvmsg ||
                        req.op == io_opcode::sendmsg;
  const bool nonblocking = per_call || fd_is_nonblocking(req.fd);
  if (req.op == io_opcode::connect) {
    int saved = -1;
    if (!nonblocking && (saved = set_nonblocking(req.fd)) < 0) return saved;
    long res = perform_syscall(req, true);
    if (res == -EINPROGRESS || res == -EAGAIN) {
      res = wait(true);
      if (res == 0) res = connect_outcome(req.fd);
    }
    if (!nonblocking) restore_flags(req.fd, saved);
    return res;
  }
  const bool for_write = wants_write(req.op);
  for (;;) {
    if (nonblocking) {
      const long res = perform_syscall(req, true);
      if (res != -EAGAIN && res != -EWOULDBLOCK) return res;
    }
    const long r = wait(for_write);
    if (r < 0) return r;
    if (!nonblocking) return perform_syscall(req, false);
  }
}

}  // namespace usched::detail
