// The HTTP server of examples/net, run in-process: serve() on a runtime with
// a port-0 listener on 127.0.0.1, driven by plain blocking sockets from the
// test's thread (so Catch2's assertions stay on one thread). Every client
// socket has a receive and send timeout, so a server that hangs fails a
// check instead of the suite; what is asserted is what came back and
// whether the connection was closed, never how fast.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <usched/usched.hpp>
#include <usched/net.hpp>

#include "http_server.hpp"

using namespace std::chrono_literals;
using usched::http::command_line;
using usched::http::parse_command_line;
using usched::http::server_options;

namespace {

// How long a client waits for the server before a check fails.
constexpr int client_timeout_s = 10;

// The exact answers the tests expect.
const std::string hello = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, world!";
const std::string hello_close =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nConnection: close\r\n\r\nHello, world!";

// A status page of the server: "404 Not Found\n" with its head.
std::string page(int status, std::string_view reason, bool close, std::string_view extra = {}) {
  const std::string body = std::to_string(status) + " " + std::string(reason) + "\n";
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
         "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
         std::string(extra) + (close ? "Connection: close\r\n" : "") + "\r\n" + body;
}
const std::string not_found = page(404, "Not Found", false);

// test_server: serve() on a runtime of its own, until stop() or the end of
// the scope. Log lines are kept for the test to read.
class test_server {
 public:
  explicit test_server(server_options opts = {}) : opts_(std::move(opts)), rt_(runtime_options()) {
    listener_ = usched::net::tcp_listener::bind(usched::net::endpoint::loopback_v4(0));
    port_ = listener_.local_endpoint().port();
    opts_.log = [this](std::string_view line) {
      std::lock_guard<std::mutex> g(log_lock_);
      log_.emplace_back(line);
    };
    serving_ = rt_.spawn([this] { usched::http::serve(listener_, opts_, stop_.get_token()); });
  }
  ~test_server() { stop(); }
  test_server(const test_server&) = delete;
  test_server& operator=(const test_server&) = delete;

  std::uint16_t port() const { return port_; }

  // stop(): requests stop and waits for serve() to return; true if it did
  // within the clients' timeout. A serve() that never returns would hang the
  // runtime's destructor, so that ends the process with a line saying so.
  bool stop() {
    stop_.request_stop();
    if (!serving_.joinable()) return true;
    if (serving_.join_for(std::chrono::seconds(client_timeout_s))) return true;
    std::fprintf(stderr, "test_http_server: serve() did not return after a stop request\n");
    std::abort();
  }

  // make_reactors(): one I/O call on every worker, so each has made its
  // reactor (made on a worker's first I/O) before a test takes the
  // process's descriptors away.
  void make_reactors() {
    int pair[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
    for (unsigned w = 0; w < rt_.workers(); ++w) {
      usched::spawn_options on;
      on.pin = static_cast<int>(w);
      rt_.spawn(on, [fd = pair[0]] { usched::io::wait_writable(fd); }).join();
    }
    ::close(pair[0]);
    ::close(pair[1]);
  }

  std::vector<std::string> log() {
    std::lock_guard<std::mutex> g(log_lock_);
    return log_;
  }

 private:
  static usched::options runtime_options() {
    usched::options o;
    o.workers = 2;
    return usched::options::from_env(o);  // USCHED_IO and the rest, when set
  }

  server_options opts_;
  usched::runtime rt_;
  usched::net::tcp_listener listener_;
  std::uint16_t port_ = 0;
  std::stop_source stop_;
  usched::join_handle<void> serving_;
  std::mutex log_lock_;
  std::vector<std::string> log_;
};

// again(): makes `call` until it is not interrupted (EINTR), for at most the
// client's timeout. A blocking socket call with a timeout (SO_RCVTIMEO) is
// not restarted after an interruption, and this process's io_uring workers
// can interrupt other threads' calls without any signal (the kernel's task
// work), so a plain client here sees EINTR now and then.
template <class Call>
ssize_t again(Call call) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(client_timeout_s);
  for (;;) {
    const ssize_t r = call();
    if (r >= 0 || errno != EINTR || std::chrono::steady_clock::now() > end) return r;
  }
}

// client: a plain blocking socket to the server on 127.0.0.1.
class client {
 public:
  // Connected at once, or (connect_now false) when connect() is called.
  explicit client(std::uint16_t port, bool connect_now = true) : port_(port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    const timeval tv{client_timeout_s, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect_now) connect();
  }
  ~client() {
    if (fd_ >= 0) ::close(fd_);
  }
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  void connect() { REQUIRE(try_connect()); }
  // try_connect(): connect() without an assertion, for where Catch2 cannot
  // run one (out of descriptors, UBSan's checks of its objects fail).
  bool try_connect() {
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(port_);
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const auto* addr = reinterpret_cast<const sockaddr*>(&at);
    if (::connect(fd_, addr, sizeof at) == 0) return true;
    // An interrupted connect goes on in the background; on loopback it has
    // finished by the time a second one asks.
    return errno == EINTR && (::connect(fd_, addr, sizeof at) == 0 || errno == EISCONN);
  }

  // send(): every byte of `s` (fails the test otherwise).
  void send(std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = again([&] { return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL); });
      REQUIRE(n > 0);
      s.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  // send_bytewise(): one segment per byte (Nagle off).
  void send_bytewise(std::string_view s) {
    const int on = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    for (char c : s) send(std::string_view(&c, 1));
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }

  // read_exactly(): `n` bytes, or fewer if the stream ends or times out.
  std::string read_exactly(std::size_t n) {
    std::string out(n, '\0');
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = again([&] { return ::recv(fd_, out.data() + got, n - got, 0); });
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    out.resize(got);
    return out;
  }
  // read_to_end(): everything until the server closes; `closed` says
  // whether it did (the end of the stream, or a reset) or the wait timed out.
  std::string read_to_end(bool& closed) {
    std::string out;
    char buf[65536];
    for (;;) {
      const ssize_t r = again([&] { return ::recv(fd_, buf, sizeof buf, 0); });
      if (r > 0) {
        out.append(buf, static_cast<std::size_t>(r));
        continue;
      }
      closed = r == 0 || errno == ECONNRESET;
      return out;
    }
  }
  // reset(): closes with SO_LINGER 0, which sends a reset, not a FIN.
  void reset() {
    const linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd_);
    fd_ = -1;
  }

 private:
  std::uint16_t port_;
  int fd_ = -1;
};

// A folder of files for --root, removed at the end of the scope.
class temp_root {
 public:
  temp_root() {
    char name[] = "/tmp/usched_http_test_XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    path_ = name;
  }
  ~temp_root() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_root(const temp_root&) = delete;
  temp_root& operator=(const temp_root&) = delete;

  const std::string& path() const { return path_; }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path_ + "/" + name, std::ios::binary) << bytes;
  }

 private:
  std::string path_;
};

// `n` bytes of every value, in an order that is no simple repetition.
std::string binary_bytes(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7 + i / 251) & 0xff);
  return s;
}

}  // namespace

TEST_CASE("http server: GET / answers the exact greeting, and closes when asked", "[http_server]") {
  test_server server;
  client c(server.port());
  c.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
  CHECK(c.read_exactly(hello.size()) == hello);
  c.send("GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  bool closed = false;
  CHECK(c.read_to_end(closed) == hello_close);
  CHECK(closed);
}

TEST_CASE("http server: 100 requests on one keep-alive connection", "[http_server]") {
  test_server server;
  client c(server.port());
  int right = 0;
  for (int i = 0; i < 100; ++i) {
    c.send("GET /?i=" + std::to_string(i) + " HTTP/1.1\r\nHost: t\r\n\r\n");
    right += c.read_exactly(hello.size()) == hello ? 1 : 0;
  }
  CHECK(right == 100);
  // Still open after them.
  c.send("GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
  bool closed = false;
  CHECK(c.read_to_end(closed) == hello_close);
  CHECK(closed);
}

TEST_CASE("http server: pipelined requests are answered in order, bodies skipped", "[http_server]") {
  test_server server;
  client c(server.port());
  c.send(
      "GET / HTTP/1.1\r\n\r\n"
      "GET /nothing-here HTTP/1.1\r\n\r\n"
      "POST / HTTP/1.1\r\nContent-Length: 18\r\n\r\nGET / HTTP/1.1\r\n\r\n"
      "HEAD / HTTP/1.1\r\n\r\n"
      "GET / HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc");
  const std::string expected = hello + not_found + page(405, "Method Not Allowed", false, "Allow: GET, HEAD\r\n") +
                               hello.substr(0, hello.size() - 13) + hello_close;
  bool closed = false;
  CHECK(c.read_to_end(closed) == expected);
  CHECK(closed);
}

TEST_CASE("http server: a request sent one byte at a time is answered", "[http_server]") {
  test_server server;
  client c(server.port());
  c.send_bytewise("GET / HTTP/1.1\r\nHost: t\r\nUser-Agent: slow/1\r\n\r\n");
  CHECK(c.read_exactly(hello.size()) == hello);
}

TEST_CASE("http server: HTTP/1.0 closes unless it asks for keep-alive", "[http_server]") {
  test_server server;
  SECTION("plain 1.0") {
    client c(server.port());
    c.send("GET / HTTP/1.0\r\n\r\n");
    bool closed = false;
    CHECK(c.read_to_end(closed) == hello_close);
    CHECK(closed);
  }
  SECTION("1.0 with Connection: keep-alive") {
    client c(server.port());
    const std::string kept =
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nConnection: keep-alive\r\n\r\n"
        "Hello, world!";
    c.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    CHECK(c.read_exactly(kept.size()) == kept);
    c.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    CHECK(c.read_exactly(kept.size()) == kept);
  }
}

TEST_CASE("http server: garbage is answered 400, then closed", "[http_server]") {
  test_server server;
  client c(server.port());
  c.send("garbage\r\nmore garbage after it\r\n\r\n");
  bool closed = false;
  CHECK(c.read_to_end(closed) == page(400, "Bad Request", true));
  CHECK(closed);
}

TEST_CASE("http server: a head over 8 KiB is answered 431, then closed", "[http_server]") {
  test_server server;
  client c(server.port());
  c.send("GET / HTTP/1.1\r\nX-Pad: " + std::string(9000, 'p') + "\r\n\r\n");
  bool closed = false;
  CHECK(c.read_to_end(closed) == page(431, "Request Header Fields Too Large", true));
  CHECK(closed);
}

TEST_CASE("http server: chunked bodies are 501 and a body over the limit 413, then closed", "[http_server]") {
  test_server server;
  {
    client c(server.port());
    c.send("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    bool closed = false;
    CHECK(c.read_to_end(closed) == page(501, "Not Implemented", true));
    CHECK(closed);
  }
  {
    client c(server.port());
    c.send("POST / HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n");
    bool closed = false;
    CHECK(c.read_to_end(closed) == page(413, "Content Too Large", true));
    CHECK(closed);
  }
}

TEST_CASE("http server: a body shorter than its length ends the connection unanswered", "[http_server]") {
  test_server server;
  client c(server.port());
  c.send("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n0123456789");
  c.shutdown_write();
  bool closed = false;
  CHECK(c.read_to_end(closed).empty());
  CHECK(closed);
}

TEST_CASE("http server: a client that never sends is closed after the idle timeout", "[http_server][realtime]") {
  server_options opts;
  opts.idle_timeout = 200ms;
  test_server server(opts);
  SECTION("nothing sent") {
    client c(server.port());
    bool closed = false;
    CHECK(c.read_to_end(closed).empty());
    CHECK(closed);
  }
  SECTION("half a head sent") {
    client c(server.port());
    c.send("GET / HTTP/1.1\r\nHost: t\r\n");
    bool closed = false;
    CHECK(c.read_to_end(closed).empty());
    CHECK(closed);
  }
  SECTION("idle after an answer") {
    client c(server.port());
    c.send("GET / HTTP/1.1\r\n\r\n");
    CHECK(c.read_exactly(hello.size()) == hello);
    bool closed = false;
    CHECK(c.read_to_end(closed).empty());
    CHECK(closed);
  }
}

TEST_CASE("http server: a client that resets mid-answer does not stop the next one", "[http_server]") {
  temp_root root;
  // Far more than the socket buffers hold: the answer is still being
  // written when the reset arrives.
  root.write("big.bin", binary_bytes(16 * 1024 * 1024));
  server_options opts;
  opts.root = root.path();
  test_server server(opts);
  for (int i = 0; i < 5; ++i) {
    client c(server.port());
    c.send("GET /static/big.bin HTTP/1.1\r\n\r\n");
    CHECK(c.read_exactly(64).size() == 64);  // the answer has begun
    c.reset();
    client next(server.port());
    next.send("GET / HTTP/1.1\r\n\r\n");
    CHECK(next.read_exactly(hello.size()) == hello);
  }
}

TEST_CASE("http server: 1000 idle clients do not keep another from being served", "[http_server]") {
  // Each idle client is two descriptors here (its end and the server's).
  rlimit files{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &files) == 0);
  constexpr rlim_t needed = 2 * 1000 + 64;
  if (files.rlim_cur < needed) {
    files.rlim_cur = std::min(needed, files.rlim_max);
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &files) == 0);
  }
  REQUIRE(files.rlim_cur >= needed);
  test_server server;
  std::vector<std::unique_ptr<client>> idle;
  for (int i = 0; i < 1000; ++i) {
    idle.push_back(std::make_unique<client>(server.port()));
    // Half of them mid-request: their fibers wait inside a head.
    if (i % 2 == 1) idle.back()->send("GET / HTTP/1.1\r\n");
  }
  client c(server.port());
  c.send("GET / HTTP/1.1\r\n\r\n");
  CHECK(c.read_exactly(hello.size()) == hello);
  // And an idle one is still served when it speaks.
  idle[998]->send("GET / HTTP/1.1\r\n\r\n");
  CHECK(idle[998]->read_exactly(hello.size()) == hello);
}

TEST_CASE("http server: static files are served byte for byte", "[http_server]") {
  temp_root root;
  const std::string data = binary_bytes(200'000);  // several chunks of the server's reads
  root.write("data.bin", data);
  root.write("note.txt", "a note\n");
  root.write("empty.bin", "");
  server_options opts;
  opts.root = root.path();
  test_server server(opts);
  client c(server.port());
  const std::string data_head =
      "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 200000\r\n\r\n";
  c.send("GET /static/data.bin HTTP/1.1\r\n\r\n");
  CHECK(c.read_exactly(data_head.size()) == data_head);
  CHECK(c.read_exactly(data.size()) == data);
  const std::string note = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 7\r\n\r\n";
  c.send("GET /static/note.txt?v=2 HTTP/1.1\r\n\r\n");
  CHECK(c.read_exactly(note.size() + 7) == note + "a note\n");
  c.send("HEAD /static/note.txt HTTP/1.1\r\n\r\n");
  CHECK(c.read_exactly(note.size()) == note);
  const std::string empty =
      "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  c.send("GET /static/empty.bin HTTP/1.1\r\nConnection: close\r\n\r\n");
  bool closed = false;
  CHECK(c.read_to_end(closed) == empty);
  CHECK(closed);
}

TEST_CASE("http server: 404 for other paths and names outside the root, 405 for other methods", "[http_server]") {
  temp_root root;
  root.write("here.txt", "here\n");
  std::filesystem::create_directory(root.path() + "/sub");
  root.write("sub/inner.txt", "inner\n");
  server_options opts;
  opts.root = root.path() + "/sub";
  test_server server(opts);
  client c(server.port());
  for (const char* target : {"/static/", "/static/missing.txt", "/static/..", "/static/../here.txt",
                             "/static/inner.txt/", "/static/a/b", "/static/.%2e/here.txt", "/nope", "/static",
                             "http://localhost/", "*"}) {
    INFO(target);
    c.send("GET " + std::string(target) + " HTTP/1.1\r\n\r\n");
    CHECK(c.read_exactly(not_found.size()) == not_found);
  }
  c.send("GET /static/inner.txt HTTP/1.1\r\n\r\n");
  const std::string inner = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\ninner\n";
  CHECK(c.read_exactly(inner.size()) == inner);
  const std::string not_allowed = page(405, "Method Not Allowed", false, "Allow: GET, HEAD\r\n");
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS", "get"}) {
    INFO(method);
    c.send(std::string(method) + " / HTTP/1.1\r\n\r\n");
    CHECK(c.read_exactly(not_allowed.size()) == not_allowed);
  }
}

TEST_CASE("http server: without a root, no file is served", "[http_server]") {
  temp_root root;
  root.write("f.txt", "f\n");
  test_server server;  // no root
  client c(server.port());
  c.send("GET /static/f.txt HTTP/1.1\r\n\r\n");
  CHECK(c.read_exactly(not_found.size()) == not_found);
}

TEST_CASE("http server: a stop ends serve() with connections open", "[http_server]") {
  test_server server;
  client idle(server.port());
  client mid(server.port());
  mid.send("GET / HTTP/1.1\r\n");
  client kept(server.port());
  kept.send("GET / HTTP/1.1\r\n\r\n");
  CHECK(kept.read_exactly(hello.size()) == hello);
  CHECK(server.stop());
  for (client* c : {&idle, &mid, &kept}) {
    bool closed = false;
    CHECK(c->read_to_end(closed).empty());
    CHECK(closed);
  }
}

TEST_CASE("http server: accept failing for want of descriptors is logged once, and serving resumes",
          "[http_server][fd_limit]") {
  test_server server;
  server.make_reactors();
  // The clients' sockets are made first; then the descriptor limit is
  // lowered to what is open, so each accept() fails with EMFILE while they
  // connect (the kernel completes the handshake into the backlog; accept()
  // is what needs a descriptor); then it is raised again.
  constexpr int waiting = 4;
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < waiting; ++i) clients.push_back(std::make_unique<client>(server.port(), false));
  rlimit files{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &files) == 0);
  const rlimit before = files;
  const int lowest_free = ::dup(0);
  ::close(lowest_free);
  files.rlim_cur = static_cast<rlim_t>(lowest_free);
  const int lowered = ::setrlimit(RLIMIT_NOFILE, &files);
  // No assertion until the limit is back: Catch2's (and the sanitizers'
  // checks of them) may need a descriptor.
  int connected = 0;
  for (auto& c : clients) connected += c->try_connect() ? 1 : 0;
  // Long enough for many attempts at the 5 ms back-off.
  std::this_thread::sleep_for(100ms);
  const int restored = ::setrlimit(RLIMIT_NOFILE, &before);
  REQUIRE(lowered == 0);
  REQUIRE(restored == 0);
  REQUIRE(connected == waiting);
  for (auto& c : clients) {
    c->send("GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
    bool closed = false;
    CHECK(c->read_to_end(closed) == hello_close);
    CHECK(closed);
  }
  const std::vector<std::string> log = server.log();
  REQUIRE(log.size() == 2);
  CHECK(log[0].find("accept: ") == 0);
  CHECK(log[0].find("errno 24") != std::string::npos);
  CHECK(log[1] == "accept: accepting again");
}

TEST_CASE("http server: the command line", "[http_server]") {
  const auto parse = [](std::vector<const char*> args, command_line& cl) {
    args.insert(args.begin(), "usched_http_server");
    return parse_command_line(static_cast<int>(args.size()), args.data(), cl);
  };
  SECTION("defaults") {
    command_line cl;
    CHECK(parse({}, cl).empty());
    CHECK(cl.port == 8080);
    CHECK(cl.server.root.empty());
    CHECK(cl.server.idle_timeout == 10000ms);
    CHECK_FALSE(cl.help);
  }
  SECTION("every flag") {
    command_line cl;
    CHECK(parse({"--port", "0", "--root", "/tmp", "--idle-timeout-ms", "250", "-h"}, cl).empty());
    CHECK(cl.port == 0);
    CHECK(cl.server.root == "/tmp");
    CHECK(cl.server.idle_timeout == 250ms);
    CHECK(cl.help);
  }
  SECTION("bad values name the flag, the value and what is accepted") {
    command_line cl;
    CHECK(parse({"--port", "65536"}, cl) == "--port '65536': expected a whole number 0..65535");
    CHECK(parse({"--port", "x1"}, cl) == "--port 'x1': expected a whole number 0..65535");
    CHECK(parse({"--port"}, cl) == "--port: missing value. expected a whole number 0..65535");
    CHECK(parse({"--idle-timeout-ms", "0"}, cl) ==
          "--idle-timeout-ms '0': expected a whole number of milliseconds 1..3600000");
    CHECK(parse({"--root", "/nonexistent/dir"}, cl) ==
          "--root '/nonexistent/dir': not a folder. expected an existing folder to serve /static/ from");
    CHECK(parse({"--bogus"}, cl) == "unknown flag '--bogus'. accepted: --port N --root DIR --idle-timeout-ms N -h");
  }
}
