# The generated build-config header, <include_dir>/causal_conv1d/build_config.h, from
# cmake/build_config.h.in: the backend macros (CAUSAL_CONV1D_BACKEND_HIP, _CUDA, CAUSAL_CONV1D_HAS_GPU)
# and the build report's strings, for every source that depends on them. configure_file rewrites
# the file only when its text changes, so a re-configure rebuilds nothing by itself.
#
#   causal_conv1d_write_build_config(<include_dir> BACKEND <hip|cuda|cpu> [GPU_ARCHS <list>]
#                                    [TORCH_VERSION <v>] [HIP_VERSION <v>] [ROCM_ROOT <path>])
#
# Script mode, for compiles outside a CMake build (scripts/compile_report.py runs hipcc directly):
#
#   cmake -DOUTPUT_DIR=<include_dir> -DBACKEND=hip [-DGPU_ARCHS=gfx1201] -P cmake/BuildConfig.cmake

set(_causal_conv1d_build_config_template "${CMAKE_CURRENT_LIST_DIR}/build_config.h.in")

# <out> = <value> as the inside of a C string literal.
function(_causal_conv1d_c_string out value)
  string(REPLACE "\\" "\\\\" value "${value}")
  string(REPLACE "\"" "\\\"" value "${value}")
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

function(causal_conv1d_write_build_config include_dir)
  cmake_parse_arguments(PARSE_ARGV 1 _cfg "" "BACKEND;TORCH_VERSION;HIP_VERSION;ROCM_ROOT" "GPU_ARCHS")
  if(NOT _cfg_BACKEND MATCHES "^(hip|cuda|cpu)$")
    message(FATAL_ERROR "causal_conv1d_write_build_config: BACKEND must be hip, cuda or cpu, got '${_cfg_BACKEND}'")
  endif()
  set(CAUSAL_CONV1D_CONFIG_HIP 0)
  set(CAUSAL_CONV1D_CONFIG_CUDA 0)
  if(_cfg_BACKEND STREQUAL "hip")
    set(CAUSAL_CONV1D_CONFIG_HIP 1)
  elseif(_cfg_BACKEND STREQUAL "cuda")
    set(CAUSAL_CONV1D_CONFIG_CUDA 1)
  endif()
  set(CAUSAL_CONV1D_CONFIG_BACKEND "${_cfg_BACKEND}")
  string(REPLACE ";" "," _archs "${_cfg_GPU_ARCHS}")
  _causal_conv1d_c_string(CAUSAL_CONV1D_CONFIG_GPU_ARCHS "${_archs}")
  _causal_conv1d_c_string(CAUSAL_CONV1D_CONFIG_TORCH_VERSION "${_cfg_TORCH_VERSION}")
  _causal_conv1d_c_string(CAUSAL_CONV1D_CONFIG_HIP_VERSION "${_cfg_HIP_VERSION}")
  _causal_conv1d_c_string(CAUSAL_CONV1D_CONFIG_ROCM_ROOT "${_cfg_ROCM_ROOT}")
  configure_file("${_causal_conv1d_build_config_template}" "${include_dir}/causal_conv1d/build_config.h" @ONLY)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT OUTPUT_DIR)
    message(FATAL_ERROR "usage: cmake -DOUTPUT_DIR=<dir> -DBACKEND=<hip|cuda|cpu> [-DGPU_ARCHS=<list>] -P ${CMAKE_CURRENT_LIST_FILE}")
  endif()
  causal_conv1d_write_build_config("${OUTPUT_DIR}" BACKEND "${BACKEND}" GPU_ARCHS ${GPU_ARCHS})
endif()
