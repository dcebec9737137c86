// io_call.cpp: where an I/O request goes (reactor.hpp): a fiber's to its
// worker's reactor, a plain thread's to the system call itself, waiting in
// poll(2); and the requests' system calls, shared by the epoll reactor and
// the threads.
#include <cerrno>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <system_error>

#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.hpp"
#include "io_syscall.hpp"
#include "reactor.hpp"
#include "runtime_impl.hpp"

namespace usched::detail {

const char* to_string(io_opcode op) noexcept {
  switch (op) {
    case io_opcode::read: return "read";
    case io_opcode::write: return "write";
    case io_opcode::pread: return "pread";
    case io_opcode::pwrite: return "pwrite";
    case io_opcode::recv: return "recv";
    case io_opcode::send: return "send";
    case io_opcode::recvmsg: return "recvmsg";
    case io_opcode::sendmsg: return "sendmsg";
    case io_opcode::accept: return "accept";
    case io_opcode::connect: return "connect";
    case io_opcode::poll: return "poll";
    case io_opcode::fsync: return "fsync";
    case io_opcode::openat: return "open";
  }
  return "io";
}

bool wants_write(io_opcode op) noexcept {
  return op == io_opcode::write || op == io_opcode::send || op == io_opcode::sendmsg ||
         op == io_opcode::connect || op == io_opcode::pwrite;
}

bool fd_is_nonblocking(int fd) noexcept {
  const int fl = fcntl(fd, F_GETFL);
  return fl >= 0 && (fl & O_NONBLOCK) != 0;
}

int set_nonblocking(int fd) noexcept {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return -errno;
  return flags;
}

void restore_flags(int fd, int flags) noexcept { (void)fcntl(fd, F_SETFL, flags); }

long connect_outcome(int fd) noexcept {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return -errno;
  return err ? -err : 0;
}

long perform_syscall(const io_request& r, bool nonblocking) noexcept {
  const int dontwait = nonblocking ? MSG_DONTWAIT : 0;
  long res = 0;
  do {
    switch (r.op) {
      case io_opcode::read: res = ::read(r.fd, r.buf, r.len); break;
      case io_opcode::write: res = ::write(r.fd, r.buf, r.len); break;
      case io_opcode::pread: res = ::pread(r.fd, r.buf, r.len, r.offset); break;
      case io_opcode::pwrite: res = ::pwrite(r.fd, r.buf, r.len, r.offset); break;
      case io_opcode::recv: res = ::recv(r.fd, r.buf, r.len, r.flags | dontwait); break;
      case io_opcode::send: res = ::send(r.fd, r.buf, r.len, r.flags | dontwait | MSG_NOSIGNAL); break;
      case io_opcode::recvmsg: res = ::recvmsg(r.fd, r.msg, r.flags | dontwait); break;
      case io_opcode::sendmsg: res = ::sendmsg(r.fd, r.msg, r.flags | dontwait | MSG_NOSIGNAL); break;
      case io_opcode::accept: res = ::accept4(r.fd, r.addr, r.addrlen, r.flags | SOCK_CLOEXEC); break;
      case io_opcode::connect: res = ::connect(r.fd, r.caddr, r.caddrlen); break;
      case io_opcode::poll: {
        pollfd p{r.fd, static_cast<short>(r.flags), 0};
        res = ::poll(&p, 1, 0);
        if (res > 0) res = p.revents;
        break;
      }
      case io_opcode::fsync: res = ::fsync(r.fd); break;
      case io_opcode::openat: res = ::openat(AT_FDCWD, r.path, r.flags | O_CLOEXEC, r.mode); break;
    }
  } while (res < 0 && errno == EINTR);
  return res < 0 ? -errno : res;
}

namespace {

// A plain thread's stop requests reach its poll(2) through an eventfd of
// its own, made on its first I/O call that has a stop token.
struct thread_stop_fd {
  int fd = -1;
  ~thread_stop_fd() {
    if (fd >= 0) ::close(fd);
  }
};
thread_local thread_stop_fd tls_stop_fd;

// wait_fd(): a plain thread waits in poll(2) for `fd` to be ready for
// `events`, until `deadline_ns` or a stop request.
long wait_fd(int fd, short events, std::int64_t deadline_ns, const std::stop_token& stop) noexcept {
  pollfd fds[2] = {{fd, events, 0}, {-1, POLLIN, 0}};
  nfds_t n = 1;
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
  if (stop.stop_possible()) {
    if (tls_stop_fd.fd < 0) tls_stop_fd.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (tls_stop_fd.fd >= 0) {
      fds[1].fd = tls_stop_fd.fd;
      n = 2;
      const int sfd = tls_stop_fd.fd;
      try {
        on_stop.emplace(stop, [sfd] {
          const std::uint64_t one = 1;
          [[maybe_unused]] const ssize_t w = ::write(sfd, &one, sizeof one);
        });
      } catch (const std::bad_alloc&) {
        return -ENOMEM;
      }
    }
  }
  long res = 0;
  for (;;) {
    if (stop.stop_requested()) {
      res = -ECANCELED;
      break;
    }
    timespec ts{};
    timespec* tsp = nullptr;
    if (has_timer(deadline_ns)) {
      const std::int64_t left = deadline_ns - now_ns();
      if (left <= 0) {
        res = -ETIMEDOUT;
        break;
      }
      ts.tv_sec = static_cast<time_t>(left / 1'000'000'000);
      ts.tv_nsec = static_cast<long>(left % 1'000'000'000);
      tsp = &ts;
    }
    const int rc = ::ppoll(fds, n, tsp, nullptr);
    if (rc < 0 && errno != EINTR) {
      res = -errno;
      break;
    }
    if (rc > 0 && fds[0].revents != 0) {
      res = 0;
      break;
    }
  }
  on_stop.reset();
  if (n == 2) {
    std::uint64_t v = 0;
    [[maybe_unused]] const ssize_t r = ::read(tls_stop_fd.fd, &v, sizeof v);
  }
  return res;
}

long thread_call(const io_request& req, std::int64_t deadline_ns, const std::stop_token& stop) noexcept {
  if (stop.stop_requested()) return -ECANCELED;
  if (is_file_call(req.op)) return perform_syscall(req, false);
  return by_readiness(req, [&](bool for_write) {
    return wait_fd(req.fd, for_write ? POLLOUT : POLLIN, deadline_ns, stop);
  });
}

}  // namespace

long io_call(const io_request& req, std::int64_t deadline_ns, const std::stop_token& stop) noexcept {
  worker* w = worker_of_this_thread();
  fiber* f = w ? w->current_fiber() : nullptr;
  if (!f) return thread_call(req, deadline_ns, stop);
  if (w->rt().io_closed()) return -ECANCELED;
  try {
    return w->io().call(*f, req, deadline_ns, stop);
  } catch (const std::system_error& e) {
    return -e.code().value();
  } catch (const std::bad_alloc&) {
    return -ENOMEM;
  }
}

// The probe: one ring set up and torn down with the flags the workers'
// rings will use, the best the kernel takes, tried from the best down.
const io_support& probe_io_support() noexcept {
  static const io_support support = [] {
    io_support s;
    const unsigned candidates[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        0,
    };
    int last = 0;
    for (const unsigned flags : candidates) {
      io_uring ring{};
      io_uring_params p{};
      p.flags = flags;
      const int rc = io_uring_queue_init_params(8, &ring, &p);
      if (rc < 0) {
        last = -rc;
        // Refused outright (seccomp, the sysctl, no io_uring at all): no
        // smaller set of flags will do better.
        if (last == ENOSYS || last == EPERM || last == EACCES) break;
        continue;
      }
      s.uring = true;
      s.setup_flags = flags;
      std::string f;
      auto add = [&f](bool on, const char* name) {
        if (!on) return;
        if (!f.empty()) f += ", ";
        f += name;
      };
      add(flags & IORING_SETUP_SINGLE_ISSUER, "single issuer");
      add(flags & IORING_SETUP_DEFER_TASKRUN, "deferred task work");
      add(flags & IORING_SETUP_COOP_TASKRUN, "cooperative task work");
      add(flags & IORING_SETUP_TASKRUN_FLAG, "task-run flag");
      add(p.features & IORING_FEAT_NODROP, "no-drop completions");
      add(p.features & IORING_FEAT_EXT_ARG, "wait timeouts");
      if (io_uring_probe* pr = io_uring_get_probe_ring(&ring)) {
        add(io_uring_opcode_supported(pr, IORING_OP_MSG_RING), "MSG_RING");
        add(io_uring_opcode_supported(pr, IORING_OP_SEND_ZC), "zero-copy send");
        io_uring_free_probe(pr);
      }
      s.features = f;
      io_uring_queue_exit(&ring);
      return s;
    }
    s.why_not = std::string("io_uring_setup failed: ") + std::strerror(last);
    if (last == ENOSYS) s.why_not += " (the kernel has no io_uring)";
    if (last == EPERM || last == EACCES) {
      s.why_not += " (refused: a seccomp profile, or the kernel.io_uring_disabled sysctl)";
    }
    return s;
  }();
  return support;
}

}  // namespace usched::detail
