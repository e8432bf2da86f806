# The Slurm release the SPANK plugin is built against. Slurm refuses a plugin built for another
# major release, so the release found here is stamped into the plugin and the packages.
#
# -DSLURM_ROOT=PREFIX picks a Slurm installed under PREFIX (PREFIX/include/slurm/spank.h);
# by default the system's. Sets:
#   SLURM_INCLUDE_DIR        the folder holding slurm/spank.h
#   GPUBIND_SLURM_HEADERS    a folder holding only slurm/ (a link to it), for the include path
#   GPUBIND_SLURM_VERSION    e.g. 24.11.5 (from slurm/slurm_version.h)
#   GPUBIND_SLURM_RELEASE    e.g. 24.11 (the part plugins must match)
#   GPUBIND_SLURM_NEXT       the first version past that release, e.g. 24.12 (for package ranges)
#   GPUBIND_SLURM_API        libslurm's API number (its soname), e.g. 42, or 0 when no libslurm
#                            was found; the plugin compares it with the running Slurm's
set(SLURM_ROOT "" CACHE PATH "Prefix of the Slurm the SPANK plugin is built against (default: the system's)")

# A new SLURM_ROOT in an existing build folder: find again, not the cached old Slurm.
if(NOT "${SLURM_ROOT}" STREQUAL "${GPUBIND_SLURM_ROOT_FOUND}")
  unset(SLURM_INCLUDE_DIR CACHE)
  unset(SLURM_LIBRARY CACHE)
endif()
set(GPUBIND_SLURM_ROOT_FOUND "${SLURM_ROOT}" CACHE INTERNAL "SLURM_ROOT the Slurm paths were found for")
if(SLURM_ROOT)
  find_path(SLURM_INCLUDE_DIR slurm/spank.h PATHS ${SLURM_ROOT}/include NO_DEFAULT_PATH)
  find_library(SLURM_LIBRARY slurm PATHS ${SLURM_ROOT}/lib ${SLURM_ROOT}/lib64
               ${SLURM_ROOT}/lib/${CMAKE_LIBRARY_ARCHITECTURE} NO_DEFAULT_PATH)
else()
  find_path(SLURM_INCLUDE_DIR slurm/spank.h)
  find_library(SLURM_LIBRARY slurm)
endif()
if(NOT SLURM_INCLUDE_DIR)
  message(FATAL_ERROR "slurm/spank.h not found${SLURM_ROOT}: install Slurm's headers "
                      "(Debian: libslurm-dev, EL: slurm-devel) or set -DSLURM_ROOT=PREFIX")
endif()

file(STRINGS ${SLURM_INCLUDE_DIR}/slurm/slurm_version.h slurm_version_line
     REGEX "^#define SLURM_VERSION_NUMBER ")
if(NOT slurm_version_line MATCHES "0x([0-9a-fA-F][0-9a-fA-F])([0-9a-fA-F][0-9a-fA-F])([0-9a-fA-F][0-9a-fA-F])")
  message(FATAL_ERROR "no SLURM_VERSION_NUMBER in ${SLURM_INCLUDE_DIR}/slurm/slurm_version.h")
endif()
math(EXPR slurm_major "0x${CMAKE_MATCH_1}")
math(EXPR slurm_minor "0x${CMAKE_MATCH_2}")
math(EXPR slurm_micro "0x${CMAKE_MATCH_3}")
math(EXPR slurm_next_minor "${slurm_minor} + 1")
# Slurm's minor numbers are two digits (22.05, 23.02).
string(LENGTH "${slurm_minor}" minor_digits)
if(minor_digits EQUAL 1)
  set(slurm_minor "0${slurm_minor}")
endif()
string(LENGTH "${slurm_next_minor}" minor_digits)
if(minor_digits EQUAL 1)
  set(slurm_next_minor "0${slurm_next_minor}")
endif()
set(GPUBIND_SLURM_RELEASE "${slurm_major}.${slurm_minor}")
set(GPUBIND_SLURM_VERSION "${GPUBIND_SLURM_RELEASE}.${slurm_micro}")
set(GPUBIND_SLURM_NEXT "${slurm_major}.${slurm_next_minor}")

# libslurm's soname carries its API number (libslurm.so.38 is 22.05's).
set(GPUBIND_SLURM_API 0)
if(SLURM_LIBRARY)
  get_filename_component(slurm_library_real ${SLURM_LIBRARY} REALPATH)
  if(slurm_library_real MATCHES "libslurm\\.so\\.([0-9]+)")
    set(GPUBIND_SLURM_API ${CMAKE_MATCH_1})
  endif()
endif()
message(STATUS "SPANK plugin built for Slurm ${GPUBIND_SLURM_RELEASE} (${GPUBIND_SLURM_VERSION}, "
               "headers in ${SLURM_INCLUDE_DIR}, libslurm API ${GPUBIND_SLURM_API})")

# The plugin sees Slurm's headers alone: PREFIX/include may hold another system's libc headers.
set(GPUBIND_SLURM_HEADERS ${CMAKE_BINARY_DIR}/slurm-headers)
file(MAKE_DIRECTORY ${GPUBIND_SLURM_HEADERS})
file(CREATE_LINK ${SLURM_INCLUDE_DIR}/slurm ${GPUBIND_SLURM_HEADERS}/slurm SYMBOLIC)

# For scripts and tests: the release this build's plugin is for.
file(WRITE ${CMAKE_BINARY_DIR}/slurm-release "${GPUBIND_SLURM_RELEASE}\n")
