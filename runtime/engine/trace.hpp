// trace.hpp: the scheduler's event record and the recorder both backends
// write it into.
//
// One record type for every event the engine decides (a switch, a wake-up
// or spawn and where it was placed, a migration and what moved it, a
// balance pass and what it decided) and the few the backends own (a worker
// spinning, parking, being woken or kicked; a fiber's label). The engine
// emits its own, so the real runtime and the simulator produce the same
// events from the same code; the simulator's times are virtual, which
// makes its traces deterministic.
//
// Recording follows Go's execution tracer: fixed-size binary records, one
// buffer per worker written only by that worker's thread, with no lock, no
// allocation per event and no stack. A thread outside the runtime (a timer
// thread, a foreign waker) writes to one more buffer behind a spinlock.
// Two modes:
//   - whole run: every event, in chunks of `chunk_records` allocated as a
//     worker's fill (one allocation per chunk, not per event), up to a
//     bound on the whole trace's memory; past it events are counted as
//     dropped, never blocked on.
//   - flight recorder: the last `flight_records` events of each worker, in
//     a ring of fixed size, overwritten oldest first, for a dump on demand
//     or with a fatal report.
// Records are stored as atomic words (a flight ring's with release, read
// with acquire), so that a dump taken while the workers run
// (runtime::dump_trace, a stall report) reads them without a data race; a
// record being overwritten while it is copied is detected by the ring's
// index and left out.
//
// Turned off (the default), nothing is allocated and every emission site
// in the engine is one load of a null pointer and a branch predicted not
// taken.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <usched/detail/spinlock.hpp>

namespace usched::detail {

// What a record is. The fields each type uses are listed at trace_record.
enum class trace_event : std::uint8_t {
  none,
  switch_to,  // a worker switches from one fiber (or idle) to another (or idle)
  wakeup,     // a fiber is made runnable, new (a spawn) or woken, and placed
  migrate,    // a fiber moves to another worker's runqueue
  balance,    // one balance pass's decision at one domain level
  idle,       // a worker's idle loop: spin, park, unpark, kick
  label,      // eight bytes of a fiber's label (spawn_options::label)
  count,
};

// Why the previous fiber of a switch stopped running.
enum class stop_reason : std::uint8_t {
  yield,            // this_fiber::yield()
  block,            // it waits; trace_record::detail says in what (wait_kind)
  preempt_tick,     // its slice ran out (CFS's tick, or the FIFO policies' fixed slice)
  preempt_wakeup,   // a wake-up asked it to yield (check_preempt_wakeup)
  preempt_balance,  // an active balance asked it to yield, to push it elsewhere
  exit,             // it returned
  count,
};

// What moved a fiber (trace_event::migrate).
enum class migrate_cause : std::uint8_t {
  wake,      // the wake-up placement chose another worker than its last
  newidle,   // a newly-idle balance pulled it (the CFS family)
  periodic,  // a periodic balance pulled it (the tick's, at a level)
  active,    // an active balance pushed it off the worker it was running on
  steal,     // an idle work stealer took it (steal, steal-lifo)
  count,
};

// What a balance pass came to (trace_event::balance, low nibble of flags).
enum class balance_outcome : std::uint8_t {
  balanced,       // no busiest group or queue: nothing to do
  moved,          // value fibers moved
  none_movable,   // a busiest queue, but nothing on it the policy lets go
  active_asked,   // nothing movable, and the busiest worker was asked to push its running fiber
  count,
};

// A worker's idle loop (trace_event::idle).
enum class idle_kind : std::uint8_t {
  spin,    // it found nothing and spins
  park,    // it parks (futex or its I/O ring's wait)
  unpark,  // it is back from parking
  kick,    // it was kicked (woken, or told while spinning) to balance; `from` kicked it
  count,
};

// The record, 40 bytes. Per type:
//
// | type      | cpu          | fiber          | other                | from            | aux              | reason           | detail             | flags                        | value       | depth |
// |-----------|--------------|----------------|----------------------|-----------------|------------------|------------------|--------------------|------------------------------|-------------|-------|
// | switch_to | the worker   | prev (0: idle) | next (0: idle)       | -               | -                | stop_reason      | block: wait_kind   | 1: prev stays runnable       | -           | yes   |
// | wakeup    | placed on    | the woken      | waker fiber (0: none)| its last worker | waker's worker   | wake_reason      | -                  | 1: new, 2: still running, 4: preempts | -    | yes   |
// | migrate   | to           | the fiber      | -                    | from            | mover's worker   | migrate_cause    | domain level       | -                            | -           | yes (to) |
// | balance   | the balancer | group types    | imbalance            | busiest worker  | busiest group    | cpu_idle_type    | domain level       | outcome, migration_type << 4 | moved       | -     |
// | idle      | the worker   | -              | -                    | kicker's worker | -                | idle_kind        | -                  | -                            | -           | -     |
// | label     | -            | the fiber      | 8 bytes of text      | -               | -                | -                | chunk index        | 1: last chunk                | -           | -     |
//
// depth is how many fibers wait in the worker's queue after the event (the
// running one not counted), saturated at 65535. A balance's group types
// are the busiest group's group_type and the local group's << 8. A
// migration's level is 255 where no domain level applies (a wake-up's, an
// active push's). Workers and levels are small: 16 bits each.
struct trace_record {
  std::int64_t time = 0;     // ns: the engine's clock, or the simulator's virtual time
  std::uint64_t fiber = 0;
  std::uint64_t other = 0;
  std::int16_t cpu = -1;
  std::int16_t from = -1;
  std::int16_t aux = -1;
  std::uint16_t depth = 0;
  trace_event type = trace_event::none;
  std::uint8_t reason = 0;
  std::uint8_t detail = 0;
  std::uint8_t flags = 0;
  std::uint32_t value = 0;

  friend bool operator==(const trace_record&, const trace_record&) = default;
};
static_assert(sizeof(trace_record) == 40, "a record is five 64-bit words");

inline constexpr std::uint8_t wake_flag_new = 1;
inline constexpr std::uint8_t wake_flag_running = 2;
inline constexpr std::uint8_t wake_flag_preempts = 4;
inline constexpr std::uint8_t switch_flag_runnable = 1;
inline constexpr std::uint8_t label_flag_last = 1;
// The longest label a trace keeps (eight records); longer ones are cut.
inline constexpr std::size_t trace_label_max = 64;

// The raw format (tracer::write_raw): this header, then records of
// `record_size` bytes (trace_record's layout, host byte order) to the end
// of the file, each buffer's in the order written, the buffers one after
// the other: a reader sorts them by time.
struct raw_trace_header {
  char magic[8] = {'U', 'S', 'C', 'H', 'E', 'D', 'T', 'R'};
  std::uint32_t version = 1;
  std::uint32_t record_size = sizeof(trace_record);
  std::uint64_t nr_cpus = 0;
  std::uint64_t dropped = 0;
  std::uint32_t virtual_time = 0;
  char policy[44] = {};
};
static_assert(sizeof(raw_trace_header) == 80, "the raw header's layout is the file's");

inline std::uint16_t trace_depth(unsigned n) noexcept { return n > 0xffff ? 0xffff : static_cast<std::uint16_t>(n); }

// The names exporters print for the enums above.
std::string_view to_string(trace_event e) noexcept;
std::string_view to_string(stop_reason r) noexcept;
std::string_view to_string(migrate_cause c) noexcept;
std::string_view to_string(balance_outcome o) noexcept;
std::string_view to_string(idle_kind k) noexcept;

// A whole trace, merged: what exporters read and what a dump writes.
struct trace_data {
  std::string policy;
  std::size_t nr_cpus = 0;
  bool virtual_time = false;  // the simulator's
  // Events lost: past the whole run's memory bound, or overwritten in a
  // flight recorder's ring while it was being read.
  std::uint64_t dropped = 0;
  // In time order; among equal times, in the order of the worker buffer
  // (worker 0 first, outside threads last), and within one buffer in the
  // order written.
  std::vector<trace_record> records;
};

// Records a trace. Emission is thread-safe: a worker thread that has bound
// itself (bind_thread) writes its own buffer without a lock; any other
// thread takes the outside buffer's spinlock.
class tracer {
 public:
  enum class mode : std::uint8_t { whole_run, flight };
  struct config {
    std::size_t nr_cpus = 1;
    mode kind = mode::whole_run;
    // Flight recorder: records kept per worker (rounded up to a power of two).
    std::size_t flight_records = 1u << 14;
    // Whole run: the bound on the whole trace's memory.
    std::size_t limit_bytes = std::size_t{1} << 30;
  };
  static constexpr std::size_t chunk_records = 4096;

  explicit tracer(config cfg);
  ~tracer();
  tracer(const tracer&) = delete;
  tracer& operator=(const tracer&) = delete;

  const config& cfg() const noexcept { return cfg_; }

  // bind_thread(cpu): the calling thread is worker cpu's and writes its
  // buffer from now on (for this tracer only; another runtime's tracer
  // sees it as an outside thread). unbind_thread(): it no longer does.
  void bind_thread(int cpu) noexcept;
  void unbind_thread() noexcept;

  // emit() records r in the calling thread's buffer.
  void emit(const trace_record& r) noexcept;
  // emit_label() records a fiber's label (at most trace_label_max bytes)
  // as label records at time t.
  void emit_label(std::int64_t t, std::uint64_t fiber, std::string_view label) noexcept;

  // collect() merges every buffer's records, as they stand, in time
  // order. Safe while other threads emit: a record overwritten while it
  // is read is left out and counted in trace_data::dropped.
  trace_data collect() const;

  std::uint64_t dropped() const noexcept;

  // write_raw() writes every buffer's records, as they stand, to the file
  // descriptor `fd` in the raw format below, unsorted, without allocating
  // or locking: what a report made inside a signal handler (a stack
  // overflow) can do. Async-signal-safe; returns false when a write failed.
  // The outside buffer is read without its lock, as a dying process reads
  // it. The exporters read the format back (read_trace_file).
  bool write_raw(int fd, const char* policy, bool virtual_time) const noexcept;

 private:
  struct slot {
    std::atomic<std::uint64_t> w[5];
  };
  struct buffer;
  buffer& buffer_of_caller() noexcept;
  static void store(slot& s, const trace_record& r, std::memory_order order) noexcept;
  static trace_record load(const slot& s, std::memory_order order) noexcept;
  void append(buffer& b, const trace_record& r) noexcept;
  void read(const buffer& b, std::vector<trace_record>& out, std::uint64_t& dropped) const;

  config cfg_;
  std::size_t ring_mask_ = 0;
  std::size_t max_chunks_ = 0;  // per buffer, whole run
  std::unique_ptr<buffer[]> buffers_;  // nr_cpus + 1: the last is the outside threads'
  mutable spinlock outside_lock_;
  std::atomic<std::size_t> chunks_in_use_{0};
  std::size_t chunk_limit_ = 0;  // chunks the memory bound allows, over every buffer
};

}  // namespace usched::detail
