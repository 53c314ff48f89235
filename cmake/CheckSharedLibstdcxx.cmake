# The op library shares the process with PyTorch, so it must use the same, shared libstdc++.
# A compiler whose runtime only comes as a static archive (seen with self-built GCCs in /opt)
# produces a library whose iostreams crash inside PyTorch's process; refuse it up front.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so
                  OUTPUT_VARIABLE _libstdcxx OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT IS_ABSOLUTE "${_libstdcxx}")
    message(FATAL_ERROR
      "causal-conv1d: ${CMAKE_CXX_COMPILER} has no shared libstdc++ (it would link it statically, "
      "which crashes inside PyTorch's process). Use a compiler with a shared runtime, e.g. "
      "CXX=/usr/bin/g++ (and CUDAHOSTCXX=/usr/bin/g++ for the CUDA backend).")
  endif()
endif()
