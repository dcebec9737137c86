// io.cpp: usched/io.hpp's calls: each one request to io_call()
// (reactor.hpp), its result turned into a count, an error_code or an
// exception that names the call.
#include <cerrno>
#include <string>
#include <system_error>
#include <type_traits>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <usched/io.hpp>

#include "reactor.hpp"
#include "runtime_impl.hpp"

namespace usched::detail {

void owned_fd::reset() noexcept {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

}  // namespace usched::detail

namespace usched::io {
namespace {

using detail::io_opcode;
using detail::io_request;

long run(const io_request& r, const bound& b) noexcept { return detail::io_call(r, b.deadline_ns(), b.stop()); }

std::size_t counted(long res, std::error_code& ec) noexcept {
  if (res < 0) {
    ec = std::error_code(static_cast<int>(-res), std::generic_category());
    return 0;
  }
  ec.clear();
  return static_cast<std::size_t>(res);
}

[[noreturn]] void fail(const std::error_code& ec, const char* call) {
  throw std::system_error(ec, std::string("usched::io::") + call);
}

// or_throw(): the throwing form of a call, from its error_code form `f`.
template <class F>
auto or_throw(const char* call, F&& f) {
  std::error_code ec;
  if constexpr (std::is_void_v<decltype(f(ec))>) {
    f(ec);
    if (ec) fail(ec, call);
  } else {
    auto r = f(ec);
    if (ec) fail(ec, call);
    return r;
  }
}

io_request buffer_request(io_opcode op, int fd, const void* buf, std::size_t n) noexcept {
  io_request r;
  r.op = op;
  r.fd = fd;
  r.buf = const_cast<void*>(buf);
  r.len = n;
  return r;
}

}  // namespace

std::size_t read(int fd, void* buf, std::size_t n, const bound& b, std::error_code& ec) noexcept {
  return counted(run(buffer_request(io_opcode::read, fd, buf, n), b), ec);
}
std::size_t read(int fd, void* buf, std::size_t n, const bound& b) {
  return or_throw("read", [&](std::error_code& ec) { return read(fd, buf, n, b, ec); });
}

std::size_t write(int fd, const void* buf, std::size_t n, const bound& b, std::error_code& ec) noexcept {
  return counted(run(buffer_request(io_opcode::write, fd, buf, n), b), ec);
}
std::size_t write(int fd, const void* buf, std::size_t n, const bound& b) {
  return or_throw("write", [&](std::error_code& ec) { return write(fd, buf, n, b, ec); });
}

std::size_t pread(int fd, void* buf, std::size_t n, off_t offset, const bound& b, std::error_code& ec) noexcept {
  io_request r = buffer_request(io_opcode::pread, fd, buf, n);
  r.offset = offset;
  return counted(run(r, b), ec);
}
std::size_t pread(int fd, void* buf, std::size_t n, off_t offset, const bound& b) {
  return or_throw("pread", [&](std::error_code& ec) { return pread(fd, buf, n, offset, b, ec); });
}

std::size_t pwrite(int fd, const void* buf, std::size_t n, off_t offset, const bound& b,
                   std::error_code& ec) noexcept {
  io_request r = buffer_request(io_opcode::pwrite, fd, buf, n);
  r.offset = offset;
  return counted(run(r, b), ec);
}
std::size_t pwrite(int fd, const void* buf, std::size_t n, off_t offset, const bound& b) {
  return or_throw("pwrite", [&](std::error_code& ec) { return pwrite(fd, buf, n, offset, b, ec); });
}

std::size_t recv(int fd, void* buf, std::size_t n, int flags, const bound& b, std::error_code& ec) noexcept {
  io_request r = buffer_request(io_opcode::recv, fd, buf, n);
  r.flags = flags;
  return counted(run(r, b), ec);
}
std::size_t recv(int fd, void* buf, std::size_t n, int flags, const bound& b) {
  return or_throw("recv", [&](std::error_code& ec) { return recv(fd, buf, n, flags, b, ec); });
}

std::size_t send(int fd, const void* buf, std::size_t n, int flags, const bound& b, std::error_code& ec) noexcept {
  io_request r = buffer_request(io_opcode::send, fd, buf, n);
  r.flags = flags;
  return counted(run(r, b), ec);
}
std::size_t send(int fd, const void* buf, std::size_t n, int flags, const bound& b) {
  return or_throw("send", [&](std::error_code& ec) { return send(fd, buf, n, flags, b, ec); });
}

int accept(int fd, sockaddr* addr, socklen_t* len, const bound& b, std::error_code& ec) noexcept {
  io_request r;
  r.op = io_opcode::accept;
  r.fd = fd;
  r.addr = addr;
  r.addrlen = len;
  r.flags = SOCK_CLOEXEC;
  const long res = run(r, b);
  if (res < 0) {
    ec = std::error_code(static_cast<int>(-res), std::generic_category());
    return -1;
  }
  ec.clear();
  return static_cast<int>(res);
}
int accept(int fd, sockaddr* addr, socklen_t* len, const bound& b) {
  return or_throw("accept", [&](std::error_code& ec) { return accept(fd, addr, len, b, ec); });
}

void connect(int fd, const sockaddr* addr, socklen_t len, const bound& b, std::error_code& ec) noexcept {
  io_request r;
  r.op = io_opcode::connect;
  r.fd = fd;
  r.caddr = addr;
  r.caddrlen = len;
  (void)counted(run(r, b), ec);
}
void connect(int fd, const sockaddr* addr, socklen_t len, const bound& b) {
  or_throw("connect", [&](std::error_code& ec) { connect(fd, addr, len, b, ec); });
}

namespace {
void wait_for(int fd, short events, const bound& b, std::error_code& ec) noexcept {
  io_request r;
  r.op = io_opcode::poll;
  r.fd = fd;
  r.flags = events;
  (void)counted(run(r, b), ec);
}
}  // namespace

void wait_readable(int fd, const bound& b, std::error_code& ec) noexcept { wait_for(fd, POLLIN, b, ec); }
void wait_readable(int fd, const bound& b) {
  or_throw("wait_readable", [&](std::error_code& ec) { wait_readable(fd, b, ec); });
}
void wait_writable(int fd, const bound& b, std::error_code& ec) noexcept { wait_for(fd, POLLOUT, b, ec); }
void wait_writable(int fd, const bound& b) {
  or_throw("wait_writable", [&](std::error_code& ec) { wait_writable(fd, b, ec); });
}

// ---- file --------------------------------------------------------------------

file file::open(const std::string& path, int flags, mode_t mode, const bound& b, std::error_code& ec) noexcept {
  io_request r;
  r.op = io_opcode::openat;
  r.path = path.c_str();
  r.flags = flags | O_CLOEXEC;
  r.mode = mode;
  const long res = run(r, b);
  if (res < 0) {
    ec = std::error_code(static_cast<int>(-res), std::generic_category());
    return file();
  }
  ec.clear();
  return file(static_cast<int>(res));
}
file file::open(const std::string& path, int flags, mode_t mode, const bound& b) {
  std::error_code ec;
  file f = open(path, flags, mode, b, ec);
  if (ec) throw std::system_error(ec, "usched::io::file::open '" + path + "'");
  return f;
}

std::size_t file::read_at(off_t offset, void* buf, std::size_t n, const bound& b, std::error_code& ec) noexcept {
  return io::pread(fd_, buf, n, offset, b, ec);
}
std::size_t file::read_at(off_t offset, void* buf, std::size_t n, const bound& b) {
  return or_throw("file::read_at", [&](std::error_code& ec) { return read_at(offset, buf, n, b, ec); });
}
std::size_t file::write_at(off_t offset, const void* buf, std::size_t n, const bound& b,
                           std::error_code& ec) noexcept {
  return io::pwrite(fd_, buf, n, offset, b, ec);
}
std::size_t file::write_at(off_t offset, const void* buf, std::size_t n, const bound& b) {
  return or_throw("file::write_at", [&](std::error_code& ec) { return write_at(offset, buf, n, b, ec); });
}
void file::sync(const bound& b, std::error_code& ec) noexcept {
  io_request r;
  r.op = io_opcode::fsync;
  r.fd = fd_;
  (void)counted(run(r, b), ec);
}
void file::sync(const bound& b) {
  or_throw("file::sync", [&](std::error_code& ec) { sync(b, ec); });
}
std::uint64_t file::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) < 0) fail(std::error_code(errno, std::generic_category()), "file::size");
  return static_cast<std::uint64_t>(st.st_size);
}
void file::close() {
  const int fd = fd_.release();
  if (fd < 0) return;
  const int rc = ::close(fd);
  if (rc < 0 && errno != EINTR) fail(std::error_code(errno, std::generic_category()), "file::close");
}

const char* backend() noexcept {
  detail::runtime_impl* rt = detail::runtime_of_current_fiber();
  if (!rt) return "none";
  return rt->io_backend() == options::io_backend::io_uring ? "io_uring" : "epoll";
}

}  // namespace usched::io
