// random.hpp: the scheduler's two generators of random bits, written once.
//
// splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", 2014) gives each worker, the simulator's virtual workers and
// threads outside the runtime their bits for placement and for where a
// kick's or a steal's search starts: one add and a mix, and any state,
// even one a counter hands out, gives a well-spread value.
//
// lcg_next() is Knuth's MMIX linear congruential step: a balance pass that
// walks up a worker's chain derives each level's bits from the previous
// level's with it, so that one draw serves the whole pass.
#pragma once

#include <cstdint>

namespace usched::detail {

// What splitmix64 adds to its state at each draw (2^64 / phi).
inline constexpr std::uint64_t splitmix64_increment = 0x9e3779b97f4a7c15ULL;

// splitmix64_mix(): splitmix64's output function, of a state just
// advanced (by splitmix64(), or by a shared counter's fetch_add of the
// increment).
constexpr std::uint64_t splitmix64_mix(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// splitmix64(): advances `state` and returns its next value.
constexpr std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  return splitmix64_mix(state += splitmix64_increment);
}

// lcg_next(): the next state of the MMIX LCG.
constexpr std::uint64_t lcg_next(std::uint64_t x) noexcept {
  return x * 6364136223846793005ULL + 1442695040888963407ULL;
}

}  // namespace usched::detail
