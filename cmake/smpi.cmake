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
  add_compile_options("SHELL:-include ${CMAKE_SOURCE_DIR}/common/sim/smpi_prelude.h")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} --version OUTPUT_VARIABLE _smpi_version
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  message(STATUS "SMPI build: ${_smpi_version}")
endif()
