// usched/net.hpp: TCP and UDP sockets whose calls block the calling fiber,
// not its worker (the reactor of usched/io.hpp; docs/io.md). IPv4 and IPv6.
//
// Shapes follow what C++ users know from Asio and the Networking TS
// (endpoint, read_some, write_all, shutdown, no_delay), kept to POSIX's
// meanings: a read_some of 0 is the end of the stream. Every blocking call
// takes an io::bound (a deadline, a stop token, or both) and has a
// std::error_code overload that does not throw; errors otherwise are
// std::system_error naming the operation (usched/io.hpp).
//
// Sockets are move-only and close their descriptor when destroyed. A socket
// may be used by two fibers at once, one reading and one writing, as a
// descriptor may; two concurrent readers get the bytes in an unspecified
// split, as with read(2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>

#include <usched/io.hpp>

namespace usched::net {

// endpoint: an IPv4 or IPv6 address and a port (Asio's ip::tcp::endpoint).
class endpoint {
 public:
  // The IPv4 any-address, port 0.
  endpoint() noexcept;
  // From a numeric address ("127.0.0.1", "::1", "fe80::1%eth0"): parse()
  // throws std::invalid_argument naming the text for anything else (a
  // host name needs resolve()).
  static endpoint parse(std::string_view address, std::uint16_t port);
  static endpoint loopback_v4(std::uint16_t port) noexcept;
  static endpoint loopback_v6(std::uint16_t port) noexcept;
  static endpoint any_v4(std::uint16_t port) noexcept;
  static endpoint any_v6(std::uint16_t port) noexcept;
  // From what a socket call filled in (AF_INET or AF_INET6; anything else
  // is std::invalid_argument).
  static endpoint from_sockaddr(const sockaddr* sa, socklen_t len);

  bool is_v6() const noexcept { return storage_.ss_family == AF_INET6; }
  int family() const noexcept { return storage_.ss_family; }
  std::uint16_t port() const noexcept;
  // The address without the port ("127.0.0.1", "::1").
  std::string address() const;
  // "127.0.0.1:8080", "[::1]:8080".
  std::string to_string() const;

  const sockaddr* data() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t size() const noexcept;

  friend bool operator==(const endpoint& a, const endpoint& b) noexcept;

 private:
  sockaddr_storage storage_{};
};

// resolve(): the endpoints of `host` (a name or a numeric address) at
// `port`, from getaddrinfo(3) on the blocking pool (usched::blocking);
// IPv6 and IPv4 in the resolver's order. An unknown name is a
// std::system_error whose code is std::errc::host_unreachable (or
// std::errc::resource_unavailable_try_again for a temporary failure) and
// whose what() names the host and gai_strerror's reason.
std::vector<endpoint> resolve(const std::string& host, std::uint16_t port);

class tcp_stream;

// tcp_listener: a bound, listening TCP socket (SO_REUSEADDR set).
class tcp_listener {
 public:
  tcp_listener() noexcept = default;
  tcp_listener(tcp_listener&&) noexcept = default;
  tcp_listener& operator=(tcp_listener&&) noexcept = default;
  tcp_listener(const tcp_listener&) = delete;
  tcp_listener& operator=(const tcp_listener&) = delete;
  ~tcp_listener() = default;

  // bind(): a socket bound to `at` (port 0: the kernel picks; see
  // local_endpoint()) and listening with `backlog`.
  static tcp_listener bind(const endpoint& at, int backlog = SOMAXCONN);
  static tcp_listener bind(const endpoint& at, int backlog, std::error_code& ec) noexcept;

  // accept(): the next connection. Fails (EMFILE, ENFILE, ...) without
  // closing the listener: a server logs and accepts again.
  tcp_stream accept(const io::bound& b = {});
  tcp_stream accept(const io::bound& b, std::error_code& ec) noexcept;
  tcp_stream accept(endpoint& peer, const io::bound& b = {});

  endpoint local_endpoint() const;
  bool is_open() const noexcept { return fd_ >= 0; }
  int native_handle() const noexcept { return fd_; }
  // close(): closes now. A fiber blocked in accept() on this listener from
  // another fiber is not woken by it (as with close(2)): end that wait with
  // its stop token.
  void close() noexcept { fd_.reset(); }

 private:
  explicit tcp_listener(int fd) noexcept : fd_(fd) {}
  detail::owned_fd fd_;
};

// tcp_stream: a connected TCP socket.
class tcp_stream {
 public:
  tcp_stream() noexcept = default;
  // Takes ownership of a connected socket.
  explicit tcp_stream(int fd) noexcept : fd_(fd) {}
  tcp_stream(tcp_stream&&) noexcept = default;
  tcp_stream& operator=(tcp_stream&&) noexcept = default;
  tcp_stream(const tcp_stream&) = delete;
  tcp_stream& operator=(const tcp_stream&) = delete;
  ~tcp_stream() = default;

  // connect(): a stream connected to `to`; or to the first endpoint of
  // `host` that accepts (resolve(), then each in turn), the bound covering
  // all of it.
  static tcp_stream connect(const endpoint& to, const io::bound& b = {});
  static tcp_stream connect(const endpoint& to, const io::bound& b, std::error_code& ec) noexcept;
  static tcp_stream connect(const std::string& host, std::uint16_t port, const io::bound& b = {});

  // read_some(): at least one byte, at most `n`, once some have arrived;
  // 0 at the end of the stream (the peer shut its side down).
  std::size_t read_some(void* buf, std::size_t n, const io::bound& b = {});
  std::size_t read_some(void* buf, std::size_t n, const io::bound& b, std::error_code& ec) noexcept;
  // read_exactly(): `n` bytes, or fewer only at the end of the stream (the
  // count says how many arrived; Go's io.ReadFull reports that case as an
  // error, here the caller compares).
  std::size_t read_exactly(void* buf, std::size_t n, const io::bound& b = {});
  std::size_t read_exactly(void* buf, std::size_t n, const io::bound& b, std::error_code& ec) noexcept;
  // write_all(): every byte, or an error (EPIPE or ECONNRESET once the peer
  // has gone). With ec, the count says how many were written.
  void write_all(const void* buf, std::size_t n, const io::bound& b = {});
  std::size_t write_all(const void* buf, std::size_t n, const io::bound& b, std::error_code& ec) noexcept;
  void write_all(std::string_view s, const io::bound& b = {}) { write_all(s.data(), s.size(), b); }

  // shutdown(): shutdown(2) of one direction (SHUT_RD, SHUT_WR, SHUT_RDWR).
  void shutdown(int how);
  void shutdown(int how, std::error_code& ec) noexcept;
  // set_no_delay(): TCP_NODELAY (Nagle's algorithm off).
  void set_no_delay(bool on);

  endpoint local_endpoint() const;
  endpoint remote_endpoint() const;
  bool is_open() const noexcept { return fd_ >= 0; }
  int native_handle() const noexcept { return fd_; }
  int release() noexcept { return fd_.release(); }
  void close() noexcept { fd_.reset(); }

 private:
  detail::owned_fd fd_;
};

// udp_socket: a UDP socket, bound or not.
class udp_socket {
 public:
  udp_socket() noexcept = default;
  udp_socket(udp_socket&&) noexcept = default;
  udp_socket& operator=(udp_socket&&) noexcept = default;
  udp_socket(const udp_socket&) = delete;
  udp_socket& operator=(const udp_socket&) = delete;
  ~udp_socket() = default;

  // open(): unbound, of `family` (AF_INET or AF_INET6); bind(): bound to
  // `at` (port 0: the kernel picks).
  static udp_socket open(int family);
  static udp_socket bind(const endpoint& at);

  // send_to(): one datagram of `n` bytes to `to`; its size is the result.
  std::size_t send_to(const void* buf, std::size_t n, const endpoint& to, const io::bound& b = {});
  std::size_t send_to(const void* buf, std::size_t n, const endpoint& to, const io::bound& b,
                      std::error_code& ec) noexcept;
  // receive_from(): one datagram, at most `n` bytes of it (the rest of a
  // longer one is dropped, as recvfrom(2) does); `from` is its sender.
  std::size_t receive_from(void* buf, std::size_t n, endpoint& from, const io::bound& b = {});
  std::size_t receive_from(void* buf, std::size_t n, endpoint& from, const io::bound& b,
                           std::error_code& ec) noexcept;

  endpoint local_endpoint() const;
  bool is_open() const noexcept { return fd_ >= 0; }
  int native_handle() const noexcept { return fd_; }
  void close() noexcept { fd_.reset(); }

 private:
  explicit udp_socket(int fd) noexcept : fd_(fd) {}
  detail::owned_fd fd_;
};

}  // namespace usched::net
