// usched_http_server: an HTTP/1.1 keep-alive server on usched's sockets
// (http_server.hpp says what it answers; README.md here how to run it).
//
//   usched_http_server --port 0 --root ./public
//   listening on 127.0.0.1:40123
//
// SIGINT or SIGTERM stops it: the accept loop ends, every connection's
// pending read or write ends, and it exits 0 once they have.
#include <cstdio>
#include <exception>
#include <string>

#include <usched/error.hpp>
#include <usched/net.hpp>
#include <usched/runtime.hpp>

#include "http_server.hpp"
#include "stop_on_signals.hpp"

int main(int argc, char** argv) {
  usched::http::command_line cl;
  if (const std::string error = usched::http::parse_command_line(argc, argv, cl); !error.empty()) {
    std::fprintf(stderr, "usched_http_server: %s\n", error.c_str());
    return 2;
  }
  if (cl.help) {
    std::fputs(usched::http::usage.data(), stdout);
    return 0;
  }
  usched::examples::stop_on_signals signals;  // before the runtime's threads start
  try {
    usched::runtime rt;  // policy, workers, topology, I/O backend from USCHED_*
    rt.run([&] {
      auto listener = usched::net::tcp_listener::bind(usched::net::endpoint::loopback_v4(cl.port));
      // The port the kernel picked for --port 0: scripts and tests read it here.
      std::printf("listening on %s\n", listener.local_endpoint().to_string().c_str());
      std::fflush(stdout);
      usched::http::serve(listener, cl.server, signals.token());
    });
  } catch (const usched::config_error& e) {
    std::fprintf(stderr, "usched_http_server: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "usched_http_server: %s\n", e.what());
    return 1;
  }
  return 0;
}
