// usched/future.hpp: future, shared_future, promise, packaged_task and
// async, with <future>'s names and signatures. A wait blocks the calling
// fiber (its worker runs other fibers meanwhile) or, outside the runtime,
// the calling thread.
//
// One shared state per promise/future pair, held by std::shared_ptr: the
// producer (a promise, a packaged_task, an async fiber) and every future and
// shared_future of it. The state keeps its waiters in a wait_list under its
// own spinlock, as the other primitives do (usched/detail/wait.hpp), and
// the value or exception next to them. A result is published once: the
// producer first claims the state under the lock (a second claim is
// promise_already_satisfied), then constructs the value with the lock
// released (a move constructor is the user's code, which may block or
// throw), then sets `ready` and notifies every waiter under the lock.
// Readers that find `ready` set read the value without the lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <tuple>
#include <type_traits>
#include <utility>

#include <usched/detail/deadline.hpp>
#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>
#include <usched/fiber.hpp>
#include <usched/runtime.hpp>

namespace usched {

// std's own error and status types, so that code written against <future>
// (catch (const std::future_error&), e.code() == std::future_errc::...,
// status == std::future_status::ready) keeps working unchanged.
using future_error = std::future_error;
using future_errc = std::future_errc;
using future_status = std::future_status;
using launch = std::launch;
using std::future_category;

template <class R>
class future;
template <class R>
class shared_future;
template <class R>
class promise;
template <class Signature>
class packaged_task;

namespace detail {

[[noreturn]] inline void throw_future_error(future_errc e) { throw future_error(e); }

// future_storage<R> holds the result of a state: a value constructed in
// place, a pointer for a reference, nothing for void. take() is what
// future::get() returns (the value moved out), peek() what
// shared_future::get() returns.
template <class R>
struct future_storage {
  union {
    R value;
  };
  bool has_value = false;

  future_storage() noexcept {}
  future_storage(const future_storage&) = delete;
  future_storage& operator=(const future_storage&) = delete;
  ~future_storage() {
    if (has_value) value.~R();
  }
  template <class... A>
  void emplace(A&&... a) {
    ::new (static_cast<void*>(std::addressof(value))) R(std::forward<A>(a)...);
    has_value = true;
  }
  // The result of `f()` constructed in place: a prvalue R is not moved.
  template <class F>
  void emplace_result(F& f) {
    ::new (static_cast<void*>(std::addressof(value))) R(f());
    has_value = true;
  }
  R take() { return std::move(value); }
  const R& peek() const noexcept { return value; }
};
template <class R>
struct future_storage<R&> {
  R* ptr = nullptr;
  void emplace(R& r) noexcept { ptr = std::addressof(r); }
  template <class F>
  void emplace_result(F& f) {
    R& r = f();
    ptr = std::addressof(r);
  }
  R& take() const noexcept { return *ptr; }
  R& peek() const noexcept { return *ptr; }
};
template <>
struct future_storage<void> {
  void emplace() noexcept {}
  template <class F>
  void emplace_result(F& f) {
    f();
  }
  void take() const noexcept {}
  void peek() const noexcept {}
};

// What shared_future<R>::get() returns: const R& for a value, R& for a
// reference, void.
template <class R>
struct shared_get {
  using type = const R&;
};
template <class R>
struct shared_get<R&> {
  using type = R&;
};
template <>
struct shared_get<void> {
  using type = void;
};

// The part of a shared state that does not depend on R: the lock, the
// waiters, the flags and the exception.
class future_state_base {
 public:
  // Who produces the result. A promise or packaged_task claims the state
  // when it sets it; an async fiber or a deferred call is the only producer
  // there can be, so its state is claimed from the start.
  enum class origin : std::uint8_t { promise, async, deferred };

  explicit future_state_base(origin o) noexcept
      : satisfied_(o != origin::promise), deferred_(o == origin::deferred ? deferred::pending : deferred::none) {}
  future_state_base(const future_state_base&) = delete;
  future_state_base& operator=(const future_state_base&) = delete;
  virtual ~future_state_base() = default;

  // mark_retrieved() records that the future was handed out; a second call
  // throws future_already_retrieved. Relaxed is enough: it orders nothing,
  // the exchange alone decides which call is first.
  void mark_retrieved() {
    if (retrieved_.exchange(true, std::memory_order_relaxed)) throw_future_error(future_errc::future_already_retrieved);
  }

  bool ready() const noexcept { return ready_.load(std::memory_order_acquire); }
  const std::exception_ptr& error() const noexcept { return error_; }
  // take_error() moves the exception out, for future::get(), the state's
  // one consumer: the getter alone owns it from then on, so it is destroyed
  // on the getter's fiber or thread, not by whichever producer drops the
  // state's last reference later (as join_handle::join does with a fiber's
  // exception). The producer never touches error_ once it has published.
  std::exception_ptr take_error() noexcept { return std::move(error_); }

  // wait() returns once the result is ready. A deferred call not yet
  // started runs here, on the caller; a waiter that finds it started by
  // someone else waits for it like any other. Takes lock_.
  void wait() {
    if (ready()) return;
    std::unique_lock<spinlock> lk(lock_);
    if (ready_.load(std::memory_order_relaxed)) return;
    if (deferred_ == deferred::pending) {
      deferred_ = deferred::running;
      lk.unlock();
      run_deferred();
      return;
    }
    waiter w;
    // No timer and no stop token: only publish() ends this wait, and it
    // unlinked us before resuming us.
    wait_in(lk, waiters_, w, wait_kind::future, this, no_deadline);
  }

  // wait_until() waits until the result is ready or `deadline_ns` (a
  // deadline of usched/detail/deadline.hpp) passes. A deferred call is
  // never started by a timed wait: until its result is ready that is
  // future_status::deferred, as std (and libstdc++) have it. Takes lock_.
  future_status wait_until(std::int64_t deadline_ns, const std::stop_token& stop = {}) {
    if (ready()) return future_status::ready;
    std::unique_lock<spinlock> lk(lock_);
    if (ready_.load(std::memory_order_relaxed)) return future_status::ready;
    if (deferred_ != deferred::none) return future_status::deferred;
    // Already due: do not suspend only to be resumed by the timer.
    if (has_timer(deadline_ns) && deadline_ns <= steady_now_ns()) return future_status::timeout;
    if (stop.stop_requested()) return future_status::timeout;
    waiter w;
    if (wait_in(lk, waiters_, w, wait_kind::future, this, deadline_ns, stop)) return future_status::ready;
    // The timer or the stop won; a result published at the same moment
    // still counts.
    return ready() ? future_status::ready : future_status::timeout;
  }
  // wait() that gives up once `stop` is requested: true if the result is
  // ready. A deferred call runs here, as with wait() (a stop request
  // cannot interrupt it once it runs).
  bool wait(const std::stop_token& stop) {
    if (!stop.stop_possible()) {
      wait();
      return true;
    }
    if (ready()) return true;
    std::unique_lock<spinlock> lk(lock_);
    if (ready_.load(std::memory_order_relaxed)) return true;
    if (deferred_ == deferred::pending) {
      deferred_ = deferred::running;
      lk.unlock();
      run_deferred();
      return true;
    }
    // Not ready, and nobody's to start (a deferred call another waiter
    // runs is waited for like any producer).
    if (stop.stop_requested()) return false;
    waiter w;
    return wait_in(lk, waiters_, w, wait_kind::future, this, no_deadline, stop) || ready();
  }

  // claim() makes the caller the state's producer; promise_already_satisfied
  // if it has one. Takes lock_.
  void claim() {
    std::lock_guard<spinlock> g(lock_);
    if (satisfied_) throw_future_error(future_errc::promise_already_satisfied);
    satisfied_ = true;
  }
  // unclaim() undoes claim() when the value could not be constructed (its
  // constructor threw, and the exception went to the setter): the state is
  // as before, and a later set may succeed. Takes lock_.
  void unclaim() noexcept {
    std::lock_guard<spinlock> g(lock_);
    satisfied_ = false;
  }

  // set_exception() stores `e` as the result. Requires a claim.
  void set_exception_claimed(std::exception_ptr e) noexcept {
    error_ = std::move(e);
    publish();
  }

  // A select's side of the state (usched/select.hpp), which waits on it as
  // on a channel: it takes select_lock() with its channels' locks, polls,
  // links a waiter armed with its one token, and after it wakes unlinks it
  // again if publish() did not. publish() notifies that waiter as any
  // other: its claim of the token is what makes the future's case the one
  // taken, and a claim lost to another case leaves the select alone.
  spinlock& select_lock() noexcept { return lock_; }
  // ready_locked(): the result is ready, or a deferred call waits to be run
  // (nothing to wait for: a wait() or get() runs it on the caller).
  // Requires lock_.
  bool ready_locked() const noexcept {
    return ready_.load(std::memory_order_relaxed) || deferred_ == deferred::pending;
  }
  // link_locked() links `w`, armed by its caller; requires lock_.
  void link_locked(waiter& w) noexcept { waiters_.push_back(w); }
  // unlink() takes `w` off the list, unless publish() took it off already
  // (and may be notifying it until it lets the lock go). Takes lock_.
  void unlink(waiter& w) noexcept {
    std::lock_guard<spinlock> g(lock_);
    if (w.linked) waiters_.remove(w);
  }

  // abandon() is a producer going away: if nothing was set, the result is
  // future_error(broken_promise). Takes lock_.
  void abandon() noexcept {
    {
      std::lock_guard<spinlock> g(lock_);
      if (satisfied_) return;
      satisfied_ = true;
    }
    try {
      throw_future_error(future_errc::broken_promise);
    } catch (...) {
      // The broken_promise itself, or the bad_alloc that stopped us making
      // one: either way the waiters learn that no value is coming.
      error_ = std::current_exception();
    }
    publish();
  }

 protected:
  // publish() makes the result visible and resumes every waiter. The value
  // or the exception is in place before `ready` is stored (release), so a
  // reader that loads `ready` (acquire) sees it. The caller holds a
  // reference to the state, so it outlives this call even if a resumed
  // waiter drops the last future at once. Takes lock_.
  void publish() noexcept {
    std::lock_guard<spinlock> g(lock_);
    ready_.store(true, std::memory_order_release);
    notify_all(waiters_);
  }

  // run_deferred() runs a deferred call and publishes its result; only a
  // deferred state has one, and wait() calls it once.
  virtual void run_deferred() noexcept {}

  std::exception_ptr error_;

 private:
  enum class deferred : std::uint8_t { none, pending, running };

  spinlock lock_;
  wait_list waiters_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> retrieved_{false};
  bool satisfied_;     // a producer has claimed the state (under lock_)
  deferred deferred_;  // under lock_
};

// future_state<R>: a shared state with its result storage.
template <class R>
class future_state : public future_state_base {
 public:
  explicit future_state(origin o = origin::promise) noexcept : future_state_base(o) {}

  // set_value() is promise::set_value: claim, construct, publish. A
  // constructor that throws leaves the state unset and the exception goes
  // to the caller.
  template <class... A>
  void set_value(A&&... a) {
    claim();
    try {
      storage_.emplace(std::forward<A>(a)...);
    } catch (...) {
      unclaim();
      throw;
    }
    publish();
  }

  // store_result_of() runs `f` and publishes what it returns or throws:
  // packaged_task, async and deferred calls, whose exceptions belong to the
  // future, not to whoever ran them. Requires a claim.
  template <class F>
  void store_result_of(F&& f) noexcept {
    store_result_of(std::forward<F>(f), [] {});
  }
  // ... with `before_publish()` run between the store and the publish: an
  // async call ends there everything its waiters must see ended.
  template <class F, class Before>
  void store_result_of(F&& f, Before&& before_publish) noexcept {
    try {
      storage_.emplace_result(f);
    } catch (...) {
      error_ = std::current_exception();
    }
    before_publish();
    publish();
  }

  // The result; requires ready() and no error().
  decltype(auto) take() { return storage_.take(); }
  decltype(auto) peek() const noexcept { return storage_.peek(); }

 private:
  future_storage<R> storage_;
};

// async_state: the state of an async() call run as a fiber. The fiber
// writes the result through a plain pointer; the state joins it in its
// destructor, so the state outlives the fiber (and its publish()), and the
// last future or shared_future dropped waits until the fiber has returned,
// as std::async's does.
template <class R>
class async_state final : public future_state<R> {
 public:
  async_state() noexcept : future_state<R>(future_state_base::origin::async) {}
  ~async_state() override {
    if (runner.joinable()) runner.join();
  }
  // The fiber running the call (named so as not to hide detail::fiber).
  join_handle<void> runner;
};

// deferred_state: the state of async(launch::deferred, ...). The call and
// its arguments wait in the state until the first wait() or get(), which
// runs it on its own fiber or thread.
template <class R, class Fn, class... Args>
class deferred_state final : public future_state<R> {
 public:
  template <class F, class... A>
  explicit deferred_state(F&& f, A&&... a)
      : future_state<R>(future_state_base::origin::deferred), call_(std::forward<F>(f), std::forward<A>(a)...) {}

 private:
  void run_deferred() noexcept override {
    this->store_result_of([this]() -> R {
      return std::apply([](auto&&... a) -> R { return std::invoke(std::forward<decltype(a)>(a)...); },
                        std::move(call_));
    });
  }
  std::tuple<Fn, Args...> call_;
};

template <class R>
class future_waits;

// future_access lets the producers make futures from a state, and a
// select's future case find the state of a future.
struct future_access {
  template <class R>
  static future<R> make(std::shared_ptr<future_state<R>> s) {
    return future<R>(std::move(s));
  }
  // The state of `f`, null if it has none (!f.valid()).
  template <class R>
  static future_state<R>* state_of(const future_waits<R>& f) noexcept {
    return f.state_.get();
  }
};

template <class F, class... Args>
using async_result_t = std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>;

// The body of an async fiber: the callable and its arguments arrive as the
// spawned frame's bound values, and what the call returns or throws goes to
// the state. Nothing escapes the fiber, so its join never rethrows.
//
// A wait on an async future returns as if the call's thread had been
// joined ([futures.async]): the callable and its arguments (moved out of
// the frame into the body, a throwing move becoming the future's
// exception) and the fiber's fiber_local values are destroyed before the
// result is published, so a caller that frees something once get()
// returns cannot pull it from under their destructors. What stays in the
// frame are the moved-from originals.
// Constrained to the call it makes, so that spawn's test for a callable
// that takes a std::stop_token first sees that this one does not (an
// unconstrained generic lambda would be instantiated with the token as the
// callable).
template <class R>
auto async_body(future_state<R>* s) {
  return [s]<class... A>(A&&... a) noexcept -> void
    requires std::is_invocable_v<A...>
  {
    std::optional<std::tuple<std::decay_t<A>...>> call;
    s->store_result_of(
        [&]() -> R {
          call.emplace(std::forward<A>(a)...);
          return std::apply([](auto&... c) -> R { return std::invoke(std::move(c)...); }, *call);
        },
        [&]() noexcept {
          call.reset();
          clear_fiber_locals();
        });
  };
}

template <class R, class Spawn>
future<R> start_async(Spawn&& spawn) {
  auto s = std::make_shared<async_state<R>>();
  // If the spawn throws (no memory for the frame, a throwing copy of an
  // argument) no fiber exists and the state dies with the exception.
  s->runner = spawn(async_body<R>(s.get()));
  return future_access::make<R>(std::move(s));
}

}  // namespace detail

namespace detail {

// The waiting half that future and shared_future share: the state, and
// valid(), wait(), wait_for() and wait_until() over it.
template <class R>
class future_waits {
 public:
  bool valid() const noexcept { return state_ != nullptr; }

  // wait() blocks until the result is ready; wait_for() and wait_until()
  // also return at the deadline, with future_status::timeout, or at once
  // with future_status::deferred for an async(launch::deferred) call whose
  // result is not ready (not started, or running on another waiter). Any
  // clock (usched/detail/deadline.hpp). future_error(no_state) if
  // !valid().
  void wait() const { checked().wait(); }
  // usched extension: wait() that gives up once `stop` is requested; true
  // if the result is ready.
  [[nodiscard]] bool wait(const std::stop_token& stop) const { return checked().wait(stop); }
  template <class Rep, class Period>
  future_status wait_for(const std::chrono::duration<Rep, Period>& d) const {
    return checked().wait_until(deadline_after(d));
  }
  template <class Clock, class Duration>
  future_status wait_until(const std::chrono::time_point<Clock, Duration>& tp) const {
    return checked().wait_until(deadline_at(tp));
  }

 protected:
  friend struct future_access;
  future_waits() noexcept = default;
  explicit future_waits(std::shared_ptr<future_state<R>> s) noexcept : state_(std::move(s)) {}
  future_state<R>& checked() const {
    if (!state_) throw_future_error(future_errc::no_state);
    return *state_;
  }

  std::shared_ptr<future_state<R>> state_;
};

}  // namespace detail

// future<R> is the one consumer of a shared state (R a value type, a
// reference, or void): get() waits for the result and moves it out (R&:
// the reference; void: nothing) or rethrows the exception; after get()
// valid() is false. Move-only.
template <class R>
class future : public detail::future_waits<R> {
  using base = detail::future_waits<R>;
  using base::state_;

 public:
  future() noexcept = default;
  future(future&&) noexcept = default;
  future& operator=(future&&) noexcept = default;
  future(const future&) = delete;
  future& operator=(const future&) = delete;
  // The state of an async() call is joined by its last owner: dropping
  // this future may wait for the fiber (see detail::async_state).
  ~future() = default;

  // share() moves the state into a shared_future; valid() is then false.
  shared_future<R> share() noexcept { return shared_future<R>(std::move(*this)); }

  // get() blocks until the result is ready, then returns or rethrows it.
  // future_error(no_state) if !valid().
  R get() {
    if (!state_) detail::throw_future_error(future_errc::no_state);
    // Released before the wait, so that valid() is false after get()
    // whatever it returns or throws.
    std::shared_ptr<detail::future_state<R>> s = std::move(state_);
    s->wait();
    if (s->error()) std::rethrow_exception(s->take_error());
    return s->take();
  }

  // valid(), wait(), wait_for(), wait_until(): detail::future_waits.

 private:
  friend struct detail::future_access;
  friend class shared_future<R>;
  explicit future(std::shared_ptr<detail::future_state<R>> s) noexcept : base(std::move(s)) {}
};

// shared_future<R> is a copyable consumer: every copy may wait and get()
// as often as it likes; get() returns const R& (R&, void) into the state.
// Each copy is for one fiber or thread at a time; copies used concurrently
// are what it is for.
template <class R>
class shared_future : public detail::future_waits<R> {
  using base = detail::future_waits<R>;
  using base::checked;

 public:
  shared_future() noexcept = default;
  shared_future(const shared_future&) = default;
  shared_future(shared_future&&) noexcept = default;
  shared_future(future<R>&& f) noexcept : base(std::move(f.state_)) {}
  shared_future& operator=(const shared_future&) = default;
  shared_future& operator=(shared_future&&) noexcept = default;
  ~shared_future() = default;

  // get() blocks until the result is ready, then returns it or rethrows
  // the exception (each call rethrows the same exception object, which
  // lives as long as the state).
  // future_error(no_state) if !valid().
  typename detail::shared_get<R>::type get() const {
    detail::future_state<R>& s = checked();
    s.wait();
    if (s.error()) std::rethrow_exception(s.error());
    return s.peek();
  }

  // valid(), wait(), wait_for(), wait_until(): detail::future_waits.
};

namespace detail {

// The part of promise<R> shared by its three forms: the state, the
// future, the exception, the broken promise.
template <class R>
class promise_base {
 public:
  promise_base() : state_(std::make_shared<future_state<R>>()) {}
  template <class Alloc>
  promise_base(std::allocator_arg_t, const Alloc& a) : state_(std::allocate_shared<future_state<R>>(a)) {}
  promise_base(promise_base&&) noexcept = default;
  promise_base(const promise_base&) = delete;
  promise_base& operator=(const promise_base&) = delete;
  // A promise dropped without a result breaks it: the future's get()
  // throws future_error(broken_promise).
  ~promise_base() {
    if (state_) state_->abandon();
  }

  // get_future() returns the future of this promise, once:
  // future_already_retrieved after that, no_state on a moved-from promise.
  future<R> get_future() {
    checked().mark_retrieved();
    return future_access::make<R>(state_);
  }

  // set_exception() stores `e` as the result (promise_already_satisfied if
  // one was set). Waiters are resumed; get() rethrows it.
  void set_exception(std::exception_ptr e) {
    future_state<R>& s = checked();
    s.claim();
    s.set_exception_claimed(std::move(e));
  }

 protected:
  // Move assignment drops (and so breaks, if unset) the state it replaces.
  void assign(promise_base&& o) noexcept {
    if (this == &o) return;
    if (state_) state_->abandon();
    state_ = std::move(o.state_);
  }
  void swap_state(promise_base& o) noexcept { state_.swap(o.state_); }
  future_state<R>& checked() const {
    if (!state_) throw_future_error(future_errc::no_state);
    return *state_;
  }

 private:
  // Held while setting: a waiter resumed by publish() may drop the last
  // future before publish() has released the state's lock.
  std::shared_ptr<future_state<R>> state_;
};

}  // namespace detail

// promise<R> is the producer of a shared state: set_value() or
// set_exception() once, get_future() once. The _at_thread_exit setters are
// not provided (a fiber's "thread exit" has no meaning a user could rely on).
template <class R>
class promise : public detail::promise_base<R> {
 public:
  using detail::promise_base<R>::promise_base;
  promise() = default;
  promise(promise&&) noexcept = default;
  promise& operator=(promise&& o) noexcept {
    this->assign(std::move(o));
    return *this;
  }
  void swap(promise& o) noexcept { this->swap_state(o); }

  // set_value() stores the value and resumes every waiter;
  // promise_already_satisfied if a result was set. If copying or moving
  // the value throws, the exception goes to the caller and nothing is set.
  void set_value(const R& v) { this->checked().set_value(v); }
  void set_value(R&& v) { this->checked().set_value(std::move(v)); }
};

template <class R>
class promise<R&> : public detail::promise_base<R&> {
 public:
  using detail::promise_base<R&>::promise_base;
  promise() = default;
  promise(promise&&) noexcept = default;
  promise& operator=(promise&& o) noexcept {
    this->assign(std::move(o));
    return *this;
  }
  void swap(promise& o) noexcept { this->swap_state(o); }

  void set_value(R& r) { this->checked().set_value(r); }
};

template <>
class promise<void> : public detail::promise_base<void> {
 public:
  using detail::promise_base<void>::promise_base;
  promise() = default;
  promise(promise&&) noexcept = default;
  promise& operator=(promise&& o) noexcept {
    this->assign(std::move(o));
    return *this;
  }
  void swap(promise& o) noexcept { this->swap_state(o); }

  void set_value() { this->checked().set_value(); }
};

template <class R>
void swap(promise<R>& a, promise<R>& b) noexcept {
  a.swap(b);
}

// packaged_task<R(Args...)> wraps a callable whose result (or exception)
// goes to a future: operator() runs it on the caller, once; reset() makes a
// fresh state for another run (the old one, if never run, is broken).
// Move-only; the callable may be move-only too.
template <class R, class... Args>
class packaged_task<R(Args...)> {
 public:
  packaged_task() noexcept = default;
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, packaged_task> && std::is_invocable_r_v<R, std::decay_t<F>&, Args...>)
  explicit packaged_task(F&& f)
      : fn_(std::make_unique<holder<std::decay_t<F>>>(std::forward<F>(f))),
        state_(std::make_shared<detail::future_state<R>>()) {}
  packaged_task(packaged_task&&) noexcept = default;
  packaged_task& operator=(packaged_task&& o) noexcept {
    if (this != &o) {
      if (state_) state_->abandon();
      fn_ = std::move(o.fn_);
      state_ = std::move(o.state_);
    }
    return *this;
  }
  packaged_task(const packaged_task&) = delete;
  packaged_task& operator=(const packaged_task&) = delete;
  // A task dropped without running breaks its promise.
  ~packaged_task() {
    if (state_) state_->abandon();
  }

  bool valid() const noexcept { return state_ != nullptr; }
  void swap(packaged_task& o) noexcept {
    fn_.swap(o.fn_);
    state_.swap(o.state_);
  }

  // get_future(): once per state (future_already_retrieved), no_state if
  // !valid().
  future<R> get_future() {
    checked().mark_retrieved();
    return detail::future_access::make<R>(state_);
  }

  // operator() calls the callable with `args` and stores what it returns
  // or throws; promise_already_satisfied if this state already ran.
  void operator()(Args... args) {
    detail::future_state<R>& s = checked();
    s.claim();
    s.store_result_of([&]() -> R { return fn_->call(std::forward<Args>(args)...); });
  }

  // reset() gives the task a fresh state (a new future to retrieve); the
  // old state is broken if it never ran. no_state if !valid().
  void reset() {
    checked();
    auto fresh = std::make_shared<detail::future_state<R>>();
    state_->abandon();
    state_ = std::move(fresh);
  }

 private:
  // The callable, type-erased and called as an lvalue (it may run again
  // after reset()).
  struct callable {
    virtual ~callable() = default;
    virtual R call(Args&&... args) = 0;
  };
  template <class F>
  struct holder final : callable {
    template <class G>
    explicit holder(G&& g) : f(std::forward<G>(g)) {}
    R call(Args&&... args) override {
      if constexpr (std::is_void_v<R>) {
        static_cast<void>(std::invoke(f, std::forward<Args>(args)...));
      } else {
        return std::invoke(f, std::forward<Args>(args)...);
      }
    }
    F f;
  };

  detail::future_state<R>& checked() const {
    if (!state_) detail::throw_future_error(future_errc::no_state);
    return *state_;
  }

  std::unique_ptr<callable> fn_;
  std::shared_ptr<detail::future_state<R>> state_;
};

template <class R, class... Args>
packaged_task(R (*)(Args...)) -> packaged_task<R(Args...)>;

namespace detail {
// The signature of a callable with one non-template operator(), for
// packaged_task's deduction guide (std's rule).
template <class M>
struct call_signature;
template <class G, class R, class... A>
struct call_signature<R (G::*)(A...)> {
  using type = R(A...);
};
template <class G, class R, class... A>
struct call_signature<R (G::*)(A...) const> {
  using type = R(A...);
};
template <class G, class R, class... A>
struct call_signature<R (G::*)(A...) noexcept> {
  using type = R(A...);
};
template <class G, class R, class... A>
struct call_signature<R (G::*)(A...) const noexcept> {
  using type = R(A...);
};
}  // namespace detail

template <class F>
packaged_task(F) -> packaged_task<typename detail::call_signature<decltype(&F::operator())>::type>;

template <class R, class... Args>
void swap(packaged_task<R(Args...)>& a, packaged_task<R(Args...)>& b) noexcept {
  a.swap(b);
}

// async() runs `f(args...)` as a new fiber of the calling fiber's runtime
// and returns the future of its result. Called from a fiber only:
// std::logic_error elsewhere, whose message names the fix (async(rt, f)).
// The fiber always runs to completion, once; the last future (or
// shared_future) of it that is dropped waits for it to return, as
// std::async's does.
template <class F, class... Args>
  requires(!std::is_same_v<std::decay_t<F>, launch> && !std::is_same_v<std::remove_cvref_t<F>, runtime>)
[[nodiscard]] future<detail::async_result_t<F, Args...>> async(F&& f, Args&&... args) {
  using R = detail::async_result_t<F, Args...>;
  // Checked here, not left to spawn(), whose message names spawn's own fix
  // to a caller that never wrote a spawn; and before any state is made.
  if (!detail::runtime_of_current_fiber()) {
    throw std::logic_error("usched::async called outside a fiber; use async(rt, f)");
  }
  return detail::start_async<R>([&](auto body) {
    return usched::spawn(std::move(body), std::forward<F>(f), std::forward<Args>(args)...);
  });
}

// async(rt, f, args...) is async() on runtime `rt`, from any thread.
template <class F, class... Args>
[[nodiscard]] future<detail::async_result_t<F, Args...>> async(runtime& rt, F&& f, Args&&... args) {
  using R = detail::async_result_t<F, Args...>;
  return detail::start_async<R>([&](auto body) {
    return rt.spawn(std::move(body), std::forward<F>(f), std::forward<Args>(args)...);
  });
}

// async(policy, f, args...): a policy with launch::async set (std's
// default, async | deferred, among them) runs a fiber, as async(f, ...)
// does; launch::deferred alone is lazy, as std's: nothing runs until the
// first wait() or get(), which runs the call on the waiting fiber or
// thread; timed waits return future_status::deferred until then, and a
// future never waited on never runs it.
template <class F, class... Args>
[[nodiscard]] future<detail::async_result_t<F, Args...>> async(launch policy, F&& f, Args&&... args) {
  using R = detail::async_result_t<F, Args...>;
  if ((policy & launch::async) != launch{}) return usched::async(std::forward<F>(f), std::forward<Args>(args)...);
  using state = detail::deferred_state<R, std::decay_t<F>, std::decay_t<Args>...>;
  return detail::future_access::make<R>(std::make_shared<state>(std::forward<F>(f), std::forward<Args>(args)...));
}

}  // namespace usched

// A promise takes an allocator for its shared state, so it is
// allocator-aware, as std::promise is.
template <class R, class Alloc>
struct std::uses_allocator<usched::promise<R>, Alloc> : std::true_type {};
