// The results writer against the reader: what is written comes back, and a run that never
// finishes leaves only FILE.partial.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/harness/errors.hpp"
#include "common/results/results.hpp"

namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("suite_h5_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

suite::CaseRecord sample_case(const std::string& name) {
  suite::CaseRecord c;
  c.bench = "sp_tp";
  c.name = name;
  c.params = {{"op", std::string("allreduce")}, {"n_bytes", std::int64_t{4096}}};
  c.attrs = {{"time_median_s", 1.5e-5}, {"check_passed", std::int64_t{1}}};
  c.tables.push_back({"time_s", 2, 3, {1, 2, 3, 4, 5, 6}});
  c.int_tables.push_back({"bytes_sent", 1, 3, {10, 20, 30}});
  return c;
}

}  // namespace

TEST(Results, RoundTripOfAttributesAndDatasets) {
  fs::path path = temp_dir() / "run.h5";
  {
    suite::ResultsWriter w(path.string());
    suite::RunInfo info;
    info.attrs = {{"bench", std::string("sp_tp")}, {"world_size", std::int64_t{3}}};
    info.rank_hosts = {"a", "a", "b"};
    info.rank_devices = {"cpu", "cpu", "cpu"};
    w.write_run_info(info);
    w.write_case(sample_case("allreduce_fp32_n4K"));
    EXPECT_THROW(w.write_case(sample_case("allreduce_fp32_n4K")),
                 std::runtime_error);  // names are unique
    EXPECT_TRUE(fs::exists(w.partial_path()));
    EXPECT_FALSE(fs::exists(path));
    w.finish();
  }
  ASSERT_TRUE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path.string() + ".partial"));

  suite::h5::Handle f = suite::h5::open_file(path.string(), false);
  EXPECT_EQ(std::get<std::int64_t>(suite::h5::read_attr(f.id(), "complete")), 1);
  EXPECT_EQ(std::get<std::int64_t>(suite::h5::read_attr(f.id(), "schema_version")),
            suite::kSchemaVersion);
  EXPECT_EQ(std::get<std::string>(suite::h5::read_attr(f.id(), "bench")), "sp_tp");
  suite::h5::Handle g = suite::h5::open_group(f.id(), "sp_tp/allreduce_fp32_n4K");
  EXPECT_EQ(std::get<std::string>(suite::h5::read_attr(g.id(), "params")), "op,n_bytes");
  EXPECT_EQ(std::get<std::int64_t>(suite::h5::read_attr(g.id(), "n_bytes")), 4096);
  EXPECT_DOUBLE_EQ(std::get<double>(suite::h5::read_attr(g.id(), "time_median_s")), 1.5e-5);
  std::vector<hsize_t> dims;
  auto t = suite::h5::read_doubles(g.id(), "time_s", &dims);
  EXPECT_EQ(dims, (std::vector<hsize_t>{2, 3}));
  EXPECT_EQ(t, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(suite::h5::read_doubles(g.id(), "bytes_sent"), (std::vector<double>{10, 20, 30}));
  EXPECT_TRUE(suite::h5::exists(f.id(), "ranks/hostname"));
  EXPECT_FALSE(suite::h5::exists(f.id(), "sp_tp/nope"));
}

TEST(Results, UnfinishedRunLeavesOnlyPartialWithItsCases) {
  fs::path path = temp_dir() / "killed.h5";
  {
    suite::ResultsWriter w(path.string());
    w.write_case(sample_case("first"));
  }  // no finish(): as if the run died here
  EXPECT_FALSE(fs::exists(path));
  suite::h5::Handle f = suite::h5::open_file(path.string() + ".partial", false);
  EXPECT_EQ(std::get<std::int64_t>(suite::h5::read_attr(f.id(), "complete")), 0);
  EXPECT_TRUE(suite::h5::exists(f.id(), "sp_tp/first"));
}

TEST(Results, UnwritablePathIsAUsageError) {
  EXPECT_THROW(suite::ResultsWriter("/proc/definitely/not/here.h5"), suite::UsageError);
}
