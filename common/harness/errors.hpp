// Error handling for a multi-rank job: a failure names rank, host, file:line, the call and the
// library's message, then takes the whole job down (MPI_Abort) so no rank is left hanging.
#pragma once

#include <stdexcept>
#include <string>

namespace suite {

// Bad input from the user (flags, sizes, paths). Caught by the benchmark driver, agreed on
// collectively, printed once by rank 0, and turned into a non-zero exit without a results file.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Prints "[rank R on HOST] file:line: what" to stderr and aborts every rank of the job.
[[noreturn]] void fatal(const std::string& what, const char* file, int line);

// "rank R on HOST", used in every message that must point at one process.
std::string rank_label();
// Computes the label once (after MPI_Init, on the main thread) so later calls, from any
// thread, make no MPI call.
void remember_rank_label();

}  // namespace suite

#define SUITE_FATAL(msg) ::suite::fatal((msg), __FILE__, __LINE__)

#define SUITE_CHECK(cond, msg)                                                              \
  do {                                                                                      \
    if (!(cond))                                                                            \
      ::suite::fatal(std::string("check failed: " #cond ": ") + (msg), __FILE__, __LINE__); \
  } while (0)

#define SUITE_MPI_CHECK(expr)                                                                 \
  do {                                                                                        \
    int suite_rc_ = (expr);                                                                   \
    if (suite_rc_ != MPI_SUCCESS)                                                             \
      ::suite::fatal(std::string(#expr) + " failed: " + ::suite::mpi_error_string(suite_rc_), \
                     __FILE__, __LINE__);                                                     \
  } while (0)

namespace suite {
std::string mpi_error_string(int code);
}
