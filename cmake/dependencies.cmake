# The host dependencies of the build (compiler, MPI, HDF5, OpenBLAS, Google Benchmark, CLI11,
# nlohmann/json),
# of the tests (GoogleTest) and, said but not needed here, of `make sim` (SimGrid) and the
# scripts (the Python venv). Each is looked for without stopping at the first miss; what is
# missing is listed at the end of the configure with the ways to get it without root
# (cmake/dependency_report.cmake). A hint (<Pkg>_ROOT, MPI_HOME) must hold what it names.

suite_found("CMake" "${CMAKE_VERSION}" "${CMAKE_COMMAND}")
if("cxx_std_20" IN_LIST CMAKE_CXX_COMPILE_FEATURES)
  suite_found("C++ compiler" "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}" "${CMAKE_CXX_COMPILER}")
else()
  suite_missing(compiler "${CMAKE_CXX_COMPILER} (${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}) "
                         "has no C++20 mode; a newer one needs a fresh build folder")
endif()

# MPI's C API only: also runs on MPIs without C++ bindings (mpicxx is not needed, mpicc or the
# headers and library are).
find_package(MPI COMPONENTS C)
if(MPI_C_FOUND)
  set(_mpi_version "MPI ${MPI_C_VERSION}")
  foreach(_header IN LISTS MPI_C_INCLUDE_DIRS)
    if(EXISTS ${_header}/mpi.h)
      suite_header_version(${_header}/mpi.h _ompi OMPI_MAJOR_VERSION OMPI_MINOR_VERSION OMPI_RELEASE_VERSION)
      file(STRINGS ${_header}/mpi.h _mpich REGEX "^#define MPICH_VERSION ")
      string(REGEX MATCH "\"[^\"]+\"" _mpich "${_mpich}")
      if(_ompi)
        set(_mpi_version "Open MPI ${_ompi}")
      elseif(_mpich)
        set(_mpi_version "MPICH ${_mpich}")
      endif()
      break()
    endif()
  endforeach()
  if(SUITE_SMPI)
    set(_mpi_version "SimGrid's SMPI (MPI ${MPI_C_VERSION})")
  endif()
  set(_mpi_where "${MPI_C_COMPILER}")
  if(NOT _mpi_where)
    list(GET MPI_C_INCLUDE_DIRS 0 _mpi_where)
  endif()
  suite_found("MPI" "${_mpi_version}" "${_mpi_where} (mpirun: ${MPIEXEC_EXECUTABLE})")
  suite_check_hint(mpi MPI_HOME TRUE "${_mpi_where}")
elseif(DEFINED MPI_HOME OR DEFINED ENV{MPI_HOME})
  suite_check_hint(mpi MPI_HOME FALSE "")
else()
  find_program(_suite_mpirun NAMES mpirun mpiexec)
  if(_suite_mpirun)
    suite_missing(mpi "${_suite_mpirun} is there, but no mpicc and no mpi.h: the MPI's development "
                      "files (compiler wrappers, headers) are missing")
  else()
    suite_searched(_seen)
    suite_missing(mpi "no mpicc on PATH, ${_seen}")
  endif()
endif()

find_package(HDF5 COMPONENTS C)
set(_hdf5_where "")
if(HDF5_FOUND)
  list(GET HDF5_INCLUDE_DIRS 0 _hdf5_where)
  suite_found("HDF5" "${HDF5_VERSION}" "${_hdf5_where}")
endif()
suite_verdict(hdf5 HDF5_ROOT "${HDF5_FOUND}" "${_hdf5_where}")

# A package with a CMake config file: found (a summary row) or missing; <Pkg>_ROOT must hold it.
# suite_find_config(<key> <package> <summary name>)
macro(suite_find_config key package name)
  suite_hint_prefix(${package}_ROOT _root)
  suite_forget_outside("${_root}" ${package}_DIR)
  find_package(${package} CONFIG QUIET)
  if(${package}_FOUND)
    suite_found("${name}" "${${package}_VERSION}" "${${package}_DIR}")
  endif()
  suite_verdict(${key} ${package}_ROOT "${${package}_FOUND}" "${${package}_DIR}")
endmacro()

suite_find_config(benchmark benchmark "Google Benchmark")

# CLI11: its CMake config where installed, else the header-only copy on the include path.
find_package(CLI11 QUIET CONFIG)
if(NOT CLI11_FOUND)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp)
  if(CLI11_INCLUDE_DIR)
    add_library(CLI11::CLI11 INTERFACE IMPORTED)
    target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
    suite_header_version(${CLI11_INCLUDE_DIR}/CLI/Version.hpp CLI11_VERSION
                         CLI11_VERSION_MAJOR CLI11_VERSION_MINOR CLI11_VERSION_PATCH)
    set(CLI11_DIR ${CLI11_INCLUDE_DIR})
    set(CLI11_FOUND TRUE)
  endif()
endif()
if(CLI11_FOUND)
  suite_found("CLI11" "${CLI11_VERSION}" "${CLI11_DIR}")
endif()
suite_verdict(cli11 CLI11_ROOT "${CLI11_FOUND}" "${CLI11_DIR}")
suite_find_config(json nlohmann_json "nlohmann/json")
find_package(Threads REQUIRED)

# The CPU backend's GEMMs and attention tiles run on OpenBLAS (Debian's libopenblas-dev ships
# its CMake config); linked by path so Debian's libblas alternative cannot swap in another BLAS.
# One thread per rank: the serial build where installed (libopenblas-serial-dev; the binaries
# find it through their RPATH), whose library never starts helper threads that would spin on
# the cores of the other ranks; otherwise the default build, told to use one thread at run time.
option(SUITE_BLAS_THREADS "Link the threaded OpenBLAS (OPENBLAS_NUM_THREADS then applies)" OFF)
suite_hint_prefix(OpenBLAS_ROOT _openblas_root)
if(NOT SUITE_BLAS_THREADS AND _openblas_root STREQUAL "")
  find_package(OpenBLAS CONFIG QUIET NO_DEFAULT_PATH
               PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-serial/cmake/openblas)
endif()
if(NOT OpenBLAS_FOUND)
  suite_find_config(openblas OpenBLAS "OpenBLAS")
else()
  suite_found("OpenBLAS" "${OpenBLAS_VERSION} (serial)" "${OpenBLAS_DIR}")
endif()
if(OpenBLAS_FOUND)
  add_library(suite_blas INTERFACE)
  target_include_directories(suite_blas INTERFACE ${OpenBLAS_INCLUDE_DIRS})
  target_link_libraries(suite_blas INTERFACE ${OpenBLAS_LIBRARIES})
endif()

# The tests: AUTO (the default) builds them where GoogleTest is found and says what is off
# otherwise; ON (make test) needs GoogleTest.
set(SUITE_BUILD_TESTS AUTO CACHE STRING "Build the unit and integration tests: ON, OFF or AUTO (where GoogleTest is found)")
set(SUITE_TESTS OFF)
if(SUITE_BUILD_TESTS STREQUAL "AUTO" OR SUITE_BUILD_TESTS)
  find_package(GTest QUIET)
  if(GTest_FOUND)
    set(SUITE_TESTS ON)
    set(_gtest_where "${GTest_DIR}")
    if(NOT _gtest_where)
      set(_gtest_where "${GTEST_INCLUDE_DIRS}")
    endif()
    suite_found("GoogleTest" "${GTest_VERSION}" "${_gtest_where}")
  elseif(SUITE_BUILD_TESTS STREQUAL "AUTO")
    suite_ways(gtest _ways)
    suite_off("no GoogleTest: the tests are not built (make test needs it): ${_ways}")
  else()
    suite_searched(_seen)
    suite_missing(gtest "${_seen}; the tests need it (SUITE_BUILD_TESTS=ON; OFF builds without them)")
  endif()
else()
  suite_off("no tests (SUITE_BUILD_TESTS=OFF): ctest has nothing to run")
endif()

# Said here, needed elsewhere: the Python venv by the tests and scripts/ (scripts/setup.sh).
set(SUITE_PYTHON ${CMAKE_SOURCE_DIR}/.venv/bin/python CACHE FILEPATH "Python with h5py, numpy, matplotlib (scripts and tests)")
if(EXISTS ${SUITE_PYTHON})
  execute_process(COMMAND ${SUITE_PYTHON} --version OUTPUT_VARIABLE _python_version
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  string(REPLACE "Python " "" _python_version "${_python_version}")
  suite_found("Python (tests, scripts)" "${_python_version}" "${SUITE_PYTHON}")
else()
  suite_off("no Python venv at ${SUITE_PYTHON}: the tests and scripts/ (plots, compare, sweeps) "
            "need it: scripts/setup.sh scripts (or make test) makes it")
endif()

# Said here, needed elsewhere: SimGrid by `make sim` and the simulated clusters.
if(NOT SUITE_SMPI)
  find_program(SUITE_SMPICXX smpicxx)
  if(SUITE_SMPICXX)
    find_file(SUITE_SIMGRID_VERSION_H simgrid/version.h)
    set(_simgrid_version "")
    if(SUITE_SIMGRID_VERSION_H)
      suite_header_version(${SUITE_SIMGRID_VERSION_H} _simgrid_version
                           SIMGRID_VERSION_MAJOR SIMGRID_VERSION_MINOR SIMGRID_VERSION_PATCH)
    endif()
    suite_found("SimGrid (make sim)" "${_simgrid_version}" "${SUITE_SMPICXX}")
  else()
    suite_ways(simgrid _ways)
    suite_off("no SimGrid: make sim and the simulated clusters (suite simulate, suite sweep "
              "--simulate) are unavailable: ${_ways}")
  endif()
endif()
