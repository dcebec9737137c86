// usched_micro: micro benchmarks of the runtime's hot paths (Google
// Benchmark). Each benchmark runs under several policies in one process, so
// their costs compare side by side.
//
//   yield/<variant>  two fibers on one worker yielding to each other: ns per
//                    switch. none and steal keep a FIFO queue without load
//                    tracking; cfs-nopelt is cfs's vruntime discipline with
//                    load tracking off (options::load_tracking), cfs has
//                    both: cfs minus cfs-nopelt is what PELT costs a switch.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include <usched/usched.hpp>

namespace {

// Yields per timed batch: long enough to amortize the start of the batch,
// short enough for Google Benchmark to repeat it.
constexpr int yields_per_batch = 200'000;

void bm_yield(benchmark::State& state, const std::string& policy, bool load_tracking) {
  usched::options o;
  o.policy = policy;
  o.workers = 1;
  o.load_tracking = load_tracking;
  usched::runtime rt(o);
  for (auto _ : state) {
    const double seconds = rt.run([] {
      auto partner = usched::spawn([] {
        for (int i = 0; i < yields_per_batch / 2; ++i) usched::this_fiber::yield();
      });
      usched::this_fiber::yield();  // let the partner start
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < yields_per_batch / 2; ++i) usched::this_fiber::yield();
      const auto t1 = std::chrono::steady_clock::now();
      partner.join();
      return std::chrono::duration<double>(t1 - t0).count();
    });
    state.SetIterationTime(seconds);
  }
  state.SetItemsProcessed(state.iterations() * yields_per_batch);
  state.counters["ns_per_switch"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * yields_per_batch,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace

int main(int argc, char** argv) {
  struct variant {
    const char* label;
    const char* policy;
    bool load_tracking;
  };
  for (const variant& v : {variant{"none", "none", false}, variant{"steal", "steal", false},
                           variant{"cfs-nopelt", "cfs", false}, variant{"cfs", "cfs", true}}) {
    benchmark::RegisterBenchmark((std::string("yield/") + v.label).c_str(), bm_yield,
                                 std::string(v.policy), v.load_tracking)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(7)
        ->ReportAggregatesOnly(true);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
