#include "common/results/results.hpp"

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "common/harness/errors.hpp"

namespace suite {

ResultsWriter::ResultsWriter(std::string final_path) : final_path_(std::move(final_path)) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path parent = fs::path(final_path_).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec)
    throw UsageError("--out " + final_path_ + ": cannot create directory " + parent.string() +
                     ": " + ec.message());
  if (fs::is_directory(final_path_))
    throw UsageError("--out " + final_path_ + " is a directory; name a file");
  // An older complete file under the final name must not sit beside this run's .partial.
  fs::remove(final_path_, ec);
  if (ec)
    throw UsageError("--out " + final_path_ +
                     ": cannot replace the existing file: " + ec.message());
  h5::Handle file;
  try {
    file = h5::create_file(partial_path());
  } catch (const std::exception&) {
    throw UsageError("--out " + final_path_ + ": cannot create " + partial_path() +
                     " (is the directory writable?)");
  }
  h5::write_attr(file.id(), "schema_version", kSchemaVersion);
  h5::write_attr(file.id(), "complete", std::int64_t{0});
}

// The file is closed between writes: a run killed between cases leaves a file whose
// metadata is complete on disk, which a flush alone does not guarantee.
h5::Handle ResultsWriter::reopen() {
  return h5::open_file(partial_path(), true);
}

ResultsWriter::~ResultsWriter() = default;

void ResultsWriter::write_run_info(const RunInfo& info) {
  h5::Handle file = reopen();
  for (const auto& [name, value] : info.attrs)
    h5::write_attr(file.id(), name, value);
  h5::Handle ranks = h5::create_group(file.id(), "ranks");
  h5::write_dataset(ranks.id(), "hostname", info.rank_hosts);
  h5::write_dataset(ranks.id(), "device", info.rank_devices);
}

void ResultsWriter::write_case(const CaseRecord& c) {
  h5::Handle file = reopen();
  std::string path = c.bench + "/" + c.name;
  if (h5::exists(file.id(), path))
    throw std::runtime_error("results: case " + path + " written twice");
  h5::Handle g = h5::create_group(file.id(), path);
  std::string names;
  for (const auto& [name, value] : c.params) {
    h5::write_attr(g.id(), name, value);
    names += (names.empty() ? "" : ",") + name;
  }
  h5::write_attr(g.id(), "params", names);
  for (const auto& [name, value] : c.attrs)
    h5::write_attr(g.id(), name, value);
  for (const auto& t : c.tables)
    h5::write_dataset(g.id(), t.name, t.values, {t.rows, t.cols});
  for (const auto& t : c.int_tables) {
    std::vector<hsize_t> dims =
        t.rows == 1 ? std::vector<hsize_t>{t.cols} : std::vector<hsize_t>{t.rows, t.cols};
    h5::write_dataset(g.id(), t.name, t.values, dims);
  }
  for (const auto& l : c.string_lists)
    h5::write_dataset(g.id(), l.name, l.values);
}

void ResultsWriter::finish() {
  set_attr("complete", std::int64_t{1});
  if (std::rename(partial_path().c_str(), final_path_.c_str()) != 0) {
    set_attr("complete", std::int64_t{0});  // a .partial file never claims to be complete
    throw std::runtime_error("cannot rename " + partial_path() + " to " + final_path_ +
                             "; the results stay in " + partial_path());
  }
}

void ResultsWriter::discard() {
  std::remove(partial_path().c_str());
}

void ResultsWriter::set_attr(const std::string& name, const h5::Value& value) {
  h5::Handle file = reopen();
  h5::write_attr(file.id(), name, value);
}

}  // namespace suite
