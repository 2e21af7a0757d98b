// The one place that knows which MPI library extensions exist (CUDA-awareness queries).
#pragma once

#include <mpi.h>

#include <cstdlib>
#include <string>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

namespace suite {

// Whether device pointers may be passed to MPI. SUITE_MPI_CUDA_AWARE=0|1 overrides the
// library's answer (for MPIs that do not report it, or to force host staging).
inline bool mpi_library_cuda_aware() {
  if (const char* force = std::getenv("SUITE_MPI_CUDA_AWARE")) return std::string(force) == "1";
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;  // Open MPI
#elif defined(MPIX_GPU_SUPPORT_CUDA)
  int supported = 0;  // MPICH 4 family (Cray MPICH, MVAPICH)
  return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported) == MPI_SUCCESS && supported;
#else
  return false;
#endif
}

}  // namespace suite
