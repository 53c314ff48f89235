# Reads what the build needs of the PyTorch in use from its Python package: version, whether it is
# a ROCm or CUDA build, headers, libraries, C++ ABI. Deliberately not find_package(Torch): its
# CUDA/HIP logic probes nvcc and injects -gencode flags, which is the upstream failure on ROCm.
#
# In:  CAUSAL_CONV1D_PYTHON (defaults to the first python3 on PATH)
# Out: TORCH_VERSION, TORCH_HIP_VERSION, TORCH_CUDA_VERSION, TORCH_INCLUDE_DIRS,
#      TORCH_LIBRARY_DIR, TORCH_CXX11_ABI, PYTHON_EXT_SUFFIX, PYTHON_INCLUDE_DIR,
#      TORCH_PARALLEL_BACKEND, TORCH_OPENMP_LIBRARY, and the targets causal_conv1d::torch,
#      causal_conv1d::torch_python and causal_conv1d::torch_parallel

if(NOT CAUSAL_CONV1D_PYTHON)
  unset(CAUSAL_CONV1D_PYTHON CACHE)  # an empty cache entry would stop find_program from searching
  find_program(CAUSAL_CONV1D_PYTHON NAMES python3 python REQUIRED)
endif()

# The query is a Python program of its own (torch_query.py, which reads ELF files with
# causal_conv1d/_binary.py); a change to either re-runs the configure.
set(_query_script "${CMAKE_CURRENT_LIST_DIR}/torch_query.py")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  "${_query_script}" "${CMAKE_CURRENT_LIST_DIR}/../causal_conv1d/_binary.py")
execute_process(
  COMMAND "${CAUSAL_CONV1D_PYTHON}" "${_query_script}"
  OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "causal-conv1d: cannot import torch with ${CAUSAL_CONV1D_PYTHON}:\n${_err}\n"
                      "Install PyTorch first (build with pip --no-build-isolation so it is visible).")
endif()
string(REPLACE "\n" ";" _lines "${_out}")
foreach(_line IN LISTS _lines)
  if(_line MATCHES "^([a-z_0-9]+)=(.*)$")
    set(_torch_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
  endif()
endforeach()
set(TORCH_VERSION "${_torch_version}")
set(TORCH_HIP_VERSION "${_torch_hip}")
set(TORCH_CUDA_VERSION "${_torch_cuda}")
string(REPLACE "|" ";" TORCH_INCLUDE_DIRS "${_torch_include_dirs}")
set(TORCH_LIBRARY_DIR "${_torch_library_dir}")
set(TORCH_CXX11_ABI "${_torch_cxx11_abi}")
set(PYTHON_EXT_SUFFIX "${_torch_ext_suffix}")
set(PYTHON_INCLUDE_DIR "${_torch_python_include_dir}")
set(TORCH_PARALLEL_BACKEND "${_torch_parallel}")

# The C++ headers ship in a separate package on some distributions (Debian/Ubuntu: python3-torch
# without libtorch-dev leaves dangling symlinks) and are stripped from some wheels: say so now
# rather than failing mid-compile on the first #include.
set(_torch_header_found FALSE)
foreach(_dir IN LISTS TORCH_INCLUDE_DIRS)
  if(EXISTS "${_dir}/torch/library.h")
    set(_torch_header_found TRUE)
  endif()
endforeach()
if(NOT _torch_header_found)
  string(REPLACE ";" "\n    " _dirs_text "${TORCH_INCLUDE_DIRS}")
  message(FATAL_ERROR
    "causal-conv1d: the PyTorch ${TORCH_VERSION} of ${CAUSAL_CONV1D_PYTHON} has no C++ headers: "
    "torch/library.h is in none of its include directories\n    ${_dirs_text}\n"
    "The extension compiles against them. Install them: Debian/Ubuntu python3-torch -> "
    "`apt install libtorch-dev`; a pip or conda PyTorch -> reinstall the full package "
    "(its wheel ships torch/include).")
endif()

foreach(_lib c10 torch_cpu torch torch_python)
  find_library(TORCH_${_lib}_LIBRARY NAMES ${_lib} PATHS "${TORCH_LIBRARY_DIR}" NO_DEFAULT_PATH)
  if(NOT TORCH_${_lib}_LIBRARY)
    message(FATAL_ERROR "causal-conv1d: lib${_lib}.so not found in ${TORCH_LIBRARY_DIR}")
  endif()
endforeach()

add_library(causal_conv1d_torch INTERFACE)
add_library(causal_conv1d::torch ALIAS causal_conv1d_torch)
target_include_directories(causal_conv1d_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
target_compile_definitions(causal_conv1d_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=${TORCH_CXX11_ABI})
target_link_libraries(causal_conv1d_torch INTERFACE
  ${TORCH_torch_LIBRARY} ${TORCH_torch_cpu_LIBRARY} ${TORCH_c10_LIBRARY})

# What a CPython extension module built against torch needs on top (causal_conv1d._eager): Python's
# headers and libtorch_python (THPVariable, torch's error translation; found with the other
# libraries above). Python's own symbols come from the interpreter that imports the module, so
# libpython is not linked.
if(NOT EXISTS "${PYTHON_INCLUDE_DIR}/Python.h")
  message(FATAL_ERROR
    "causal-conv1d: Python.h is not in ${PYTHON_INCLUDE_DIR}, the header directory of ${CAUSAL_CONV1D_PYTHON}. "
    "Install Python's development headers (Debian/Ubuntu: python3-dev).")
endif()
add_library(causal_conv1d_torch_python INTERFACE)
add_library(causal_conv1d::torch_python ALIAS causal_conv1d_torch_python)
target_include_directories(causal_conv1d_torch_python SYSTEM INTERFACE "${PYTHON_INCLUDE_DIR}")
target_link_libraries(causal_conv1d_torch_python INTERFACE causal_conv1d_torch ${TORCH_torch_python_LIBRARY})

# at::parallel_for is a header template. With ATen's OpenMP backend it parallelises only in code
# compiled with OpenMP (#pragma omp parallel under _OPENMP); compiled without, it runs the whole
# range on the calling thread. So the torch layer's CPU ops are compiled with OpenMP, and linked to
# the very runtime torch has loaded (never a second copy: two OpenMP runtimes in one process ignore
# each other's thread settings, and wheels ship their own renamed libgomp). GCC and Clang both
# emit calls a libgomp or an LLVM libomp (which also exports the GOMP_* entry points) accepts.
add_library(causal_conv1d_torch_parallel INTERFACE)
add_library(causal_conv1d::torch_parallel ALIAS causal_conv1d_torch_parallel)
set(CAUSAL_CONV1D_OPENMP_LIBRARY "" CACHE FILEPATH
    "OpenMP runtime PyTorch uses (found from the running torch when empty)")
if(TORCH_PARALLEL_BACKEND STREQUAL "OpenMP")
  set(TORCH_OPENMP_LIBRARY "${CAUSAL_CONV1D_OPENMP_LIBRARY}")
  if(NOT TORCH_OPENMP_LIBRARY)
    set(TORCH_OPENMP_LIBRARY "${_torch_openmp_library}")
  endif()
  if(NOT TORCH_OPENMP_LIBRARY OR NOT EXISTS "${TORCH_OPENMP_LIBRARY}")
    message(FATAL_ERROR
      "causal-conv1d: the PyTorch of ${CAUSAL_CONV1D_PYTHON} parallelises with OpenMP, but which OpenMP "
      "runtime it uses could not be told (mapped after `import torch`: '${_torch_openmp_mapped}'; none "
      "named by libtorch_cpu.so). Without it the CPU ops would run on one thread. Pass "
      "-DCAUSAL_CONV1D_OPENMP_LIBRARY=/path/to/the/libgomp.so.1 that libtorch_cpu.so uses.")
  endif()
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # Clang emits parallel regions only for LLVM's runtime (libomp, or Intel's libiomp5 which
    # shares its ABI); with -fopenmp=libgomp it compiles none.
    if(TORCH_OPENMP_LIBRARY MATCHES "gomp")
      message(FATAL_ERROR
        "causal-conv1d: PyTorch uses GNU libgomp (${TORCH_OPENMP_LIBRARY}), which Clang "
        "(${CMAKE_CXX_COMPILER}) cannot generate parallel code for. Build the C++ parts with GCC: "
        "CXX=g++ (the HIP kernels are still compiled by ROCm's clang).")
    endif()
    set(_omp_flag -fopenmp=libomp)
  else()
    set(_omp_flag -fopenmp)  # GOMP_* calls: libgomp, and libomp / libiomp5 through their GOMP layer
  endif()
  target_compile_options(causal_conv1d_torch_parallel INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${_omp_flag}>)
  target_link_libraries(causal_conv1d_torch_parallel INTERFACE "${TORCH_OPENMP_LIBRARY}")
  message(STATUS "causal-conv1d: CPU ops parallel through PyTorch's OpenMP runtime ${TORCH_OPENMP_LIBRARY}")
elseif(TORCH_PARALLEL_BACKEND STREQUAL "unknown")
  message(FATAL_ERROR "causal-conv1d: cannot tell how the PyTorch of ${CAUSAL_CONV1D_PYTHON} parallelises "
                      "(torch.__config__.parallel_info() names no ATen parallel backend)")
else()
  message(STATUS "causal-conv1d: CPU ops parallel through PyTorch's ${TORCH_PARALLEL_BACKEND} thread pool")
endif()
