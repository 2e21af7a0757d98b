# Bookkeeping shared by the dependency checks (cmake/cuda.cmake, cudnn.cmake, dependencies.cmake)
# and the build summary: what was found (name, version, where), what is missing with the ways
# to get it without root (from cmake/dependencies.txt, which scripts/setup.sh reads too), and
# what each optional piece that is off means for a user. Nothing stops at the first miss: the
# configure ends with one list of everything missing (suite_stop_if_missing).

# Texts kept in global list properties carry their semicolons as this character instead.
string(ASCII 31 SUITE_SEMICOLON)

file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/dependencies.txt _suite_dependency_lines REGEX "^[a-z]")
foreach(_line IN LISTS _suite_dependency_lines)
  string(REPLACE "|" ";" _fields "${_line}")
  list(TRANSFORM _fields STRIP)
  list(GET _fields 0 _key)
  set(SUITE_DEPENDENCY_${_key} "${_fields}")
endforeach()

# The ways to get dependency <key> without root, and as root on Debian/Ubuntu, in <out>.
function(suite_ways key out)
  list(GET SUITE_DEPENDENCY_${key} 2 debian)
  list(GET SUITE_DEPENDENCY_${key} 3 spack)
  list(GET SUITE_DEPENDENCY_${key} 4 conda)
  list(GET SUITE_DEPENDENCY_${key} 5 hint)
  set(ways "module load ${spack} (module avail ${spack}) | spack install ${spack} | ")
  string(APPEND ways "conda install -c conda-forge ${conda}; then ${hint}, or its prefix in CMAKE_PREFIX_PATH")
  if(NOT debian STREQUAL "-")
    string(APPEND ways "\n        as root on Debian/Ubuntu: apt-get install ${debian}")
  endif()
  set(${out} "${ways}" PARENT_SCOPE)
endfunction()

# Appends <text> to the global list property <property>, its semicolons kept.
function(suite_keep property text)
  string(REPLACE ";" "${SUITE_SEMICOLON}" text "${text}")
  set_property(GLOBAL APPEND PROPERTY ${property} "${text}")
endfunction()

# A row of the build summary: suite_found(<name> <version> <where>).
function(suite_found name version where)
  string(REPLACE ";" "," version "${version}")
  string(REPLACE ";" " " where "${where}")
  suite_keep(SUITE_FOUND_ROWS "${name}|${version}|${where}")
endfunction()

# A dependency this configure needs and lacks: suite_missing(<key> <what was seen>...), the
# pieces of the text given as separate arguments.
function(suite_missing key)
  set(seen "")
  math(EXPR last "${ARGC} - 1")
  foreach(i RANGE 1 ${last})
    string(APPEND seen "${ARGV${i}}")
  endforeach()
  list(GET SUITE_DEPENDENCY_${key} 6 what)
  suite_ways(${key} ways)
  suite_keep(SUITE_MISSING_ROWS "${what}: ${seen}\n        get it: ${ways}")
endfunction()

# A version read from a header's #define lines, joined with dots ("" when the file lacks them):
# suite_header_version(<header> <out> <MAJOR macro> <MINOR macro> ...).
function(suite_header_version header out)
  set(parts)
  foreach(macro IN LISTS ARGN)
    file(STRINGS "${header}" line REGEX "^#define ${macro} +[0-9]+")
    string(REGEX MATCH "[0-9]+$" value "${line}")
    if(value STREQUAL "")
      set(${out} "" PARENT_SCOPE)
      return()
    endif()
    list(APPEND parts ${value})
  endforeach()
  string(JOIN "." version ${parts})
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

# An optional piece that is off, and what that means for a user: suite_off(<line>...), the
# pieces of the line given as separate arguments.
function(suite_off)
  set(line "")
  math(EXPR last "${ARGC} - 1")
  foreach(i RANGE ${last})
    string(APPEND line "${ARGV${i}}")
  endforeach()
  suite_keep(SUITE_OFF_LINES "${line}")
endfunction()

# The prefix a hint variable names (a CMake variable or, failing that, the environment), empty
# when unset: suite_hint_prefix(<variable> <out>).
function(suite_hint_prefix variable out)
  if(DEFINED ${variable})
    set(${out} "${${variable}}" PARENT_SCOPE)
  elseif(DEFINED ENV{${variable}})
    set(${out} "$ENV{${variable}}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

# Drops the cached results of an earlier configure that lie outside <prefix> (a hint given since),
# so that the search runs again there: suite_forget_outside(<prefix> <cache variable>...).
function(suite_forget_outside prefix)
  if(prefix STREQUAL "")
    return()
  endif()
  foreach(variable IN LISTS ARGN)
    string(FIND "${${variable}}" "${prefix}" at)
    if(DEFINED CACHE{${variable}} AND NOT at EQUAL 0)
      unset(${variable} CACHE)
    endif()
  endforeach()
endfunction()

# A hint (<Pkg>_ROOT, NCCL_HOME...) must hold what it names: a prefix that does not, or that was
# passed over for another copy found elsewhere, is reported as missing, never silently ignored.
# suite_check_hint(<key> <variable> <found> <where found>)
function(suite_check_hint key variable found where)
  suite_hint_prefix(${variable} prefix)
  if(prefix STREQUAL "")
    return()
  endif()
  if(NOT EXISTS "${prefix}")
    suite_missing(${key} "${variable}=${prefix} does not exist")
    return()
  endif()
  file(REAL_PATH "${prefix}" real_prefix)
  if(found)
    file(REAL_PATH "${where}" real_where)
    string(FIND "${real_where}/" "${real_prefix}/" at)
    if(at EQUAL 0)
      return()
    endif()
    suite_missing(${key} "${variable}=${prefix} does not hold it (CMake found ${where} instead)")
  else()
    suite_missing(${key} "${variable}=${prefix} does not hold it")
  endif()
endfunction()

# The verdict on dependency <key> whose hint is <variable>: found (the hint, if given, must hold
# the copy found) or missing (said against the hint if given, else against where CMake looked).
# suite_verdict(<key> <variable> <found> <where found>)
function(suite_verdict key variable found where)
  suite_hint_prefix(${variable} prefix)
  if(found OR NOT prefix STREQUAL "")
    suite_check_hint(${key} ${variable} "${found}" "${where}")
  else()
    suite_searched(seen)
    suite_missing(${key} "${seen}")
  endif()
endfunction()

# Where the search looked, for a "not found" line.
function(suite_searched out)
  set(searched "the system folders")
  if(CMAKE_PREFIX_PATH)
    string(REPLACE ";" ":" prefixes "${CMAKE_PREFIX_PATH}")
    set(searched "CMAKE_PREFIX_PATH=${prefixes} and ${searched}")
  elseif(DEFINED ENV{CMAKE_PREFIX_PATH})
    set(searched "CMAKE_PREFIX_PATH=$ENV{CMAKE_PREFIX_PATH} and ${searched}")
  endif()
  set(${out} "not found (searched ${searched})" PARENT_SCOPE)
endfunction()

# Ends the configure with one message listing every missing dependency, if any.
function(suite_stop_if_missing)
  get_property(rows GLOBAL PROPERTY SUITE_MISSING_ROWS)
  if(NOT rows)
    return()
  endif()
  list(LENGTH rows count)
  set(what "things are missing or misplaced")
  if(count EQUAL 1)
    set(what "thing is missing or misplaced")
  endif()
  string(JOIN "\n    " text ${rows})
  string(REPLACE "${SUITE_SEMICOLON}" ";" text "${text}")
  message(FATAL_ERROR
          "${count} ${what} for this build (docs/CLUSTER.md shows the "
          "module, Spack and conda routes):\n    ${text}\n"
          "Nothing was generated; run the same command again once they are there.")
endfunction()

# A prefix given with -DCMAKE_PREFIX_PATH must be a folder and is expected to supply something:
# one that does not exist stops the configure, one that supplied none of the dependencies found
# is said in the summary. Entries of the environment's CMAKE_PREFIX_PATH (which modules set for
# many packages) are only said when they do not exist.
function(suite_check_prefix_path)
  get_property(rows GLOBAL PROPERTY SUITE_FOUND_ROWS)
  set(found_at)
  foreach(row IN LISTS rows)
    string(REGEX REPLACE "^[^|]*\\|[^|]*\\|([^ ]*).*" "\\1" where "${row}")
    if(EXISTS "${where}")
      file(REAL_PATH "${where}" where)
    endif()
    list(APPEND found_at "${where}")
  endforeach()
  foreach(prefix IN LISTS CMAKE_PREFIX_PATH)
    if(NOT IS_DIRECTORY "${prefix}")
      suite_keep(SUITE_MISSING_ROWS "CMAKE_PREFIX_PATH names ${prefix}, which is not a folder (a mistyped path, or an environment that is not loaded)")
      continue()
    endif()
    file(REAL_PATH "${prefix}" real_prefix)
    set(used FALSE)
    foreach(where IN LISTS found_at)
      string(FIND "${where}/" "${real_prefix}/" at)
      if(at EQUAL 0)
        set(used TRUE)
      endif()
    endforeach()
    if(NOT used)
      suite_off("CMAKE_PREFIX_PATH entry ${prefix} supplied none of the dependencies found "
                "(each came from elsewhere): is it the prefix you meant?")
    endif()
  endforeach()
  if(DEFINED ENV{CMAKE_PREFIX_PATH})
    string(REPLACE ":" ";" env_prefixes "$ENV{CMAKE_PREFIX_PATH}")
    foreach(prefix IN LISTS env_prefixes)
      if(NOT prefix STREQUAL "" AND NOT IS_DIRECTORY "${prefix}")
        suite_off("the environment's CMAKE_PREFIX_PATH names ${prefix}, which is not a folder")
      endif()
    endforeach()
  endif()
endfunction()
