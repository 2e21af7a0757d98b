# SimGrid SMPI build (`make sim`, build-sim/): the MPI benchmarks' CPU backend compiled with
# smpicxx, run by smpirun on a simulated platform (scripts/envs/simulate.py). No CUDA, no NCCL, no
# tests. Configure with CC=smpicc CXX=smpicxx -DSUITE_SMPI=ON (the Makefile's `sim` target).
option(SUITE_SMPI "Build for SimGrid's SMPI: simulated clock (MPI_Wtime), executed or modeled compute" OFF)
if(SUITE_SMPI)
  if(NOT CMAKE_CXX_COMPILER MATCHES "smpicxx")
    message(FATAL_ERROR "SUITE_SMPI needs CXX=smpicxx and CC=smpicc (found ${CMAKE_CXX_COMPILER}); "
                        "use `make sim`")
  endif()
  set(SUITE_ENABLE_CUDA OFF CACHE BOOL "" FORCE)
  set(SUITE_BUILD_TESTS OFF CACHE BOOL "" FORCE)
  # smpicxx force-includes smpi/smpi_helpers.h, whose function-like macros (malloc, free, exit...)
  # collide with C++ code (CLI11's App::exit): keep the allocator, and undo `exit` with a second
  # forced include (docs/SIMULATION notes). SUITE_SMPI switches the clock and the compute model.
  add_compile_definitions(SUITE_SMPI=1 SMPI_NO_OVERRIDE_MALLOC=1)
  # SMPI's dlopen privatisation loads a copy of the executable per simulated rank (and of
  # libbenchmark: simulate.py), so whatever code the executable holds is mapped once a rank,
  # 2.4 MiB a rank of the pipeline at 2048 ranks. The suite's libraries are shared libraries
  # here, loaded once for all ranks: the executables keep only main() and the Google Benchmark
  # glue (suite_harness), and the little state that is a rank's own is kept per rank by
  # common/sim/rank_local.hpp. --no-undefined: a library that reached into an executable (whose
  # symbols a shared library cannot see under privatisation) fails at link time, not in a run.
  set(BUILD_SHARED_LIBS ON)
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
  string(APPEND CMAKE_SHARED_LINKER_FLAGS " -Wl,--no-undefined")
  add_compile_options("SHELL:-include ${CMAKE_SOURCE_DIR}/common/sim/smpi_prelude.h")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} --version OUTPUT_VARIABLE _smpi_version
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  message(STATUS "SMPI build: ${_smpi_version}")
endif()
