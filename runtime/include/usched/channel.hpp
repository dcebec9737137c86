// usched/channel.hpp: a bounded multi-producer multi-consumer channel.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>

#include <usched/detail/deadline.hpp>
#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>

namespace usched {

// What a channel operation that may fail did. `ok` is the only success;
// the others say why nothing was sent or received, so a caller can tell a
// channel that is only full or empty now from one that is closed for good.
enum class channel_status : std::uint8_t {
  ok,       // sent, or received a value
  empty,    // try_recv_status(): nothing buffered and no sender waiting
  full,     // try_send_status(): no room and no receiver waiting
  closed,   // closed (and, for a receive, drained)
  timeout,  // a timed operation's time came first
  stopped,  // a stop request came first
};

// recv_result<T> is a receive's value, if it got one, and its status. It
// reads like std::optional<T> (`if (r)`, `*r`, `r->`, `value()`), plus
// status(); has_value() is status() == channel_status::ok.
template <class T>
class channel;

template <class T>
class recv_result {
 public:
  recv_result() = default;

  channel_status status() const noexcept { return status_; }
  bool has_value() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return value_.has_value(); }
  T& operator*() & noexcept { return *value_; }
  const T& operator*() const& noexcept { return *value_; }
  T&& operator*() && noexcept { return std::move(*value_); }
  T* operator->() noexcept { return &*value_; }
  const T* operator->() const noexcept { return &*value_; }
  // value() throws std::bad_optional_access without one.
  T& value() & { return value_.value(); }
  T&& value() && { return std::move(value_.value()); }
  // The value as an optional (moved out), for code written against recv().
  std::optional<T>& optional() & noexcept { return value_; }
  std::optional<T>&& optional() && noexcept { return std::move(value_); }

 private:
  // The channel receives straight into value_: no move of T after the
  // transfer, which a throwing move could lose the value in.
  friend class channel<T>;
  std::optional<T> value_;
  channel_status status_ = channel_status::empty;
};

namespace detail {

struct channel_access;  // usched/select.hpp: what select needs of a channel

// How a waker ended a channel waiter's wait. Written only by the waker that
// won the claim, before it resumes the waiter; `pending` after the wait
// ends means a timer or a stop request claimed it.
enum class channel_outcome : std::uint8_t {
  pending,
  done,    // the item was handed over (sent, or received into the slot)
  closed,  // the channel was closed
  retry,   // a receiver claimed, then the sender's move threw: look again
  threw,   // a sender's item threw while a receiver moved it: `error`
};

// report_channel_destroyed_with_waiters() ends the process for a channel
// destroyed while `receivers` + `senders` callers (fibers or threads) are
// blocked in it: one line on stderr naming how many, and the rule, then
// abort(). Each waiter's node is on its stack and linked into the channel,
// and would be resumed into freed memory.
[[noreturn]] void report_channel_destroyed_with_waiters(std::size_t receivers, std::size_t senders) noexcept;

// A waiter blocked in a channel, or one case of a select. `item` is the
// sender's T or the receiver's std::optional<T> slot; every case of one
// select carries the same waitable and token, so exactly one channel's
// waker wins the claim, and the channel it won on says which case fired.
struct channel_waiter : waiter {
  channel_outcome outcome = channel_outcome::pending;
  // What moving this sender's item threw, rethrown by the sender: the
  // value is its to keep, so the exception is too (see channel<T>).
  std::exception_ptr error;
};

}  // namespace detail

// channel<T> carries values between fibers (and threads), Go style.
//
// - capacity > 0: send() blocks while the buffer is full; recv() blocks while
//   it is empty.
// - capacity == 0: a rendezvous; send() blocks until a receiver takes the
//   value, and returns as soon as the receiver has it, not once the receiver
//   has run (a send that finds a receiver waiting does not block at all).
// - close(): later sends fail (return false); receivers drain what is
//   buffered, then recv() returns an empty optional. Senders blocked at close
//   return false, their values not delivered.
//
// A value passes from a blocked sender straight to a blocked receiver, and a
// receiver that frees a slot refills it from the first waiting sender, so
// values are received in the order their sends completed.
//
// Every operation that may fail has a form that says why (channel_status):
// try_send_status() / try_recv_status() (full / empty versus closed), the
// timed send_for / send_until / recv_for / recv_until (any clock), and
// send(v, stop_token) / recv(stop_token). A send that did not deliver
// leaves the caller's value alone: an rvalue is moved from only once it is
// delivered, so `while (ch.send_for(std::move(v), 1ms) == timeout) ...`
// retries the same value; an lvalue is copied, as send(v) always did.
//
// Values are moved under the channel's internal spinlock, so T's move must
// not block (on this channel least of all). It may throw: a move that
// throws leaves the channel as it was, and the exception goes to the party
// whose value it was:
// - moving a sender's value (into the buffer, to a waiting receiver, or into
//   a buffer slot a receiver freed) throws from that sender's send (or its
//   select), the value still its own, in whatever state T's failed move
//   left it; a receiver that was about to get it waits on for the next;
// - moving a buffered value out to a receiver throws from that recv, the
//   value left at the front of the buffer.
// Nothing is duplicated or dropped. A value is lost only where std's
// containers lose one: when the caller's own move of what recv() returned
// throws (the receive itself constructs its optional in place).
template <class T>
class channel {
  static_assert(std::is_move_constructible_v<T>, "usched::channel<T> needs a move-constructible T");
  static_assert(std::is_nothrow_destructible_v<T>, "usched::channel<T> needs a nothrow-destructible T");

 public:
  class iterator;

  explicit channel(std::size_t capacity = 0)
      : cap_(capacity), buf_(capacity ? std::make_unique<slot[]>(capacity) : nullptr) {}
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;
  // Destroys buffered values. No fiber or thread may be blocked in the
  // channel: close() it and let its waiters return first. One that is
  // ends the process with one line on stderr saying how many wait (a
  // count under the lock, cheap beside what a destructor frees).
  ~channel() {
    std::size_t receivers = 0;
    std::size_t senders = 0;
    {
      std::lock_guard<detail::spinlock> g(lock_);
      receivers = receivers_.size();
      senders = senders_.size();
    }
    if (receivers + senders > 0) [[unlikely]] detail::report_channel_destroyed_with_waiters(receivers, senders);
    while (size_ > 0) drop_front();
  }

  // send() delivers `v` (to a receiver or the buffer), blocking as needed.
  // Returns false if the channel is or becomes closed first; an rvalue `v`
  // is then not moved from.
  bool send(const T& v) {
    T copy(v);
    return send(std::move(copy));
  }
  bool send(T&& v) { return send_wait(v, detail::no_deadline, {}) == channel_status::ok; }
  // send(v, stop) is send() that also ends when `stop` is requested: ok,
  // closed or stopped. A value it can deliver at once is delivered even if
  // stop was requested already.
  channel_status send(const T& v, const std::stop_token& stop) {
    T copy(v);
    return send_wait(copy, detail::no_deadline, stop);
  }
  channel_status send(T&& v, const std::stop_token& stop) { return send_wait(v, detail::no_deadline, stop); }
  // send_for() / send_until(): send() that gives up after `d` or at `tp`
  // (any clock): ok, closed or timeout. An rvalue `v` not delivered is not
  // moved from.
  template <class Rep, class Period>
  channel_status send_for(const T& v, const std::chrono::duration<Rep, Period>& d) {
    T copy(v);
    return send_wait(copy, detail::deadline_after(d), {});
  }
  template <class Rep, class Period>
  channel_status send_for(T&& v, const std::chrono::duration<Rep, Period>& d) {
    return send_wait(v, detail::deadline_after(d), {});
  }
  template <class Clock, class Duration>
  channel_status send_until(const T& v, const std::chrono::time_point<Clock, Duration>& tp) {
    T copy(v);
    return send_wait(copy, detail::deadline_at(tp), {});
  }
  template <class Clock, class Duration>
  channel_status send_until(T&& v, const std::chrono::time_point<Clock, Duration>& tp) {
    return send_wait(v, detail::deadline_at(tp), {});
  }

  // try_send() delivers without blocking; on false (full, no receiver, or
  // closed) `v` is left untouched.
  template <class U>
  bool try_send(U&& v) {
    return try_send_status(std::forward<U>(v)) == channel_status::ok;
  }
  // try_send_status() is try_send() saying why not: ok, full or closed.
  template <class U>
  channel_status try_send_status(U&& v) {
    std::lock_guard<detail::spinlock> g(lock_);
    if (closed_) return channel_status::closed;
    bool sent = false;
    if constexpr (std::is_same_v<std::remove_cvref_t<U>, T> && !std::is_const_v<std::remove_reference_t<U>>) {
      sent = offer_locked(v);
    } else {
      T tmp(std::forward<U>(v));
      sent = offer_locked(tmp);
    }
    return sent ? channel_status::ok : channel_status::full;
  }

  // recv() takes the next value, blocking while there is none; empty once the
  // channel is closed and drained.
  std::optional<T> recv() {
    // One optional, constructed in place by whoever hands the value over
    // and returned by name (elided): no move of T after the receive.
    std::optional<T> out;
    recv_wait(out, detail::no_deadline, {});
    return out;
  }
  // recv(stop) is recv() that also ends when `stop` is requested: ok,
  // closed (and drained) or stopped. A value there already is taken even if
  // stop was requested.
  recv_result<T> recv(const std::stop_token& stop) { return recv_result_wait(detail::no_deadline, stop); }
  // recv_for() / recv_until(): recv() that gives up after `d` or at `tp`
  // (any clock): ok, closed or timeout.
  template <class Rep, class Period>
  recv_result<T> recv_for(const std::chrono::duration<Rep, Period>& d) {
    return recv_result_wait(detail::deadline_after(d), {});
  }
  template <class Clock, class Duration>
  recv_result<T> recv_until(const std::chrono::time_point<Clock, Duration>& tp) {
    return recv_result_wait(detail::deadline_at(tp), {});
  }

  // try_recv() takes a value if one is available now.
  std::optional<T> try_recv() {
    std::optional<T> out;
    std::lock_guard<detail::spinlock> g(lock_);
    take_locked(out);
    return out;
  }
  // try_recv_status() is try_recv() saying why not: ok, empty or closed
  // (closed and drained: nothing will ever come).
  recv_result<T> try_recv_status() {
    recv_result<T> r;
    std::lock_guard<detail::spinlock> g(lock_);
    if (take_locked(r.value_)) {
      r.status_ = channel_status::ok;
    } else {
      r.status_ = closed_ ? channel_status::closed : channel_status::empty;
    }
    return r;
  }

  // close() ends the channel; idempotent. Blocked receivers (there are some
  // only while nothing is buffered) get closed; blocked senders get closed
  // with their values still theirs.
  void close() noexcept {
    std::lock_guard<detail::spinlock> g(lock_);
    closed_ = true;
    // Claimed as any transfer is: a waiter a timer, a stop request or
    // another case of its select ended is passed over.
    for (detail::wait_list* list : {&receivers_, &senders_}) {
      while (detail::waiter* p = list->pop_front()) {
        if (claim_waiter(as_chan(*p))) end_wait(as_chan(*p), detail::channel_outcome::closed);
      }
    }
  }

  bool closed() const noexcept {
    std::lock_guard<detail::spinlock> g(lock_);
    return closed_;
  }
  std::size_t capacity() const noexcept { return cap_; }
  // Values buffered now (a snapshot).
  std::size_t size() const noexcept {
    std::lock_guard<detail::spinlock> g(lock_);
    return size_;
  }

  // Range-for: `for (T v : ch)` receives until the channel is closed and
  // drained, as Go's `for v := range ch`. begin() blocks for the first
  // value; each ++ is a recv().
  iterator begin() { return iterator(*this); }
  std::default_sentinel_t end() const noexcept { return std::default_sentinel; }

 private:
  friend struct detail::channel_access;

  struct slot {
    alignas(T) unsigned char bytes[sizeof(T)];
  };
  T* at(std::size_t i) noexcept { return std::launder(reinterpret_cast<T*>(buf_[i].bytes)); }
  static detail::channel_waiter& as_chan(detail::waiter& w) noexcept {
    return static_cast<detail::channel_waiter&>(w);
  }

  // push_buffer() moves `v` into the slot after the last; if the move
  // throws, the slot stays raw and the count unchanged.
  void push_buffer(T& v) {
    ::new (static_cast<void*>(buf_[(head_ + size_) % cap_].bytes)) T(std::move(v));
    ++size_;
  }
  // pop_buffer_into() moves the front value into `out` (empty); if the move
  // throws, the value stays at the front.
  void pop_buffer_into(std::optional<T>& out) {
    out.emplace(std::move(*at(head_)));
    drop_front();
  }
  void drop_front() noexcept {
    at(head_)->~T();
    head_ = (head_ + 1) % cap_;
    --size_;
  }

  // end_wait() is the waker's half of a transfer after it has claimed `w`
  // (the lock held, w unlinked): record how the wait ended, then resume it.
  // Last: once resumed the waiter may return and its node (on its stack)
  // be gone.
  static void end_wait(detail::channel_waiter& w, detail::channel_outcome how) noexcept {
    w.outcome = how;
    detail::resume_wait(*w.who);
  }
  // claim_waiter(): claim_wait() of a queued channel waiter.
  static bool claim_waiter(detail::channel_waiter& w) noexcept { return detail::claim_wait(*w.who, w.token); }

  // give_locked(): hand `v` to the first receiver still waiting; false if
  // none is. A receiver a timer or a stop request ended is passed over. If
  // the move throws, the receiver (claimed already) is told to look again
  // and the exception goes on to the sender, whose value it is.
  bool give_locked(T& v) {
    while (detail::waiter* p = receivers_.pop_front()) {
      detail::channel_waiter& r = as_chan(*p);
      if (!claim_waiter(r)) continue;
      try {
        static_cast<std::optional<T>*>(r.item)->emplace(std::move(v));
      } catch (...) {
        end_wait(r, detail::channel_outcome::retry);
        throw;
      }
      end_wait(r, detail::channel_outcome::done);
      return true;
    }
    return false;
  }

  // offer_locked(): hand `v` to a waiting receiver, or buffer it. Wakes are
  // issued under the lock: a waiter's node is on its stack and stays valid
  // only until it is claimed (or, for a wait a timer may end, until it has
  // taken the lock to unlink itself). Throws what moving `v` throws, with
  // nothing changed.
  bool offer_locked(T& v) {
    if (give_locked(v)) return true;
    if (size_ < cap_) {
      push_buffer(v);
      return true;
    }
    return false;
  }

  // take_sender_locked(): move the first waiting sender's value into `out`
  // (the buffer slot just freed when `out` is null). A sender whose value
  // throws as it is moved gets the exception, and its value stays with it;
  // the next sender is tried. False if no sender was left.
  bool take_sender_locked(std::optional<T>* out) noexcept {
    while (detail::waiter* p = senders_.pop_front()) {
      detail::channel_waiter& s = as_chan(*p);
      if (!claim_waiter(s)) continue;
      T& v = *static_cast<T*>(s.item);
      std::exception_ptr error;
      try {
        if (out) {
          out->emplace(std::move(v));
        } else {
          push_buffer(v);
        }
      } catch (...) {
        error = std::current_exception();
      }
      if (error) {
        // Resumed only once the handler here is over, so the sender, which
        // rethrows it, holds the exception's last reference: it is
        // destroyed on the sender's side, after everything this side did.
        s.error = std::move(error);
        end_wait(s, detail::channel_outcome::threw);
        continue;
      }
      end_wait(s, detail::channel_outcome::done);
      return true;
    }
    return false;
  }

  // take_locked(): the next value from the buffer (refilled from the first
  // waiting sender) or straight from a waiting sender, into `out` (empty).
  // Throws only what moving a buffered value out throws, the value then
  // still at the front.
  bool take_locked(std::optional<T>& out) {
    if (size_ > 0) {
      pop_buffer_into(out);
      take_sender_locked(nullptr);
      return true;
    }
    return take_sender_locked(&out);
  }

  // send_wait(): the blocking send, until delivered (ok), closed, or
  // `deadline_ns` (timeout) or `stop` (stopped) ends the wait. `v` is moved
  // from only when delivered.
  channel_status send_wait(T& v, std::int64_t deadline_ns, const std::stop_token& stop) {
    std::unique_lock<detail::spinlock> lk(lock_);
    if (closed_) return channel_status::closed;
    if (offer_locked(v)) return channel_status::ok;
    if (stop.stop_requested()) return channel_status::stopped;
    // Already due: do not suspend only to be resumed by the timer.
    if (detail::has_timer(deadline_ns) && deadline_ns <= detail::steady_now_ns()) return channel_status::timeout;
    detail::channel_waiter w;
    w.item = &v;
    detail::wait_in(lk, senders_, w, detail::wait_kind::channel_send, this, deadline_ns, stop);
    switch (w.outcome) {
      case detail::channel_outcome::done: return channel_status::ok;
      case detail::channel_outcome::closed: return channel_status::closed;
      case detail::channel_outcome::threw: std::rethrow_exception(std::move(w.error));
      case detail::channel_outcome::retry:  // only receivers are told to retry
      case detail::channel_outcome::pending: break;
    }
    return stop.stop_requested() ? channel_status::stopped : channel_status::timeout;
  }

  // recv_wait(): the blocking receive into `out` (empty), until it has a
  // value (ok), the channel is closed and drained, or the deadline or stop
  // ends the wait.
  channel_status recv_wait(std::optional<T>& out, std::int64_t deadline_ns, const std::stop_token& stop) {
    std::unique_lock<detail::spinlock> lk(lock_);
    for (;;) {
      if (take_locked(out)) return channel_status::ok;
      if (closed_) return channel_status::closed;
      if (stop.stop_requested()) return channel_status::stopped;
      if (detail::has_timer(deadline_ns) && deadline_ns <= detail::steady_now_ns()) return channel_status::timeout;
      detail::channel_waiter w;
      w.item = &out;
      detail::wait_in(lk, receivers_, w, detail::wait_kind::channel_recv, this, deadline_ns, stop);
      switch (w.outcome) {
        case detail::channel_outcome::done: return channel_status::ok;
        case detail::channel_outcome::closed: return channel_status::closed;
        case detail::channel_outcome::retry:
          // A sender claimed us and its value threw on the way: our wait
          // is over but we have nothing; look again, same deadline.
          lk.lock();
          continue;
        case detail::channel_outcome::threw:  // only senders' values throw for them
        case detail::channel_outcome::pending: break;
      }
      return stop.stop_requested() ? channel_status::stopped : channel_status::timeout;
    }
  }

  recv_result<T> recv_result_wait(std::int64_t deadline_ns, const std::stop_token& stop) {
    recv_result<T> r;
    r.status_ = recv_wait(r.value_, deadline_ns, stop);
    return r;
  }

  const std::size_t cap_;
  std::unique_ptr<slot[]> buf_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  bool closed_ = false;
  mutable detail::spinlock lock_;
  detail::wait_list receivers_;  // channel_waiters
  detail::wait_list senders_;    // channel_waiters

 public:
  // The input iterator of range-for. `*it` is the value received last, as
  // an rvalue (as std::move_iterator's): the loop body owns it, so a
  // move-only T works with `for (T v : ch)` and `for (auto&& v : ch)`.
  // Move-only, like the values it hands out: a copy would hand one value
  // to two loops.
  class iterator {
   public:
    using iterator_concept = std::input_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;

    iterator() = default;
    iterator(iterator&&) = default;
    iterator& operator=(iterator&&) = default;

    T&& operator*() const noexcept { return std::move(*cur_); }
    iterator& operator++() {
      cur_.reset();
      ch_->recv_wait(cur_, detail::no_deadline, {});
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept { return !it.cur_.has_value(); }

   private:
    friend class channel;
    explicit iterator(channel& ch) : ch_(&ch) { ++*this; }

    channel* ch_ = nullptr;
    // mutable: *it is a const operation handing out the value it holds.
    mutable std::optional<T> cur_;
  };
};

}  // namespace usched
