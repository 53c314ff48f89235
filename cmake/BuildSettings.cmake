# The build settings read from the environment. Their one list is BUILD_SETTINGS in setup.py, and
# their one description the "Build settings" table of docs/install.md
# (tests/python/test_build_settings.py keeps the list, the table and what setup.py and cmake/
# read in step). setup.py passes each of them on every configure: -D<name>=<value> when set, and
# -U<name> when unset, so a pip build always uses the environment of that pip run and never a
# value an earlier configure left in the cache.
#
# Running CMake directly: -D wins; otherwise the environment variable of the same name fills the
# cache entry at the first configure, and the entry persists from then on (a re-configure the
# build tool triggers, in a different environment, must not silently switch backend or archs).
#
# causal_conv1d_setting(<name> <type> <doc>) declares one; <name>_SOURCE then says where its value
# came from, for the build log ("environment <name>" or "-D<name>"; empty when the value is).

function(causal_conv1d_setting name type doc)
  set(${name} "$ENV{${name}}" CACHE ${type} "${doc}")  # keeps a value already in the cache
  set(_value "${${name}}")
  if(_value STREQUAL "")
    set(_source "")
  elseif("$ENV{${name}}" STREQUAL "${_value}")
    set(_source "environment ${name}")
  elseif(DEFINED CACHE{${name}_SEEN} AND "${_value}" STREQUAL "${${name}_SEEN}")
    set(_source "${${name}_SOURCE}")  # unchanged since we recorded where it came from
  else()
    set(_source "-D${name}")
  endif()
  set(${name}_SOURCE "${_source}" CACHE INTERNAL "")
  set(${name}_SEEN "${_value}" CACHE INTERNAL "")
endfunction()

# The first of the named settings with a value: <out> gets the value, <out>_SOURCE its source.
function(causal_conv1d_first_setting out)
  foreach(_name IN LISTS ARGN)
    if(NOT "${${_name}}" STREQUAL "")
      set(${out} "${${_name}}" PARENT_SCOPE)
      set(${out}_SOURCE "${${_name}_SOURCE}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
  set(${out}_SOURCE "" PARENT_SCOPE)
endfunction()
