// http_parser.hpp: an incremental HTTP/1.1 request parser with hard limits.
//
// The parser is fed bytes as they arrive from a connection, in any split (one
// byte at a time works), and says after each call whether it needs more, has
// a complete request, or has found an error and which status to answer with.
// It keeps no state outside itself and allocates once, at construction (the
// buffer that holds one request head); nothing per request.
//
// What it reads of a request (RFC 9112): the request line, and of the header
// fields only those that decide framing and the connection's life:
// Content-Length, Transfer-Encoding and Connection. Other fields are checked
// for syntax and skipped. A body is consumed and dropped (this server answers
// no request by its body), so that the next request of a keep-alive or
// pipelined connection starts at the right byte.
//
// Errors, each final (the connection is to be answered and closed):
//   400 a malformed request line, an HTTP version that is not HTTP/D.D, a
//       malformed header line (no colon, white space before the colon, a
//       line folded onto the previous one, a control character), a line
//       ending in a bare CR or bare LF, a Content-Length that is not a
//       decimal number (lists included) or that disagrees with another one,
//       Transfer-Encoding together with Content-Length (the framing is
//       ambiguous: the request-smuggling case of RFC 9112 section 6.3), or
//       Transfer-Encoding in an HTTP/1.0 request (which has none).
//   413 a Content-Length above limits::max_body_bytes.
//   431 a request head (request line, header lines and the empty line that
//       ends them) longer than limits::max_header_bytes.
//   501 any other Transfer-Encoding: this parser implements no transfer
//       coding, chunked included, so it cannot find where such a body ends
//       (RFC 9112 section 6.1 asks for 501 for a coding a server does not
//       understand; nothing after it can be read, so the connection closes).
//   505 a well-formed version other than HTTP/1.x.
// The Host field is not checked: the server built on this serves one site.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace usched::http {

// limits: the bounds on what one request may make the parser hold or skip.
struct limits {
  // Bytes of a request head: request line, header lines with their CRLFs,
  // and the final empty line (empty lines before the request line count
  // too). The parser's one allocation is a buffer of this size. Longer: 431.
  std::size_t max_header_bytes = 8 * 1024;
  // The largest Content-Length accepted; the body is skipped, not stored,
  // so this bounds the time a connection spends on bytes it throws away,
  // not memory. Larger: 413.
  std::uint64_t max_body_bytes = 1024 * 1024;
};

// request: what the parser has read of one complete request. The views point
// into the parser's buffer: valid until the next call of feed().
struct request {
  std::string_view method;           // "GET", "HEAD", ... (case-sensitive, as sent)
  std::string_view target;           // the request target as sent: "/", "/static/a.txt?x"
  int version_minor = 1;             // HTTP/1.<version_minor> (0 or more; 1 and up read as 1.1)
  std::uint64_t content_length = 0;  // the body's size, consumed before the request is returned
  // Whether the connection stays open after the answer: HTTP/1.1 unless
  // "Connection: close"; HTTP/1.0 only with "Connection: keep-alive" (and no
  // "close").
  bool keep_alive = true;
};

// parse_status: what a call of feed() ended with.
enum class parse_status {
  need_more,  // every byte was consumed; the request is not complete yet
  complete,   // a request ended (request()); the rest of the input is the next one's
  error,      // the request is malformed (feed_result::error_status); final
};

// feed_result: the outcome of one call of feed(). `consumed` bytes of the
// input were used: all of them for need_more; up to the request's last byte
// for complete; for error, up to and including the byte that showed it.
struct feed_result {
  parse_status status = parse_status::need_more;
  std::size_t consumed = 0;
  int error_status = 0;  // for error: 400, 413, 431, 501 or 505
};

// request_parser: the parser of one connection's requests, one after another.
class request_parser {
 public:
  explicit request_parser(const limits& lim = {});
  request_parser(request_parser&&) noexcept = default;
  request_parser& operator=(request_parser&&) noexcept = default;

  // feed() reads `data[0, n)`, the bytes that follow those consumed so far.
  // After `complete`, call it again with the bytes not consumed (a pipelined
  // request, or none): the next request starts there. After `error`, every
  // call returns the same error and consumes nothing. Never reads outside
  // `data[0, n)` or writes outside its own buffer; n == 0 is need_more.
  feed_result feed(const char* data, std::size_t n) noexcept;
  feed_result feed(std::string_view s) noexcept { return feed(s.data(), s.size()); }

  // The last complete request; valid after feed() returned `complete`,
  // until the next feed().
  const request& current() const noexcept { return request_; }

  // between_requests(): no byte of a next request has been consumed (blank
  // lines before a request line aside): the end of the stream here is a
  // clean close; anywhere else it cuts a request short (a body shorter than
  // its Content-Length, a head never finished), and nothing is answered.
  bool between_requests() const noexcept;
  // failed(): feed() has returned `error`.
  bool failed() const noexcept { return state_ == state::failed; }

 private:
  enum class state { head, body, done, failed };

  // The steps of the head: a finished line [begin, end) of buf_ (without its
  // CRLF). Each returns 0 or an error status.
  int on_line(std::size_t begin, std::size_t end) noexcept;
  int on_request_line(std::string_view line) noexcept;
  int on_header_line(std::string_view line) noexcept;
  int on_head_end() noexcept;
  feed_result fail(int status, std::size_t consumed) noexcept;
  void start_request() noexcept;

  limits limits_;
  std::unique_ptr<char[]> buf_;  // the current head, limits_.max_header_bytes long
  state state_ = state::head;
  std::size_t head_len_ = 0;     // bytes of the head in buf_
  std::size_t line_start_ = 0;   // where the current line begins in buf_
  bool seen_request_line_ = false;
  std::uint64_t body_left_ = 0;  // bytes of the body still to skip
  int error_status_ = 0;
  // Framing fields seen in this head.
  bool has_content_length_ = false;
  bool has_transfer_encoding_ = false;
  bool connection_close_ = false;
  bool connection_keep_alive_ = false;
  request request_;
};

}  // namespace usched::http
