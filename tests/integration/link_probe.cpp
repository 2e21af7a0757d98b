// link_probe: the emulated cluster's tests' own exchange, independent of the suite's transport.
// Each pair A:B given sends BYTES both ways at once (MPI_Sendrecv), REPS times after WARMUP more
// (a new TCP connection starts slow),
// while the other ranks wait; rank 0 prints one line per pair with the best and median time and
// the rate per direction of the best, and first the host name of every rank.
//
//   mpirun -np 4 link_probe --bytes 4194304 --reps 5 --warmup 3 --pairs 0:1,0:2
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace {

[[noreturn]] void usage(const char* why) {
  std::fprintf(
      stderr,
      "link_probe: %s\nusage: link_probe --bytes N --reps R --warmup W --pairs A:B[,C:D...]\n",
      why);
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}

std::vector<std::pair<int, int>> parse_pairs(const std::string& text, int size) {
  std::vector<std::pair<int, int>> pairs;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    int a = -1, b = -1;
    if (std::sscanf(item.c_str(), "%d:%d", &a, &b) != 2 || a < 0 || b < 0 || a >= size ||
        b >= size || a == b)
      usage(("bad pair '" + item + "' (two different ranks below the job's size)").c_str());
    pairs.emplace_back(a, b);
    at = end + 1;
  }
  if (pairs.empty()) usage("no --pairs");
  return pairs;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long long bytes = 4 << 20;
  int reps = 5, warmup = 3;
  std::string pairs_text;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--bytes")
      bytes = std::atoll(argv[i + 1]);
    else if (flag == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (flag == "--warmup")
      warmup = std::atoi(argv[i + 1]);
    else if (flag == "--pairs")
      pairs_text = argv[i + 1];
    else
      usage(("unknown flag " + flag).c_str());
  }
  if (bytes <= 0 || bytes > (1LL << 30) || reps < 1 || warmup < 0)
    usage("--bytes 1..2^30, --reps >= 1, --warmup >= 0");
  const auto pairs = parse_pairs(pairs_text, size);

  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::vector<char> hosts(static_cast<std::size_t>(size) * sizeof host);
  MPI_Gather(host, sizeof host, MPI_CHAR, hosts.data(), sizeof host, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("hosts:");
    for (int r = 0; r < size; ++r)
      std::printf(" %s", &hosts[static_cast<std::size_t>(r) * sizeof host]);
    std::printf("\n");
  }

  std::vector<char> out(static_cast<std::size_t>(bytes), 1), in(static_cast<std::size_t>(bytes));
  for (const auto& [a, b] : pairs) {
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<double> times;
    if (rank == a || rank == b) {
      const int peer = rank == a ? b : a;
      for (int i = 0; i < warmup + reps; ++i) {
        const double t0 = MPI_Wtime();
        MPI_Sendrecv(out.data(), static_cast<int>(bytes), MPI_CHAR, peer, 0, in.data(),
                     static_cast<int>(bytes), MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (i >= warmup) times.push_back(MPI_Wtime() - t0);
      }
    }
    // A's times to rank 0 (A may be rank 0 itself).
    std::vector<double> got(static_cast<std::size_t>(reps));
    if (rank == a && a != 0)
      MPI_Send(times.data(), reps, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD);
    else if (rank == 0 && a != 0)
      MPI_Recv(got.data(), reps, MPI_DOUBLE, a, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank == 0) {
      if (a == 0) got = times;
      std::sort(got.begin(), got.end());
      const double best = got.front(), median = got[got.size() / 2];
      std::printf("pair %d %d bytes %lld best_s %.6f median_s %.6f rate_MBps %.2f\n", a, b, bytes,
                  best, median, static_cast<double>(bytes) / best / 1e6);
      std::fflush(stdout);
    }
  }
  MPI_Finalize();
  return 0;
}
