// test_io.cpp: the I/O reactor and the io / net calls (docs/io.md), each
// case on both backends (io_uring and epoll) unless it says otherwise.
// Every socket is on 127.0.0.1 (or ::1), every wait bounded.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <usched/io.hpp>
#include <usched/net.hpp>
#include <usched/usched.hpp>

#include "test_support.hpp"

using namespace std::chrono_literals;
using usched::options;
using usched::net::endpoint;
using usched::net::tcp_listener;
using usched::net::tcp_stream;

namespace {

const char* name_of(options::io_backend b) {
  return b == options::io_backend::io_uring ? "io_uring" : "epoll";
}

options io_options(options::io_backend b, const std::string& policy = "cfs", unsigned workers = 2) {
  options o = usched::test::make_options(policy, workers);
  o.io = b;
  return o;
}

// A connected pair of loopback TCP sockets made with plain calls: `a` for
// the fiber under test, `b` for the test's side.
struct socket_pair {
  tcp_stream a;
  tcp_stream b;
};
socket_pair tcp_pair() {
  tcp_listener l = tcp_listener::bind(endpoint::loopback_v4(0));
  const endpoint at = l.local_endpoint();
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(c >= 0);
  REQUIRE(::connect(c, at.data(), at.size()) == 0);
  int s = -1;
  for (int i = 0; i < 1000 && s < 0; ++i) {
    s = ::accept4(l.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
    if (s < 0) std::this_thread::sleep_for(1ms);
  }
  REQUIRE(s >= 0);
  return {tcp_stream(s), tcp_stream(c)};
}

usched::spawn_options on_worker(int w) {
  usched::spawn_options o;
  o.pin = w;
  return o;
}

int open_fds() {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("io: an echo server and 20 clients exchange 2000 messages exactly, on every backend and policy", "[io]") {
  const auto backend = GENERATE(options::io_backend::io_uring, options::io_backend::epoll);
  const auto policy = GENERATE(as<std::string>{}, "cfs", "steal", "none");
  const unsigned workers = GENERATE(1u, 2u);
  INFO(name_of(backend) << " " << policy << " workers=" << workers);
  usched::runtime rt(io_options(backend, policy, workers));
  // Catch2's checks are not thread-safe: the fibers, on every worker,
  // count what they saw, and the test checks the counts.
  std::atomic<int> echoed{0};
  std::atomic<int> ends_seen{0};
  rt.run([&] {
    REQUIRE(std::string(usched::io::backend()) == name_of(backend));
    tcp_listener l = tcp_listener::bind(endpoint::loopback_v4(0));
    const std::uint16_t port = l.local_endpoint().port();
    usched::task_group conns;
    auto server = usched::runtime::current()->spawn([&] {
      for (int i = 0; i < 20; ++i) {
        conns.spawn([s = l.accept()]() mutable {
          char buf[256];
          for (;;) {
            const std::size_t n = s.read_some(buf, sizeof buf);
            if (n == 0) return;
            s.write_all(buf, n);
          }
        });
      }
    });
    usched::task_group clients;
    for (int i = 0; i < 20; ++i) {
      clients.spawn([&, i] {
        tcp_stream c = tcp_stream::connect(endpoint::loopback_v4(port));
        c.set_no_delay(true);
        for (int k = 0; k < 100; ++k) {
          char msg[32];
          const int len = std::snprintf(msg, sizeof msg, "client %d message %d", i, k);
          c.write_all(msg, static_cast<std::size_t>(len));
          char back[32];
          const std::size_t n = c.read_exactly(back, static_cast<std::size_t>(len));
          if (n == static_cast<std::size_t>(len) && std::memcmp(back, msg, n) == 0) echoed.fetch_add(1);
        }
        c.shutdown(SHUT_WR);
        char rest;
        if (c.read_some(&rest, 1) == 0) ends_seen.fetch_add(1);  // the server closes after our shutdown
      });
    }
    clients.wait();
    server.join();
    conns.wait();
  });
  CHECK(echoed.load() == 2000);
  CHECK(ends_seen.load() == 20);
}

TEST_CASE("io: UDP datagrams go and come back over IPv4 and IPv6, senders named", "[io]") {
  const auto backend = GENERATE(options::io_backend::io_uring, options::io_backend::epoll);
  const bool v6 = GENERATE(false, true);
  INFO(name_of(backend) << (v6 ? " IPv6" : " IPv4"));
  // A host without ::1 (IPv6 disabled) cannot run the IPv6 half.
  if (v6) {
    const int probe = ::socket(AF_INET6, SOCK_DGRAM, 0);
    const endpoint lo = endpoint::loopback_v6(0);
    const bool ok = probe >= 0 && ::bind(probe, lo.data(), lo.size()) == 0;
    if (probe >= 0) ::close(probe);
    if (!ok) {
      WARN("no IPv6 loopback on this host");
      return;
    }
  }
  usched::runtime rt(io_options(backend));
  rt.run([&] {
    const endpoint lo = v6 ? endpoint::loopback_v6(0) : endpoint::loopback_v4(0);
    usched::net::udp_socket server = usched::net::udp_socket::bind(lo);
    usched::net::udp_socket client = usched::net::udp_socket::bind(lo);
    const endpoint server_at = server.local_endpoint();
    const endpoint client_at = client.local_endpoint();
    // The echo fiber counts what it saw (Catch2's checks are not
    // thread-safe), the test checks the count.
    auto echo = usched::runtime::current()->spawn([&] {
      int right = 0;
      for (int i = 0; i < 50; ++i) {
        char buf[64];
        endpoint from;
        const std::size_t n = server.receive_from(buf, sizeof buf, from, usched::io::within(10s));
        if (from == client_at && server.send_to(buf, n, from) == n) ++right;
      }
      return right;
    });
    for (int i = 0; i < 50; ++i) {
      const std::string msg = "datagram " + std::to_string(i);
      CHECK(client.send_to(msg.data(), msg.size(), server_at) == msg.size());
      char buf[64];
      endpoint from;
      const std::size_t n = client.receive_from(buf, sizeof buf, from, usched::io::within(10s));
      CHECK(std::string(buf, n) == msg);
      CHECK(from == server_at);
    }
    CHECK(echo.join() == 50);
  });
}

TEST_CASE("io: a read past its deadline fails with timed_out and leaves the stream usable", "[io][realtime]") {
  const auto backend = GENERATE(options::io_backend::io_uring, options::io_backend::epoll);
  INFO(name_of(backend));
  usched::runtime rt(io_options(backend));
  rt.run([&] {
    socket_pair p = tcp_pair();
    char buf[8] = {};
    std::error_code ec;
    const auto began = std::chrono::steady_clock::now();
    CHECK(p.a.read_some(buf, sizeof buf, usched::io::within(30ms), ec) == 0);
    CHECK(ec == std::errc::timed_out);
    CHECK(std::chrono::steady_clock::now() - began >= 30ms);
    // The throwing form says which call failed.
    try {
      p.a.read_some(buf, sizeof buf, usched::io::within(1ms));
      FAIL("no exception");
    } catch (const std::system_error& e) {
      CHECK(e.code() == std::errc::timed_out);
      CHECK(std::string(e.what()).find("tcp_stream::read_some") != std::string::npos);
    }
    p.b.write_all("xyz", 3);
    CHECK(p.a.read_exactly(buf, 3, usched::io::within(10s)) == 3);
    CHECK(std::string(buf, 3) == "xyz");
  });
}

TEST_CASE("io: a stop request ends a blocked read with operation_canceled; the data sent later is not lost",
          "[io]") {
  const auto backend = GENERATE(options::io_backend::io_uring, options::io_backend::epoll);
  INFO(name_of(backend));
  usched::runtime rt(io_options(backend));
  rt.run([&] {
    socket_pair p = tcp_pair();
    std::stop_source stop;
    std::atomic<bool> reading{false};
    std::error_code ec;
    char buf[8];
    std::memset(buf, '#', sizeof buf);
    auto reader = usched::runtime::current()->spawn([&] {
      reading = true;
      return p.a.read_some(buf, sizeof buf, stop.get_token(), ec);
    });
    REQUIRE(usched::test::yield_until([&] { return reading.load(); }));
    usched::this_fiber::yield();
    stop.request_stop();
    CHECK(reader.join() == 0);
    CHECK(ec == std::errc::operation_canceled);
    CHECK(std::string(buf, sizeof buf) == "########");
    p.b.write_all("ok", 2);
    CHECK(p.a.read_exactly(buf, 2, usched::io::within(10s)) == 2);
    CHECK(std::string(buf, 2) == "ok");
  });
}

TEST_CASE("io: a stop racing a completion, 2000 times: one outcome each, every byte read exactly once, "
          "no buffer written after its call returned, no descriptor left",
          "[io]") {
  const auto backend = GENERATE(options::io_backend::io_uring, options::io_backend::epoll);
  INFO(name_of(backend));
  const int fds_before = open_fds();
  const int rounds = 2000 / static_cast<int>(usched::test::volume_divisor);
  int completed = 0;
  int canceled = 0;
  {
    usched::runtime rt(io_options(backend, "cfs", 2));
    rt.run([&] {
      socket_pair p = tcp_pair();
      long received = 0;
      for (int i = 0; i < rounds; ++i) {
        std::stop_source stop;
        char buf[4];
        std::memset(buf, '.', sizeof buf);
        std::error_code ec;
        // The byte and the stop request race from two other fibers.
        usched::task_group racers;
        racers.spawn([&] { p.b.write_all("!", 1); });
        racers.spawn([&] { stop.request_stop(); });
        const std::size_t n = p.a.read_some(buf, 1, stop.get_token(), ec);
        racers.wait();
        if (!ec) {
          REQUIRE(n == 1);
          REQUIRE(buf[0] == '!');
          ++completed;
          ++received;
        } else {
          REQUIRE(ec == std::errc::operation_canceled);
          REQUIRE(n == 0);
          ++canceled;
        }
        // Whatever happened, the kernel is done with buf: it stays as it is.
        const std::string seen(buf, sizeof buf);
        usched::this_fiber::yield();
        REQUIRE(std::string(buf, sizeof buf) == seen);
      }
      // The bytes of the canceled rounds are all still in the socket.
      std::vector<char> rest(static_cast<std::size_t>(rounds - received));
      if (!rest.empty()) {
        REQUIRE(p.a.read_exactly(rest.data(), rest.size(), usched::io::within(10s)) == rest.size());
        for (char c : rest) REQUIRE(c == '!');
      }
    });
  }
  CHECK(completed + canceled == rounds);
  CHECK(open_fds() == fds_before);
}

TEST_CASE("io: writing to a peer that has gone is an error, never a SIGPIPE", "[io]") {
  const auto backend = GENERATE(options::io_backend::io_uring, options::io_backend::epoll);
  INFO(name_of(backend));
  usched::runtime rt(io_options(backend));
  rt.run([&] {
    socket_pair p = tcp_pair();
    // A reset: SO_LINGER with a zero timeout makes close() send RST.
    linger lg{1, 0};
    REQUIRE(::setsockopt(p.b.native_handle(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
    p.b.close();
    std::vector<char> big(1 << 20, 'x');
    std::error_code ec;
    for (int i = 0; i < 8 && !ec; ++i) p.a.write_all(big.data(), big.size(), usched::io::within(10s), ec);
    CHECK((ec == std::errc::broken_pipe || ec == std::errc::connection_reset));
    // io::write (no MSG_NOSIGNAL of its own) on the same socket: still an error.
    ec.clear();
    usched::io::write(p.a.native_handle(), "x", 1, {}, ec);
    CHECK((ec == std::errc::broken_pipe || ec == std::errc::connection_reset));
  });
}

TEST_CASE("io: a regular file is written, synced and read back at offsets", "[io]") {
  const auto backend = GENERATE(options::io_backend::io_uring, options::io_backend::epoll);
  INFO(name_of(backend));
  char path[] = "/tmp/usched-io-test-XXXXXX";
  const int tmp = ::mkstemp(path);
  REQUIRE(tmp >= 0);
  ::close(tmp);
  usched::runtime rt(io_options(backend));
  rt.run([&] {
    usched::io::file f = usched::io::file::open(path, O_RDWR | O_TRUNC);
    std::string block(4096, '\0');
    for (int i = 0; i < 16; ++i) {
      std::memset(block.data(), 'a' + i, block.size());
      CHECK(f.write_at(static_cast<off_t>(i) * 4096, block.data(), block.size()) == block.size());
    }
    f.sync();
    CHECK(f.size() == 16u * 4096u);
    for (int i = 15; i >= 0; --i) {
      CHECK(f.read_at(static_cast<off_t>(i) * 4096, block.data(), block.size()) == block.size());
      CHECK(block == std::string(4096, static_cast<char>('a' + i)));
    }
    CHECK(f.read_at(16 * 4096, block.data(), block.size()) == 0);  // the end of the file
    std::error_code ec;
    usched::io::file missing = usched::io::file::open("/nonexistent/usched", O_RDONLY, 0, {}, ec);
    CHECK(ec == std::errc::no_such_file_or_directory);
    CHECK_FALSE(missing.is_open());
  });
  ::unlink(path);
}

TEST_CASE("io: from a plain thread every call blocks the thread, with the same deadline and stop", "[io][realtime]") {
  socket_pair p = tcp_pair();
  char buf[4];
  std::error_code ec;
  CHECK(p.a.read_some(buf, sizeof buf, usched::io::within(20ms), ec) == 0);
  CHECK(ec == std::errc::timed_out);
  std::stop_source stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(20ms);
    stop.request_stop();
  });
  CHECK(p.a.read_some(buf, sizeof buf, stop.get_token(), ec) == 0);
  CHECK(ec == std::errc::operation_canceled);
  stopper.join();
  p.b.write_all("abc", 3);
  CHECK(p.a.read_exactly(buf, 3) == 3);
  CHECK(std::string(usched::io::backend()) == "none");
}

TEST_CASE("io: readiness waits drive a non-blocking descriptor a library owns", "[io]") {
  const auto backend = GENERATE(options::io_backend::io_uring, options::io_backend::epoll);
  INFO(name_of(backend));
  usched::runtime rt(io_options(backend));
  rt.run([&] {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
    // The library's own loop: a non-blocking read, EAGAIN, wait, again.
    char buf[8];
    ssize_t n = ::read(sv[0], buf, sizeof buf);
    REQUIRE(n < 0);
    REQUIRE(errno == EAGAIN);
    auto writer = usched::runtime::current()->spawn([&] { return ::write(sv[1], "ping", 4); });
    int waits = 0;
    do {
      usched::io::wait_readable(sv[0], usched::io::within(10s));
      ++waits;
    } while ((n = ::read(sv[0], buf, sizeof buf)) < 0 && errno == EAGAIN);
    CHECK(n == 4);
    CHECK(std::string(buf, 4) == "ping");
    usched::io::wait_writable(sv[0], usched::io::within(10s));
    CHECK(writer.join() == 4);
    ::close(sv[0]);
    ::close(sv[1]);
  });
}

TEST_CASE("io: a completion while the reader's worker runs something long is reaped at its preempt points, "
          "and the reader, moved by the policy, makes its next call on its new worker's reactor",
          "[io]") {
  const auto backend = GENERATE(options::io_backend::io_uring, options::io_backend::epoll);
  INFO(name_of(backend));
  // steal: the woken reader, queued behind the spinner, is taken by the
  // idle worker; the writer is this thread, outside the runtime, so that
  // the other worker is idle to take it.
  usched::runtime rt(io_options(backend, "steal", 2));
  socket_pair p = tcp_pair();
  // At least 20 rounds, and on until the reader has moved once (at most
  // 200: a policy that never moves it fails the check below).
  constexpr int min_rounds = 20;
  constexpr int max_rounds = 200;
  std::atomic<int> round_ready{-1};
  std::atomic<int> rounds{0};
  std::atomic<bool> finished{false};
  std::atomic<int> right{0};
  std::atomic<int> moved{0};
  auto reader = rt.spawn([&] {
    char buf[4];
    for (int i = 0; i < max_rounds && (i < min_rounds || moved.load() == 0); ++i) {
      rounds = i + 1;
      const int before = usched::this_fiber::worker_index();
      std::atomic<bool> done{false};
      // Holds the reader's worker from when the reader blocks until it has
      // run again, with preempt points, for 5 s at most.
      auto spinner = usched::spawn(on_worker(before), [&] {
        round_ready.store(i);
        const auto until = std::chrono::steady_clock::now() + 5s;
        while (!done.load() && std::chrono::steady_clock::now() < until) usched::this_fiber::preempt_point();
      });
      if (p.a.read_exactly(buf, 2, usched::io::within(10s)) == 2 && std::string(buf, 2) == "hi") right++;
      if (usched::this_fiber::worker_index() != before) moved++;
      done = true;
      spinner.join();
    }
    finished = true;
  });
  for (int i = 0;; ++i) {
    while (round_ready.load() < i && !finished.load()) std::this_thread::yield();
    if (finished.load()) break;
    p.b.write_all("hi", 2);
  }
  reader.join();
  CHECK(right.load() == rounds.load());
  // The policy moves it in nearly every round; one is the claim.
  CHECK(moved.load() >= 1);
}

TEST_CASE("io: destroying a runtime cancels the calls in flight and refuses new ones, losing no byte", "[io]") {
  const auto backend = GENERATE(options::io_backend::io_uring, options::io_backend::epoll);
  INFO(name_of(backend));
  socket_pair p = tcp_pair();
  std::atomic<bool> reading{false};
  std::error_code in_flight, after;
  std::size_t got_in_flight = 99, got_after = 99;
  {
    usched::runtime rt(io_options(backend));
    rt.spawn([&] {
      char buf[16];
      reading = true;
      got_in_flight = p.a.read_some(buf, sizeof buf, {}, in_flight);
      got_after = p.a.read_some(buf, sizeof buf, {}, after);
    }).detach();
    while (!reading.load()) std::this_thread::yield();
  }  // ~runtime: the read is cancelled (or refused, if it had not begun), then the workers stop
  CHECK(in_flight == std::errc::operation_canceled);
  CHECK(got_in_flight == 0);
  CHECK(after == std::errc::operation_canceled);
  CHECK(got_after == 0);
  // Nothing was taken from the socket: what the peer sends now is all there.
  p.b.write_all("later", 5);
  char buf[8];
  CHECK(p.a.read_exactly(buf, 5, usched::io::within(10s)) == 5);
  CHECK(std::string(buf, 5) == "later");
}

TEST_CASE("io: connect by host name, a refused connect, and an unknown host", "[io]") {
  const auto backend = GENERATE(options::io_backend::io_uring, options::io_backend::epoll);
  INFO(name_of(backend));
  usched::runtime rt(io_options(backend));
  rt.run([&] {
    tcp_listener l = tcp_listener::bind(endpoint::loopback_v4(0));
    const std::uint16_t port = l.local_endpoint().port();
    auto acceptor = usched::runtime::current()->spawn([&] { return l.accept(usched::io::within(10s)); });
    tcp_stream c = tcp_stream::connect("localhost", port, usched::io::within(10s));
    tcp_stream s = acceptor.join();
    CHECK(s.remote_endpoint() == c.local_endpoint());
    l.close();
    std::error_code ec;
    tcp_stream refused = tcp_stream::connect(endpoint::loopback_v4(port), {}, ec);
    CHECK(ec == std::errc::connection_refused);
    try {
      (void)tcp_stream::connect("no-such-host.invalid", 80, usched::io::within(10s));
      FAIL("no exception");
    } catch (const std::system_error& e) {
      CHECK(std::string(e.what()).find("no-such-host.invalid") != std::string::npos);
    }
    CHECK_THROWS_AS(endpoint::parse("not an address", 1), std::invalid_argument);
    CHECK(endpoint::parse("::1", 8080).to_string() == "[::1]:8080");
    CHECK(endpoint::parse("127.0.0.1", 80).to_string() == "127.0.0.1:80");
  });
}

TEST_CASE("io: USCHED_IO is parsed, and a bad value is one line naming it", "[io]") {
  CHECK(options::io_backend::automatic == options{}.io);
  ::setenv("USCHED_IO", "epoll", 1);
  CHECK(options::from_env().io == options::io_backend::epoll);
  ::setenv("USCHED_IO", "kqueue", 1);
  try {
    (void)options::from_env();
    FAIL("no exception");
  } catch (const usched::config_error& e) {
    CHECK(std::string(e.what()) == "USCHED_IO='kqueue' is not valid: expected auto, io_uring or epoll");
  }
  ::unsetenv("USCHED_IO");
}

TEST_CASE("io: 10,000 concurrent connections from another process are each served", "[io][stress]") {
  const auto backend = GENERATE(options::io_backend::io_uring, options::io_backend::epoll);
  INFO(name_of(backend));
  constexpr int conns = 10'000 / static_cast<int>(usched::test::volume_divisor);
  rlimit lim{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &lim) == 0);
  if (lim.rlim_max < conns + 256) {
    WARN("descriptor limit " << lim.rlim_max << " is below " << conns + 256);
    return;
  }
  const rlimit saved = lim;
  lim.rlim_cur = lim.rlim_max;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &lim) == 0);
  tcp_listener l = tcp_listener::bind(endpoint::loopback_v4(0), 4096);
  const endpoint at = l.local_endpoint();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The clients: their own runtime, in their own process (each side then
    // holds 10,000 descriptors).
    int served = 0;
    {
      usched::runtime crt(io_options(backend, "cfs", 1));
      crt.run([&] {
        std::vector<tcp_stream> open(conns);
        for (int i = 0; i < conns; ++i) open[static_cast<std::size_t>(i)] = tcp_stream::connect(at, usched::io::within(30s));
        usched::task_group g;
        std::atomic<int> ok{0};
        for (int i = 0; i < conns; ++i) {
          g.spawn([&, i] {
            tcp_stream& c = open[static_cast<std::size_t>(i)];
            const std::uint32_t v = static_cast<std::uint32_t>(i);
            c.write_all(&v, sizeof v, usched::io::within(30s));
            std::uint32_t back = 0;
            if (c.read_exactly(&back, sizeof back, usched::io::within(30s)) == sizeof back && back == v + 1) ok++;
          });
        }
        g.wait();
        served = ok.load();
      });
    }
    std::_Exit(served == conns ? 0 : 1);
  }
  int handled = 0;
  {
    usched::runtime rt(io_options(backend, "cfs", 2));
    rt.run([&] {
      usched::task_group g;
      std::atomic<int> ok{0};
      for (int i = 0; i < conns; ++i) {
        g.spawn([&, s = l.accept(usched::io::within(60s))]() mutable {
          std::uint32_t v = 0;
          if (s.read_exactly(&v, sizeof v, usched::io::within(30s)) != sizeof v) return;
          ++v;
          s.write_all(&v, sizeof v, usched::io::within(30s));
          ok++;
        });
      }
      g.wait();
      handled = ok.load();
    });
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  CHECK(handled == conns);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("io: a runtime whose fibers all wait in accepts and reads parks in its reactors and burns no CPU",
          "[io][realtime]") {
  const auto backend = GENERATE(options::io_backend::io_uring, options::io_backend::epoll);
  INFO(name_of(backend));
  usched::runtime rt(io_options(backend, "steal", 2));
  tcp_listener l = tcp_listener::bind(endpoint::loopback_v4(0));
  socket_pair p = tcp_pair();
  std::stop_source stop;
  std::atomic<int> waiting{0};
  usched::spawn_options on0, on1;
  on0.pin = 0;
  on1.pin = 1;
  auto acceptor = rt.spawn(on0, [&] {
    waiting++;
    std::error_code ec;
    (void)l.accept(stop.get_token(), ec);
    return ec;
  });
  auto reader = rt.spawn(on1, [&] {
    waiting++;
    char b;
    std::error_code ec;
    (void)p.a.read_some(&b, 1, stop.get_token(), ec);
    return ec;
  });
  while (waiting.load() < 2) std::this_thread::yield();
  std::this_thread::sleep_for(20ms);
  const auto a = rt.stats().workers;
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(200ms);
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  const auto b = rt.stats().workers;
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i].parks == a[i].parks);
  const auto us = [](const rusage& r) {
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1'000'000L + r.ru_utime.tv_usec + r.ru_stime.tv_usec;
  };
#if defined(__SANITIZE_THREAD__)
  constexpr long bound_us = 20'000;
#else
  constexpr long bound_us = 2'000;
#endif
  CHECK(us(after) - us(before) < bound_us);
  // A stop request reaches both (the acceptor's through its worker's
  // reactor, which it wakes).
  stop.request_stop();
  CHECK(acceptor.join() == std::errc::operation_canceled);
  CHECK(reader.join() == std::errc::operation_canceled);
}
