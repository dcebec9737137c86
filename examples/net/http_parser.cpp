// http_parser.cpp: the request parser's state machine (http_parser.hpp).
//
// The head is copied byte by byte into the parser's buffer, so a request
// split anywhere reads the same as one sent whole; each line is checked when
// its CRLF arrives, so garbage is answered as soon as its first line ends,
// not when the head limit runs out. The body is never copied: it is counted
// down as it passes.
#include "http_parser.hpp"

#include <algorithm>

namespace usched::http {

namespace {

constexpr char cr = '\r';
constexpr char lf = '\n';

// tchar of RFC 9110 section 5.6.2: the characters of a token (a method, a
// field name, a connection option).
bool is_tchar(unsigned char c) noexcept {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

// A control character that may not appear anywhere in a head: everything
// below 0x20 except HTAB (CR and LF are the line ends, checked apart), and DEL.
bool is_forbidden_ctl(unsigned char c) noexcept {
  return (c < 0x20 && c != '\t' && c != cr && c != lf) || c == 0x7f;
}

bool is_ows(char c) noexcept { return c == ' ' || c == '\t'; }

std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if ((static_cast<unsigned char>(a[i]) | 0x20) != (static_cast<unsigned char>(b[i]) | 0x20)) return false;
  }
  return true;
}

// A Content-Length value: 1*DIGIT and no more than fits in 63 bits (a
// larger one is no size anyone sends; it is refused rather than wrapped).
bool parse_length(std::string_view s, std::uint64_t& out) noexcept {
  if (s.empty()) return false;
  constexpr std::uint64_t cap = std::uint64_t{1} << 63;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
    if (v >= cap) return false;
  }
  out = v;
  return true;
}

}  // namespace

request_parser::request_parser(const limits& lim)
    : limits_(lim), buf_(std::make_unique<char[]>(std::max<std::size_t>(lim.max_header_bytes, 1))) {}

bool request_parser::between_requests() const noexcept {
  return (state_ == state::head && !seen_request_line_ && line_start_ == head_len_) || state_ == state::done;
}

void request_parser::start_request() noexcept {
  state_ = state::head;
  head_len_ = 0;
  line_start_ = 0;
  seen_request_line_ = false;
  body_left_ = 0;
  has_content_length_ = false;
  has_transfer_encoding_ = false;
  connection_close_ = false;
  connection_keep_alive_ = false;
  request_ = request{};
}

feed_result request_parser::fail(int status, std::size_t consumed) noexcept {
  state_ = state::failed;
  error_status_ = status;
  return {parse_status::error, consumed, status};
}

feed_result request_parser::feed(const char* data, std::size_t n) noexcept {
  if (state_ == state::failed) return {parse_status::error, 0, error_status_};
  if (state_ == state::done) start_request();
  std::size_t i = 0;
  while (i < n) {
    if (state_ == state::body) {
      const std::uint64_t take = std::min<std::uint64_t>(body_left_, n - i);
      body_left_ -= take;
      i += static_cast<std::size_t>(take);
      if (body_left_ == 0) {
        state_ = state::done;
        return {parse_status::complete, i, 0};
      }
      continue;
    }
    // state::head: one byte into the buffer.
    const char c = data[i];
    if (head_len_ == limits_.max_header_bytes) return fail(431, i + 1);
    if (is_forbidden_ctl(static_cast<unsigned char>(c))) return fail(400, i + 1);
    const bool after_cr = head_len_ > line_start_ && buf_[head_len_ - 1] == cr;
    // A CR is a line end only right before LF: a bare CR, or a bare LF,
    // would let two parsers disagree on where a line ends.
    if (after_cr != (c == lf)) return fail(400, i + 1);
    buf_[head_len_++] = c;
    ++i;
    if (c != lf) continue;
    const std::size_t line_end = head_len_ - 2;
    const int status = on_line(line_start_, line_end);
    line_start_ = head_len_;
    if (status != 0) return fail(status, i);
    if (state_ == state::done) return {parse_status::complete, i, 0};
  }
  return {parse_status::need_more, i, 0};
}

int request_parser::on_line(std::size_t begin, std::size_t end) noexcept {
  const std::string_view line(buf_.get() + begin, end - begin);
  if (!seen_request_line_) {
    // RFC 9112 section 2.2: empty lines before the request line are skipped
    // (a client may end a body with an extra CRLF). They count toward the
    // head's limit, so a stream of them ends in 431.
    if (line.empty()) return 0;
    seen_request_line_ = true;
    return on_request_line(line);
  }
  if (line.empty()) return on_head_end();
  return on_header_line(line);
}

int request_parser::on_request_line(std::string_view line) noexcept {
  // method SP request-target SP HTTP-version, single spaces (RFC 9112 3).
  const std::size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return 400;
  const std::string_view method = line.substr(0, sp1);
  if (!std::all_of(method.begin(), method.end(), [](char c) { return is_tchar(static_cast<unsigned char>(c)); })) {
    return 400;
  }
  const std::size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return 400;
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  // Visible ASCII only: a target with a tab, or bytes above 0x7e, is not a
  // URI (non-ASCII is percent-encoded on the wire).
  if (!std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; })) return 400;
  const std::string_view version = line.substr(sp2 + 1);
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.') return 400;
  const char major = version[5];
  const char minor = version[7];
  if (major < '0' || major > '9' || minor < '0' || minor > '9') return 400;
  // A well-formed version of another major is a protocol this parser does
  // not speak (RFC 9110 15.6.6); a higher 1.x minor is read as 1.1 (RFC 9110
  // 2.5: minor versions are compatible).
  if (major != '1') return 505;
  request_.method = method;
  request_.target = target;
  request_.version_minor = minor - '0';
  return 0;
}

int request_parser::on_header_line(std::string_view line) noexcept {
  // A line starting with white space folds onto the previous field
  // (obs-fold) or hides a field name behind it: RFC 9112 5.2 lets a server
  // reject both, and it does.
  if (is_ows(line.front())) return 400;
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return 400;
  const std::string_view name = line.substr(0, colon);
  // No white space between the name and the colon (RFC 9112 5.1: 400).
  if (!std::all_of(name.begin(), name.end(), [](char c) { return is_tchar(static_cast<unsigned char>(c)); })) {
    return 400;
  }
  const std::string_view value = trim_ows(line.substr(colon + 1));
  if (iequals(name, "content-length")) {
    std::uint64_t len = 0;
    if (!parse_length(value, len)) return 400;
    // Several Content-Length fields are one length sent twice, or two
    // framings a proxy and this server could each pick one of.
    if (has_content_length_ && len != request_.content_length) return 400;
    has_content_length_ = true;
    request_.content_length = len;
  } else if (iequals(name, "transfer-encoding")) {
    has_transfer_encoding_ = true;
  } else if (iequals(name, "connection")) {
    // A comma-separated list of options, case-insensitive.
    std::string_view rest = value;
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      const std::string_view option = trim_ows(rest.substr(0, comma));
      if (iequals(option, "close")) connection_close_ = true;
      if (iequals(option, "keep-alive")) connection_keep_alive_ = true;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return 0;
}

int request_parser::on_head_end() noexcept {
  if (has_transfer_encoding_) {
    // HTTP/1.0 has no transfer codings, and both framings at once is the
    // smuggling case: 400. Otherwise a coding is there this parser cannot
    // decode, chunked included: 501.
    if (request_.version_minor == 0 || has_content_length_) return 400;
    return 501;
  }
  if (request_.content_length > limits_.max_body_bytes) return 413;
  request_.keep_alive = request_.version_minor == 0 ? (connection_keep_alive_ && !connection_close_)
                                                    : !connection_close_;
  if (request_.content_length > 0) {
    body_left_ = request_.content_length;
    state_ = state::body;
  } else {
    state_ = state::done;
  }
  return 0;
}

}  // namespace usched::http
