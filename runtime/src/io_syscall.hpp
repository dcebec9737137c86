// io_syscall.hpp: an I/O request (reactor.hpp) made as the plain system
// call, for the epoll reactor and for callers that are not fibers.
#pragma once

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

// Whether the request waits for a descriptor to be writable, not readable.
bool wants_write(io_opcode op) noexcept;

// connect_outcome(): the result of a non-blocking connect that has
// finished (SO_ERROR): 0 or -errno.
long connect_outcome(int fd) noexcept;

}  // namespace usched::detail
