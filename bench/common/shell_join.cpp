// shell_join.cpp: see shell_join.hpp.
#include "common/shell_join.hpp"

#include <string_view>
#include <vector>

namespace bench {

std::string shell_join(std::span<const std::string> args) {
  // Characters a shell leaves alone in an unquoted word.
  constexpr std::string_view plain =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%";
  std::string out;
  for (const std::string& a : args) {
    if (!out.empty()) out += ' ';
    if (!a.empty() && a.find_first_not_of(plain) == std::string::npos) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) {
      if (c == '\'') out += "'\\''";
      else out += c;
    }
    out += '\'';
  }
  return out;
}

std::string shell_join(const std::string& exe, std::span<const std::string> args) {
  std::vector<std::string> all{exe};
  all.insert(all.end(), args.begin(), args.end());
  return shell_join(all);
}

}  // namespace bench
