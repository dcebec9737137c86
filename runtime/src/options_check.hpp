// options_check.hpp: how the runtime names a setting in an error message.
#pragma once

#include <string>
#include <string_view>

#include <usched/options.hpp>

namespace usched::detail {

// option_subject() names the field `field` of `o` as the user set it:
// "USCHED_WORKERS='9'" while the field holds the value its variable gives
// it, else "options::workers=9". `field` is the member's name.
std::string option_subject(const options& o, std::string_view field);

}  // namespace usched::detail
