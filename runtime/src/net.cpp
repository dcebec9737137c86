// net.cpp: usched/net.hpp's sockets, on usched/io.hpp's calls.
#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

#include <usched/blocking.hpp>
#include <usched/net.hpp>

#include "reactor.hpp"

namespace usched::net {
namespace {

[[noreturn]] void fail(const std::error_code& ec, const std::string& call) {
  throw std::system_error(ec, "usched::net::" + call);
}
[[noreturn]] void fail_errno(const std::string& call) {
  fail(std::error_code(errno, std::generic_category()), call);
}
std::error_code last_error() noexcept { return std::error_code(errno, std::generic_category()); }

endpoint name_of(int fd, bool peer, const char* call) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (rc < 0) fail_errno(call);
  return endpoint::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
}

}  // namespace

// ---- endpoint ----------------------------------------------------------------

endpoint::endpoint() noexcept { storage_.ss_family = AF_INET; }

endpoint endpoint::parse(std::string_view address, std::uint16_t port) {
  endpoint e;
  std::string text(address);
  std::string scope;
  if (const auto pct = text.find('%'); pct != std::string::npos) {
    scope = text.substr(pct + 1);
    text.resize(pct);
  }
  if (scope.empty()) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&e.storage_);
    if (::inet_pton(AF_INET, text.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(port);
      return e;
    }
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&e.storage_);
  if (::inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    if (!scope.empty()) {
      v6->sin6_scope_id = ::if_nametoindex(scope.c_str());
      if (v6->sin6_scope_id == 0) {
        throw std::invalid_argument("usched::net::endpoint: '" + std::string(address) +
                                    "' names no network interface after '%'");
      }
    }
    return e;
  }
  throw std::invalid_argument("usched::net::endpoint: '" + std::string(address) +
                              "' is not a numeric IPv4 or IPv6 address (a host name needs net::resolve)");
}

namespace {

// The endpoint of an IPv4 address in host order, or of an IPv6 address.
endpoint v4_endpoint(std::uint32_t address, std::uint16_t port) noexcept {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(address);
  return endpoint::from_sockaddr(reinterpret_cast<const sockaddr*>(&a), sizeof a);
}

endpoint v6_endpoint(const in6_addr& address, std::uint16_t port) noexcept {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  a.sin6_addr = address;
  return endpoint::from_sockaddr(reinterpret_cast<const sockaddr*>(&a), sizeof a);
}

}  // namespace

endpoint endpoint::loopback_v4(std::uint16_t port) noexcept { return v4_endpoint(INADDR_LOOPBACK, port); }
endpoint endpoint::loopback_v6(std::uint16_t port) noexcept { return v6_endpoint(in6addr_loopback, port); }
endpoint endpoint::any_v4(std::uint16_t port) noexcept { return v4_endpoint(INADDR_ANY, port); }
endpoint endpoint::any_v6(std::uint16_t port) noexcept { return v6_endpoint(in6addr_any, port); }

endpoint endpoint::from_sockaddr(const sockaddr* sa, socklen_t len) {
  endpoint e;
  if (sa->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    std::memcpy(&e.storage_, sa, sizeof(sockaddr_in));
    return e;
  }
  if (sa->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    std::memcpy(&e.storage_, sa, sizeof(sockaddr_in6));
    return e;
  }
  throw std::invalid_argument("usched::net::endpoint: address family " + std::to_string(sa->sa_family) +
                              " is neither AF_INET nor AF_INET6");
}

std::uint16_t endpoint::port() const noexcept {
  if (is_v6()) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
}

std::string endpoint::address() const {
  char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = {};
  if (is_v6()) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
    std::string s(buf);
    if (v6->sin6_scope_id != 0) {
      char name[IF_NAMESIZE] = {};
      s += '%';
      s += ::if_indextoname(v6->sin6_scope_id, name) ? std::string(name) : std::to_string(v6->sin6_scope_id);
    }
    return s;
  }
  ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf, sizeof buf);
  return buf;
}

std::string endpoint::to_string() const {
  if (is_v6()) return "[" + address() + "]:" + std::to_string(port());
  return address() + ":" + std::to_string(port());
}

socklen_t endpoint::size() const noexcept {
  return is_v6() ? static_cast<socklen_t>(sizeof(sockaddr_in6)) : static_cast<socklen_t>(sizeof(sockaddr_in));
}

bool operator==(const endpoint& a, const endpoint& b) noexcept {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

std::vector<endpoint> resolve(const std::string& host, std::uint16_t port) {
  struct answer {
    int rc = 0;
    std::vector<endpoint> found;
  };
  // getaddrinfo() blocks (a DNS query): on the blocking pool.
  answer a = usched::blocking([&host] {
    answer out;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    addrinfo* list = nullptr;
    out.rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &list);
    if (out.rc != 0) return out;
    for (addrinfo* ai = list; ai; ai = ai->ai_next) {
      if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
      out.found.push_back(endpoint::from_sockaddr(ai->ai_addr, ai->ai_addrlen));
    }
    ::freeaddrinfo(list);
    return out;
  });
  if (a.rc != 0) {
    const auto code = a.rc == EAI_AGAIN ? std::errc::resource_unavailable_try_again : std::errc::host_unreachable;
    throw std::system_error(std::make_error_code(code),
                            "usched::net::resolve '" + host + "': " + ::gai_strerror(a.rc));
  }
  for (endpoint& e : a.found) {
    if (e.is_v6()) {
      reinterpret_cast<sockaddr_in6*>(const_cast<sockaddr*>(e.data()))->sin6_port = htons(port);
    } else {
      reinterpret_cast<sockaddr_in*>(const_cast<sockaddr*>(e.data()))->sin_port = htons(port);
    }
  }
  if (a.found.empty()) {
    throw std::system_error(std::make_error_code(std::errc::host_unreachable),
                            "usched::net::resolve '" + host + "': no IPv4 or IPv6 address");
  }
  return a.found;
}

// ---- tcp_listener ------------------------------------------------------------


tcp_listener tcp_listener::bind(const endpoint& at, int backlog, std::error_code& ec) noexcept {
  // Non-blocking: several fibers may accept on one listener, and the epoll
  // backend must never make an accept that blocks its worker.
  int fd = ::socket(at.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ec = last_error();
    return tcp_listener();
  }
  const int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 || ::bind(fd, at.data(), at.size()) < 0 ||
      ::listen(fd, backlog) < 0) {
    ec = last_error();
    ::close(fd);
    return tcp_listener();
  }
  ec.clear();
  return tcp_listener(fd);
}

tcp_listener tcp_listener::bind(const endpoint& at, int backlog) {
  std::error_code ec;
  tcp_listener l = bind(at, backlog, ec);
  if (ec) fail(ec, "tcp_listener::bind " + at.to_string());
  return l;
}

tcp_stream tcp_listener::accept(const io::bound& b, std::error_code& ec) noexcept {
  const int c = io::accept(fd_, nullptr, nullptr, b, ec);
  return c < 0 ? tcp_stream() : tcp_stream(c);
}

tcp_stream tcp_listener::accept(const io::bound& b) {
  std::error_code ec;
  tcp_stream s = accept(b, ec);
  if (ec) fail(ec, "tcp_listener::accept");
  return s;
}

tcp_stream tcp_listener::accept(endpoint& peer, const io::bound& b) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  const int c = io::accept(fd_, reinterpret_cast<sockaddr*>(&ss), &len, b);
  tcp_stream s(c);
  peer = endpoint::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
  return s;
}

endpoint tcp_listener::local_endpoint() const { return name_of(fd_, false, "tcp_listener::local_endpoint"); }


// ---- tcp_stream --------------------------------------------------------------


tcp_stream tcp_stream::connect(const endpoint& to, const io::bound& b, std::error_code& ec) noexcept {
  int fd = ::socket(to.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ec = last_error();
    return tcp_stream();
  }
  io::connect(fd, to.data(), to.size(), b, ec);
  if (ec) {
    ::close(fd);
    return tcp_stream();
  }
  return tcp_stream(fd);
}

tcp_stream tcp_stream::connect(const endpoint& to, const io::bound& b) {
  std::error_code ec;
  tcp_stream s = connect(to, b, ec);
  if (ec) fail(ec, "tcp_stream::connect " + to.to_string());
  return s;
}

tcp_stream tcp_stream::connect(const std::string& host, std::uint16_t port, const io::bound& b) {
  std::error_code ec;
  for (const endpoint& e : resolve(host, port)) {
    tcp_stream s = connect(e, b, ec);
    if (!ec) return s;
    // A deadline or a stop covers the whole attempt, not each address.
    if (ec == std::errc::timed_out || ec == std::errc::operation_canceled) break;
  }
  fail(ec, "tcp_stream::connect " + host + ":" + std::to_string(port));
}

std::size_t tcp_stream::read_some(void* buf, std::size_t n, const io::bound& b, std::error_code& ec) noexcept {
  return io::recv(fd_, buf, n, 0, b, ec);
}

std::size_t tcp_stream::read_some(void* buf, std::size_t n, const io::bound& b) {
  std::error_code ec;
  const std::size_t got = read_some(buf, n, b, ec);
  if (ec) fail(ec, "tcp_stream::read_some");
  return got;
}

std::size_t tcp_stream::read_exactly(void* buf, std::size_t n, const io::bound& b, std::error_code& ec) noexcept {
  auto* p = static_cast<char*>(buf);
  std::size_t got = 0;
  ec.clear();
  while (got < n) {
    const std::size_t k = io::recv(fd_, p + got, n - got, 0, b, ec);
    if (ec || k == 0) break;
    got += k;
  }
  return got;
}

std::size_t tcp_stream::read_exactly(void* buf, std::size_t n, const io::bound& b) {
  std::error_code ec;
  const std::size_t got = read_exactly(buf, n, b, ec);
  if (ec) fail(ec, "tcp_stream::read_exactly");
  return got;
}

std::size_t tcp_stream::write_all(const void* buf, std::size_t n, const io::bound& b, std::error_code& ec) noexcept {
  const auto* p = static_cast<const char*>(buf);
  std::size_t put = 0;
  ec.clear();
  while (put < n) {
    const std::size_t k = io::send(fd_, p + put, n - put, 0, b, ec);
    if (ec) break;
    put += k;
  }
  return put;
}

void tcp_stream::write_all(const void* buf, std::size_t n, const io::bound& b) {
  std::error_code ec;
  write_all(buf, n, b, ec);
  if (ec) fail(ec, "tcp_stream::write_all");
}

void tcp_stream::shutdown(int how, std::error_code& ec) noexcept {
  if (::shutdown(fd_, how) < 0) {
    ec = last_error();
  } else {
    ec.clear();
  }
}

void tcp_stream::shutdown(int how) {
  std::error_code ec;
  shutdown(how, ec);
  if (ec) fail(ec, "tcp_stream::shutdown");
}

void tcp_stream::set_no_delay(bool on) {
  const int v = on ? 1 : 0;
  if (::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v) < 0) fail_errno("tcp_stream::set_no_delay");
}

endpoint tcp_stream::local_endpoint() const { return name_of(fd_, false, "tcp_stream::local_endpoint"); }
endpoint tcp_stream::remote_endpoint() const { return name_of(fd_, true, "tcp_stream::remote_endpoint"); }

// ---- udp_socket --------------------------------------------------------------


udp_socket udp_socket::open(int family) {
  if (family != AF_INET && family != AF_INET6) {
    throw std::invalid_argument("usched::net::udp_socket::open: family " + std::to_string(family) +
                                " is neither AF_INET nor AF_INET6");
  }
  const int fd = ::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail_errno("udp_socket::open");
  return udp_socket(fd);
}

udp_socket udp_socket::bind(const endpoint& at) {
  udp_socket s = open(at.family());
  if (::bind(s.fd_, at.data(), at.size()) < 0) fail_errno("udp_socket::bind " + at.to_string());
  return s;
}

std::size_t udp_socket::send_to(const void* buf, std::size_t n, const endpoint& to, const io::bound& b,
                                std::error_code& ec) noexcept {
  iovec iov{const_cast<void*>(buf), n};
  msghdr msg{};
  msg.msg_name = const_cast<sockaddr*>(to.data());
  msg.msg_namelen = to.size();
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  detail::io_request r;
  r.op = detail::io_opcode::sendmsg;
  r.fd = fd_;
  r.msg = &msg;
  const long res = detail::io_call(r, b.deadline_ns(), b.stop());
  if (res < 0) {
    ec = std::error_code(static_cast<int>(-res), std::generic_category());
    return 0;
  }
  ec.clear();
  return static_cast<std::size_t>(res);
}

std::size_t udp_socket::send_to(const void* buf, std::size_t n, const endpoint& to, const io::bound& b) {
  std::error_code ec;
  const std::size_t put = send_to(buf, n, to, b, ec);
  if (ec) fail(ec, "udp_socket::send_to " + to.to_string());
  return put;
}

std::size_t udp_socket::receive_from(void* buf, std::size_t n, endpoint& from, const io::bound& b,
                                     std::error_code& ec) noexcept {
  sockaddr_storage ss{};
  iovec iov{buf, n};
  msghdr msg{};
  msg.msg_name = &ss;
  msg.msg_namelen = sizeof ss;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  detail::io_request r;
  r.op = detail::io_opcode::recvmsg;
  r.fd = fd_;
  r.msg = &msg;
  const long res = detail::io_call(r, b.deadline_ns(), b.stop());
  if (res < 0) {
    ec = std::error_code(static_cast<int>(-res), std::generic_category());
    return 0;
  }
  ec.clear();
  if (msg.msg_namelen > 0) {
    try {
      from = endpoint::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), msg.msg_namelen);
    } catch (const std::invalid_argument&) {
      ec = std::make_error_code(std::errc::address_family_not_supported);
    }
  }
  return static_cast<std::size_t>(res);
}

std::size_t udp_socket::receive_from(void* buf, std::size_t n, endpoint& from, const io::bound& b) {
  std::error_code ec;
  const std::size_t got = receive_from(buf, n, from, b, ec);
  if (ec) fail(ec, "udp_socket::receive_from");
  return got;
}

endpoint udp_socket::local_endpoint() const { return name_of(fd_, false, "udp_socket::local_endpoint"); }

}  // namespace usched::net
