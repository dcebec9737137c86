// usched_echo_server: the smallest server on usched's sockets. Every byte a
// client sends comes back to it, until it closes. Read this one first;
// usched_http_server is the same shape with a protocol in the middle.
//
//   usched_echo_server --port 7000      (0: any free port, printed)
//   listening on 127.0.0.1:7000
//
// SIGINT or SIGTERM stops it; it exits 0 once every connection has ended.
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <usched/error.hpp>
#include <usched/net.hpp>
#include <usched/runtime.hpp>
#include <usched/task_group.hpp>

#include "stop_on_signals.hpp"

namespace {

// [snippet connection]
// One connection, on a fiber of its own. read_some() and write_all() block
// this fiber only: the worker runs other connections meanwhile. Each call
// carries the stop token (an io::bound), so a stop ends the wait.
void echo(usched::net::tcp_stream client, std::stop_token stop) {
  char buf[4096];
  for (;;) {
    std::error_code ec;  // the error_code overloads: a client that goes away is not an exception here
    const std::size_t n = client.read_some(buf, sizeof buf, stop, ec);
    if (ec || n == 0) return;  // stopped, reset, or the client closed: the destructor closes
    client.write_all(buf, n, stop, ec);
    if (ec) return;
  }
}
// [end connection]

// Accepts until stop is requested; the task_group waits for every
// connection's fiber before serve() returns.
void serve(usched::net::tcp_listener& listener, std::stop_token stop) {
  usched::task_group connections;
  bool accept_failing = false;  // log a run of failures once, not once per retry
  while (!stop.stop_requested()) {
    std::error_code ec;
    usched::net::tcp_stream client = listener.accept(stop, ec);
    if (ec == std::errc::operation_canceled) break;
    if (ec) {
      // Out of descriptors (EMFILE, ENFILE) until a connection closes:
      // say so once, wait a little, try again.
      if (!accept_failing) std::fprintf(stderr, "usched_echo_server: accept: %s; retrying\n", ec.message().c_str());
      accept_failing = true;
      usched::this_fiber::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    accept_failing = false;
    connections.spawn(echo, std::move(client), stop);
  }
}

}  // namespace

int main(int argc, char** argv) {
  unsigned port = 7000;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag != "--port") {
      std::fprintf(stderr, "usched_echo_server: unknown flag '%s'. accepted: --port N\n", argv[i]);
      return 2;
    }
    const std::string_view value = i + 1 < argc ? argv[++i] : "";
    const auto [end, err] = std::from_chars(value.data(), value.data() + value.size(), port);
    if (err != std::errc() || end != value.data() + value.size() || port > 65535) {
      std::fprintf(stderr, "usched_echo_server: --port '%s': expected a whole number 0..65535\n",
                   std::string(value).c_str());
      return 2;
    }
  }
  usched::examples::stop_on_signals signals;  // first: the runtime's threads inherit its signal mask
  try {
    usched::runtime rt;  // policy, workers and I/O backend from USCHED_*
    rt.run([&] {
      auto listener = usched::net::tcp_listener::bind(
          usched::net::endpoint::loopback_v4(static_cast<std::uint16_t>(port)));
      std::printf("listening on %s\n", listener.local_endpoint().to_string().c_str());
      std::fflush(stdout);
      serve(listener, signals.token());
    });
  } catch (const usched::config_error& e) {
    std::fprintf(stderr, "usched_echo_server: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "usched_echo_server: %s\n", e.what());
    return 1;
  }
  return 0;
}
