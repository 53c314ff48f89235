# Whether the HIP the extension is built with can share a process with the PyTorch it targets.
# A ROCm PyTorch wheel carries its own HIP runtime; built against another major version, the
# extension either loads a second runtime next to PyTorch's or fails at the first kernel launch,
# with an HSA error that names neither cause. So:
#   same major.minor       fine
#   other minor            a warning naming both
#   other major            an error naming both, where each came from, and how to pick the
#                          matching ROCm; CAUSAL_CONV1D_ALLOW_HIP_MISMATCH=1 turns it into a warning
# Usable from a project (after find_package(hip)) and from `cmake -P` (tests/python/test_build.py).

# causal_conv1d_check_hip_versions(<found> <found_from> <torch> <torch_from> <allow>)
#   found: the toolchain's HIP version (hip_VERSION, e.g. 6.4.43484); torch: torch.version.hip
#   (e.g. 6.4.43484-2d6e21c8d, empty for a PyTorch without ROCm); allow: a true value overrides.
function(causal_conv1d_check_hip_versions found found_from torch torch_from allow)
  if("${torch}" STREQUAL "")
    message(STATUS "causal-conv1d: PyTorch is not a ROCm build (${torch_from}): no HIP version to match; "
                   "building with HIP ${found} (${found_from})")
    return()
  endif()
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _f "${found}")
  set(_f_major "${CMAKE_MATCH_1}")
  set(_f_minor "${CMAKE_MATCH_2}")
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _t "${torch}")
  set(_t_major "${CMAKE_MATCH_1}")
  set(_t_minor "${CMAKE_MATCH_2}")
  if(NOT _f OR NOT _t)
    message(FATAL_ERROR "causal-conv1d: cannot read HIP versions: toolchain '${found}' (${found_from}), "
                        "PyTorch '${torch}' (${torch_from})")
  endif()
  set(_both "the toolchain's HIP is ${found} (${found_from}) and PyTorch's is ${torch} (${torch_from})")
  set(_fix "Build with the ROCm matching PyTorch: ROCM_PATH=/opt/rocm-${_t_major}.${_t_minor}.x (or "
           "-DCMAKE_PREFIX_PATH=/opt/rocm-${_t_major}.${_t_minor}.x), or install the PyTorch built for "
           "ROCm ${_f_major}.${_f_minor}.")
  if(NOT _f_major STREQUAL _t_major)
    if(allow)
      message(WARNING "causal-conv1d: ${_both}: different major versions, built anyway because "
                      "CAUSAL_CONV1D_ALLOW_HIP_MISMATCH=1. Expect a second HIP runtime in the process or "
                      "HSA errors at the first kernel launch. ${_fix}")
    else()
      message(FATAL_ERROR "causal-conv1d: ${_both}: different major versions cannot share a process "
                          "(two HIP runtimes, or HSA errors at the first kernel launch). ${_fix} "
                          "CAUSAL_CONV1D_ALLOW_HIP_MISMATCH=1 builds anyway.")
    endif()
  elseif(NOT _f_minor STREQUAL _t_minor)
    message(WARNING "causal-conv1d: ${_both}: the minor versions differ. This usually works within a "
                    "major version; if kernels fail to launch, ${_fix}")
  else()
    message(STATUS "causal-conv1d: HIP ${found} (${found_from}) matches PyTorch's HIP ${torch}")
  endif()
endfunction()
