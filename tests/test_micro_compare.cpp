// test_micro_compare.cpp: usched_micro_compare's command line: the defaults
// on hosts of different sizes, and every bad value as the one line the
// program prints, before any usched_micro run.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <usched/usched.hpp>

#include "test_support.hpp"

#include "micro_compare_cli.hpp"

namespace mc = bench::micro_compare;

namespace {

using usched::test::words;

std::string message(const std::vector<std::string>& args, unsigned cpus) {
  try {
    mc::parse_options(args, cpus);
  } catch (const mc::usage_error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string policy_list() {
  std::string s;
  for (const std::string& n : usched::policy_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

TEST_CASE("micro_compare: defaults follow the host's CPUs", "[micro_compare]") {
  const mc::options two = mc::parse_options(words(""), 2);
  CHECK(two.rounds == 3);
  CHECK(two.workers == 2);
  CHECK(two.policy == "cfs");
  CHECK_FALSE(two.quick);
  CHECK_FALSE(two.scaling);
  CHECK(two.markdown.empty());
  CHECK(two.micro.empty());
  CHECK(two.ops() == mc::full_ops);
  CHECK(mc::parse_options(words(""), 1).workers == 1);
  CHECK(mc::parse_options(words(""), 16).workers == 2);
  // --scaling climbs to every CPU, but never past usched_micro's limit.
  CHECK(mc::parse_options(words("--scaling"), 16).workers == 16);
  CHECK(mc::parse_options(words("--scaling"), 4096).workers == mc::max_workers);

  const mc::options o = mc::parse_options(
      words("-r 5 -w=4 --policy steal-lifo --against cfs --quick --scaling --markdown=m.md --micro /x/usched_micro"),
      4);
  CHECK(o.rounds == 5);
  CHECK(o.against == "cfs");
  CHECK(o.workers == 4);
  CHECK(o.policy == "steal-lifo");
  CHECK(o.quick);
  // --quick shrinks every workload, the task API's benchmarks' --ops too.
  CHECK(o.samples() == mc::quick_samples);
  CHECK(o.fibers() == mc::quick_fibers);
  CHECK(o.ops() == mc::quick_ops);
  CHECK(mc::quick_ops < mc::full_ops);
  CHECK(o.scaling);
  CHECK(o.markdown == "m.md");
  CHECK(o.micro == "/x/usched_micro");
  CHECK(mc::parse_options(words("-r 2 --help -r 0"), 2).help);  // parsing stops at --help
}

TEST_CASE("micro_compare: every bad input is one line naming the flag", "[micro_compare]") {
  const std::string flags =
      "' is not a flag; expected -r N, -w N, --policy NAME, --against NAME, --quick, --scaling, "
      "--markdown FILE, --micro PATH or -h";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      // More workers than CPUs: rejected here, not after a run of failed rows.
      {{"-w", "3"}, "-w 3 is more workers than the 2 CPUs this process may run on; expected an integer 1..2"},
      {{"-w=3"}, "-w 3 is more workers than the 2 CPUs this process may run on; expected an integer 1..2"},
      {{"-w", "99999999999"},
       "-w 99999999999 is more workers than the 2 CPUs this process may run on; expected an integer "
       "1..2"},
      {{"-w", "0"}, "-w '0' is not valid; expected an integer 1..2"},
      {{"-w", "-1"}, "-w '-1' is not valid; expected an integer 1..2"},
      {{"-w", "two"}, "-w 'two' is not valid; expected an integer 1..2"},
      {{"-w", "2x"}, "-w '2x' is not valid; expected an integer 1..2"},
      {{"-w", ""}, "-w '' is not valid; expected an integer 1..2"},
      {{"-w"}, "-w needs a value; expected an integer 1..2"},
      {{"-r", "0"}, "-r '0' is not valid; expected an integer 1..100"},
      {{"-r", "101"}, "-r '101' is not valid; expected an integer 1..100"},
      {{"-r", "1.5"}, "-r '1.5' is not valid; expected an integer 1..100"},
      {{"-r"}, "-r needs a value; expected an integer 1..100"},
      // The flag the user gave, not the runtime's USCHED_POLICY wording.
      {{"--policy", "bogus"},
       "--policy 'bogus' is not a registered policy; choose one of: " + policy_list()},
      {{"--policy="}, "--policy '' is not a registered policy; choose one of: " + policy_list()},
      {{"--policy"}, "--policy needs a value; expected a usched policy: one of " + policy_list()},
      {{"--against", "bogus"},
       "--against 'bogus' is not a registered policy; choose one of: " + policy_list()},
      {{"--markdown="}, "--markdown '' is not valid; expected a file name"},
      {{"--markdown"}, "--markdown needs a value; expected a file name"},
      {{"--micro="}, "--micro '' is not valid; expected the path of usched_micro"},
      {{"--micro"}, "--micro needs a value; expected the path of usched_micro"},
      {{"--quick=1"}, "--quick takes no value; '--quick=1' is not valid"},
      {{"--scaling=yes"}, "--scaling takes no value; '--scaling=yes' is not valid"},
      {{"--bogus"}, "'--bogus" + flags},
      {{"-r3"}, "'-r3" + flags},
      {{"extra"}, "'extra" + flags},
  };
  for (const auto& [args, want] : cases) {
    INFO((args.empty() ? std::string() : args[0]));
    CHECK(message(args, 2) == want);
    CHECK(want.find('\n') == std::string::npos);
  }
  CHECK(message({"-w", "2"}, 1) ==
        "-w 2 is more workers than the 1 CPU this process may run on; expected an integer 1..1");
  CHECK(message({"-w", "1025"}, 4096) ==
        "-w 1025 is more workers than usched_micro takes; expected an integer 1..1024");
}

TEST_CASE("micro_compare: --help names every flag and this host's -w range", "[micro_compare]") {
  const std::string usage = mc::usage_text(4);
  for (const char* f : {"-r N", "-w N", "--policy NAME", "--quick", "--scaling", "--markdown FILE",
                        "--micro PATH", "-h, --help"}) {
    INFO(f);
    CHECK(usage.find(std::string("  ") + f) != std::string::npos);
  }
  CHECK(usage.find("1..4, at most one per CPU") != std::string::npos);
  CHECK(usage.find(policy_list()) != std::string::npos);
  // Both sizes of the task API's benchmarks, as usched_micro takes them.
  CHECK(usage.find("--ops=" + std::to_string(mc::quick_ops)) != std::string::npos);
  CHECK(usage.find("--ops=" + std::to_string(mc::full_ops)) != std::string::npos);
}
