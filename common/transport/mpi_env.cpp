#include "common/transport/mpi_env.hpp"

#include <unistd.h>

#include <climits>

#include "common/harness/errors.hpp"

namespace suite {

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  SUITE_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  thread_multiple_ = provided >= MPI_THREAD_MULTIPLE;
  // Errors come back as codes so SUITE_MPI_CHECK can name the call before aborting.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  SUITE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  SUITE_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  remember_rank_label();
  MPI_Comm node;
  SUITE_MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
  SUITE_MPI_CHECK(MPI_Comm_rank(node, &local_rank_));
  SUITE_MPI_CHECK(MPI_Comm_size(node, &local_size_));
  MPI_Comm_free(&node);
  char host[256] = {};
#if defined(SUITE_SMPI)
  int len = 0;  // the simulated host this rank runs on, not the machine running the simulation
  MPI_Get_processor_name(host, &len);
#else
  gethostname(host, sizeof host - 1);
#endif
  hostname_ = host;
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string MpiSession::library_version() const {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, static_cast<size_t>(len));
  if (auto cut = s.find_first_of(",\n"); cut != std::string::npos) s.resize(cut);
  return s;
}

std::optional<std::string> agree_on_error(const std::optional<std::string>& local_error,
                                          MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int mine = local_error ? rank : INT_MAX;
  int first = INT_MAX;
  SUITE_MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == INT_MAX) return std::nullopt;
  std::string msg = (rank == first) ? *local_error : std::string();
  int len = static_cast<int>(msg.size());
  SUITE_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, first, comm));
  msg.resize(static_cast<size_t>(len));
  SUITE_MPI_CHECK(MPI_Bcast(msg.data(), len, MPI_CHAR, first, comm));
  return msg;
}

namespace {

// One string per rank, to `root` (to every rank when root < 0; none elsewhere).
std::vector<std::string> collect_strings(const std::string& mine, int root, MPI_Comm comm) {
  int size = 0, rank = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  const std::size_t n = root < 0 || rank == root ? static_cast<std::size_t>(size) : 0;
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(n), displs(n);
  if (root < 0)
    SUITE_MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm));
  else
    SUITE_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, comm));
  int total = 0;
  for (std::size_t r = 0; r < n; ++r) {
    displs[r] = total;
    total += lens[r];
  }
  std::string all(static_cast<size_t>(total), '\0');
  if (root < 0)
    SUITE_MPI_CHECK(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(),
                                   displs.data(), MPI_CHAR, comm));
  else
    SUITE_MPI_CHECK(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                                MPI_CHAR, root, comm));
  std::vector<std::string> out;
  for (std::size_t r = 0; r < n; ++r)
    out.push_back(all.substr(static_cast<size_t>(displs[r]), static_cast<size_t>(lens[r])));
  return out;
}

}  // namespace

std::vector<std::string> all_gather_strings(const std::string& mine, MPI_Comm comm) {
  return collect_strings(mine, -1, comm);
}

std::vector<std::string> gather_strings(const std::string& mine, int root, MPI_Comm comm) {
  return collect_strings(mine, root, comm);
}

double all_reduce_max(double v, MPI_Comm comm) {
  double out = v;
  SUITE_MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, comm));
  return out;
}

std::vector<std::int64_t> all_reduce_max(std::vector<std::int64_t> v, MPI_Comm comm) {
  SUITE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_INT64_T,
                                MPI_MAX, comm));
  return v;
}

}  // namespace suite
