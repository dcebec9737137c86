// embed: the README's embedding snippet, compiled.
#include <usched/usched.hpp>

int main() {
  usched::runtime rt;                    // configured from USCHED_* (below)
  int v = rt.run([] {                    // runs as a fiber; blocks until it returns
    auto h = usched::spawn([] { return 41; });
    return h.join() + 1;                 // join() rethrows the fiber's exception
  });
  return v == 42 ? 0 : 1;
}                                        // ~runtime waits for every fiber, then stops
