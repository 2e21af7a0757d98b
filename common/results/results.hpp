// The results file of one run (docs/RESULTS_SCHEMA.md). Rank 0 owns it. Cases are written
// and flushed one by one into FILE.partial; finish() marks the file complete and renames it,
// so a run that dies keeps its finished cases and never leaves a complete-looking file.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/results/h5.hpp"

namespace suite {

constexpr std::int64_t kSchemaVersion = 1;

using Attributes = std::vector<std::pair<std::string, h5::Value>>;

// A [rows, cols] row-major table of doubles (rows = iterations, cols = ranks, typically).
struct Table {
  std::string name;
  std::size_t rows = 0, cols = 0;
  std::vector<double> values;
};

struct IntTable {
  std::string name;
  std::size_t rows = 0, cols = 0;
  std::vector<std::int64_t> values;
};

struct StringList {
  std::string name;
  std::vector<std::string> values;
};

struct CaseRecord {
  std::string bench;  // group /<bench>
  std::string name;   // group /<bench>/<name>
  Attributes params;  // typed parameters; their names also go to the `params` attribute
  Attributes attrs;   // statistics, checks, measured figures and pred_* beside them
  std::vector<Table> tables;
  std::vector<IntTable> int_tables;
  std::vector<StringList> string_lists;
};

struct RunInfo {
  Attributes attrs;  // file attributes (schema_version and complete are added by the writer)
  std::vector<std::string> rank_hosts, rank_devices;
};

class ResultsWriter {
 public:
  // Creates `final_path`.partial (and its directory) and removes an older `final_path`, so a
  // stale complete file never sits beside a new run. Throws UsageError when it cannot.
  explicit ResultsWriter(std::string final_path);
  ~ResultsWriter();  // without finish(): closes and leaves the .partial file
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;

  void write_run_info(const RunInfo& info);
  void write_case(const CaseRecord& c);  // throws std::runtime_error on an HDF5 failure
  // Marks the file complete and renames it; on failure the file stays `.partial`, complete=0.
  void finish();
  // Removes the .partial file (a run that turned out to have nothing to record).
  void discard();
  // A file attribute added after the run (e.g. the cases that were skipped).
  void set_attr(const std::string& name, const h5::Value& value);

  const std::string& final_path() const { return final_path_; }
  std::string partial_path() const { return final_path_ + ".partial"; }

 private:
  h5::Handle reopen();
  std::string final_path_;
};

}  // namespace suite
