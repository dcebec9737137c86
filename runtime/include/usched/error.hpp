// usched/error.hpp: the exception thrown for bad configuration.
#pragma once

#include <stdexcept>
#include <string>

namespace usched {

// config_error is thrown by options::from_env(), options::validate() and the
// runtime constructor when a setting cannot be honoured: an unknown policy, a
// malformed topology, an impossible worker count. what() is one line that names
// the offending value and what is accepted; bundled programs print it and exit
// non-zero.
class config_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace usched
