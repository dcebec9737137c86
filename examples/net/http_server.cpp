// http_server.cpp: the accept loop, the connection fiber and the answers of
// http_server.hpp.
#include "http_server.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>

#include <usched/fiber.hpp>
#include <usched/io.hpp>
#include <usched/runtime.hpp>
#include <usched/task_group.hpp>

namespace usched::http {

namespace {

// Bytes asked of one read. A request head is usually a few hundred bytes;
// a larger head or body arrives in several reads, which the parser joins.
constexpr std::size_t read_chunk = 4096;
// Bytes of a file read (and written) at a time: large enough that a big
// file costs few calls, small enough for one per connection.
constexpr std::size_t file_chunk = 64 * 1024;
// After an answer that closes the connection the server stops writing,
// then reads and drops what the client still sends, for at most this long
// and this much, before it closes. Closing with unread bytes queued makes
// the kernel send a reset, which may destroy the answer before the client
// has read it (Apache's "lingering close").
constexpr std::chrono::milliseconds linger_time{1000};
constexpr std::size_t linger_bytes = 256 * 1024;

void log_line(const server_options& opts, std::string_view line) {
  if (opts.log) {
    opts.log(line);
  } else {
    std::fprintf(stderr, "usched_http_server: %.*s\n", static_cast<int>(line.size()), line.data());
  }
}

const char* reason_of(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

// Appends a status line and the headers every answer has. `close`: the
// connection ends after this answer; an HTTP/1.0 client that asked to keep
// it is told it is kept (its default is to close).
void append_head(std::string& out, int status, std::string_view content_type, std::uint64_t length, bool close,
                 bool http10_keep_alive, std::string_view extra = {}) {
  out += "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += reason_of(status);
  out += "\r\nContent-Type: ";
  out += content_type;
  out += "\r\nContent-Length: ";
  out += std::to_string(length);
  out += "\r\n";
  out += extra;
  if (close) {
    out += "Connection: close\r\n";
  } else if (http10_keep_alive) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
}

// An answer whose body is text of our own: "404 Not Found\n".
void append_status_page(std::string& out, int status, bool close, bool http10_keep_alive, bool head_only,
                        std::string_view extra = {}) {
  const std::string body = std::to_string(status) + " " + reason_of(status) + "\n";
  append_head(out, status, "text/plain", body.size(), close, http10_keep_alive, extra);
  if (!head_only) out += body;
}

// The name of GET /static/<name>, or empty if the target is not one the
// server could serve: no folders, no way out of the root.
std::string_view static_name(std::string_view path) {
  constexpr std::string_view prefix = "/static/";
  if (path.substr(0, prefix.size()) != prefix) return {};
  const std::string_view name = path.substr(prefix.size());
  if (name.empty() || name.find('/') != std::string_view::npos || name.find("..") != std::string_view::npos) {
    return {};
  }
  return name;
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

std::string_view content_type_of(std::string_view name) {
  for (std::string_view text : {".txt", ".md", ".csv", ".log"}) {
    if (ends_with(name, text)) return "text/plain";
  }
  return "application/octet-stream";
}

// One connection: its stream, its parser, and the buffers it reuses for
// every request (allocated once, here).
class connection {
 public:
  connection(net::tcp_stream stream, const server_options& opts, std::stop_token stop)
      : stream_(std::move(stream)),
        opts_(opts),
        stop_(std::move(stop)),
        parser_(opts.request_limits),
        in_(std::make_unique<char[]>(read_chunk)) {}

  // run(): answers requests until the client closes, a request fails or
  // times out, the client asks to close, or the server stops.
  void run() {
    std::size_t have = 0;  // bytes in in_
    std::size_t used = 0;  // of which the parser has consumed
    io::bound request_bound = io::within(opts_.idle_timeout, stop_);
    for (;;) {
      if (used == have) {
        std::error_code ec;
        have = stream_.read_some(in_.get(), read_chunk, request_bound, ec);
        used = 0;
        // A timeout, a stop, a reset or the end of the stream: whichever,
        // a request cut short is not answered (there is no one to tell, or
        // nothing complete to answer), and the connection just closes.
        if (ec || have == 0) return;
      }
      const feed_result r = parser_.feed(in_.get() + used, have - used);
      used += r.consumed;
      if (r.status == parse_status::need_more) continue;
      out_.clear();
      if (r.status == parse_status::error) {
        append_status_page(out_, r.error_status, true, false, false);
        if (write(out_)) linger_close();
        return;
      }
      const request& req = parser_.current();
      const bool close = !req.keep_alive || stop_.stop_requested();
      if (!answer(req, close)) return;
      if (close) {
        linger_close();
        return;
      }
      request_bound = io::within(opts_.idle_timeout, stop_);
    }
  }

 private:
  // answer(): writes the answer to `req`; false if the connection cannot go
  // on (a write failed, or a file ended before its promised length).
  bool answer(const request& req, bool close) {
    const bool head_only = req.method == "HEAD";
    const bool http10_keep_alive = req.version_minor == 0 && !close;
    // The query does not choose the resource.
    const std::string_view path = req.target.substr(0, req.target.find('?'));
    if (req.method != "GET" && req.method != "HEAD") {
      append_status_page(out_, 405, close, http10_keep_alive, false, "Allow: GET, HEAD\r\n");
      return write(out_);
    }
    if (path == "/") {
      append_head(out_, 200, "text/plain", 13, close, http10_keep_alive);
      if (!head_only) out_ += "Hello, world!";
      return write(out_);
    }
    const std::string_view name = static_name(path);
    if (!name.empty() && !opts_.root.empty()) return send_file(name, close, http10_keep_alive, head_only);
    append_status_page(out_, 404, close, http10_keep_alive, head_only);
    return write(out_);
  }

  // send_file(): the file `name` of the root, or 404 if it is not a regular
  // file there. The head goes out with the first chunk, in one write.
  bool send_file(std::string_view name, bool close, bool http10_keep_alive, bool head_only) {
    std::error_code ec;
    io::file f = io::file::open(opts_.root + "/" + std::string(name), O_RDONLY, 0, io::bound(stop_), ec);
    struct stat st {};
    if (ec || ::fstat(f.native_handle(), &st) != 0 || !S_ISREG(st.st_mode)) {
      append_status_page(out_, 404, close, http10_keep_alive, head_only);
      return write(out_);
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    append_head(out_, 200, content_type_of(name), size, close, http10_keep_alive);
    if (head_only) return write(out_);
    std::uint64_t sent = 0;
    do {
      const std::size_t head = out_.size();
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(file_chunk, size - sent));
      out_.resize(head + want);
      std::size_t got = 0;
      while (got < want) {
        const std::size_t n =
            f.read_at(static_cast<off_t>(sent + got), out_.data() + head + got, want - got, io::bound(stop_), ec);
        // The file shrank, or cannot be read, after its length went out:
        // the answer cannot be finished, so the connection ends.
        if (ec || n == 0) return false;
        got += n;
      }
      if (!write(out_)) return false;
      sent += want;
      out_.clear();
    } while (sent < size);
    return true;
  }

  // write(): all of `bytes`, within the idle timeout; false if the client
  // is gone, stopped reading, or the server stops.
  bool write(std::string_view bytes) {
    std::error_code ec;
    stream_.write_all(bytes.data(), bytes.size(), io::within(opts_.idle_timeout, stop_), ec);
    return !ec;
  }

  // linger_close(): no more writes; then drop what the client still sends
  // until it closes (or linger_time, linger_bytes, a stop) before closing.
  void linger_close() {
    std::error_code ec;
    stream_.shutdown(SHUT_WR, ec);
    if (ec) return;
    const io::bound b = io::within(std::min(linger_time, opts_.idle_timeout), stop_);
    std::size_t dropped = 0;
    while (dropped < linger_bytes) {
      const std::size_t n = stream_.read_some(in_.get(), read_chunk, b, ec);
      if (ec || n == 0) return;
      dropped += n;
    }
  }

  net::tcp_stream stream_;
  const server_options& opts_;
  std::stop_token stop_;
  request_parser parser_;
  std::unique_ptr<char[]> in_;  // read_chunk bytes read from the client
  std::string out_;             // the answer being written
};

}  // namespace

void serve(net::tcp_listener& listener, const server_options& opts, std::stop_token stop) {
  task_group connections;
  // Set by the first accept() of a run of failures, cleared by the next
  // success: the log says when accepting stopped working and when it came
  // back, not once per retry.
  bool accept_failing = false;
  while (!stop.stop_requested()) {
    std::error_code ec;
    net::tcp_stream stream = listener.accept(io::bound(stop), ec);
    if (ec) {
      if (ec == std::errc::operation_canceled) break;
      // EMFILE and ENFILE (no descriptor for the connection) last until a
      // connection closes; anything else (ENOBUFS, a connection aborted
      // before it was accepted) is as likely to pass. Either way: say so
      // once, wait a little, accept again.
      if (!accept_failing) {
        log_line(opts, "accept: " + ec.message() + " (errno " + std::to_string(ec.value()) +
                           "); retrying every " + std::to_string(opts.accept_backoff.count()) + " ms");
        accept_failing = true;
      }
      this_fiber::sleep_for(opts.accept_backoff);
      continue;
    }
    if (accept_failing) {
      log_line(opts, "accept: accepting again");
      accept_failing = false;
    }
    connections.spawn(spawn_options{.label = "http connection"},
                      [&opts, stop, s = std::move(stream)]() mutable {
                        connection(std::move(s), opts, stop).run();
                      });
  }
  connections.wait();
}

namespace {

// A whole number in [lo, hi], or nothing.
bool parse_number(std::string_view s, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return false;
  out = v;
  return true;
}

}  // namespace

std::string parse_command_line(int argc, const char* const* argv, command_line& out) {
  constexpr std::string_view accepted = "accepted: --port N --root DIR --idle-timeout-ms N -h";
  constexpr std::uint64_t max_idle_ms = 3'600'000;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      out.help = true;
      continue;
    }
    std::string_view expected;
    if (flag == "--port") {
      expected = "expected a whole number 0..65535";
    } else if (flag == "--root") {
      expected = "expected an existing folder to serve /static/ from";
    } else if (flag == "--idle-timeout-ms") {
      expected = "expected a whole number of milliseconds 1..3600000";
    } else {
      return "unknown flag '" + std::string(flag) + "'. " + std::string(accepted);
    }
    if (i + 1 == argc) return std::string(flag) + ": missing value. " + std::string(expected);
    const std::string_view value = argv[++i];
    const std::string bad = std::string(flag) + " '" + std::string(value) + "': ";
    std::uint64_t v = 0;
    if (flag == "--port") {
      if (!parse_number(value, 0, 65535, v)) return bad + std::string(expected);
      out.port = static_cast<std::uint16_t>(v);
    } else if (flag == "--root") {
      struct stat st {};
      if (value.empty() || ::stat(std::string(value).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        return bad + "not a folder. " + std::string(expected);
      }
      out.server.root = value;
    } else {
      if (!parse_number(value, 1, max_idle_ms, v)) return bad + std::string(expected);
      out.server.idle_timeout = std::chrono::milliseconds(v);
    }
  }
  return {};
}

}  // namespace usched::http
