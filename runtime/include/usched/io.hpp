// usched/io.hpp: I/O that blocks the calling fiber, not its worker: calls on
// any file descriptor (read, write, recv, send, accept, connect, waiting for
// readiness) and regular files (open, read at, write at, fsync), served by
// the worker's reactor (docs/io.md). Sockets are usched/net.hpp.
//
// Each worker has a reactor: an io_uring (through liburing) where the kernel
// allows one, or an epoll instance (USCHED_IO=auto|io_uring|epoll,
// options::io). A fiber's call is submitted on the reactor of the worker it
// runs on and the fiber blocks; the worker runs other fibers meanwhile and
// reaps the completion on its scheduling path. A completion wakes its fiber
// like any other wake-up (reason `io`), placed by the policy: the reaping
// worker is the waker, the fiber's last worker its previous one.
//
// The calls keep POSIX's shapes and meanings (a read of 0 is the end of the
// file or stream; partial reads and writes are results, not errors), with
// two differences: they block the fiber, never the worker, whatever the
// descriptor's O_NONBLOCK flag, and a write to a socket whose peer has gone
// is an EPIPE error, never a SIGPIPE (the workers block that signal).
//
// Errors: each call throws std::system_error whose code is the errno (in
// std::generic_category) and whose what() names the operation; each has an
// overload taking a std::error_code& that does not throw. A call that gives
// up at its deadline fails with std::errc::timed_out, one whose stop was
// requested with std::errc::operation_canceled; either way it returns only
// once the kernel is done with the caller's buffer (the operation is
// cancelled in the kernel and its completion waited for), so the buffer is
// never written after the call returned.
//
// Called from a plain thread (not a fiber), a call blocks that thread, as
// every usched primitive does, honouring the same deadline and stop token.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stop_token>
#include <string>
#include <system_error>
#include <utility>

#include <sys/types.h>

#include <usched/detail/deadline.hpp>

struct sockaddr;

namespace usched::detail {

// owned_fd: one open descriptor, closed when its owner is destroyed or
// assigned another; the part every socket and io::file share. Reads as
// the descriptor (-1 when there is none).
class owned_fd {
 public:
  owned_fd() noexcept = default;
  explicit owned_fd(int fd) noexcept : fd_(fd) {}
  owned_fd(owned_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  owned_fd& operator=(owned_fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~owned_fd() { reset(); }
  operator int() const noexcept { return fd_; }  // NOLINT: reads as the descriptor by design
  // Gives the descriptor up without closing it.
  int release() noexcept { return std::exchange(fd_, -1); }
  // Closes it now (close(2)'s error is not reported).
  void reset() noexcept;

 private:
  int fd_ = -1;
};

}  // namespace usched::detail

namespace usched::io {

// bound: what ends a blocking call early. Nothing (the default), a deadline
// (within(), until()), a stop request (a std::stop_token converts to a
// bound), or both. A deadline already past still lets a call that needs no
// waiting complete (the data is there): only a wait times out.
class bound {
 public:
  bound() noexcept = default;
  bound(std::stop_token stop) noexcept : stop_(std::move(stop)) {}  // NOLINT: implicit by design
  bound(std::int64_t deadline_ns, std::stop_token stop) noexcept
      : deadline_ns_(deadline_ns), stop_(std::move(stop)) {}

  // The steady-clock deadline in ns (usched/detail/deadline.hpp), or
  // detail::far_deadline_ns for none.
  std::int64_t deadline_ns() const noexcept { return deadline_ns_; }
  const std::stop_token& stop() const noexcept { return stop_; }

 private:
  std::int64_t deadline_ns_ = detail::far_deadline_ns;
  std::stop_token stop_;
};

// within(d): a bound `d` from now; until(tp): at `tp` (any clock, converted
// as the other primitives' wait_until do). Either may carry a stop token.
template <class Rep, class Period>
bound within(const std::chrono::duration<Rep, Period>& d, std::stop_token stop = {}) noexcept {
  return bound(detail::deadline_after(d), std::move(stop));
}
template <class Clock, class Duration>
bound until(const std::chrono::time_point<Clock, Duration>& tp, std::stop_token stop = {}) noexcept {
  return bound(detail::deadline_at(tp), std::move(stop));
}

// ---- calls on any descriptor -------------------------------------------------
// The descriptor stays the caller's: these calls neither open nor close it,
// and may be made on one descriptor from several fibers at once (a reader
// and a writer of one socket, say), as the system calls may.

// read / write / pread / pwrite: read(2), write(2), pread(2), pwrite(2).
std::size_t read(int fd, void* buf, std::size_t n, const bound& b = {});
std::size_t read(int fd, void* buf, std::size_t n, const bound& b, std::error_code& ec) noexcept;
std::size_t write(int fd, const void* buf, std::size_t n, const bound& b = {});
std::size_t write(int fd, const void* buf, std::size_t n, const bound& b, std::error_code& ec) noexcept;
std::size_t pread(int fd, void* buf, std::size_t n, off_t offset, const bound& b = {});
std::size_t pread(int fd, void* buf, std::size_t n, off_t offset, const bound& b, std::error_code& ec) noexcept;
std::size_t pwrite(int fd, const void* buf, std::size_t n, off_t offset, const bound& b = {});
std::size_t pwrite(int fd, const void* buf, std::size_t n, off_t offset, const bound& b,
                   std::error_code& ec) noexcept;
// recv / send: recv(2), send(2); send always adds MSG_NOSIGNAL.
std::size_t recv(int fd, void* buf, std::size_t n, int flags = 0, const bound& b = {});
std::size_t recv(int fd, void* buf, std::size_t n, int flags, const bound& b, std::error_code& ec) noexcept;
std::size_t send(int fd, const void* buf, std::size_t n, int flags = 0, const bound& b = {});
std::size_t send(int fd, const void* buf, std::size_t n, int flags, const bound& b, std::error_code& ec) noexcept;
// accept: accept4(2) of a connection on listening socket `fd`; the new
// descriptor is close-on-exec. `addr`/`len` may be null.
int accept(int fd, sockaddr* addr, socklen_t* len, const bound& b = {});
int accept(int fd, sockaddr* addr, socklen_t* len, const bound& b, std::error_code& ec) noexcept;
// connect: connect(2) of socket `fd`, waiting until the connection is made
// or refused.
void connect(int fd, const sockaddr* addr, socklen_t len, const bound& b = {});
void connect(int fd, const sockaddr* addr, socklen_t len, const bound& b, std::error_code& ec) noexcept;
// wait_readable / wait_writable: block until `fd` polls readable (or
// writable), for a library that does its own non-blocking calls (a
// database client's socket): its EAGAIN becomes a wait here. Hang-up and
// error conditions count as ready, as poll(2) reports them.
void wait_readable(int fd, const bound& b = {});
void wait_readable(int fd, const bound& b, std::error_code& ec) noexcept;
void wait_writable(int fd, const bound& b = {});
void wait_writable(int fd, const bound& b, std::error_code& ec) noexcept;

// ---- regular files -------------------------------------------------------------
// file: an open regular file, read and written at offsets. On the io_uring
// backend every call goes through the ring; on the epoll backend (epoll
// cannot wait for regular files) through the blocking pool
// (usched::blocking), so a slow disk stalls only the calling fiber either
// way. Move-only; the destructor closes the descriptor (without waiting:
// close() reports errors).
class file {
 public:
  file() noexcept = default;
  // Takes ownership of an open descriptor.
  explicit file(int fd) noexcept : fd_(fd) {}
  file(file&&) noexcept = default;
  file& operator=(file&&) noexcept = default;
  file(const file&) = delete;
  file& operator=(const file&) = delete;
  ~file() = default;

  // open(): openat(2) relative to the working directory; `flags` are
  // open(2)'s (O_CLOEXEC is added), `mode` applies with O_CREAT.
  static file open(const std::string& path, int flags, mode_t mode = 0644, const bound& b = {});
  static file open(const std::string& path, int flags, mode_t mode, const bound& b, std::error_code& ec) noexcept;

  bool is_open() const noexcept { return fd_ >= 0; }
  int native_handle() const noexcept { return fd_; }
  // Gives the descriptor up without closing it.
  int release() noexcept { return fd_.release(); }

  // read_at / write_at: pread(2) / pwrite(2): a short count at the end of
  // the file (read) or of the device's room (write).
  std::size_t read_at(off_t offset, void* buf, std::size_t n, const bound& b = {});
  std::size_t read_at(off_t offset, void* buf, std::size_t n, const bound& b, std::error_code& ec) noexcept;
  std::size_t write_at(off_t offset, const void* buf, std::size_t n, const bound& b = {});
  std::size_t write_at(off_t offset, const void* buf, std::size_t n, const bound& b, std::error_code& ec) noexcept;
  // sync(): fsync(2).
  void sync(const bound& b = {});
  void sync(const bound& b, std::error_code& ec) noexcept;
  // size(): fstat(2)'s st_size.
  std::uint64_t size() const;
  // close(): closes now and reports close(2)'s error.
  void close();

 private:
  detail::owned_fd fd_;
};

// backend(): the reactor the calling fiber's runtime uses ("io_uring" or
// "epoll"), or "none" outside a fiber.
const char* backend() noexcept;

}  // namespace usched::io
