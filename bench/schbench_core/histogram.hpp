// histogram.hpp: schbench's latency histogram (fio's "plat" buckets), its
// percentiles, the report block it prints and the JSON the clone writes.
//
// The numbers must read like the ones in seeds/000 and seeds/003, so every
// rule here is schbench's (late 2020, masoncl/schbench schbench.c):
//
// - a sample is a wake-up latency in whole microseconds; 0 us samples are
//   dropped (schbench records only `delta > 0`), except through
//   record_any(), for histograms of every wake-up (the simulator's workload
//   files), where a 0 lands in bucket 0 and a percentile it reaches is 0;
// - values below 512 us get a bucket each; above, each power of two is cut
//   into 256 equal buckets, so the error stays under 0.4%; a bucket reports
//   its midpoint;
// - the p-th percentile is the first bucket at which the running count
//   reaches p% of the samples, and the count printed beside it is the number
//   of samples between the previous percentile's bucket and this one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace usched::schbench {

// Bits of a value kept exactly inside one power of two: 2^8 = 256 buckets
// per group (fio's FIO_IO_U_PLAT_BITS).
inline constexpr unsigned plat_bits = 8;
inline constexpr unsigned plat_val = 1u << plat_bits;
// Groups of buckets. 19 groups reach 2^(19+7) us (about 67 s); larger values
// land in the last bucket.
inline constexpr unsigned plat_group_nr = 19;
inline constexpr unsigned plat_nr = plat_group_nr * plat_val;
// Below this every microsecond has its own bucket: the first two groups
// (values whose highest set bit is at most plat_bits) are kept exactly.
inline constexpr std::uint64_t plat_exact_limit = std::uint64_t{plat_val} << 1;

// plat_val_to_idx() is the bucket of a value in microseconds.
unsigned plat_val_to_idx(std::uint64_t us) noexcept;
// plat_idx_to_val() is the value a bucket reports: the value itself in the
// exact region, the midpoint of the bucket's range above it. Requires
// idx < plat_nr.
std::uint64_t plat_idx_to_val(unsigned idx) noexcept;

// The percentiles schbench prints, in order, and which of them is starred.
inline constexpr std::array<double, 7> report_percentiles = {50.0, 75.0, 90.0, 95.0,
                                                             99.0, 99.5, 99.9};
inline constexpr std::size_t starred_percentile = 4;  // the 99.0th

// A denser list for plotting a percentile curve (compare's PNG).
inline constexpr std::array<double, 20> curve_percentiles = {
    1.0,  10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 75.0, 80.0,
    85.0, 90.0, 95.0, 97.0, 98.0, 99.0, 99.5, 99.7, 99.9, 99.99};

// One line of the report: the percentile, the bucket value that reaches it,
// and the samples counted since the previous line's bucket.
struct percentile_row {
  double percentile = 0.0;
  std::uint64_t value = 0;
  std::uint64_t samples = 0;
  friend bool operator==(const percentile_row&, const percentile_row&) = default;
};

// histogram is one set of latency statistics: the bucket counts plus the
// exact minimum and maximum. Not thread-safe; the benchmark keeps one
// recorder per worker and merges them into a histogram to report.
class histogram {
 public:
  histogram();

  // from_buckets() rebuilds a histogram from bucket counts (plat_nr of them)
  // and the exact extremes of the samples they hold; the sample count is the
  // sum of the buckets. Throws std::invalid_argument for a wrong size.
  static histogram from_buckets(std::span<const std::uint64_t> plat, std::uint64_t min_us,
                                std::uint64_t max_us);

  // record() adds one sample; a 0 us sample is dropped (returns false), as
  // schbench drops a wake-up it could not time.
  bool record(std::uint64_t us) noexcept;

  // record_any() adds one sample, 0 us included: schbench's rule is the
  // benchmark's, and a histogram that describes every wake-up of a run
  // (a wake-up served within the microsecond is one) counts them all.
  void record_any(std::uint64_t us) noexcept;

  // merge() folds another histogram into this one (per-worker stats into the
  // total). An empty histogram changes nothing, not even the minimum.
  void merge(const histogram& other) noexcept;

  // clear() forgets every sample (schbench's -w and -z).
  void clear() noexcept;

  std::uint64_t samples() const noexcept { return nr_samples_; }
  // Exact extremes of the recorded samples; 0 when empty.
  std::uint64_t min() const noexcept { return min_; }
  std::uint64_t max() const noexcept { return max_; }
  std::uint64_t bucket(unsigned idx) const { return plat_.at(idx); }

  // percentiles() is schbench's calc_percentiles over `list` (ascending, each
  // in (0, 100]): for each percentile the first bucket whose running count
  // reaches p% of the samples, and the samples since the previous row. With
  // no samples every row is 0 (0 samples), as schbench prints it.
  std::vector<percentile_row> percentiles(std::span<const double> list) const;
  std::vector<percentile_row> percentiles() const { return percentiles(report_percentiles); }

 private:
  std::vector<std::uint64_t> plat_;
  std::uint64_t nr_samples_ = 0;
  std::uint64_t min_ = 0;
  std::uint64_t max_ = 0;
};

// format_block() is the report schbench prints, in its late-2020 format:
//
//   Latency percentiles (usec) runtime 30 (s) (1000 total samples)
//   \t50.0th: 180 (502 samples)
//   ...
//   \t*99.0th: 338 (41 samples)
//   ...
//   \tmin=25, max=1185
std::string format_block(const histogram& h, std::uint64_t runtime_s);

// What one run reports: the numbers of the block plus what was run where.
// This is what --json writes and what the compare driver reads back.
struct run_summary {
  std::string policy;                 // a registered policy, or "threads"
  std::string mode;                   // "usched" or "threads"
  unsigned workers = 0;               // usched workers, or CPUs for threads
  unsigned message_threads = 0;       // -m
  unsigned worker_threads = 0;        // -t, per message thread
  std::string topology;               // one-line topology summary
  std::string command_line;           // the clone's argv, joined
  std::uint64_t runtime_s = 0;        // as printed in the block
  std::uint64_t samples = 0;
  std::uint64_t min_us = 0;
  std::uint64_t max_us = 0;
  std::vector<percentile_row> percentiles;  // report_percentiles
  std::vector<percentile_row> curve;        // curve_percentiles
  friend bool operator==(const run_summary&, const run_summary&) = default;
};

// summarize() fills the numbers of a run_summary from a histogram; the
// descriptive fields are left for the caller.
run_summary summarize(const histogram& h, std::uint64_t runtime_s);

// percentile_value() is the value of one of report_percentiles in `s` (50.0,
// 99.0, ...), 0 when the summary has no such row.
std::uint64_t percentile_value(const run_summary& s, double p) noexcept;

// to_json() writes a summary as one JSON object (one line, keys in a fixed
// order); parse_run_json() reads that format back. The parser accepts any
// JSON object whose members it knows, in any order, with any whitespace;
// unknown members are skipped. Throws std::runtime_error naming what is
// malformed or missing.
std::string to_json(const run_summary& s);
run_summary parse_run_json(std::string_view text);

}  // namespace usched::schbench
