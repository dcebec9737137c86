// death_probe_unclashed.cpp: the death probe's big frames built without
// -fstack-clash-protection (tests/CMakeLists.txt), as code from a compiler
// or a library that does not probe its frames is. Entering such a frame
// moves the stack pointer by the whole frame at once, over the guard page,
// and its first touch (index 0, the far end of the array) is where the
// stack pointer now is: in the fiber's own guard page, in the neighbouring
// block, or below the slab, depending on the frame's size.
#include <cstddef>

namespace death_probe {

namespace {

// A frame of `KiB` KiB that writes its lowest byte only.
template <std::size_t KiB>
[[gnu::noinline]] int touched_at_its_far_end() {
  volatile char buf[KiB * 1024];
  buf[0] = 1;
  return buf[0];
}

}  // namespace

// unclashed_frame() enters a frame of `kib` KiB (one of 68, 141, 1024) and
// writes its far end; false for any other size.
bool unclashed_frame(std::size_t kib) {
  switch (kib) {
    case 68:
      touched_at_its_far_end<68>();
      return true;
    case 141:
      touched_at_its_far_end<141>();
      return true;
    case 1024:
      touched_at_its_far_end<1024>();
      return true;
    default:
      return false;
  }
}

}  // namespace death_probe
