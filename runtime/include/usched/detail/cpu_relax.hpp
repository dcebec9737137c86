// cpu_relax.hpp: the spin-wait hint (x86 PAUSE, Arm YIELD).
#pragma once

namespace usched::detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
}

}  // namespace usched::detail
