# Which ROCm the HIP build uses, found before enable_language(HIP). First match wins:
#   1. ROCM_PATH (environment or -D)               AMD's variable; e.g. /opt/rocm-6.4.3
#   2. HIP_PATH (environment or -D)                the HIP toolkit's variable
#   3. ROCm installed as Python packages           TheRock's rocm[devel] wheels, asked with
#                                                  `<python> -m rocm_sdk path --root`
#   4. /opt/rocm                                   AMD's packages (a link to /opt/rocm-X.Y)
#   5. the system                                  distribution packages under /usr (Debian,
#                                                  Ubuntu, Fedora), found by CMake as usual
# A root named explicitly (1, 2) must be a ROCm install; a wrong one is an error, never skipped.
# For roots 1-4 the HIP compiler (clang++ of the root's LLVM), CMake's HIP root and the package
# search prefix (hip, hip-lang, rocPRIM, hipCUB) all come from that root, so PATH plays no part.
#
# In:  CAUSAL_CONV1D_PYTHON.  Out: CAUSAL_CONV1D_ROCM_SOURCE (where the root came from); after
# enable_language(HIP), CMAKE_HIP_COMPILER_ROCM_ROOT is the root actually used.

# A ROCm root holds the hip-lang CMake package (what CMake's HIP language loads).
function(_causal_conv1d_is_rocm_root out root)
  set(_ok FALSE)
  foreach(_sub IN ITEMS lib lib64 "lib/${CMAKE_LIBRARY_ARCHITECTURE}")
    if(EXISTS "${root}/${_sub}/cmake/hip-lang/hip-lang-config.cmake")
      set(_ok TRUE)
    endif()
  endforeach()
  set(${out} ${_ok} PARENT_SCOPE)
endfunction()

set(_rocm_root "")
set(_rocm_source "")
# Build settings (cmake/BuildSettings.cmake), but read on every configure and never put in the
# cache empty: hip-config.cmake takes a defined ROCM_PATH, even an empty one, as the ROCm root.
foreach(_var IN ITEMS ROCM_PATH HIP_PATH)
  if(NOT _rocm_root)
    set(_value "")
    if(DEFINED ${_var} AND NOT "${${_var}}" STREQUAL "")
      set(_value "${${_var}}")
      set(_from "-D${_var}")
      if("$ENV{${_var}}" STREQUAL "${_value}")
        set(_from "environment ${_var}")  # setup.py passes the environment's value as -D
      endif()
    elseif(DEFINED ENV{${_var}} AND NOT "$ENV{${_var}}" STREQUAL "")
      set(_value "$ENV{${_var}}")
      set(_from "environment ${_var}")
    endif()
    if(_value)
      _causal_conv1d_is_rocm_root(_ok "${_value}")
      if(NOT _ok)
        message(FATAL_ERROR "causal-conv1d: ${_var}=${_value} (${_from}) is not a ROCm install: no "
                            "lib/cmake/hip-lang/hip-lang-config.cmake under it. Point ${_var} at the ROCm "
                            "root (e.g. /opt/rocm-6.4.3), or unset it to use the ROCm found otherwise.")
      endif()
      set(_rocm_root "${_value}")
      set(_rocm_source "${_from}")
    endif()
  endif()
endforeach()
if(NOT _rocm_root AND CAUSAL_CONV1D_PYTHON)
  execute_process(COMMAND "${CAUSAL_CONV1D_PYTHON}" -m rocm_sdk path --root
    OUTPUT_VARIABLE _out ERROR_QUIET RESULT_VARIABLE _rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_rc EQUAL 0 AND _out)
    _causal_conv1d_is_rocm_root(_ok "${_out}")
    if(_ok)
      set(_rocm_root "${_out}")
      set(_rocm_source "ROCm Python packages: ${CAUSAL_CONV1D_PYTHON} -m rocm_sdk path --root")
    endif()
  endif()
endif()
if(NOT _rocm_root)
  _causal_conv1d_is_rocm_root(_ok "/opt/rocm")
  if(_ok)
    get_filename_component(_rocm_root "/opt/rocm" REALPATH)
    set(_rocm_source "/opt/rocm")
  endif()
endif()

if(_rocm_root)
  get_filename_component(_rocm_root "${_rocm_root}" ABSOLUTE)
  # The root's own clang++: AMD's packages keep LLVM in llvm/, TheRock's wheels in lib/llvm/.
  if(NOT CMAKE_HIP_COMPILER AND "$ENV{HIPCXX}" STREQUAL "")
    foreach(_c IN ITEMS "${_rocm_root}/llvm/bin/clang++" "${_rocm_root}/lib/llvm/bin/clang++")
      if(NOT CMAKE_HIP_COMPILER AND EXISTS "${_c}")
        set(CMAKE_HIP_COMPILER "${_c}" CACHE FILEPATH "HIP compiler (from the ROCm root)")
      endif()
    endforeach()
    if(NOT CMAKE_HIP_COMPILER)
      message(FATAL_ERROR "causal-conv1d: the ROCm at ${_rocm_root} (${_rocm_source}) has no clang++ in "
                          "llvm/bin or lib/llvm/bin. Install its compiler (hipcc / rocm-llvm), or set "
                          "HIPCXX to the clang++ to use.")
    endif()
  endif()
  set(CMAKE_HIP_COMPILER_ROCM_ROOT "${_rocm_root}" CACHE PATH "ROCm root of the HIP language")
  list(PREPEND CMAKE_PREFIX_PATH "${_rocm_root}")
else()
  set(_rocm_source "system packages, found by CMake")
endif()
set(CAUSAL_CONV1D_ROCM_SOURCE "${_rocm_source}")
