# Findliburing: locate liburing (Debian 12: liburing-dev 2.3) through
# pkg-config and expose it as the imported target liburing::liburing.
# Installed with usched's package config so that a static usched can be
# consumed with find_package(usched).
include(FindPackageHandleStandardArgs)
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_LIBURING QUIET liburing)
endif()
find_path(LIBURING_INCLUDE_DIR liburing.h HINTS ${PC_LIBURING_INCLUDE_DIRS})
find_library(LIBURING_LIBRARY NAMES uring HINTS ${PC_LIBURING_LIBRARY_DIRS})
set(liburing_VERSION ${PC_LIBURING_VERSION})
find_package_handle_standard_args(liburing
  REQUIRED_VARS LIBURING_LIBRARY LIBURING_INCLUDE_DIR
  VERSION_VAR liburing_VERSION)
if(liburing_FOUND AND NOT TARGET liburing::liburing)
  add_library(liburing::liburing UNKNOWN IMPORTED)
  set_target_properties(liburing::liburing PROPERTIES
    IMPORTED_LOCATION "${LIBURING_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${LIBURING_INCLUDE_DIR}")
endif()
mark_as_advanced(LIBURING_INCLUDE_DIR LIBURING_LIBRARY)
