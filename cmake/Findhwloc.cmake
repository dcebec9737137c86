# Findhwloc: locate the hwloc library through pkg-config and expose it as the
# imported target hwloc::hwloc. Installed with usched's package config so that a
# static usched can be consumed with find_package(usched).
include(FindPackageHandleStandardArgs)
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_HWLOC QUIET hwloc)
endif()
find_path(HWLOC_INCLUDE_DIR hwloc.h HINTS ${PC_HWLOC_INCLUDE_DIRS})
find_library(HWLOC_LIBRARY NAMES hwloc HINTS ${PC_HWLOC_LIBRARY_DIRS})
set(hwloc_VERSION ${PC_HWLOC_VERSION})
find_package_handle_standard_args(hwloc
  REQUIRED_VARS HWLOC_LIBRARY HWLOC_INCLUDE_DIR
  VERSION_VAR hwloc_VERSION)
if(hwloc_FOUND AND NOT TARGET hwloc::hwloc)
  add_library(hwloc::hwloc UNKNOWN IMPORTED)
  set_target_properties(hwloc::hwloc PROPERTIES
    IMPORTED_LOCATION "${HWLOC_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${HWLOC_INCLUDE_DIR}")
endif()
mark_as_advanced(HWLOC_INCLUDE_DIR HWLOC_LIBRARY)
