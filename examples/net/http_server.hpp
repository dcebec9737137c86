// http_server.hpp: a small HTTP/1.1 keep-alive server on usched's sockets.
//
// One fiber accepts; each connection gets a fiber of its own, which reads
// requests with the parser of http_parser.hpp and answers them: `GET /` with
// a fixed greeting, `GET /static/<name>` with a file of the root directory,
// anything else 404 (other paths) or 405 (other methods). Every blocking call
// carries a bound: the server's stop token, and a deadline, so neither a
// client that never sends nor one that never reads holds a connection for
// ever. usched_http_server.cpp is the program; the tests call serve() on a
// listener of their own.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>
#include <string_view>

#include <usched/net.hpp>

#include "http_parser.hpp"

namespace usched::http {

// server_options: what the server serves and how long it waits.
struct server_options {
  // The folder GET /static/<name> serves files from; empty serves none (404).
  std::string root;
  // How long one request may take to arrive: from the connection's start,
  // or the end of the previous answer, to the request's last byte. It ends
  // idle keep-alive connections and slow senders alike; also the bound of
  // each write, so a client that stops reading is dropped too.
  std::chrono::milliseconds idle_timeout{10000};
  // The parser's limits (a head over 8 KiB: 431, a body over 1 MiB: 413).
  limits request_limits;
  // How long the accept loop waits before accepting again after accept()
  // failed (EMFILE, ENFILE, ...): the condition lasts until some
  // connection closes, so retrying at once would only spin.
  std::chrono::milliseconds accept_backoff{5};
  // Where the server's log lines go (one line each, no newline); null:
  // stderr. It logs only what an operator acts on: accept() failing (once
  // per run of failures, not per attempt) and recovering.
  std::function<void(std::string_view)> log;
};

// serve() accepts connections on `listener` and answers each on a fiber of
// its own, until `stop` is requested; then it returns once every connection
// fiber has ended (they carry the same token, so a read or write they are
// blocked in ends with it). Must be called from a fiber; the listener stays
// open (the caller's). Throws only what it cannot serve through (no memory).
void serve(net::tcp_listener& listener, const server_options& opts, std::stop_token stop);

// The exact answer to GET / on a connection that stays open (with
// "Connection: close" after the Content-Length line when it closes).
inline constexpr std::string_view hello_response =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, world!";

// command_line: usched_http_server's flags.
struct command_line {
  std::uint16_t port = 8080;  // --port N: 0..65535 on 127.0.0.1 (0: the kernel picks)
  server_options server;      // --root DIR, --idle-timeout-ms N
  bool help = false;          // -h, --help
};

// parse_command_line() fills `out` from argv[1..argc). Returns an empty
// string, or one line naming the flag and value that are wrong and what is
// accepted (the program prints it and exits 2).
std::string parse_command_line(int argc, const char* const* argv, command_line& out);

// The usage text of -h.
inline constexpr std::string_view usage =
    "usage: usched_http_server [--port N] [--root DIR] [--idle-timeout-ms N]\n"
    "  --port N             port on 127.0.0.1, 0..65535 (0: any free one; default 8080)\n"
    "  --root DIR           serve GET /static/<name> from DIR (default: none)\n"
    "  --idle-timeout-ms N  time a request may take to arrive, 1..3600000 (default 10000)\n"
    "policy, workers and I/O backend come from USCHED_* (docs/api.md)\n";

}  // namespace usched::http
