// shared_mutex: many readers of a table at once, one writer at a time.
#include <cstdio>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include <usched/usched.hpp>

namespace {

class registry {
 public:
  void put(const std::string& key, int value) {
    std::unique_lock<usched::shared_mutex> g(m_);  // writers alone
    table_[key] = value;
  }
  int get(const std::string& key) const {
    std::shared_lock<usched::shared_mutex> g(m_);  // readers together
    const auto it = table_.find(key);
    return it == table_.end() ? -1 : it->second;
  }

 private:
  mutable usched::shared_mutex m_;
  std::map<std::string, int> table_;
};

}  // namespace

int main() {
  usched::runtime rt;
  const long sum = rt.run([] {
    registry r;
    r.put("answer", 42);
    std::vector<usched::join_handle<long>> readers;
    for (int i = 0; i < 16; ++i) {
      readers.push_back(usched::spawn([&r] {
        long s = 0;
        for (int k = 0; k < 1000; ++k) s += r.get("answer");
        return s;
      }));
    }
    auto writer = usched::spawn([&r] {
      for (int k = 0; k < 100; ++k) r.put("other" + std::to_string(k), k);
    });
    long s = 0;
    for (auto& h : readers) s += h.join();
    writer.join();
    return s;
  });
  std::printf("readers summed %ld (expected %ld)\n", sum, 16L * 1000 * 42);
  return sum == 16L * 1000 * 42 ? 0 : 1;
}
