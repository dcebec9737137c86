// usched/channel.hpp: a bounded multi-producer multi-consumer channel.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>

namespace usched {

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
// values are received in the order their sends completed. T must be nothrow
// move-constructible: values are moved under the channel's internal lock.
template <class T>
class channel {
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "usched::channel<T> needs a nothrow move-constructible T");

 public:
  explicit channel(std::size_t capacity = 0)
      : cap_(capacity), buf_(capacity ? std::make_unique<slot[]>(capacity) : nullptr) {}
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;
  // Destroys buffered values. No fiber may be blocked on the channel.
  ~channel() {
    while (size_ > 0) pop_buffer();
  }

  // send() delivers `v` (to a receiver or the buffer), blocking as needed.
  // Returns false if the channel is or becomes closed first.
  bool send(T v) {
    detail::waitable& me = detail::current_waitable();
    detail::waiter w;
    {
      std::lock_guard<detail::spinlock> g(lock_);
      if (closed_) return false;
      if (offer_locked(v)) return true;
      w.who = &me;
      w.token = detail::prepare_wait(me, detail::wait_kind::channel_send, this);
      w.item = &v;
      senders_.push_back(w);
    }
    detail::block(me, w.token, -1);
    return w.ok;
  }

  // try_send() delivers without blocking; on false (full, no receiver, or
  // closed) `v` is left untouched.
  template <class U>
  bool try_send(U&& v) {
    std::lock_guard<detail::spinlock> g(lock_);
    if (closed_) return false;
    if constexpr (std::is_same_v<std::remove_cvref_t<U>, T> && !std::is_const_v<std::remove_reference_t<U>>) {
      return offer_locked(v);
    } else {
      T tmp(std::forward<U>(v));
      return offer_locked(tmp);
    }
  }

  // recv() takes the next value, blocking while there is none; empty once the
  // channel is closed and drained.
  std::optional<T> recv() {
    detail::waitable& me = detail::current_waitable();
    std::optional<T> out;
    detail::waiter w;
    {
      std::lock_guard<detail::spinlock> g(lock_);
      if (take_locked(out)) return out;
      if (closed_) return std::nullopt;
      w.who = &me;
      w.token = detail::prepare_wait(me, detail::wait_kind::channel_recv, this);
      w.item = &out;
      receivers_.push_back(w);
    }
    detail::block(me, w.token, -1);
    return out;
  }

  // try_recv() takes a value if one is available now.
  std::optional<T> try_recv() {
    std::optional<T> out;
    std::lock_guard<detail::spinlock> g(lock_);
    take_locked(out);
    return out;
  }

  // close() ends the channel; idempotent.
  void close() noexcept {
    std::lock_guard<detail::spinlock> g(lock_);
    closed_ = true;
    while (detail::waiter* r = receivers_.pop_front()) detail::wake(*r->who, r->token);
    while (detail::waiter* s = senders_.pop_front()) detail::wake(*s->who, s->token);
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

 private:
  struct slot {
    alignas(T) unsigned char bytes[sizeof(T)];
  };
  T* at(std::size_t i) noexcept { return std::launder(reinterpret_cast<T*>(buf_[i].bytes)); }
  void push_buffer(T&& v) noexcept {
    ::new (static_cast<void*>(buf_[(head_ + size_) % cap_].bytes)) T(std::move(v));
    ++size_;
  }
  T pop_buffer() noexcept {
    T* p = at(head_);
    T v(std::move(*p));
    p->~T();
    head_ = (head_ + 1) % cap_;
    --size_;
    return v;
  }

  // offer_locked(): hand `v` to a waiting receiver, or buffer it. Wakes are
  // issued under the lock: a waiter's node is on its stack and stays valid
  // only until it is claimed.
  bool offer_locked(T& v) noexcept {
    if (detail::waiter* r = receivers_.pop_front()) {
      static_cast<std::optional<T>*>(r->item)->emplace(std::move(v));
      r->ok = true;
      detail::wake(*r->who, r->token);
      return true;
    }
    if (size_ < cap_) {
      push_buffer(std::move(v));
      return true;
    }
    return false;
  }

  // take_locked(): the next value from the buffer (refilled from the first
  // waiting sender) or straight from a waiting sender.
  bool take_locked(std::optional<T>& out) noexcept {
    if (size_ > 0) {
      out.emplace(pop_buffer());
      if (detail::waiter* s = senders_.pop_front()) {
        push_buffer(std::move(*static_cast<T*>(s->item)));
        s->ok = true;
        detail::wake(*s->who, s->token);
      }
      return true;
    }
    if (detail::waiter* s = senders_.pop_front()) {
      out.emplace(std::move(*static_cast<T*>(s->item)));
      s->ok = true;
      detail::wake(*s->who, s->token);
      return true;
    }
    return false;
  }

  const std::size_t cap_;
  std::unique_ptr<slot[]> buf_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  bool closed_ = false;
  mutable detail::spinlock lock_;
  detail::wait_list receivers_;
  detail::wait_list senders_;
};

}  // namespace usched
