#include "common/harness/errors.hpp"

#include "common/sim/rank_local.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace suite {

namespace {
sim::RankLocal<std::string> g_label;
std::string& cached_label() {
  return g_label.get();
}
}  // namespace

void remember_rank_label() {
  cached_label() = rank_label();
}

std::string rank_label() {
  if (!cached_label().empty()) return cached_label();  // no MPI call: safe from any thread
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  std::string label = "rank ";  // built by appends: GCC 12 warns falsely on a + chain here
  label.append(std::to_string(rank)).append(" on ").append(host);
  return label;
}

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

void fatal(const std::string& what, const char* file, int line) {
  std::fprintf(stderr, "[%s] %s:%d: %s\n", rank_label().c_str(), file, line, what.c_str());
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

}  // namespace suite
