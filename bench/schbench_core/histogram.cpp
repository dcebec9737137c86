// histogram.cpp: plat buckets, calc_percentiles, the report block, the JSON.
#include "histogram.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

namespace usched::schbench {

unsigned plat_val_to_idx(std::uint64_t us) noexcept {
  if (us < plat_exact_limit) return static_cast<unsigned>(us);
  // The highest set bit picks the group; the plat_bits bits below it pick the
  // bucket inside the group; the bits under those are the rounding error.
  const unsigned msb = static_cast<unsigned>(std::bit_width(us)) - 1;
  const unsigned error_bits = msb - plat_bits;
  const std::uint64_t base = std::uint64_t{error_bits + 1} << plat_bits;
  const std::uint64_t offset = (us >> error_bits) & (plat_val - 1);
  return static_cast<unsigned>(std::min<std::uint64_t>(base + offset, plat_nr - 1));
}

std::uint64_t plat_idx_to_val(unsigned idx) noexcept {
  if (idx < plat_exact_limit) return idx;
  const unsigned error_bits = (idx >> plat_bits) - 1;
  const std::uint64_t base = std::uint64_t{1} << (error_bits + plat_bits);
  const std::uint64_t k = idx % plat_val;
  // The midpoint of [base + k*w, base + (k+1)*w) with w = 2^error_bits; w is
  // at least 2 here, so the midpoint is a whole number (schbench computes
  // base + (k + 0.5) * w in floating point and truncates: the same value).
  const std::uint64_t width = std::uint64_t{1} << error_bits;
  return base + k * width + width / 2;
}

histogram::histogram() : plat_(plat_nr, 0) {}

histogram histogram::from_buckets(std::span<const std::uint64_t> plat, std::uint64_t min_us,
                                  std::uint64_t max_us) {
  if (plat.size() != plat_nr) {
    throw std::invalid_argument("histogram::from_buckets: expected " + std::to_string(plat_nr) +
                                " buckets, got " + std::to_string(plat.size()));
  }
  histogram h;
  std::copy(plat.begin(), plat.end(), h.plat_.begin());
  for (std::uint64_t c : plat) h.nr_samples_ += c;
  if (h.nr_samples_ > 0) {
    h.min_ = min_us;
    h.max_ = max_us;
  }
  return h;
}

bool histogram::record(std::uint64_t us) noexcept {
  if (us == 0) return false;
  record_any(us);
  return true;
}

void histogram::record_any(std::uint64_t us) noexcept {
  // The extremes are set from the first sample, not from 0 as "unset"
  // (schbench's add_lat), so a 0 sample is the minimum it is.
  if (nr_samples_ == 0 || us < min_) min_ = us;
  if (us > max_) max_ = us;
  ++plat_[plat_val_to_idx(us)];
  ++nr_samples_;
}

void histogram::merge(const histogram& other) noexcept {
  if (other.nr_samples_ == 0) return;
  for (unsigned i = 0; i < plat_nr; ++i) plat_[i] += other.plat_[i];
  min_ = nr_samples_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  nr_samples_ += other.nr_samples_;
}

void histogram::clear() noexcept {
  std::fill(plat_.begin(), plat_.end(), 0);
  nr_samples_ = 0;
  min_ = 0;
  max_ = 0;
}

std::vector<percentile_row> histogram::percentiles(std::span<const double> list) const {
  std::vector<percentile_row> rows;
  rows.reserve(list.size());
  if (list.empty()) return rows;
  // Walk the buckets once; a bucket can satisfy several percentiles at once.
  // The threshold is compared in floating point, as schbench does, so that
  // e.g. 99.9% of 1000 samples needs 999 of them, and 50% of 3 needs 2.
  const double nr = static_cast<double>(nr_samples_);
  std::uint64_t running = 0;
  std::size_t j = 0;
  for (unsigned i = 0; i < plat_nr && j < list.size(); ++i) {
    running += plat_[i];
    while (j < list.size() && static_cast<double>(running) >= list[j] / 100.0 * nr) {
      rows.push_back({list[j], plat_idx_to_val(i), running});
      ++j;
    }
  }
  // Cumulative counts become the samples in each band.
  std::uint64_t before = 0;
  for (percentile_row& r : rows) {
    const std::uint64_t cumulative = r.samples;
    r.samples = cumulative - before;
    before = cumulative;
  }
  return rows;
}

namespace {

std::string format_percent(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%2.1f", p);
  return buf;
}

}  // namespace

std::string format_block(const histogram& h, std::uint64_t runtime_s) {
  std::string out = "Latency percentiles (usec) runtime " + std::to_string(runtime_s) + " (s) (" +
                    std::to_string(h.samples()) + " total samples)\n";
  const std::vector<percentile_row> rows = h.percentiles();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out += '\t';
    if (i == starred_percentile) out += '*';
    out += format_percent(rows[i].percentile) + "th: " + std::to_string(rows[i].value) + " (" +
           std::to_string(rows[i].samples) + " samples)\n";
  }
  out += "\tmin=" + std::to_string(h.min()) + ", max=" + std::to_string(h.max()) + "\n";
  return out;
}

std::uint64_t percentile_value(const run_summary& s, double p) noexcept {
  for (const percentile_row& r : s.percentiles) {
    if (r.percentile == p) return r.value;
  }
  return 0;
}

run_summary summarize(const histogram& h, std::uint64_t runtime_s) {
  run_summary s;
  s.runtime_s = runtime_s;
  s.samples = h.samples();
  s.min_us = h.min();
  s.max_us = h.max();
  s.percentiles = h.percentiles(report_percentiles);
  s.curve = h.percentiles(curve_percentiles);
  return s;
}

// ---- JSON writer ----------------------------------------------------------

namespace {

void put_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", u);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// Percentiles are short decimals (99.99); %g writes them without trailing
// zeros and reads back as the same double.
std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void put_rows(std::string& out, const std::vector<percentile_row>& rows) {
  out += '[';
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i) out += ',';
    out += "{\"p\":" + number_text(rows[i].percentile) + ",\"value\":" +
           std::to_string(rows[i].value) + ",\"samples\":" + std::to_string(rows[i].samples) + "}";
  }
  out += ']';
}

}  // namespace

std::string to_json(const run_summary& s) {
  std::string out = "{";
  const auto key = [&out](std::string_view k) {
    if (out.size() > 1) out += ',';
    put_string(out, k);
    out += ':';
  };
  const auto text = [&](std::string_view k, std::string_view v) {
    key(k);
    put_string(out, v);
  };
  const auto number = [&](std::string_view k, std::uint64_t v) {
    key(k);
    out += std::to_string(v);
  };
  const auto rows = [&](std::string_view k, const std::vector<percentile_row>& v) {
    key(k);
    put_rows(out, v);
  };
  text("policy", s.policy);
  text("mode", s.mode);
  number("workers", s.workers);
  number("message_threads", s.message_threads);
  number("worker_threads", s.worker_threads);
  text("topology", s.topology);
  text("command_line", s.command_line);
  number("runtime_s", s.runtime_s);
  number("samples", s.samples);
  number("min_us", s.min_us);
  number("max_us", s.max_us);
  rows("percentiles", s.percentiles);
  rows("curve", s.curve);
  out += "}\n";
  return out;
}

// ---- JSON reader ----------------------------------------------------------

namespace {

// A parsed JSON value. Numbers keep their text so that integers up to 2^64
// survive (a double would round them).
struct json_value {
  enum class kind { null, boolean, number, string, array, object };
  kind k = kind::null;
  bool flag = false;
  std::string text;  // number text or string contents
  std::vector<json_value> items;
  std::vector<std::pair<std::string, json_value>> members;
};

// Recursive descent over one document. Nesting is bounded so that a hostile
// file cannot overflow the stack.
class json_reader {
 public:
  explicit json_reader(std::string_view text) : s_(text) {}

  json_value document() {
    json_value v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("trailing characters after the JSON value");
    return v;
  }

 private:
  // Our documents nest three deep; anything past this is not ours.
  static constexpr int max_depth = 64;

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("schbench JSON: " + what + " at offset " + std::to_string(pos_));
  }

  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool consume(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }

  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  json_value value(int depth) {
    if (depth > max_depth) fail("nesting too deep");
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end of input");
    json_value v;
    const char c = s_[pos_];
    if (c == '{') {
      ++pos_;
      v.k = json_value::kind::object;
      if (consume('}')) return v;
      do {
        skip_ws();
        if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a member name");
        std::string name = string_body();
        expect(':');
        v.members.emplace_back(std::move(name), value(depth + 1));
      } while (consume(','));
      expect('}');
    } else if (c == '[') {
      ++pos_;
      v.k = json_value::kind::array;
      if (consume(']')) return v;
      do {
        v.items.push_back(value(depth + 1));
      } while (consume(','));
      expect(']');
    } else if (c == '"') {
      v.k = json_value::kind::string;
      v.text = string_body();
    } else if (literal("true")) {
      v.k = json_value::kind::boolean;
      v.flag = true;
    } else if (literal("false")) {
      v.k = json_value::kind::boolean;
    } else if (literal("null")) {
      v.k = json_value::kind::null;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.k = json_value::kind::number;
      const std::size_t start = pos_;
      while (pos_ < s_.size() && std::string_view("+-0123456789.eE").find(s_[pos_]) !=
                                     std::string_view::npos) {
        ++pos_;
      }
      v.text = std::string(s_.substr(start, pos_ - start));
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  unsigned hex4() {
    if (pos_ + 4 > s_.size()) fail("short \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
      else fail("bad hex digit in \\u escape");
    }
    return v;
  }

  static void put_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // string_body() reads a string starting at its opening quote.
  std::string string_body() {
    ++pos_;  // the opening quote
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          // A high surrogate followed by a low one is one code point.
          if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(pos_, 2) == "\\u") {
            pos_ += 2;
            const unsigned lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("unpaired surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          put_utf8(out, cp);
          break;
        }
        default: fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

const json_value* member(const json_value& obj, std::string_view name) {
  for (const auto& [k, v] : obj.members) {
    if (k == name) return &v;
  }
  return nullptr;
}

const json_value& required(const json_value& obj, std::string_view name, json_value::kind k) {
  const json_value* v = member(obj, name);
  if (!v) throw std::runtime_error("schbench JSON: missing member \"" + std::string(name) + "\"");
  if (v->k != k) throw std::runtime_error("schbench JSON: member \"" + std::string(name) + "\" has the wrong type");
  return *v;
}

std::uint64_t as_u64(const json_value& obj, std::string_view name) {
  const json_value& v = required(obj, name, json_value::kind::number);
  errno = 0;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.text.c_str(), &end, 10);
  if (errno != 0 || end != v.text.c_str() + v.text.size() || v.text.front() == '-') {
    throw std::runtime_error("schbench JSON: member \"" + std::string(name) +
                             "\" is not a whole number: " + v.text);
  }
  return n;
}

unsigned as_unsigned(const json_value& obj, std::string_view name) {
  const std::uint64_t n = as_u64(obj, name);
  if (n > 0xFFFFFFFFu) throw std::runtime_error("schbench JSON: member \"" + std::string(name) + "\" is too large");
  return static_cast<unsigned>(n);
}

double as_double(const json_value& obj, std::string_view name) {
  const json_value& v = required(obj, name, json_value::kind::number);
  char* end = nullptr;
  const double d = std::strtod(v.text.c_str(), &end);
  if (end != v.text.c_str() + v.text.size()) {
    throw std::runtime_error("schbench JSON: member \"" + std::string(name) + "\" is not a number: " + v.text);
  }
  return d;
}

std::vector<percentile_row> as_rows(const json_value& obj, std::string_view name) {
  const json_value& arr = required(obj, name, json_value::kind::array);
  std::vector<percentile_row> rows;
  for (const json_value& item : arr.items) {
    if (item.k != json_value::kind::object) {
      throw std::runtime_error("schbench JSON: \"" + std::string(name) + "\" holds a non-object");
    }
    rows.push_back({as_double(item, "p"), as_u64(item, "value"), as_u64(item, "samples")});
  }
  return rows;
}

}  // namespace

run_summary parse_run_json(std::string_view text) {
  const json_value doc = json_reader(text).document();
  if (doc.k != json_value::kind::object) throw std::runtime_error("schbench JSON: not an object");
  run_summary s;
  s.policy = required(doc, "policy", json_value::kind::string).text;
  s.mode = required(doc, "mode", json_value::kind::string).text;
  s.workers = as_unsigned(doc, "workers");
  s.message_threads = as_unsigned(doc, "message_threads");
  s.worker_threads = as_unsigned(doc, "worker_threads");
  s.topology = required(doc, "topology", json_value::kind::string).text;
  s.command_line = required(doc, "command_line", json_value::kind::string).text;
  s.runtime_s = as_u64(doc, "runtime_s");
  s.samples = as_u64(doc, "samples");
  s.min_us = as_u64(doc, "min_us");
  s.max_us = as_u64(doc, "max_us");
  s.percentiles = as_rows(doc, "percentiles");
  s.curve = as_rows(doc, "curve");
  return s;
}

}  // namespace usched::schbench
