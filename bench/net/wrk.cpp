// wrk.cpp: wrk's command line, the report script and its line (wrk.hpp).
#include "wrk.hpp"

#include <charconv>
#include <cstdlib>
#include <string>

namespace bench::netbench {

const char* const report_script =
    "-- usched_netbench: one line at the end of the run, read back by the driver.\n"
    "done = function(summary, latency, requests)\n"
    "  local e = summary.errors\n"
    "  io.write(string.format(\"netbench-report requests=%.0f duration_us=%.0f bytes=%.0f \"\n"
    "    .. \"connect=%.0f read=%.0f write=%.0f status=%.0f timeout=%.0f \"\n"
    "    .. \"p50=%.0f p90=%.0f p99=%.0f p99.9=%.0f\\n\",\n"
    "    summary.requests, summary.duration, summary.bytes,\n"
    "    e.connect, e.read, e.write, e.status, e.timeout,\n"
    "    latency:percentile(50), latency:percentile(90),\n"
    "    latency:percentile(99), latency:percentile(99.9)))\n"
    "end\n";

double wrk_result::requests_per_s() const noexcept {
  return duration_us ? static_cast<double>(requests) * 1e6 / static_cast<double>(duration_us) : 0.0;
}

double wrk_result::bytes_per_response() const noexcept {
  return requests ? static_cast<double>(bytes) / static_cast<double>(requests) : 0.0;
}

std::vector<std::string> wrk_args(unsigned connections, unsigned seconds, const std::string& script,
                                  unsigned port) {
  return {"-t1",
          "-c" + std::to_string(connections),
          "-d" + std::to_string(seconds) + "s",
          "--latency",
          "-s",
          script,
          "http://127.0.0.1:" + std::to_string(port) + "/"};
}

std::optional<wrk_result> parse_report(std::string_view output) {
  constexpr std::string_view tag = "netbench-report ";
  std::size_t at = output.find(tag);
  // The tag at the start of a line: the script's line, not an echo of it.
  while (at != std::string_view::npos && at != 0 && output[at - 1] != '\n') at = output.find(tag, at + 1);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view line = output.substr(at + tag.size());
  line = line.substr(0, line.find('\n'));

  wrk_result r;
  struct field {
    std::string_view key;
    unsigned long long* count;
    double* value;
  };
  const field fields[] = {{"requests", &r.requests, nullptr},     {"duration_us", &r.duration_us, nullptr},
                          {"bytes", &r.bytes, nullptr},           {"connect", &r.connect_errors, nullptr},
                          {"read", &r.read_errors, nullptr},      {"write", &r.write_errors, nullptr},
                          {"status", &r.status_errors, nullptr},  {"timeout", &r.timeouts, nullptr},
                          {"p50", nullptr, &r.p50_us},            {"p90", nullptr, &r.p90_us},
                          {"p99", nullptr, &r.p99_us},            {"p99.9", nullptr, &r.p999_us}};
  std::size_t seen = 0;
  while (!line.empty()) {
    const std::size_t space = line.find(' ');
    const std::string_view item = line.substr(0, space);
    line = space == std::string_view::npos ? std::string_view{} : line.substr(space + 1);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view key = item.substr(0, eq);
    const std::string_view v = item.substr(eq + 1);
    unsigned long long n = 0;
    const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (v.empty() || ec != std::errc{} || ptr != v.data() + v.size()) return std::nullopt;
    for (const field& f : fields) {
      if (f.key != key) continue;
      if (f.count) *f.count = n;
      else *f.value = static_cast<double>(n);
      ++seen;
    }
  }
  if (seen != std::size(fields)) return std::nullopt;
  return r;
}

std::vector<std::string> errors_of(const wrk_result& r) {
  std::vector<std::string> out;
  const auto add = [&out](unsigned long long n, const char* what) {
    if (n) out.push_back(std::to_string(n) + " " + what);
  };
  if (r.requests == 0) out.emplace_back("no request answered");
  add(r.status_errors, "responses of status 400 or more");
  add(r.read_errors, "read errors");
  add(r.write_errors, "write errors");
  add(r.timeouts, "timeouts");
  return out;
}

}  // namespace bench::netbench
