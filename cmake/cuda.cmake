# CUDA is optional: every kernel has a CPU reference, so the suite builds and runs without it.
# Found: SUITE_HAVE_CUDA (nvcc, the toolkit) and SUITE_HAVE_NCCL (the target suite_nccl). NCCL is
# looked for in NCCL_HOME and the toolkit's folders (NCCL_HOME may be a pip `nvidia-nccl-cu*`
# package's site-packages/nvidia/nccl, whose library has only its versioned name). Then, after
# MPI was found (cmake/dependencies.cmake), whether it is CUDA-aware.
option(SUITE_ENABLE_CUDA "Compile the CUDA, cuBLAS and NCCL paths when nvcc is found" ON)
set(SUITE_HAVE_CUDA OFF)
set(SUITE_HAVE_NCCL OFF)
if(SUITE_ENABLE_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)  # A100, H100/H200; override with -DCMAKE_CUDA_ARCHITECTURES=...
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 cannot ask nvcc for C++20; device code needs only 17
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(SUITE_HAVE_CUDA ON)
    suite_found("CUDA" "${CUDAToolkit_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES}" "${CMAKE_CUDA_COMPILER}")
    # NCCL_HOME (a CMake or environment variable) first, then the toolkit's own folders.
    suite_hint_prefix(NCCL_HOME _nccl_home)
    suite_forget_outside("${_nccl_home}" NCCL_INCLUDE_DIR NCCL_LIBRARY)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_home} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
    find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_home} ${CUDAToolkit_LIBRARY_DIR}
                 PATH_SUFFIXES lib lib64)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      set(SUITE_HAVE_NCCL ON)
      add_library(suite_nccl INTERFACE)
      target_include_directories(suite_nccl INTERFACE ${NCCL_INCLUDE_DIR})
      target_link_libraries(suite_nccl INTERFACE ${NCCL_LIBRARY})
      suite_header_version(${NCCL_INCLUDE_DIR}/nccl.h _nccl_version NCCL_MAJOR NCCL_MINOR NCCL_PATCH)
      suite_found("NCCL" "${_nccl_version}" "${NCCL_LIBRARY}")
    endif()
    suite_check_hint(nccl NCCL_HOME "${SUITE_HAVE_NCCL}" "${NCCL_LIBRARY}")
    if(NOT SUITE_HAVE_NCCL)
      suite_ways(nccl _ways)
      suite_off("no NCCL: run with --transport mpi; the Slurm jobs will use it. For NCCL: ${_ways} "
                "(or pip install nvidia-nccl-cu12 and NCCL_HOME=<site-packages>/nvidia/nccl)")
    endif()
  else()
    suite_ways(cuda _ways)
    suite_off("no CUDA (nvcc not found): the cpu backend only, SUITE_MODE=cpu for the Slurm jobs. "
              "For the GPU paths: ${_ways}")
  endif()
else()
  suite_off("no CUDA (SUITE_ENABLE_CUDA=OFF): the cpu backend only, SUITE_MODE=cpu for the Slurm jobs")
endif()

# Whether the MPI passes device pointers, where the headers tell (the suite asks the library
# again at run time: common/transport/mpi_compat.hpp): yes, no, or "asked at run time".
set(SUITE_MPI_CUDA_AWARE "")
if(SUITE_HAVE_CUDA AND MPI_C_FOUND)
  include(CheckCSourceCompiles)
  set(CMAKE_REQUIRED_INCLUDES ${MPI_C_INCLUDE_DIRS})
  set(CMAKE_REQUIRED_QUIET ON)
  set(_mpi_ext "#include <mpi.h>\n#if defined(OPEN_MPI) && OPEN_MPI\n#include <mpi-ext.h>\n#endif\n")
  check_c_source_compiles("${_mpi_ext}#if !(defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT)
#error no
#endif
int main(void) { return 0; }" SUITE_MPI_BUILT_WITH_CUDA)
  check_c_source_compiles("${_mpi_ext}#ifndef MPIX_GPU_SUPPORT_CUDA
#error no
#endif
int main(void) { return 0; }" SUITE_MPI_GPU_QUERY)
  unset(CMAKE_REQUIRED_INCLUDES)
  unset(CMAKE_REQUIRED_QUIET)
  if(SUITE_MPI_BUILT_WITH_CUDA)
    set(SUITE_MPI_CUDA_AWARE "yes")
  elseif(SUITE_MPI_GPU_QUERY)
    set(SUITE_MPI_CUDA_AWARE "asked at run time")
  else()
    set(SUITE_MPI_CUDA_AWARE "no")
    suite_off("MPI not CUDA-aware: --transport mpi stages GPU buffers through pinned host memory "
              "(slower than NCCL or a CUDA-aware MPI; SUITE_MPI_CUDA_AWARE=1 forces device pointers)")
  endif()
endif()
