# Chooses the backend and, for GPU backends, the target architectures, then enables the GPU
# language. Decisions and their sources are printed so a build log says what was built.
#
# Backend: CAUSAL_CONV1D_BACKEND (hip | cuda | cpu | auto), else from the PyTorch build:
# ROCm -> hip, CUDA -> cuda, neither -> cpu.
#
# HIP archs, first one set wins: CAUSAL_CONV1D_HIP_ARCHS, PYTORCH_ROCM_ARCH, HIP_ARCHITECTURES
# (upstream's name), else the default list below.
# Lists may be separated by ';', ',' or spaces. "native" is passed on only when asked for; "auto"
# asks this machine's GPUs (amdgpu-arch, rocm_agent_enumerator or rocminfo) and fails without one.
#
# CUDA archs (the NVIDIA build of the same source): CAUSAL_CONV1D_CUDA_ARCHS (CMake's form:
# "90;80"), else TORCH_CUDA_ARCH_LIST ("9.0;8.0+PTX"), else 80;90.
#
# Each is a build setting (cmake/BuildSettings.cmake): -D, or the environment.
#
# Out: CAUSAL_CONV1D_BACKEND_RESOLVED (hip | cuda | cpu), CAUSAL_CONV1D_GPU_ARCHS (list).

set(CAUSAL_CONV1D_DEFAULT_HIP_ARCHS gfx1201 gfx1200 gfx1100 gfx1101 gfx1151 gfx942 gfx90a)

function(_causal_conv1d_split_list out value)
  string(REGEX REPLACE "[ ,;]+" ";" _l "${value}")
  list(REMOVE_ITEM _l "")
  list(REMOVE_DUPLICATES _l)
  set(${out} "${_l}" PARENT_SCOPE)
endfunction()

causal_conv1d_setting(CAUSAL_CONV1D_BACKEND STRING "hip | cuda | cpu | auto")
causal_conv1d_setting(CAUSAL_CONV1D_HIP_ARCHS STRING "AMD GPU archs (default: a list incl. gfx1201)")
causal_conv1d_setting(PYTORCH_ROCM_ARCH STRING "AMD GPU archs when CAUSAL_CONV1D_HIP_ARCHS is empty (PyTorch's name)")
causal_conv1d_setting(HIP_ARCHITECTURES STRING "AMD GPU archs when both of the above are empty (upstream's name)")
causal_conv1d_setting(CAUSAL_CONV1D_CUDA_ARCHS STRING "NVIDIA archs, CMake form (default: 80;90)")
causal_conv1d_setting(TORCH_CUDA_ARCH_LIST STRING "NVIDIA archs when CAUSAL_CONV1D_CUDA_ARCHS is empty (PyTorch's name)")
causal_conv1d_first_setting(_hip_archs CAUSAL_CONV1D_HIP_ARCHS PYTORCH_ROCM_ARCH HIP_ARCHITECTURES)
causal_conv1d_first_setting(_cuda_archs CAUSAL_CONV1D_CUDA_ARCHS TORCH_CUDA_ARCH_LIST)

# --- backend ---------------------------------------------------------------------------------
string(TOLOWER "${CAUSAL_CONV1D_BACKEND}" _backend)
if(_backend STREQUAL "" OR _backend STREQUAL "auto")
  if(TORCH_HIP_VERSION)
    set(_backend hip)
    set(_backend_source "PyTorch ${TORCH_VERSION} is a ROCm build (HIP ${TORCH_HIP_VERSION})")
  elseif(TORCH_CUDA_VERSION)
    set(_backend cuda)
    set(_backend_source "PyTorch ${TORCH_VERSION} is a CUDA build (CUDA ${TORCH_CUDA_VERSION})")
  else()
    set(_backend cpu)
    set(_backend_source "PyTorch ${TORCH_VERSION} has no GPU support")
  endif()
elseif(_backend MATCHES "^(hip|cuda|cpu)$")
  set(_backend_source "${CAUSAL_CONV1D_BACKEND_SOURCE}")
else()
  message(FATAL_ERROR "causal-conv1d: CAUSAL_CONV1D_BACKEND must be hip, cuda, cpu or auto, got '${CAUSAL_CONV1D_BACKEND}' (${CAUSAL_CONV1D_BACKEND_SOURCE})")
endif()
set(CAUSAL_CONV1D_BACKEND_RESOLVED ${_backend})
message(STATUS "causal-conv1d: backend ${_backend} (${_backend_source})")

# --- HIP -------------------------------------------------------------------------------------
if(_backend STREQUAL "hip")
  _causal_conv1d_split_list(_archs "${_hip_archs}")
  set(_archs_source "${_hip_archs_SOURCE}")
  if(NOT _archs)
    set(_archs ${CAUSAL_CONV1D_DEFAULT_HIP_ARCHS})
    set(_archs_source "default list")
  elseif(_archs STREQUAL "auto")
    # The GPUs of this machine, from whichever ROCm tool exists; no GPU visible is an error.
    set(_found "")
    find_program(_amdgpu_arch NAMES amdgpu-arch offload-arch PATHS /opt/rocm/llvm/bin /opt/rocm/bin ENV ROCM_PATH PATH_SUFFIXES llvm/bin bin)
    find_program(_agent_enum NAMES rocm_agent_enumerator PATHS /opt/rocm/bin ENV ROCM_PATH PATH_SUFFIXES bin)
    find_program(_rocminfo NAMES rocminfo PATHS /opt/rocm/bin ENV ROCM_PATH PATH_SUFFIXES bin)
    foreach(_tool IN ITEMS "${_amdgpu_arch}" "${_agent_enum}" "${_rocminfo}")
      if(_tool AND NOT _found)
        execute_process(COMMAND "${_tool}" OUTPUT_VARIABLE _out ERROR_QUIET RESULT_VARIABLE _rc)
        string(REGEX MATCHALL "gfx[0-9a-f]+" _gfx "${_out}")
        list(REMOVE_ITEM _gfx gfx000)  # rocm_agent_enumerator lists the CPU agent as gfx000
        list(REMOVE_DUPLICATES _gfx)
        if(_gfx)
          set(_found "${_gfx}")
          set(_archs_source "auto: ${_tool}")
        endif()
      endif()
    endforeach()
    if(NOT _found)
      message(FATAL_ERROR "causal-conv1d: CAUSAL_CONV1D_HIP_ARCHS=auto found no AMD GPU (tried amdgpu-arch, "
                          "rocm_agent_enumerator, rocminfo). Is a GPU visible (/dev/kfd, render group)? "
                          "Or name the arch, e.g. CAUSAL_CONV1D_HIP_ARCHS=gfx1201.")
    endif()
    set(_archs ${_found})
  endif()
  foreach(_a IN LISTS _archs)
    if(NOT _a MATCHES "^(gfx[0-9a-f]+(:[a-z0-9-]+[+-])*|native)$")
      message(FATAL_ERROR "causal-conv1d: '${_a}' (from ${_archs_source}) is not an AMD GPU arch such as gfx1201 or gfx90a:xnack-")
    endif()
  endforeach()
  # Must be set before enable_language(HIP): otherwise CMake asks the machine's GPUs (native).
  set(CMAKE_HIP_ARCHITECTURES "${_archs}" CACHE STRING "AMD GPU targets" FORCE)
  include(RocmToolchain)  # which ROCm: compiler, HIP root, package prefix
  enable_language(HIP)
  set(CAUSAL_CONV1D_GPU_ARCHS ${_archs})
  set(CAUSAL_CONV1D_ROCM_ROOT "${CMAKE_HIP_COMPILER_ROCM_ROOT}")
  message(STATUS "causal-conv1d: ROCm ${CAUSAL_CONV1D_ROCM_ROOT} (${CAUSAL_CONV1D_ROCM_SOURCE})")
  message(STATUS "causal-conv1d: HIP archs ${_archs} (${_archs_source}); compiler ${CMAKE_HIP_COMPILER} ${CMAKE_HIP_COMPILER_VERSION}")

# --- CUDA ------------------------------------------------------------------------------------
elseif(_backend STREQUAL "cuda")
  # Accepts CMake's form (90;80) and TORCH_CUDA_ARCH_LIST's (9.0;8.0+PTX).
  _causal_conv1d_split_list(_l "${_cuda_archs}")
  set(_archs "")
  foreach(_a IN LISTS _l)
    string(REGEX REPLACE "\\+PTX$" "" _a "${_a}")
    string(REPLACE "." "" _a "${_a}")
    list(APPEND _archs ${_a})
  endforeach()
  set(_archs_source "${_cuda_archs_SOURCE}")
  if(NOT _archs)
    set(_archs 80 90)
    set(_archs_source "default list")
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${_archs}" CACHE STRING "NVIDIA GPU targets" FORCE)
  enable_language(CUDA)
  set(CAUSAL_CONV1D_GPU_ARCHS ${_archs})
  message(STATUS "causal-conv1d: CUDA archs ${_archs} (${_archs_source}); compiler ${CMAKE_CUDA_COMPILER} ${CMAKE_CUDA_COMPILER_VERSION}")
else()
  set(CAUSAL_CONV1D_GPU_ARCHS "")
endif()
