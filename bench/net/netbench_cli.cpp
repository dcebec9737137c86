// netbench_cli.cpp: parsing usched_netbench's flags.
#include "netbench_cli.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <optional>

#include <usched/options.hpp>

namespace bench::netbench {

namespace {

std::string joined(const std::vector<std::string>& names, const char* sep = ", ") {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : sep) + n;
  return s;
}

template <std::size_t N>
std::vector<std::string> listed(const char* const (&names)[N]) {
  return {std::begin(names), std::end(names)};
}

std::string cpu_words(const std::vector<unsigned>& cpus) {
  std::string s;
  for (unsigned c : cpus) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

// parse_uint() reads `v` as flag's value in [lo, hi].
unsigned parse_uint(const std::string& flag, const std::string& v, unsigned lo, unsigned hi) {
  unsigned n = 0;
  const char* end = v.data() + v.size();
  const auto [ptr, ec] = std::from_chars(v.data(), end, n);
  if (v.empty() || ptr != end || ec != std::errc{} || n < lo || n > hi) {
    throw usage_error(flag + " '" + v + "' is not valid; expected an integer " + std::to_string(lo) + ".." +
                      std::to_string(hi));
  }
  return n;
}

// split() is `v`'s comma-separated items; an empty item (",," or a
// trailing comma) is an error naming the flag and `expected`.
std::vector<std::string> split(const std::string& flag, const std::string& v, const std::string& expected) {
  std::vector<std::string> items;
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = v.find(',', at);
    const std::string item = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (item.empty()) throw usage_error(flag + " '" + v + "' is not valid; expected " + expected);
    items.push_back(item);
    if (comma == std::string::npos) return items;
    at = comma + 1;
  }
}

// chosen() checks each of `items` is one of `allowed`, and drops repeats.
std::vector<std::string> chosen(const std::string& flag, const std::vector<std::string>& items,
                                const std::vector<std::string>& allowed, const std::string& what) {
  std::vector<std::string> out;
  for (const std::string& i : items) {
    if (std::find(allowed.begin(), allowed.end(), i) == allowed.end()) {
      throw usage_error(flag + " '" + i + "' is not " + what + "; choose from: " + joined(allowed));
    }
    if (std::find(out.begin(), out.end(), i) == out.end()) out.push_back(i);
  }
  return out;
}

unsigned parse_cpu(const std::string& flag, const std::string& v, const std::vector<unsigned>& cpus) {
  unsigned n = 0;
  const char* end = v.data() + v.size();
  const auto [ptr, ec] = std::from_chars(v.data(), end, n);
  const bool number = !v.empty() && ptr == end && ec == std::errc{};
  if (!number || std::find(cpus.begin(), cpus.end(), n) == cpus.end()) {
    throw usage_error(flag + " '" + v + "' is not a CPU this process may run on; expected one of " +
                      cpu_words(cpus));
  }
  return n;
}

}  // namespace

bool options::runs(const std::string& kind) const {
  return std::find(servers.begin(), servers.end(), kind) != servers.end();
}

options parse_options(std::span<const std::string> args, const std::vector<unsigned>& cpus) {
  options o;
  o.server_cpu = cpus.front();
  o.client_cpu = cpus.size() > 1 ? cpus[1] : cpus.front();
  bool rounds_given = false;
  bool seconds_given = false;
  const std::vector<std::string> kinds = listed(server_kinds);
  const std::vector<std::string> backends = listed(io_backends);
  const std::vector<std::string> policies = usched::policy_names();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    // "--flag=value" or "--flag value"; `expected` completes the error line.
    const auto value = [&](const std::string& flag, const std::string& expected) -> std::optional<std::string> {
      if (a.size() > flag.size() && a.compare(0, flag.size() + 1, flag + "=") == 0) {
        return a.substr(flag.size() + 1);
      }
      if (a != flag) return std::nullopt;
      if (i + 1 >= args.size()) throw usage_error(flag + " needs a value; expected " + expected);
      return args[++i];
    };
    const std::string conns = "a comma-separated list of integers 1.." + std::to_string(max_connections);
    if (a == "-h" || a == "--help") {
      o.help = true;
      return o;
    }
    if (a == "--quick") {
      o.quick = true;
    } else if (a.rfind("--quick=", 0) == 0) {
      throw usage_error("--quick takes no value; '" + a + "' is not valid");
    } else if (auto r = value("-r", "an integer 1.." + std::to_string(max_rounds))) {
      o.rounds = parse_uint("-r", *r, 1, max_rounds);
      rounds_given = true;
    } else if (auto d = value("-d", "seconds, an integer 1.." + std::to_string(max_seconds))) {
      o.seconds = parse_uint("-d", *d, 1, max_seconds);
      seconds_given = true;
    } else if (auto c = value("-c", conns)) {
      o.connections.clear();
      for (const std::string& item : split("-c", *c, conns)) {
        const unsigned n = parse_uint("-c", item, 1, max_connections);
        if (std::find(o.connections.begin(), o.connections.end(), n) == o.connections.end()) {
          o.connections.push_back(n);
        }
      }
    } else if (auto s = value("--servers", "a comma-separated list of: " + joined(kinds))) {
      const std::vector<std::string> picked =
          chosen("--servers", split("--servers", *s, "a comma-separated list of: " + joined(kinds)), kinds,
                 "a server");
      // Kept in the order of the table, whatever the order given.
      o.servers.clear();
      for (const std::string& k : kinds) {
        if (std::find(picked.begin(), picked.end(), k) != picked.end()) o.servers.push_back(k);
      }
    } else if (auto p = value("--policies", "a comma-separated list of usched policies: " + joined(policies))) {
      o.policies = chosen("--policies", split("--policies", *p, "a comma-separated list of usched policies"),
                          policies, "a registered policy");
    } else if (auto b = value("--io", "a comma-separated list of: " + joined(backends))) {
      o.io = chosen("--io", split("--io", *b, "a comma-separated list of: " + joined(backends)), backends,
                    "an I/O backend");
    } else if (auto f = value("--plot", "a PNG file name")) {
      if (f->empty()) throw usage_error("--plot '' is not valid; expected a PNG file name");
      o.plot = *f;
    } else if (auto sc = value("--server-cpu", "a CPU number: one of " + cpu_words(cpus))) {
      o.server_cpu = parse_cpu("--server-cpu", *sc, cpus);
    } else if (auto cc = value("--client-cpu", "a CPU number: one of " + cpu_words(cpus))) {
      o.client_cpu = parse_cpu("--client-cpu", *cc, cpus);
    } else if (auto u = value("--usched-server", "the path of usched_http_server")) {
      if (u->empty()) throw usage_error("--usched-server '' is not valid; expected the path of usched_http_server");
      o.usched_server = *u;
    } else {
      throw usage_error("'" + a +
                        "' is not a flag; expected -r N, -d SECONDS, -c LIST, --quick, --servers LIST, "
                        "--policies LIST, --io LIST, --plot FILE, --server-cpu N, --client-cpu N, "
                        "--usched-server PATH or -h");
    }
  }
  if (o.quick) {
    if (!rounds_given) o.rounds = 1;
    if (!seconds_given) o.seconds = quick_seconds;
  }
  if (o.servers.empty()) o.servers = kinds;
  if (o.policies.empty()) o.policies = listed(default_policies);
  if (o.io.empty()) o.io = backends;
  return o;
}

std::string usage_text(const std::vector<unsigned>& cpus) {
  const std::string second = std::to_string(cpus.size() > 1 ? cpus[1] : cpus.front());
  return std::string("usage: usched_netbench") +
         " [-r N] [-d SECONDS] [-c LIST] [--quick] [--servers LIST] [--policies LIST]\n"
         "       [--io LIST] [--plot FILE.png] [--server-cpu N] [--client-cpu N] [--usched-server PATH]\n"
         "Runs HTTP/1.1 keep-alive servers answering GET / with a 13-byte body under wrk on\n"
         "127.0.0.1 (wrk -t1 -cC -dD --latency), the server pinned to one CPU and wrk to\n"
         "another: floor_server (C, one epoll loop, the floor), Go's net/http, and\n"
         "usched_http_server on one worker per I/O backend and policy, and on two workers.\n"
         "Rounds take the servers in turn, starting one further each round; the tables\n"
         "give requests/s median [min..max], the ratios to Go and to the floor (medians\n"
         "of per-round ratios) and the latency percentiles' medians, per connection count.\n"
         "  -r N               rounds, 1.." + std::to_string(max_rounds) + " (default " +
         std::to_string(default_rounds) + ")\n"
         "  -d SECONDS         wrk's measured duration per run, 1.." + std::to_string(max_seconds) +
         " (default " + std::to_string(default_seconds) + "); each run is\n"
         "                     preceded by a 1 s warm-up\n"
         "  -c LIST            connection counts, e.g. 100,1000, each 1.." + std::to_string(max_connections) +
         " (default " + std::to_string(default_connections) + ")\n"
         "  --quick            a smoke run: -r 1 -d " + std::to_string(quick_seconds) +
         " unless -r or -d is given\n"
         "  --servers LIST     the rows to run: " + joined(listed(server_kinds), ",") + " (default: all)\n"
         "  --policies LIST    the usched rows' policies (default " + joined(listed(default_policies), ",") +
         "); usched-2w uses the first\n"
         "  --io LIST          the usched rows' I/O backends (default " + joined(listed(io_backends), ",") +
         "); usched-2w uses the first\n"
         "  --plot FILE.png    also plot p50/p99/p99.9 per server at the first connection count\n"
         "                     (gnuplot)\n"
         "  --server-cpu N     the servers' CPU (default " + std::to_string(cpus.front()) + ")\n"
         "  --client-cpu N     wrk's CPU (default " + second + "); usched-2w runs on both\n"
         "  --usched-server PATH  usched_http_server (default: examples/net/ of this build;\n"
         "                     its rows are skipped, with a line saying so, when it is not built)\n"
         "  -h, --help         this text\n";
}

}  // namespace bench::netbench
