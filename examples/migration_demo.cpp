// migration_demo: watch a policy move fibers between workers.
//
// One fiber spawns a burst of CPU-bound fibers on its own worker, the worst
// case for a runtime without balancing. Each fiber works in short slices,
// calling this_fiber::preempt_point() as cooperative code does, and records
// every worker it ran on. The demo runs the same burst under each policy
// named on the command line (default: every registered policy) and prints,
// per policy, the wall time, how the fibers' running time spread over the
// workers, how many fibers ran on more than one worker, and what the
// balancer pulled.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <usched/usched.hpp>

namespace {

using clock_type = std::chrono::steady_clock;

struct fiber_report {
  std::vector<unsigned> slices_on;  // slices run on each worker
};

struct policy_result {
  std::string policy;
  double seconds = 0;
  std::vector<unsigned> slices_per_worker;
  unsigned migrated = 0;
  std::uint64_t pulled = 0;
};

constexpr int fibers = 32;
constexpr int slices_per_fiber = 20;
constexpr auto slice_work = std::chrono::microseconds(500);

policy_result run_policy(const std::string& policy, usched::options base) {
  base.policy = policy;
  usched::runtime rt(base);
  const unsigned n = rt.workers();
  policy_result r;
  r.policy = policy;
  const auto t0 = clock_type::now();
  const auto reports = rt.run([n] {
    std::vector<usched::join_handle<fiber_report>> hs;
    for (int i = 0; i < fibers; ++i) {
      hs.push_back(usched::spawn([n] {
        fiber_report rep;
        rep.slices_on.assign(n, 0);
        for (int s = 0; s < slices_per_fiber; ++s) {
          const auto until = clock_type::now() + slice_work;
          while (clock_type::now() < until) usched::this_fiber::preempt_point();
          ++rep.slices_on[static_cast<std::size_t>(usched::this_fiber::worker_index())];
          usched::this_fiber::yield();
        }
        return rep;
      }));
    }
    std::vector<fiber_report> out;
    for (auto& h : hs) out.push_back(h.join());
    return out;
  });
  r.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  r.slices_per_worker.assign(n, 0);
  for (const auto& rep : reports) {
    unsigned workers_used = 0;
    for (unsigned w = 0; w < n; ++w) {
      r.slices_per_worker[w] += rep.slices_on[w];
      workers_used += rep.slices_on[w] > 0;
    }
    r.migrated += workers_used > 1;
  }
  for (const auto& s : rt.stats().workers) r.pulled += s.fibers_pulled;
  return r;
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<std::string> policies;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::printf("usage: migration_demo [POLICY...]   (default: every registered policy)\n");
      return 0;
    }
    policies.emplace_back(argv[i]);
  }
  if (policies.empty()) policies = usched::policy_names();
  const usched::options base = usched::options::from_env();

  std::vector<policy_result> results;
  for (const auto& p : policies) results.push_back(run_policy(p, base));

  const unsigned n = static_cast<unsigned>(results.front().slices_per_worker.size());
  std::printf("%d CPU-bound fibers x %d slices of %lld us, all spawned on one worker; %u workers\n\n",
              fibers, slices_per_fiber, static_cast<long long>(slice_work.count()), n);
  std::printf("%-18s %9s %7s  %-30s %9s %7s\n", "policy", "wall (s)", "ratio", "slices run per worker",
              "migrated", "pulled");
  const double base_time = results.front().seconds;
  for (const auto& r : results) {
    std::string spread;
    for (unsigned w = 0; w < n; ++w) spread += (w ? " " : "") + std::to_string(r.slices_per_worker[w]);
    std::printf("%-18s %9.3f %6.2fx  %-30s %6u/%d %7llu\n", r.policy.c_str(), r.seconds,
                r.seconds / base_time, spread.c_str(), r.migrated, fibers,
                static_cast<unsigned long long>(r.pulled));
  }
  std::printf("\nratio: wall time relative to the first policy listed; migrated: fibers that ran\n"
              "on more than one worker; pulled: fibers moved by newly-idle balancing.\n");
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "migration_demo: %s\n", e.what());
  return 2;
}
