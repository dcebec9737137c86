// cli_main.cpp: the benchmark programs' catch ladder (cli_main.hpp).
#include "common/cli_main.hpp"

#include <exception>
#include <iostream>

#include <usched/error.hpp>

namespace bench {

int guarded_main(std::string_view program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const usage_error& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return exit_usage;
  } catch (const usched::config_error& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return exit_usage;
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return exit_failure;
  }
}

}  // namespace bench
