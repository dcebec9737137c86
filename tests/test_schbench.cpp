// test_schbench.cpp: the schbench clone. The histogram and percentile rules
// against hand-computed cases and the numbers quoted in seeds/000, the
// option parser on the seeds' command lines and on every bad input, and one
// short run in each mode (correctness only: no latency is asserted).
#include <catch2/catch.hpp>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <usched/usched.hpp>

#include "test_support.hpp"

#include "cli.hpp"
#include "compare_cli.hpp"
#include "histogram.hpp"

namespace sb = usched::schbench;

namespace {

using usched::test::words;

sb::cli_options parse(const std::string& line) { return sb::parse_cli(words(line)); }

std::string usage_message(const std::vector<std::string>& args) {
  try {
    sb::parse_cli(args);
  } catch (const sb::usage_error& e) {
    return e.what();
  }
  return "(no error)";
}

// The last report block of a run's output.
std::string last_block(const std::string& out) {
  const std::size_t at = out.rfind("Latency percentiles");
  return at == std::string::npos ? std::string() : out.substr(at);
}

// Parses one line against a scanf format that must consume all of it.
template <class... Out>
bool scan_whole(const std::string& line, const char* format, Out*... out) {
  int used = -1;
  const std::string fmt = std::string(format) + "%n";
  const int n = std::sscanf(line.c_str(), fmt.c_str(), out..., &used);
  return n == static_cast<int>(sizeof...(Out)) && used == static_cast<int>(line.size());
}

// Checks a block in the 2020 format: the header with `samples`, the seven
// tab-indented percentile lines in order, the min/max line; the per-band
// counts add up to at most the total.
void check_block(const std::string& block, std::uint64_t samples) {
  INFO(block);
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < block.size()) {
    const std::size_t end = block.find('\n', start);
    REQUIRE(end != std::string::npos);  // every line ends with a newline
    lines.push_back(block.substr(start, end - start));
    start = end + 1;
  }
  REQUIRE(lines.size() == 9);
  // scanf treats a tab in the format as any run of white space, so the
  // indentation is checked on its own.
  for (std::size_t i = 1; i < lines.size(); ++i) {
    CHECK(lines[i].size() > 1);
    CHECK(lines[i][0] == '\t');
    CHECK(lines[i][1] != ' ');
  }
  unsigned long long runtime = 0, total = 0;
  REQUIRE(scan_whole(lines[0], "Latency percentiles (usec) runtime %llu (s) (%llu total samples)",
                     &runtime, &total));
  CHECK(total == samples);
  const char* labels[] = {"\t50.0th: ", "\t75.0th: ", "\t90.0th: ", "\t95.0th: ",
                          "\t*99.0th: ", "\t99.5th: ", "\t99.9th: "};
  unsigned long long banded = 0;
  for (int i = 0; i < 7; ++i) {
    unsigned long long value = 0, count = 0;
    const std::string fmt = std::string(labels[i]) + "%llu (%llu samples)";
    CHECK(scan_whole(lines[static_cast<std::size_t>(i) + 1], fmt.c_str(), &value, &count));
    banded += count;
  }
  unsigned long long mn = 0, mx = 0;
  CHECK(scan_whole(lines[8], "\tmin=%llu, max=%llu", &mn, &mx));
  CHECK(mn <= mx);
  CHECK(banded <= samples);
}

}  // namespace

// ---- buckets -------------------------------------------------------------------

TEST_CASE("schbench: below 512 us every value is its own bucket", "[schbench]") {
  for (std::uint64_t v : {0u, 1u, 2u, 255u, 256u, 300u, 510u, 511u}) {
    CHECK(sb::plat_val_to_idx(v) == v);
    CHECK(sb::plat_idx_to_val(static_cast<unsigned>(v)) == v);
  }
}

TEST_CASE("schbench: above 512 us, 256 buckets per power of two report midpoints", "[schbench]") {
  // 512..1023: buckets 2 us wide, starting at index 512.
  CHECK(sb::plat_val_to_idx(512) == 512);
  CHECK(sb::plat_val_to_idx(513) == 512);
  CHECK(sb::plat_val_to_idx(514) == 513);
  CHECK(sb::plat_idx_to_val(512) == 513);  // midpoint of [512, 514)
  CHECK(sb::plat_idx_to_val(513) == 515);
  CHECK(sb::plat_val_to_idx(1023) == 767);
  CHECK(sb::plat_idx_to_val(767) == 1023);
  // 1024..2047: 4 us wide, index 768 on.
  CHECK(sb::plat_val_to_idx(1024) == 768);
  CHECK(sb::plat_idx_to_val(768) == 1026);
  // 1185 us (seeds/000's max) sits in [1184, 1188): reported as 1186, which
  // is why that block reads "99.9th: 1186" above "max=1185".
  CHECK(sb::plat_val_to_idx(1185) == 808);
  CHECK(sb::plat_idx_to_val(808) == 1186);
  // 600 and 601 share [600, 602).
  CHECK(sb::plat_val_to_idx(600) == sb::plat_val_to_idx(601));
  CHECK(sb::plat_idx_to_val(sb::plat_val_to_idx(600)) == 601);
}

TEST_CASE("schbench: every value the seeds print above 512 us is a bucket midpoint", "[schbench]") {
  for (std::uint64_t v : {1510u, 3132u, 12240u, 12752u, 13104u, 1186u, 12688u, 13008u, 12656u,
                          12944u, 13168u, 15120u, 1310u}) {
    INFO(v);
    CHECK(sb::plat_idx_to_val(sb::plat_val_to_idx(v)) == v);
  }
}

TEST_CASE("schbench: bucket index and midpoint round-trip, and huge values clamp", "[schbench]") {
  for (unsigned idx = 0; idx < sb::plat_nr; ++idx) {
    REQUIRE(sb::plat_val_to_idx(sb::plat_idx_to_val(idx)) == idx);
  }
  const unsigned last = sb::plat_nr - 1;
  CHECK(sb::plat_val_to_idx(std::uint64_t{1} << 40) == last);
  CHECK(sb::plat_val_to_idx(~std::uint64_t{0}) == last);
  // The last group starts at 2^25 us with 2^17 us buckets.
  CHECK(sb::plat_idx_to_val(last) == (1u << 25) + 255u * (1u << 17) + (1u << 16));
}

// ---- percentiles ------------------------------------------------------------------

TEST_CASE("schbench: a percentile is the first bucket reaching p% of the samples", "[schbench]") {
  sb::histogram h;
  for (std::uint64_t v = 1; v <= 10; ++v) h.record(v);
  const std::vector<sb::percentile_row> rows = h.percentiles();
  const std::vector<sb::percentile_row> expected = {
      {50.0, 5, 5},   // 5 of 10 reached at 5
      {75.0, 8, 3},   // 7.5 needs 8
      {90.0, 9, 1},   // 9 reached at 9
      {95.0, 10, 1},  // 9.5 needs 10
      {99.0, 10, 0},  // same bucket: no samples in between
      {99.5, 10, 0},
      {99.9, 10, 0},
  };
  CHECK(rows == expected);
}

TEST_CASE("schbench: the threshold is compared as a real number", "[schbench]") {
  sb::histogram h;
  for (std::uint64_t v : {1u, 2u, 3u}) h.record(v);
  // 50% of 3 is 1.5: one sample is not enough, two are.
  const std::vector<double> half = {50.0};
  CHECK(h.percentiles(half) == std::vector<sb::percentile_row>{{50.0, 2, 2}});
  // 99.9 / 100.0 * 1000 is 999.0000000000001 in doubles, so schbench's 99.9th
  // of 1000 samples needs all 1000: it is the maximum's bucket. seeds/000's
  // 1000-sample blocks show it: their bands add up to 1000, not 999.
  sb::histogram k;
  for (int i = 0; i < 998; ++i) k.record(10);
  k.record(20);
  k.record(30);
  const std::vector<double> tail = {99.0, 99.9};
  CHECK(k.percentiles(tail) ==
        std::vector<sb::percentile_row>{{99.0, 10, 998}, {99.9, 30, 2}});
}

TEST_CASE("schbench: zero-microsecond samples are dropped", "[schbench]") {
  sb::histogram h;
  CHECK_FALSE(h.record(0));
  CHECK(h.samples() == 0);
  CHECK(h.min() == 0);
  CHECK(h.record(7));
  CHECK_FALSE(h.record(0));
  CHECK(h.samples() == 1);
  CHECK(h.min() == 7);
  CHECK(h.max() == 7);
  CHECK(h.bucket(0) == 0);
}

TEST_CASE("schbench: record_any counts a zero-microsecond sample, in bucket 0, reported as 0", "[schbench]") {
  sb::histogram h;
  h.record_any(7);
  h.record_any(0);
  h.record_any(0);
  CHECK(h.samples() == 3);
  CHECK(h.min() == 0);  // a real minimum, not "unset"
  CHECK(h.max() == 7);
  CHECK(h.bucket(0) == 2);
  CHECK(h.bucket(7) == 1);
  // Two of three samples are 0: the 50th is reached in bucket 0.
  const std::vector<double> list = {50.0, 90.0};
  CHECK(h.percentiles(list) == std::vector<sb::percentile_row>{{50.0, 0, 2}, {90.0, 7, 1}});
  CHECK_THAT(sb::format_block(h, 1), Catch::Contains("(3 total samples)") && Catch::EndsWith("\tmin=0, max=7\n"));
  // A histogram of zeros only: every percentile is 0, and merging it into
  // another keeps its minimum.
  sb::histogram zeros;
  zeros.record_any(0);
  CHECK(zeros.percentiles(list) == std::vector<sb::percentile_row>{{50.0, 0, 1}, {90.0, 0, 0}});
  sb::histogram total;
  total.record(5);
  total.merge(zeros);
  CHECK(total.samples() == 2);
  CHECK(total.min() == 0);
  CHECK(total.max() == 5);
}

TEST_CASE("schbench: an empty histogram prints zeros, as schbench does", "[schbench]") {
  const sb::histogram h;
  CHECK(sb::format_block(h, 0) ==
        "Latency percentiles (usec) runtime 0 (s) (0 total samples)\n"
        "\t50.0th: 0 (0 samples)\n"
        "\t75.0th: 0 (0 samples)\n"
        "\t90.0th: 0 (0 samples)\n"
        "\t95.0th: 0 (0 samples)\n"
        "\t*99.0th: 0 (0 samples)\n"
        "\t99.5th: 0 (0 samples)\n"
        "\t99.9th: 0 (0 samples)\n"
        "\tmin=0, max=0\n");
}

namespace {

// 1000 hand-made samples: 500 at 10 us, 250 at 20, 150 at 30, 50 at 40,
// 40 at 1185 (bucket [1184, 1188), midpoint 1186), 5 at 3000 ([3000, 3008),
// 3004) and 5 at 5000 ([4992, 5008), 5000). Spread over `workers`
// histograms round-robin, as the benchmark's per-worker stats are.
std::vector<sb::histogram> hand_made(unsigned workers) {
  std::vector<sb::histogram> per(workers);
  unsigned next = 0;
  const auto add = [&](std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) per[next++ % workers].record(v);
  };
  add(10, 500);
  add(20, 250);
  add(30, 150);
  add(40, 50);
  add(1185, 40);
  add(3000, 5);
  add(5000, 5);
  return per;
}

const char* const hand_made_block =
    "Latency percentiles (usec) runtime 30 (s) (1000 total samples)\n"
    "\t50.0th: 10 (500 samples)\n"
    "\t75.0th: 20 (250 samples)\n"
    "\t90.0th: 30 (150 samples)\n"
    "\t95.0th: 40 (50 samples)\n"
    "\t*99.0th: 1186 (40 samples)\n"
    "\t99.5th: 3004 (5 samples)\n"
    "\t99.9th: 5000 (5 samples)\n"
    "\tmin=10, max=5000\n";

}  // namespace

TEST_CASE("schbench: the report block, exactly", "[schbench]") {
  const sb::histogram h = hand_made(1).front();
  CHECK(h.samples() == 1000);
  CHECK(sb::format_block(h, 30) == hand_made_block);
}

TEST_CASE("schbench: seeds/000's 'last good kernel' block, rebuilt from samples", "[schbench]") {
  // Samples chosen to land on the seed's bands (the archive strips the tabs).
  sb::histogram h;
  const auto add = [&h](std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) h.record(v);
  };
  add(25, 1);
  add(180, 501);
  add(227, 251);
  add(268, 147);
  add(300, 50);
  add(338, 41);
  add(344, 4);
  add(1185, 5);
  CHECK(sb::format_block(h, 30) ==
        "Latency percentiles (usec) runtime 30 (s) (1000 total samples)\n"
        "\t50.0th: 180 (502 samples)\n"
        "\t75.0th: 227 (251 samples)\n"
        "\t90.0th: 268 (147 samples)\n"
        "\t95.0th: 300 (50 samples)\n"
        "\t*99.0th: 338 (41 samples)\n"
        "\t99.5th: 344 (4 samples)\n"
        "\t99.9th: 1186 (5 samples)\n"
        "\tmin=25, max=1185\n");
}

TEST_CASE("schbench: per-worker stats merge into the same report", "[schbench]") {
  const std::vector<sb::histogram> per = hand_made(7);
  sb::histogram total;
  total.merge(sb::histogram{});  // an idle worker changes nothing
  for (const sb::histogram& h : per) total.merge(h);
  total.merge(sb::histogram{});
  CHECK(total.samples() == 1000);
  CHECK(total.min() == 10);
  CHECK(total.max() == 5000);
  CHECK(sb::format_block(total, 30) == hand_made_block);

  SECTION("an empty worker does not pull the minimum to 0") {
    sb::histogram a;
    a.merge(sb::histogram{});
    sb::histogram b;
    b.record(42);
    a.merge(b);
    CHECK(a.min() == 42);
    a.merge(sb::histogram{});
    CHECK(a.min() == 42);
  }
  SECTION("from_buckets rebuilds a histogram from counts") {
    std::vector<std::uint64_t> counts(sb::plat_nr);
    for (unsigned i = 0; i < sb::plat_nr; ++i) counts[i] = total.bucket(i);
    const sb::histogram copy = sb::histogram::from_buckets(counts, total.min(), total.max());
    CHECK(sb::format_block(copy, 30) == hand_made_block);
    CHECK_THROWS_AS(sb::histogram::from_buckets(std::vector<std::uint64_t>(3), 0, 0),
                    std::invalid_argument);
  }
  SECTION("clear forgets everything") {
    total.clear();
    CHECK(total.samples() == 0);
    CHECK(total.min() == 0);
    CHECK(total.max() == 0);
  }
}

// ---- JSON -------------------------------------------------------------------------

TEST_CASE("schbench: the JSON report reads back as written", "[schbench]") {
  sb::run_summary s = sb::summarize(hand_made(3).front(), 30);
  s.policy = "cfs-v5.9";
  s.mode = "usched";
  s.workers = 2;
  s.message_threads = 2;
  s.worker_threads = 1;
  s.topology = "Machine (2 PUs) \"quoted\"\ttab\\slash";
  s.command_line = "usched_schbench -m 2 --json '/tmp/a b.json'";
  const std::string text = sb::to_json(s);
  CHECK(text.find('\n') == text.size() - 1);  // one line
  CHECK(text.find("\"percentiles\":[{\"p\":50,\"value\":") != std::string::npos);
  CHECK(sb::parse_run_json(text) == s);
  CHECK(s.percentiles.size() == sb::report_percentiles.size());
  CHECK(s.curve.size() == sb::curve_percentiles.size());
}

TEST_CASE("schbench: the JSON reader takes any layout and rejects junk", "[schbench]") {
  const std::string doc = R"( {
    "curve": [], "extra": {"nested": [1, 2.5e3, true, null, "x"]},
    "percentiles": [ {"samples": 3, "value": 1186, "p": 99.0} ],
    "policy": "steal", "mode": "usched", "workers": 4, "message_threads": 2,
    "worker_threads": 2, "topology": "caf\u00e9 \ud83d\ude00", "command_line": "a\/b",
    "runtime_s": 10, "samples": 3, "min_us": 5, "max_us": 1185 } )";
  const sb::run_summary s = sb::parse_run_json(doc);
  CHECK(s.policy == "steal");
  CHECK(s.workers == 4);
  CHECK(s.topology == "caf\xc3\xa9 \xf0\x9f\x98\x80");
  CHECK(s.command_line == "a/b");
  CHECK(s.percentiles == std::vector<sb::percentile_row>{{99.0, 1186, 3}});

  CHECK_THROWS_AS(sb::parse_run_json(""), std::runtime_error);
  CHECK_THROWS_AS(sb::parse_run_json("[]"), std::runtime_error);
  CHECK_THROWS_AS(sb::parse_run_json("{\"policy\": \"cfs\"}"), std::runtime_error);  // missing
  CHECK_THROWS_AS(sb::parse_run_json("{\"policy\": \"cfs\""), std::runtime_error);   // truncated
  CHECK_THROWS_AS(sb::parse_run_json(sb::to_json(s) + "x"), std::runtime_error);     // trailing
  std::string negative = sb::to_json(s);
  negative.replace(negative.find("\"samples\":3"), 11, "\"samples\":-3");
  CHECK_THROWS_AS(sb::parse_run_json(negative), std::runtime_error);
  CHECK_THROWS_AS(sb::parse_run_json(std::string(100, '[')), std::runtime_error);  // too deep
}

// ---- command line ---------------------------------------------------------------------

TEST_CASE("schbench: defaults are schbench's", "[schbench]") {
  const sb::cli_options o = parse("");
  CHECK(o.message_threads == 2);
  CHECK(o.worker_threads == 0);
  CHECK(o.runtime_s == 30);
  CHECK(o.sleep_us == 30000);
  CHECK(o.worker_think_us == 30000);
  CHECK(o.message_think_us == 30000);
  CHECK(o.interval_s == 10);
  CHECK(o.zero_s == 0);
  CHECK(o.warmup_s == 5);
  CHECK(o.policy.empty());
  CHECK_FALSE(o.threads);
  CHECK(o.json_file.empty());
  CHECK_FALSE(o.help);
  CHECK(o.command_line == "usched_schbench");
}

TEST_CASE("schbench: the seeds' command lines parse verbatim", "[schbench]") {
  SECTION("seeds/000, Chris Mason") {
    const sb::cli_options o = parse("-t 20 -r 0 -c 1000000 -s 1000 -i 30 -z 120");
    CHECK(o.message_threads == 2);
    CHECK(o.worker_threads == 20);
    CHECK(o.runtime_s == 0);
    CHECK(o.worker_think_us == 1000000);
    CHECK(o.sleep_us == 1000);
    CHECK(o.interval_s == 30);
    CHECK(o.zero_s == 120);
    CHECK(o.warmup_s == 5);
    CHECK(o.command_line == "usched_schbench -t 20 -r 0 -c 1000000 -s 1000 -i 30 -z 120");
  }
  SECTION("seeds/000, Vincent Guittot") {
    const sb::cli_options o = parse("-t 4 -r 10 -c 1000000 -s 1000");
    CHECK(o.worker_threads == 4);
    CHECK(o.runtime_s == 10);
    CHECK(o.worker_think_us == 1000000);
    CHECK(o.sleep_us == 1000);
  }
  SECTION("seeds/003, Tejun Heo") {
    const sb::cli_options o = parse("-m 2 -t 16 -s 10000 -c 15000 -r 30");
    CHECK(o.message_threads == 2);
    CHECK(o.worker_threads == 16);
    CHECK(o.sleep_us == 10000);
    CHECK(o.worker_think_us == 15000);
    CHECK(o.runtime_s == 30);
  }
  SECTION("-m 2 -t 4 -s 10000 -c 1000000 -r 10") {
    const sb::cli_options o = parse("-m 2 -t 4 -s 10000 -c 1000000 -r 10");
    CHECK(o.message_threads == 2);
    CHECK(o.worker_threads == 4);
    CHECK(o.sleep_us == 10000);
    CHECK(o.worker_think_us == 1000000);
    CHECK(o.runtime_s == 10);
  }
}

TEST_CASE("schbench: clone flags, attached values and repeats", "[schbench]") {
  const sb::cli_options o =
      parse("-t20 -C 0 -c 0 -w 0 -i 0 -z 7 --policy=steal --json=/tmp/x.json -t 3");
  CHECK(o.worker_threads == 3);  // the last -t wins, as with getopt
  CHECK(o.message_think_us == 0);
  CHECK(o.worker_think_us == 0);
  CHECK(o.warmup_s == 0);
  CHECK(o.interval_s == 0);
  CHECK(o.zero_s == 7);
  CHECK(o.policy == "steal");
  CHECK(o.json_file == "/tmp/x.json");
  const sb::cli_options t = parse("--threads --json out.json");
  CHECK(t.threads);
  CHECK(t.json_file == "out.json");
  CHECK(parse("-m 1 -h -x").help);
  CHECK(parse("--help").help);
  CHECK(sb::usage_text().find("--policy NAME") != std::string::npos);
}

TEST_CASE("schbench: every bad input is one line naming the flag", "[schbench]") {
  const std::string policies = "cfs, cfs-v5.9, cfs-v5.9-weight1, cfs-v5.9-idle, cfs-v5.9-failshift, "
                               "cfs-blocked-load, cfs-runnable-load, cfs-no-idlest-util, cfs-numa-mel, cfs-numa-v4.19-rc1, none, steal, steal-lifo, eevdf";
  REQUIRE(usched::policy_names().front() == "cfs");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-x"},
       "unknown flag '-x'; accepted: -m N -t N -r N -s N -c N -C N -i N -z N -w N --policy NAME "
       "--threads --json FILE -h"},
      {{"--frobnicate"},
       "unknown flag '--frobnicate'; accepted: -m N -t N -r N -s N -c N -C N -i N -z N -w N "
       "--policy NAME --threads --json FILE -h"},
      {{"20"}, "unexpected argument '20'; every setting is a flag (see --help)"},
      {{"-t"}, "-t: missing value; expected workers per message thread, 1..16384"},
      {{"-t", "abc"}, "-t: 'abc' is not a whole number; expected workers per message thread, 1..16384"},
      {{"-t", "0"}, "-t: 0 is out of range; expected workers per message thread, 1..16384"},
      {{"-t", "-3"}, "-t: -3 is out of range; expected workers per message thread, 1..16384"},
      {{"-t", "16385"}, "-t: 16385 is out of range; expected workers per message thread, 1..16384"},
      {{"-t", "4x"}, "-t: '4x' is not a whole number; expected workers per message thread, 1..16384"},
      {{"-t", ""}, "-t: '' is not a whole number; expected workers per message thread, 1..16384"},
      {{"-m", "0"}, "-m: 0 is out of range; expected message threads, 1..1024"},
      {{"-m", "+2"}, "-m: '+2' is not a whole number; expected message threads, 1..1024"},
      {{"-r", "-1"},
       "-r: -1 is out of range; expected seconds to run, 0..31622400 (0 = until SIGINT/SIGTERM)"},
      {{"-r", "1.5"},
       "-r: '1.5' is not a whole number; expected seconds to run, 0..31622400 (0 = until "
       "SIGINT/SIGTERM)"},
      {{"-s", "0"},
       "-s: 0 is out of range; expected message-thread sleep in microseconds, 4..3600000000 (a "
       "random jitter below s/4 is added)"},
      {{"-s", "3"},
       "-s: 3 is out of range; expected message-thread sleep in microseconds, 4..3600000000 (a "
       "random jitter below s/4 is added)"},
      {{"-s", "3600000001"},
       "-s: 3600000001 is out of range; expected message-thread sleep in microseconds, "
       "4..3600000000 (a random jitter below s/4 is added)"},
      {{"-s", "99999999999999999999999"},
       "-s: 99999999999999999999999 is out of range; expected message-thread sleep in "
       "microseconds, 4..3600000000 (a random jitter below s/4 is added)"},
      {{"-c", "-1"}, "-c: -1 is out of range; expected worker think time in microseconds, 0..3600000000"},
      {{"-C", "x"},
       "-C: 'x' is not a whole number; expected message-thread think time in microseconds, "
       "0..3600000000"},
      {{"-i"}, "-i: missing value; expected seconds between reports, 0..31622400 (0 = final report only)"},
      {{"-z", "-2"},
       "-z: -2 is out of range; expected seconds between zeroing the statistics, 0..31622400 (0 = "
       "never)"},
      {{"-w", "w"},
       "-w: 'w' is not a whole number; expected warm-up seconds after which the statistics are "
       "zeroed once, 0..31622400 (0 = none)"},
      {{"--policy"}, "--policy: missing value; expected a policy name: one of " + policies},
      {{"--policy="}, "--policy: missing value; expected a policy name: one of " + policies},
      {{"--json"}, "--json: missing value; expected a file name"},
      {{"--json="}, "--json: missing value; expected a file name"},
      {{"--threads=1"}, "--threads: takes no value"},
      {{"--threads", "--policy", "cfs"},
       "--policy: not used with --threads (the kernel schedules the threads); give one or the other"},
      // The flag the user gave, not the runtime's USCHED_POLICY wording.
      {{"--policy", "bogus"}, "--policy 'bogus' is not a registered policy; choose one of: " + policies},
      {{"--policy=CFS"}, "--policy 'CFS' is not a registered policy; choose one of: " + policies},
  };
  for (const auto& [args, message] : cases) {
    INFO(sb::shell_join(args));
    CHECK(usage_message(args) == message);
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("schbench: -t defaults to the workers divided by -m, at least 1", "[schbench]") {
  sb::cli_options o;
  CHECK(sb::resolve_worker_threads(o, 40) == 20);  // seeds/000: -t <cpus/2>
  CHECK(sb::resolve_worker_threads(o, 2) == 1);
  CHECK(sb::resolve_worker_threads(o, 1) == 1);
  o.message_threads = 3;
  CHECK(sb::resolve_worker_threads(o, 8) == 2);
  o.worker_threads = 5;
  CHECK(sb::resolve_worker_threads(o, 8) == 5);
}

TEST_CASE("schbench: command lines are joined so a shell splits them back", "[schbench]") {
  CHECK(sb::shell_join(std::vector<std::string>{"a", "-t", "20"}) == "a -t 20");
  CHECK(sb::shell_join(std::vector<std::string>{"--json", "a b", "it's", ""}) ==
        "--json 'a b' 'it'\\''s' ''");
}

// ---- runs -------------------------------------------------------------------------------

namespace {

// A short run: one message thread, two workers, quick rounds, a report each
// second, no warm-up. Correctness only.
sb::cli_options short_run(const std::string& extra) {
  return parse("-r 2 -w 0 -i 1 -m 1 -t 2 -c 2000 -C 100 -s 1000 " + extra);
}

std::string temp_path(const char* name) {
  return "/tmp/usched_test_schbench_" + std::to_string(getpid()) + "_" + name;
}

void check_run(const sb::cli_options& o, const std::string& policy, const std::string& mode) {
  const std::string json = temp_path("run.json");
  sb::cli_options with_json = o;
  with_json.json_file = json;
  std::ostringstream out;
  const sb::run_summary s = sb::run_schbench(with_json, out);
  std::remove(json.c_str());
  INFO(out.str());
  CHECK(s.samples > 0);
  CHECK(s.policy == policy);
  CHECK(s.mode == mode);
  CHECK(s.runtime_s == 2);
  CHECK(s.worker_threads == 2);
  CHECK(s.message_threads == 1);
  CHECK(s.workers >= 1);
  CHECK_FALSE(s.topology.empty());
  CHECK(out.str().rfind("Latency percentiles (usec) runtime 1 (s)", 0) == 0);  // the -i 1 report
  const std::string block = last_block(out.str());
  CHECK(block.rfind("Latency percentiles (usec) runtime 2 (s) (", 0) == 0);
  check_block(block, s.samples);
}

}  // namespace

TEST_CASE("schbench: a 2-second run on usched fibers", "[schbench][realtime]") {
  check_run(short_run("--policy cfs"), "cfs", "usched");
}

TEST_CASE("schbench: a 2-second run on plain threads", "[schbench][realtime]") {
  check_run(short_run("--threads"), "threads", "threads");
}

TEST_CASE("schbench: the JSON file holds the run's numbers", "[schbench][realtime]") {
  const std::string json = temp_path("numbers.json");
  sb::cli_options o = parse("-r 1 -w 0 -i 0 -m 1 -t 1 -c 1000 -C 0 -s 500 --threads --json " + json);
  std::ostringstream out;
  const sb::run_summary s = sb::run_schbench(o, out);
  std::ifstream in(json);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(json.c_str());
  CHECK(sb::parse_run_json(text.str()) == s);
  CHECK(s.command_line == o.command_line);
  CHECK(out.str() == last_block(out.str()));  // -i 0: the final block only
}

TEST_CASE("schbench: -r 0 runs until SIGINT, then reports", "[schbench][realtime]") {
  const sb::cli_options o = parse("-r 0 -w 0 -i 0 -m 1 -t 1 -c 1000 -C 0 -s 500 --threads");
  const pthread_t self = pthread_self();
  // Directed at this thread, which run_schbench has blocked SIGINT in: the
  // signal waits for it rather than killing the test binary.
  std::thread interrupter([self] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    pthread_kill(self, SIGINT);
  });
  std::ostringstream out;
  const auto start = std::chrono::steady_clock::now();
  sb::run_summary s;
  try {
    s = sb::run_schbench(o, out);
  } catch (...) {
    interrupter.join();
    throw;
  }
  interrupter.join();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(s.runtime_s == 1);
  CHECK(s.samples > 0);
  check_block(last_block(out.str()), s.samples);
}

TEST_CASE("schbench: an unknown policy is the registry's one-line error", "[schbench]") {
  // parse_cli() refuses it; options built by hand meet the runtime's check.
  sb::cli_options o = short_run("");
  o.policy = "bogus";
  std::ostringstream out;
  try {
    sb::run_schbench(o, out);
    FAIL("no config_error");
  } catch (const usched::config_error& e) {
    CHECK(std::string(e.what()).find("'bogus' is not a registered policy; choose one of: cfs") !=
          std::string::npos);
  }
  CHECK(out.str().empty());
}

TEST_CASE("schbench: an unwritable JSON path fails before the run", "[schbench][realtime]") {
  sb::cli_options o = short_run("--threads --json /nonexistent-dir/x.json");
  std::ostringstream out;
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_MATCHES(sb::run_schbench(o, out), sb::usage_error,
                       Catch::Message("--json '/nonexistent-dir/x.json': folder '/nonexistent-dir' "
                                      "does not exist; expected a file name in an existing, "
                                      "writable folder"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  CHECK(out.str().empty());
}

// ---- output files -----------------------------------------------------------------------

TEST_CASE("schbench: an output file is checked without leaving one behind", "[schbench]") {
  const std::string accepted = "; expected a file name in an existing, writable folder";
  const std::string dir = temp_path("outdir");
  const std::string plain = temp_path("plain");
  std::filesystem::create_directory(dir);
  std::ofstream(plain) << "keep me";
  const auto message = [](const std::string& path) {
    try {
      sb::check_output_file("--plot", path);
    } catch (const sb::usage_error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(message("/nonexistent/dir/p.png") ==
        "--plot '/nonexistent/dir/p.png': folder '/nonexistent/dir' does not exist" + accepted);
  CHECK(message(dir) == "--plot '" + dir + "': is a folder" + accepted);
  CHECK(message(dir + "/") == "--plot '" + dir + "/': is a folder" + accepted);
  CHECK(message(plain + "/p.png") ==
        "--plot '" + plain + "/p.png': '" + plain + "' is not a folder" + accepted);

  // A file it can write: no error, and none created.
  CHECK(message(dir + "/p.png") == "(no error)");
  CHECK_FALSE(std::filesystem::exists(dir + "/p.png"));
  // One that exists is left as it was.
  CHECK(message(plain) == "(no error)");
  std::ifstream in(plain);
  std::string kept;
  std::getline(in, kept);
  CHECK(kept == "keep me");
  std::filesystem::remove_all(dir);
  std::filesystem::remove(plain);
}

// ---- the compare driver's command line ----------------------------------------------------

namespace {

std::string compare_message(const std::vector<std::string>& args) {
  try {
    sb::parse_compare(args);
  } catch (const sb::usage_error& e) {
    return e.what();
  }
  return "(no error)";
}

// The flags a --help text names: words starting with - or -- at the start
// of a word (after a space, '[' or '('), so "wake-up" is none.
std::vector<std::string> flags_named(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool starts = text[i] == '-' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '[' ||
                                           text[i - 1] == '(' || text[i - 1] == '\n');
    if (!starts) continue;
    std::size_t end = i + 1;
    if (end < text.size() && text[end] == '-') ++end;
    if (end >= text.size() || !std::isalpha(static_cast<unsigned char>(text[end]))) continue;
    while (end < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '-')) {
      ++end;
    }
    out.push_back(text.substr(i, end - i));
    i = end;
  }
  return out;
}

}  // namespace

TEST_CASE("compare: flags, the workload passed through, defaults", "[schbench]") {
  const sb::compare_options d = sb::parse_compare(words(""));
  CHECK(d.policies == usched::policy_names());
  CHECK(d.plot == "schbench-policies.png");
  CHECK_FALSE(d.plot_given);
  CHECK(d.extra.empty());
  CHECK_FALSE(d.help);

  const sb::compare_options o =
      sb::parse_compare(words("--policies none,steal -t 4 -r5 --plot=/tmp/x.png -c 100 -w 0"));
  CHECK(o.policies == std::vector<std::string>{"none", "steal"});
  CHECK(o.plot == "/tmp/x.png");
  CHECK(o.plot_given);
  // Kept as given, in order: each run gets them after the defaults.
  CHECK(o.extra == words("-t 4 -r5 -c 100 -w 0"));
  CHECK(sb::parse_compare(words("--policies=cfs --help --bogus")).help);

  const sb::cli_options def = sb::compare_defaults();
  CHECK(def.message_threads == 2);
  CHECK(def.worker_threads == 0);
  CHECK(def.worker_think_us == 10'000);
  CHECK(def.message_think_us == 10'000);
  CHECK(def.sleep_us == 1000);
  CHECK(def.warmup_s == 2);
  CHECK(def.runtime_s == 16);
}

TEST_CASE("compare: every bad input is one line naming the flag", "[schbench]") {
  const std::string policies = sb::policy_list();
  const std::string accepted =
      "accepted: --policies a,b,c --plot FILE -m N -t N -r N -s N -c N -C N -i N -z N -w N -h";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--bogus"}, "unknown flag '--bogus'; " + accepted},
      {{"-x"}, "unknown flag '-x'; " + accepted},
      {{"plot.png"}, "unexpected argument 'plot.png'; every setting is a flag (see --help)"},
      {{"--policy", "cfs"},
       "--policy: compare sets it per run; choose the policies with --policies a,b,c from: " +
           policies},
      {{"--policy=cfs"},
       "--policy: compare sets it per run; choose the policies with --policies a,b,c from: " +
           policies},
      {{"--threads"}, "--threads: compare always adds the run on plain threads; " + accepted},
      {{"--json", "x.json"}, "--json: compare sets it per run to read the report back; " + accepted},
      {{"--policies"}, "--policies: missing value; expected a,b,c from: " + policies},
      {{"--policies="}, "--policies: missing value; expected a,b,c from: " + policies},
      {{"--policies", "cfs,bogus"},
       "--policies: 'bogus' is not a registered policy; choose from: " + policies},
      {{"--policies", "cfs,"}, "--policies: '' is not a registered policy; choose from: " + policies},
      {{"--plot"}, "--plot: missing value; expected a PNG file name"},
      {{"--plot="}, "--plot: missing value; expected a PNG file name"},
      // The workload flags get parse_cli's messages, before any run.
      {{"-t"}, "-t: missing value; expected workers per message thread, 1..16384"},
      {{"-t", "x"}, "-t: 'x' is not a whole number; expected workers per message thread, 1..16384"},
      {{"-m", "0"}, "-m: 0 is out of range; expected message threads, 1..1024"},
      {{"-s", "-5"},
       "-s: -5 is out of range; expected message-thread sleep in microseconds, 4..3600000000 (a "
       "random jitter below s/4 is added)"},
      {{"-t", "--plot"},
       "-t: '--plot' is not a whole number; expected workers per message thread, 1..16384"},
      {{"-r", "0"},
       "-r: 0 is out of range here; expected seconds to run, 1..31622400 (compare needs every run "
       "to end by itself)"},
      {{"-r0"},
       "-r: 0 is out of range here; expected seconds to run, 1..31622400 (compare needs every run "
       "to end by itself)"},
  };
  for (const auto& [args, message] : cases) {
    INFO(sb::shell_join(args));
    CHECK(compare_message(args) == message);
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("compare: --help names exactly the flags compare accepts", "[schbench]") {
  const std::string usage = sb::compare_usage_text();
  const std::vector<std::string> named = flags_named(usage);
  INFO(usage);
  for (const char* f : {"--policies", "--plot", "-m", "-t", "-r", "-s", "-c", "-C", "-i", "-z",
                        "-w", "-h", "--help"}) {
    CHECK(std::find(named.begin(), named.end(), f) != named.end());
  }
  // Every flag it names parses (the per-run ones would not).
  for (const std::string& f : named) {
    INFO(f);
    const std::string v = f == "--policies" ? "cfs" : f == "--plot" ? "p.png" : "1000";
    const std::vector<std::string> args =
        f == "-h" || f == "--help" ? std::vector<std::string>{f} : std::vector<std::string>{f, v};
    CHECK(compare_message(args) == "(no error)");
  }
  for (const char* f : {"--policy", "--threads", "--json"}) {
    CHECK(std::find(named.begin(), named.end(), f) == named.end());
  }
  // Its defaults, not schbench's (-C is schbench's: compare leaves it).
  const auto line_of = [&usage](const std::string& start) {
    const std::size_t at = usage.find("\n" + start);
    return at == std::string::npos ? std::string() : usage.substr(at + 1, usage.find('\n', at + 1) - at - 1);
  };
  CHECK_THAT(line_of("  -m N "), Catch::EndsWith("(default: 2)"));
  CHECK_THAT(line_of("  -t N "), Catch::EndsWith("(default: usched workers / 2, at least 1)"));
  CHECK_THAT(line_of("  -r S "), Catch::EndsWith("(default: 16)"));
  CHECK_THAT(line_of("  -s US "), Catch::EndsWith("(default: 1000)"));
  CHECK_THAT(line_of("  -c US "), Catch::EndsWith("(default: 10000)"));
  CHECK_THAT(line_of("  -C US "), Catch::EndsWith("(default: 10000)"));
  CHECK_THAT(line_of("  -w S "), Catch::EndsWith("(default: 2)"));
}
