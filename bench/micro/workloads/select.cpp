// select, select_one: what taking an item costs through a select over
// several channels against a plain receive from one. The producers run
// beside the consumer, so both the ready path (an item is buffered in some
// case) and the blocking path (every case registers a waiter sharing one
// token, one wins, the others are unlinked) are taken; the sum checks every
// item arrived exactly once. Neither Boost.Fiber nor std has a select.
#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "../workloads.hpp"

namespace micro::select {

void measure_usched(benchmark::State& state, const env& e, bool one_channel) {
  time_usched(state, e, [one_channel, ops = e.cfg.ops] {
    constexpr int producers = 4;
    const long per = std::max(1L, ops / producers);
    std::vector<std::unique_ptr<usched::channel<long>>> chans;
    for (int i = 0; i < producers; ++i) chans.push_back(std::make_unique<usched::channel<long>>(16));
    const std::int64_t t0 = now_ns();
    std::vector<usched::join_handle<void>> ps;
    for (int p = 0; p < producers; ++p) {
      usched::channel<long>& out = *chans[one_channel ? 0 : static_cast<std::size_t>(p)];
      ps.push_back(usched::spawn([&out, per] {
        for (long i = 1; i <= per; ++i) out.send(i);
      }));
    }
    long sum = 0;
    const long items = per * producers;
    if (one_channel) {
      for (long n = 0; n < items; ++n) sum += chans[0]->recv().value();
    } else {
      const auto take = [&sum](std::optional<long>&& v) { sum += v.value(); };
      for (long n = 0; n < items; ++n) {
        usched::select(usched::on_recv(*chans[0], take), usched::on_recv(*chans[1], take),
                       usched::on_recv(*chans[2], take), usched::on_recv(*chans[3], take));
      }
    }
    for (auto& h : ps) h.join();
    const std::int64_t t1 = now_ns();
    if (sum != producers * (per * (per + 1) / 2)) throw std::runtime_error("select: items lost or duplicated");
    return static_cast<double>(t1 - t0) / static_cast<double>(items);
  });
}

}  // namespace micro::select
