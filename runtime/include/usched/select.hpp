// usched/select.hpp: wait on several channel operations and futures at
// once, Go's `select` (Tokio's `select!`).
//
//   std::size_t taken = usched::select(
//       usched::on_recv(jobs, [&](std::optional<job> j) { ... }),  // empty: closed
//       usched::on_send(results, std::move(r), [&](bool sent) { ... }),
//       usched::on_ready(reply, [&](std::string r) { ... }),       // reply.get()
//       usched::on_timeout(10ms, [&] { ... }));
//
// Exactly one case takes effect, and select returns its index (in argument
// order) after running its callback on the caller. A case is ready when its
// operation can complete now: a receive with a value buffered or a sender
// waiting, or on a closed channel (the callback gets an empty optional); a
// send with room or a receiver waiting, or on a closed channel (the callback
// gets false, the value not sent); a future case when the future's result
// is (or its deferred call has yet to run, which the case then runs on the
// caller). Among the cases ready at once, one is
// picked at random, so no case starves another. on_default() is taken when
// no case is ready (a select that never blocks); on_timeout() when none
// became ready in time; on_stop() when stop is requested first.
//
// How a blocked select waits. It locks every channel of its cases (each
// once, in address order, so two selects never deadlock), polls them in a
// random order, and if none is ready links one waiter per case, all
// carrying the one token it armed, then unlocks and blocks. A waker on any
// of those channels claims the token before it hands anything over
// (detail::claim_wait), so exactly one wins: it delivers for its own case
// and records that in the case's waiter; the others lose the claim and pass
// on to their next waiter, as they do for a waiter whose timer fired. After
// it wakes, the select unlinks every waiter left linked (under each
// channel's lock: a waker that lost the claim may still be looking at it)
// and runs the winning case. An item is therefore delivered to at most one
// case, and never lost: the waker that lost the claim still has it.
//
// A future case waits the same way, on the future's shared state: its lock
// is taken with the channels', in the same address order, and its waiter is
// linked among the state's waiters with the select's token. The producer's
// publish() notifies every waiter of the state: for the select's it claims
// the token, and the claim won is what makes the future's case the one
// taken; a claim lost (another case won) costs the select nothing, and the
// result stays in the state for whoever gets it. (Such a wake-up is
// counted as a channel's in runtime::stats(): a select's wake-up reason is
// read from what it waits in.)
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <tuple>
#include <type_traits>
#include <utility>

#include <usched/channel.hpp>
#include <usched/detail/deadline.hpp>
#include <usched/future.hpp>
#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>

namespace usched {
namespace detail {

// What select needs of a channel's insides; every call but unlink_*
// requires the channel's lock.
struct channel_access {
  template <class T>
  static spinlock& lock(channel<T>& c) noexcept {
    return c.lock_;
  }
  // A receive is ready with a value (in `out`) or on a closed, drained
  // channel (`out` left empty).
  template <class T>
  static bool poll_recv_locked(channel<T>& c, std::optional<T>& out) {
    return c.take_locked(out) || c.closed_;
  }
  // A send is ready when it delivers `v` (`sent`) or on a closed channel.
  template <class T>
  static bool poll_send_locked(channel<T>& c, T& v, bool& sent) {
    if (c.closed_) {
      sent = false;
      return true;
    }
    sent = c.offer_locked(v);
    return sent;
  }
  template <class T>
  static void link_recv_locked(channel<T>& c, channel_waiter& w) noexcept {
    c.receivers_.push_back(w);
  }
  template <class T>
  static void link_send_locked(channel<T>& c, channel_waiter& w) noexcept {
    c.senders_.push_back(w);
  }
  // Takes the channel's lock: a waker that popped `w` and lost the claim
  // may be reading it until it lets the lock go.
  template <class T>
  static void unlink_recv(channel<T>& c, channel_waiter& w) noexcept {
    std::lock_guard<spinlock> g(c.lock_);
    if (w.linked) c.receivers_.remove(w);
  }
  template <class T>
  static void unlink_send(channel<T>& c, channel_waiter& w) noexcept {
    std::lock_guard<spinlock> g(c.lock_);
    if (w.linked) c.senders_.remove(w);
  }
};

// select_random() is a per-thread xorshift64* for the poll order. It is out
// of line because a fiber moves between threads at every switch and the
// compiler may keep a thread_local's address across calls within one
// function (see worker_of_this_thread). Per thread, not shared: the order
// only needs to be unpredictable enough that no ready case is always
// polled last, not to be one sequence.
[[gnu::noinline]] inline std::uint64_t select_random() noexcept {
  asm volatile("" ::: "memory");
  thread_local std::uint64_t state = 0;
  if (state == 0) {
    // Seeded from the thread (the variable's address) and the time, never 0.
    state = (reinterpret_cast<std::uintptr_t>(&state) ^ static_cast<std::uint64_t>(steady_now_ns())) | 1;
  }
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1DULL;
}

// The kinds of case: the channel and future cases are polled, linked and
// unlinked alike (the waiting cases); the others are the select's own.
enum class select_kind : std::uint8_t { channel, future, timeout, deflt, stop };

// Calls `fn` with what a case delivers, or with nothing if it takes nothing.
template <class F, class... A>
void invoke_case(F& fn, A&&... a) {
  if constexpr (std::is_invocable_v<F&, A&&...>) {
    std::invoke(fn, std::forward<A>(a)...);
  } else {
    std::invoke(fn);
  }
}

// A callback that does nothing: on_send without one.
struct ignore_case {
  void operator()(bool) const noexcept {}
};

}  // namespace detail

// One receive case of a select (on_recv). Its callback is called with the
// received std::optional<T> (empty: the channel is closed and drained), or
// with nothing.
template <class T, class F>
class recv_case {
 public:
  static constexpr detail::select_kind kind = detail::select_kind::channel;
  recv_case(channel<T>& ch, F fn) : ch_(&ch), fn_(std::move(fn)) {}
  recv_case(const recv_case&) = delete;
  recv_case& operator=(const recv_case&) = delete;

  // The select's side of the case; not for users.
  const void* object() const noexcept { return ch_; }
  detail::spinlock& lock() noexcept { return detail::channel_access::lock(*ch_); }
  bool poll_locked() { return detail::channel_access::poll_recv_locked(*ch_, slot_); }
  void link_locked(detail::waitable& me, std::uint64_t token) noexcept {
    w_ = detail::channel_waiter{};
    w_.who = &me;
    w_.token = token;
    w_.item = &slot_;
    detail::channel_access::link_recv_locked(*ch_, w_);
  }
  void unlink() noexcept { detail::channel_access::unlink_recv(*ch_, w_); }
  detail::channel_outcome outcome() const noexcept { return w_.outcome; }
  // A retry: a sender's move threw after it claimed this case.
  void reset() noexcept { slot_.reset(); }
  std::exception_ptr error() noexcept { return w_.error; }
  void fire() { detail::invoke_case(fn_, std::move(slot_)); }

 private:
  channel<T>* ch_;
  F fn_;
  std::optional<T> slot_;
  detail::channel_waiter w_;
};

// One send case of a select (on_send). Its callback is called with true
// (sent) or false (the channel is closed; the value was not sent), or with
// nothing.
template <class T, class F>
class send_case {
 public:
  static constexpr detail::select_kind kind = detail::select_kind::channel;
  // Sends `v` itself, moving from it only if this case is the one taken.
  send_case(channel<T>& ch, T& v, F fn) : ch_(&ch), src_(&v), fn_(std::move(fn)) {}
  // Sends a copy of `v`, made now.
  send_case(channel<T>& ch, const T& v, F fn, std::true_type) : ch_(&ch), fn_(std::move(fn)), own_(v) {}
  send_case(const send_case&) = delete;
  send_case& operator=(const send_case&) = delete;

  const void* object() const noexcept { return ch_; }
  detail::spinlock& lock() noexcept { return detail::channel_access::lock(*ch_); }
  bool poll_locked() {
    w_.outcome = detail::channel_outcome::pending;  // fire() reads sent_, not a wait of an earlier round
    return detail::channel_access::poll_send_locked(*ch_, source(), sent_);
  }
  void link_locked(detail::waitable& me, std::uint64_t token) noexcept {
    w_ = detail::channel_waiter{};
    w_.who = &me;
    w_.token = token;
    w_.item = &source();
    detail::channel_access::link_send_locked(*ch_, w_);
  }
  void unlink() noexcept { detail::channel_access::unlink_send(*ch_, w_); }
  detail::channel_outcome outcome() const noexcept { return w_.outcome; }
  void reset() noexcept {}
  std::exception_ptr error() noexcept { return w_.error; }
  void fire() {
    if (w_.outcome != detail::channel_outcome::pending) sent_ = w_.outcome == detail::channel_outcome::done;
    detail::invoke_case(fn_, sent_);
  }

 private:
  // Computed at each use, not kept: own_ lives in this object.
  T& source() noexcept { return own_ ? *own_ : *src_; }

  channel<T>* ch_;
  T* src_ = nullptr;
  F fn_;
  std::optional<T> own_;
  bool sent_ = false;
  detail::channel_waiter w_;
};

// One future case of a select (on_ready), over a future<R> or a
// shared_future<R> (`Fut`, const for a shared_future), which the case refers
// to and which must be valid (future_error(no_state) when the case is made
// otherwise). Once taken, a deferred call not yet run is run on the caller,
// and the callback is called with, the first that it takes:
//  - the future itself (Fut&): it may get() the result, which rethrows the
//    exception there, in the callback;
//  - the result (not for R = void): the case calls get(), so a future is
//    no longer valid after, and the exception propagates from select (the
//    case has taken effect, as a throwing callback's has);
//  - nothing: the future is left as it is, valid and ready, for a get()
//    later.
// A case not taken leaves the future untouched.
template <class Fut, class F>
class ready_case {
 public:
  static constexpr detail::select_kind kind = detail::select_kind::future;
  ready_case(Fut& fut, F fn) : fut_(&fut), state_(detail::future_access::state_of(fut)), fn_(std::move(fn)) {
    if (!state_) detail::throw_future_error(future_errc::no_state);
  }
  ready_case(const ready_case&) = delete;
  ready_case& operator=(const ready_case&) = delete;

  // The select's side of the case; not for users.
  const void* object() const noexcept { return state_; }
  detail::spinlock& lock() noexcept { return state_->select_lock(); }
  bool poll_locked() noexcept { return state_->ready_locked(); }
  void link_locked(detail::waitable& me, std::uint64_t token) noexcept {
    w_ = detail::waiter{};
    w_.who = &me;
    w_.token = token;
    state_->link_locked(w_);
  }
  void unlink() noexcept { state_->unlink(w_); }
  // publish() sets `ok` when its claim of the select's token won.
  detail::channel_outcome outcome() const noexcept {
    return w_.ok ? detail::channel_outcome::done : detail::channel_outcome::pending;
  }
  void reset() noexcept {}
  std::exception_ptr error() noexcept { return {}; }
  void fire() {
    // Ready, or a deferred call to run here: either way this returns with
    // the result in place, without blocking on anyone.
    fut_->wait();
    if constexpr (std::is_invocable_v<F&, Fut&>) {
      std::invoke(fn_, *fut_);
    } else if constexpr (takes_result) {
      std::invoke(fn_, fut_->get());
    } else {
      std::invoke(fn_);
    }
  }

 private:
  using result_t = decltype(std::declval<Fut&>().get());
  static constexpr bool takes_result = [] {
    if constexpr (std::is_void_v<result_t>) {
      return false;
    } else {
      return std::is_invocable_v<F&, result_t>;
    }
  }();

 public:
  // What on_ready() checks of a callback.
  static constexpr bool callable = std::is_invocable_v<F&, Fut&> || takes_result || std::is_invocable_v<F&>;

 private:
  Fut* fut_;
  detail::future_state_base* state_;
  F fn_;
  detail::waiter w_;
};

// The timeout of a select (on_timeout): taken when no case became ready by
// its deadline.
template <class F>
class timeout_case {
 public:
  static constexpr detail::select_kind kind = detail::select_kind::timeout;
  timeout_case(std::int64_t deadline_ns, F fn) : deadline_ns_(deadline_ns), fn_(std::move(fn)) {}
  std::int64_t deadline_ns() const noexcept { return deadline_ns_; }
  void fire() { fn_(); }

 private:
  std::int64_t deadline_ns_;
  F fn_;
};

// The default of a select (on_default): taken at once when no case is
// ready.
template <class F>
class default_case {
 public:
  static constexpr detail::select_kind kind = detail::select_kind::deflt;
  explicit default_case(F fn) : fn_(std::move(fn)) {}
  void fire() { fn_(); }

 private:
  F fn_;
};

// The stop case of a select (on_stop): taken when stop is requested before
// a case is ready (or already was, and no case is ready).
template <class F>
class stop_case {
 public:
  static constexpr detail::select_kind kind = detail::select_kind::stop;
  stop_case(std::stop_token stop, F fn) : stop_(std::move(stop)), fn_(std::move(fn)) {}
  const std::stop_token& token() const noexcept { return stop_; }
  void fire() { fn_(); }

 private:
  std::stop_token stop_;
  F fn_;
};

// on_recv(ch, fn): receive from `ch`; fn(std::optional<T>) or fn().
template <class T, class F>
recv_case<T, std::decay_t<F>> on_recv(channel<T>& ch, F&& fn) {
  static_assert(std::is_invocable_v<std::decay_t<F>&, std::optional<T>&&> || std::is_invocable_v<std::decay_t<F>&>,
                "usched::on_recv: the callback takes std::optional<T>, or nothing");
  return {ch, std::forward<F>(fn)};
}

// on_send(ch, v, fn): send `v` on `ch`; fn(bool sent) or fn(). An rvalue
// `v` is the caller's object, moved from only if this case is taken (so it
// is still there to retry after a timeout): like std::forward_as_tuple, the
// case refers to it, and is for the select call it is written in. An lvalue
// is copied when the case is made.
template <class T, class F = detail::ignore_case>
send_case<T, std::decay_t<F>> on_send(channel<T>& ch, std::type_identity_t<T>&& v, F&& fn = {}) {
  static_assert(std::is_invocable_v<std::decay_t<F>&, bool> || std::is_invocable_v<std::decay_t<F>&>,
                "usched::on_send: the callback takes bool (sent), or nothing");
  return {ch, v, std::forward<F>(fn)};
}
template <class T, class F = detail::ignore_case>
send_case<T, std::decay_t<F>> on_send(channel<T>& ch, const std::type_identity_t<T>& v, F&& fn = {}) {
  static_assert(std::is_invocable_v<std::decay_t<F>&, bool> || std::is_invocable_v<std::decay_t<F>&>,
                "usched::on_send: the callback takes bool (sent), or nothing");
  return {ch, v, std::forward<F>(fn), std::true_type{}};
}

// on_ready(fut, fn): the result of `fut`, a future<R> or a shared_future<R>
// (valid: future_error(no_state) otherwise); fn(future&), fn(result) or fn()
// (see ready_case). The case refers to `fut`, which outlives the select call
// it is written in.
template <class R, class F>
ready_case<future<R>, std::decay_t<F>> on_ready(future<R>& fut, F&& fn) {
  static_assert(ready_case<future<R>, std::decay_t<F>>::callable,
                "usched::on_ready: the callback takes the future, its result, or nothing");
  return {fut, std::forward<F>(fn)};
}
template <class R, class F>
ready_case<const shared_future<R>, std::decay_t<F>> on_ready(const shared_future<R>& fut, F&& fn) {
  static_assert(ready_case<const shared_future<R>, std::decay_t<F>>::callable,
                "usched::on_ready: the callback takes the shared_future, its result, or nothing");
  return {fut, std::forward<F>(fn)};
}

// on_timeout(d, fn) / on_timeout(tp, fn): give up after `d` (from when the
// case is made) or at `tp` (any clock), calling fn().
template <class Rep, class Period, class F>
timeout_case<std::decay_t<F>> on_timeout(const std::chrono::duration<Rep, Period>& d, F&& fn) {
  return {detail::deadline_after(d), std::forward<F>(fn)};
}
template <class Clock, class Duration, class F>
timeout_case<std::decay_t<F>> on_timeout(const std::chrono::time_point<Clock, Duration>& tp, F&& fn) {
  return {detail::deadline_at(tp), std::forward<F>(fn)};
}
// on_default(fn): taken, calling fn(), when no case is ready now.
template <class F>
default_case<std::decay_t<F>> on_default(F&& fn) {
  return default_case<std::decay_t<F>>(std::forward<F>(fn));
}
// on_stop(stop, fn): taken, calling fn(), when `stop` is requested first.
template <class F>
stop_case<std::decay_t<F>> on_stop(std::stop_token stop, F&& fn) {
  return {std::move(stop), std::forward<F>(fn)};
}

namespace detail {

// The cases a select polls under their locks, links a waiter for, and
// unlinks: channel and future cases.
template <class C>
inline constexpr bool is_waiting_case =
    std::remove_cvref_t<C>::kind == select_kind::channel || std::remove_cvref_t<C>::kind == select_kind::future;

// Locks a select's channels, each once, in address order; unlocks them in
// the reverse order when it goes.
template <std::size_t N>
class select_locks {
 public:
  explicit select_locks(std::array<spinlock*, N> locks) noexcept : locks_(locks) {
    std::sort(locks_.begin(), locks_.end(), std::less<spinlock*>());
    n_ = static_cast<std::size_t>(std::unique(locks_.begin(), locks_.end()) - locks_.begin());
  }
  void lock() noexcept {
    for (std::size_t i = 0; i < n_; ++i) locks_[i]->lock();
  }
  void unlock() noexcept {
    for (std::size_t i = n_; i-- > 0;) locks_[i]->unlock();
  }

 private:
  std::array<spinlock*, N> locks_;
  std::size_t n_ = 0;
};

// run_select() is select() over `cases`, a tuple of references to the case
// objects: poll under every channel's (and future's) lock, or link a waiter
// per channel and future case under one token and block, then unlink and
// run the case taken (see the top of this file). Returns the index taken.
// Takes the channels' and futures' locks; holds none while it blocks or runs
// a callback.
template <class Tuple, std::size_t... I>
std::size_t run_select(Tuple& cases, std::index_sequence<I...>) {
  using cases_t = std::remove_reference_t<Tuple>;
  constexpr std::size_t n = sizeof...(I);
  constexpr std::array<select_kind, n> kinds = {std::remove_cvref_t<std::tuple_element_t<I, cases_t>>::kind...};
  // The waiting cases, channels' and futures'.
  constexpr std::size_t n_waiting =
      static_cast<std::size_t>(std::count(kinds.begin(), kinds.end(), select_kind::channel) +
                               std::count(kinds.begin(), kinds.end(), select_kind::future));
  constexpr std::size_t n_timeout = static_cast<std::size_t>(std::count(kinds.begin(), kinds.end(), select_kind::timeout));
  constexpr std::size_t n_default = static_cast<std::size_t>(std::count(kinds.begin(), kinds.end(), select_kind::deflt));
  constexpr std::size_t n_stop = static_cast<std::size_t>(std::count(kinds.begin(), kinds.end(), select_kind::stop));
  static_assert(n > 0, "usched::select needs at least one case");
  static_assert(n_timeout <= 1 && n_default <= 1 && n_stop <= 1,
                "usched::select takes at most one on_timeout, one on_default and one on_stop");
  static_assert(n_timeout + n_default <= 1, "usched::select: on_default is taken before any timeout could be");
  constexpr std::size_t npos = n;
  constexpr auto index_of = [](const std::array<select_kind, n>& ks, select_kind k) {
    for (std::size_t i = 0; i < ks.size(); ++i) {
      if (ks[i] == k) return i;
    }
    return ks.size();
  };
  constexpr std::size_t timeout_at = index_of(kinds, select_kind::timeout);
  constexpr std::size_t default_at = index_of(kinds, select_kind::deflt);
  constexpr std::size_t stop_at = index_of(kinds, select_kind::stop);

  // Runs `f(case)` on case `k`, a runtime index.
  auto visit = [&cases](std::size_t k, auto&& f) { ((k == I ? (void)f(std::get<I>(cases)) : void()), ...); };
  auto for_each_waiting_case = [&cases](auto&& f) {
    (
        [&] {
          if constexpr (is_waiting_case<std::tuple_element_t<I, cases_t>>) f(std::get<I>(cases), I);
        }(),
        ...);
  };

  std::int64_t deadline_ns = no_deadline;
  std::stop_token stop;
  const void* object = nullptr;
  std::array<std::size_t, n_waiting> order{};
  std::array<spinlock*, n_waiting> lock_list{};
  {
    std::size_t j = 0;
    (
        [&] {
          auto& c = std::get<I>(cases);
          using C = std::remove_cvref_t<decltype(c)>;
          if constexpr (is_waiting_case<C>) {
            if (!object) object = c.object();
            lock_list[j] = &c.lock();
            order[j++] = I;
          } else if constexpr (C::kind == select_kind::timeout) {
            deadline_ns = c.deadline_ns();
          } else if constexpr (C::kind == select_kind::stop) {
            stop = c.token();
          }
        }(),
        ...);
  }
  select_locks<n_waiting> locks(lock_list);

  for (;;) {
    // A uniformly random poll order (Fisher-Yates): with several cases
    // ready, each is taken as often as the others, whatever its position.
    for (std::size_t i = n_waiting; i > 1; --i) {
      std::swap(order[i - 1], order[static_cast<std::size_t>(select_random() % i)]);
    }
    std::size_t taken = npos;
    waitable* me = nullptr;
    std::uint64_t token = 0;
    {
      std::unique_lock<select_locks<n_waiting>> lk(locks);
      for (std::size_t k : order) {
        bool ready = false;
        visit(k, [&](auto& c) {
          if constexpr (is_waiting_case<decltype(c)>) ready = c.poll_locked();
        });
        if (ready) {
          taken = k;
          break;
        }
      }
      if (taken == npos) {
        if constexpr (n_default > 0) {
          taken = default_at;
        } else {
          if constexpr (n_stop > 0) {
            if (stop.stop_requested()) taken = stop_at;
          }
          if constexpr (n_timeout > 0) {
            // Already due: do not suspend only to be resumed by the timer.
            if (taken == npos && has_timer(deadline_ns) && deadline_ns <= steady_now_ns()) taken = timeout_at;
          }
          if (taken == npos) {
            me = &current_waitable();
            token = prepare_wait(*me, wait_kind::select, object);
            for_each_waiting_case([&](auto& c, std::size_t) { c.link_locked(*me, token); });
          }
        }
      }
    }
    if (taken == npos) {
      block(*me, token, deadline_ns, stop);
      // The winner's waker unlinked it; every other case may still be
      // linked, or be in the hands of a waker that lost the claim.
      channel_outcome how = channel_outcome::pending;
      for_each_waiting_case([&](auto& c, std::size_t k) {
        if (c.outcome() == channel_outcome::pending) {
          c.unlink();
        } else {
          taken = k;
          how = c.outcome();
        }
      });
      if (how == channel_outcome::pending) {
        // The timer or the stop request claimed the wait.
        if constexpr (n_stop > 0) {
          if (stop.stop_requested()) taken = stop_at;
        }
        if constexpr (n_timeout > 0) {
          if (taken == npos) taken = timeout_at;
        }
        if (taken == npos) taken = stop_at;  // no timer: only the stop ends the wait
      } else if (how == channel_outcome::retry) {
        // A sender claimed a receive case, then its value threw on the way
        // (the sender has the exception): nothing happened here; poll again.
        visit(taken, [](auto& c) {
          if constexpr (is_waiting_case<decltype(c)>) c.reset();
        });
        continue;
      } else if (how == channel_outcome::threw) {
        // Our send case's value threw as a receiver moved it: the value is
        // still the caller's, and so is the exception.
        std::exception_ptr e;
        visit(taken, [&](auto& c) {
          if constexpr (is_waiting_case<decltype(c)>) e = c.error();
        });
        std::rethrow_exception(e);
      }
    }
    visit(taken, [](auto& c) { c.fire(); });
    return taken;
  }
}

}  // namespace detail

// select(cases...) waits until one case takes effect, runs its callback and
// returns its index. The cases are made in the call (on_recv, on_send,
// on_ready, on_timeout, on_default, on_stop), over channels of any element
// types and futures of any result types; a channel or a future may appear
// in several cases. Works from fibers and threads.
// Exceptions: what a case's callback throws propagates (the case has taken
// effect); what a send case's value throws as it is moved propagates with
// the value still the caller's, and what a buffered value throws as a
// receive case moves it out propagates with the value still buffered, as
// for channel::send and channel::recv; what a future case's get() rethrows
// propagates (the case has taken effect).
template <class... Cases>
std::size_t select(Cases&&... cases) {
  static_assert((!std::is_lvalue_reference_v<Cases> && ...),
                "usched::select: make the cases in the call (select(on_recv(...), ...))");
  auto refs = std::forward_as_tuple(cases...);
  return detail::run_select(refs, std::index_sequence_for<Cases...>{});
}

}  // namespace usched
