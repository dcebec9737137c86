// trace.cpp: the recorder's buffers (trace.hpp).
#include "trace.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace usched::detail {

std::string_view to_string(trace_event e) noexcept {
  switch (e) {
    case trace_event::none: return "none";
    case trace_event::switch_to: return "switch";
    case trace_event::wakeup: return "wakeup";
    case trace_event::migrate: return "migrate";
    case trace_event::balance: return "balance";
    case trace_event::idle: return "idle";
    case trace_event::label: return "label";
    case trace_event::count: break;
  }
  return "?";
}

std::string_view to_string(stop_reason r) noexcept {
  switch (r) {
    case stop_reason::yield: return "yield";
    case stop_reason::block: return "block";
    case stop_reason::preempt_tick: return "preempt_tick";
    case stop_reason::preempt_wakeup: return "preempt_wakeup";
    case stop_reason::preempt_balance: return "preempt_balance";
    case stop_reason::exit: return "exit";
    case stop_reason::count: break;
  }
  return "?";
}

std::string_view to_string(migrate_cause c) noexcept {
  switch (c) {
    case migrate_cause::wake: return "wake";
    case migrate_cause::newidle: return "newidle";
    case migrate_cause::periodic: return "periodic";
    case migrate_cause::active: return "active";
    case migrate_cause::steal: return "steal";
    case migrate_cause::count: break;
  }
  return "?";
}

std::string_view to_string(balance_outcome o) noexcept {
  switch (o) {
    case balance_outcome::balanced: return "balanced";
    case balance_outcome::moved: return "moved";
    case balance_outcome::none_movable: return "none_movable";
    case balance_outcome::active_asked: return "active_asked";
    case balance_outcome::count: break;
  }
  return "?";
}

std::string_view to_string(idle_kind k) noexcept {
  switch (k) {
    case idle_kind::spin: return "spin";
    case idle_kind::park: return "park";
    case idle_kind::unpark: return "unpark";
    case idle_kind::kick: return "kick";
    case idle_kind::count: break;
  }
  return "?";
}

namespace {

// Which tracer's buffer the calling thread writes without a lock, if any.
struct thread_binding {
  const tracer* owner = nullptr;
  int cpu = -1;
};
thread_local thread_binding binding;

std::size_t round_up_pow2(std::size_t n) noexcept {
  std::size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

// One writer's records. `next` counts every record ever appended (the
// index of the next one); the writer stores it with release after the
// record's words, so a reader that loads it with acquire sees every record
// below it complete, unless a flight ring has since overwritten it.
struct tracer::buffer {
  alignas(64) std::atomic<std::uint64_t> next{0};
  // Flight: records begun (next + 1 while one is being written), so that
  // a reader can tell a slot being written over from one that is not:
  // without it, it has to take the oldest slot of a full ring for lost
  // whether or not a writer is at work.
  std::atomic<std::uint64_t> started{0};
  std::uint64_t dropped = 0;  // whole run, past the bound (the writer's alone)
  std::atomic<std::uint64_t> dropped_pub{0};
  // Flight: one ring. Whole run: a table of chunks, filled in order.
  std::unique_ptr<slot[]> ring;
  std::unique_ptr<std::atomic<slot*>[]> chunks;
};

tracer::tracer(config cfg) : cfg_(cfg) {
  if (cfg_.nr_cpus == 0) cfg_.nr_cpus = 1;
  buffers_ = std::make_unique<buffer[]>(cfg_.nr_cpus + 1);
  if (cfg_.kind == mode::flight) {
    cfg_.flight_records = round_up_pow2(std::max<std::size_t>(cfg_.flight_records, 16));
    ring_mask_ = cfg_.flight_records - 1;
    for (std::size_t i = 0; i <= cfg_.nr_cpus; ++i) {
      buffers_[i].ring = std::make_unique<slot[]>(cfg_.flight_records);
    }
  } else {
    const std::size_t chunk_bytes = chunk_records * sizeof(slot);
    chunk_limit_ = std::max<std::size_t>(1, cfg_.limit_bytes / chunk_bytes);
    // Any one buffer may take every chunk the bound allows (one busy worker).
    max_chunks_ = chunk_limit_;
    for (std::size_t i = 0; i <= cfg_.nr_cpus; ++i) {
      buffers_[i].chunks = std::make_unique<std::atomic<slot*>[]>(max_chunks_);
      for (std::size_t c = 0; c < max_chunks_; ++c) buffers_[i].chunks[c].store(nullptr, std::memory_order_relaxed);
    }
  }
}

tracer::~tracer() {
  unbind_thread();
  if (!buffers_) return;
  for (std::size_t i = 0; i <= cfg_.nr_cpus; ++i) {
    if (!buffers_[i].chunks) continue;
    for (std::size_t c = 0; c < max_chunks_; ++c) delete[] buffers_[i].chunks[c].load(std::memory_order_relaxed);
  }
}

void tracer::bind_thread(int cpu) noexcept {
  if (cpu < 0 || static_cast<std::size_t>(cpu) >= cfg_.nr_cpus) return;
  binding = {this, cpu};
}

void tracer::unbind_thread() noexcept {
  if (binding.owner == this) binding = {};
}

tracer::buffer& tracer::buffer_of_caller() noexcept {
  if (binding.owner == this) return buffers_[static_cast<std::size_t>(binding.cpu)];
  return buffers_[cfg_.nr_cpus];
}

void tracer::store(slot& s, const trace_record& r, std::memory_order order) noexcept {
  std::uint64_t w[5];
  std::memcpy(w, &r, sizeof w);
  for (int i = 0; i < 5; ++i) s.w[i].store(w[i], order);
}

trace_record tracer::load(const slot& s, std::memory_order order) noexcept {
  std::uint64_t w[5];
  for (int i = 0; i < 5; ++i) w[i] = s.w[i].load(order);
  trace_record r;
  std::memcpy(&r, w, sizeof w);
  return r;
}

void tracer::append(buffer& b, const trace_record& r) noexcept {
  const std::uint64_t n = b.next.load(std::memory_order_relaxed);
  if (b.ring) {
    // `started` first, then the words with release, read with acquire
    // (read()): a reader that sees any word of this record also sees
    // `started` counting it, so it knows the slot is being written over.
    // Relaxed words would let it see a newer word with an older count and
    // keep a torn record. On x86 both are plain moves.
    b.started.store(n + 1, std::memory_order_relaxed);
    store(b.ring[n & ring_mask_], r, std::memory_order_release);
  } else {
    const std::size_t c = static_cast<std::size_t>(n / chunk_records);
    slot* chunk = c < max_chunks_ ? b.chunks[c].load(std::memory_order_relaxed) : nullptr;
    if (chunk == nullptr) [[unlikely]] {
      // A new chunk, if the bound allows one. Never blocks: past the
      // bound, or without memory, the event is counted and dropped.
      if (c >= max_chunks_ || chunks_in_use_.fetch_add(1, std::memory_order_relaxed) >= chunk_limit_) {
        if (c < max_chunks_) chunks_in_use_.fetch_sub(1, std::memory_order_relaxed);
        b.dropped_pub.store(++b.dropped, std::memory_order_relaxed);
        return;
      }
      chunk = new (std::nothrow) slot[chunk_records];
      if (chunk == nullptr) {
        chunks_in_use_.fetch_sub(1, std::memory_order_relaxed);
        b.dropped_pub.store(++b.dropped, std::memory_order_relaxed);
        return;
      }
      b.chunks[c].store(chunk, std::memory_order_release);
    }
    store(chunk[n % chunk_records], r, std::memory_order_relaxed);
  }
  b.next.store(n + 1, std::memory_order_release);
}

void tracer::emit(const trace_record& r) noexcept {
  if (binding.owner == this) {
    append(buffers_[static_cast<std::size_t>(binding.cpu)], r);
    return;
  }
  buffer& b = buffers_[cfg_.nr_cpus];
  outside_lock_.lock();
  append(b, r);
  outside_lock_.unlock();
}

void tracer::emit_label(std::int64_t t, std::uint64_t fiber, std::string_view label) noexcept {
  if (label.size() > trace_label_max) label = label.substr(0, trace_label_max);
  const std::size_t chunks = label.empty() ? 1 : (label.size() + 7) / 8;
  for (std::size_t i = 0; i < chunks; ++i) {
    trace_record r;
    r.time = t;
    r.type = trace_event::label;
    r.fiber = fiber;
    const std::string_view part = label.substr(std::min(label.size(), i * 8), 8);
    std::memcpy(&r.other, part.data(), part.size());
    r.detail = static_cast<std::uint8_t>(i);
    r.flags = i + 1 == chunks ? label_flag_last : std::uint8_t{0};
    emit(r);
  }
}

void tracer::read(const buffer& b, std::vector<trace_record>& out, std::uint64_t& dropped) const {
  const std::uint64_t end = b.next.load(std::memory_order_acquire);
  dropped += b.dropped_pub.load(std::memory_order_relaxed);
  if (b.ring) {
    const std::uint64_t size = cfg_.flight_records;
    const std::uint64_t begin = end > size ? end - size : 0;
    const std::size_t first = out.size();
    for (std::uint64_t i = begin; i < end; ++i) out.push_back(load(b.ring[i & ring_mask_], std::memory_order_acquire));
    // The writer may have gone on meanwhile: whatever it wrote over since
    // `end` was read is no longer the record that was there.
    // Record j writes over the slot of j - size: every record begun since
    // (below `started`) took one of ours, the oldest first.
    const std::uint64_t after = b.started.load(std::memory_order_acquire);
    const std::uint64_t lost = after > begin + size ? std::min(after - size - begin, end - begin) : 0;
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(first),
              out.begin() + static_cast<std::ptrdiff_t>(first + lost));
    dropped += lost;
    return;
  }
  for (std::uint64_t i = 0; i < end; ++i) {
    const slot* chunk = b.chunks[static_cast<std::size_t>(i / chunk_records)].load(std::memory_order_acquire);
    out.push_back(load(chunk[i % chunk_records], std::memory_order_relaxed));
  }
}

trace_data tracer::collect() const {
  trace_data d;
  d.nr_cpus = cfg_.nr_cpus;
  std::vector<trace_record> all;
  for (std::size_t i = 0; i <= cfg_.nr_cpus; ++i) {
    if (i == cfg_.nr_cpus) {
      // The outside buffer's writers hold its lock; so does its reader.
      outside_lock_.lock();
      read(buffers_[i], all, d.dropped);
      outside_lock_.unlock();
    } else {
      read(buffers_[i], all, d.dropped);
    }
  }
  // Each buffer is in time order already except where two threads' clocks
  // disagree by the counter's skew; a stable sort of the concatenation
  // keeps a buffer's own order among equal times and puts worker 0 first.
  std::stable_sort(all.begin(), all.end(),
                   [](const trace_record& a, const trace_record& b) { return a.time < b.time; });
  d.records = std::move(all);
  return d;
}

bool tracer::write_raw(int fd, const char* policy, bool virtual_time) const noexcept {
  const auto put = [fd](const void* p, std::size_t n) noexcept {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::write(fd, c, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      c += w;
      n -= static_cast<std::size_t>(w);
    }
    return true;
  };
  raw_trace_header h;
  h.nr_cpus = cfg_.nr_cpus;
  h.dropped = dropped();
  h.virtual_time = virtual_time ? 1 : 0;
  for (std::size_t i = 0; policy && policy[i] && i + 1 < sizeof h.policy; ++i) h.policy[i] = policy[i];
  if (!put(&h, sizeof h)) return false;
  // A stack buffer of records at a time: no allocation.
  constexpr std::size_t batch = 64;
  trace_record out[batch];
  for (std::size_t i = 0; i <= cfg_.nr_cpus; ++i) {
    const buffer& b = buffers_[i];
    const std::uint64_t end = b.next.load(std::memory_order_acquire);
    std::uint64_t begin = 0;
    if (b.ring && end > cfg_.flight_records) begin = end - cfg_.flight_records;
    std::size_t n = 0;
    for (std::uint64_t k = begin; k < end; ++k) {
      if (b.ring) {
        out[n++] = load(b.ring[k & ring_mask_], std::memory_order_acquire);
      } else {
        const slot* chunk = b.chunks[static_cast<std::size_t>(k / chunk_records)].load(std::memory_order_acquire);
        out[n++] = load(chunk[k % chunk_records], std::memory_order_relaxed);
      }
      if (n == batch) {
        if (!put(out, sizeof out)) return false;
        n = 0;
      }
    }
    if (n > 0 && !put(out, n * sizeof(trace_record))) return false;
  }
  return true;
}

std::uint64_t tracer::dropped() const noexcept {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i <= cfg_.nr_cpus; ++i) n += buffers_[i].dropped_pub.load(std::memory_order_relaxed);
  return n;
}

}  // namespace usched::detail
