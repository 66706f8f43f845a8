#include "ctl/experiment/experiment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/cluster/cluster_spec.h"
#include "common/job/job_spec.h"
#include "common/testing/fault_injecting_file_system.h"
#include "ctl/job/run_manifest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// A sweep with no points: RunExperiment writes sweep.json and sweep.csv and runs nothing.
class ExperimentFilesTest : public ::testing::Test {
 protected:
  ExperimentFilesTest() {
    sweep_.source = "test_sweep.json";
    sweep_.name = "test";
    options_.results_dir = ::testing::TempDir() + "/" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    options_.out = &out_;
    options_.fs = &fs_;
  }

  Sweep sweep_;
  ExperimentOptions options_;
  std::ostringstream out_;
  FaultInjectingFileSystem fs_;
};

TEST_F(ExperimentFilesTest, AFullDiskUnderSweepJsonNamesTheFile) {
  fs_.FailWrites("sweep.json");
  absl::Status status = RunExperiment(sweep_, {}, options_);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr(options_.results_dir + "/sweep.json"));
}

TEST_F(ExperimentFilesTest, AFailedWriteOfTheTableNamesTheFile) {
  fs_.FailWrites("sweep.csv", EIO);
  absl::Status status = RunExperiment(sweep_, {}, options_);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(options_.results_dir + "/sweep.csv"));
  fs_.ClearFaults();
  EXPECT_TRUE(RunExperiment(sweep_, {}, options_).ok());
  EXPECT_TRUE(fs_.ReadFile(options_.results_dir + "/sweep.csv").ok());
}

TEST_F(ExperimentFilesTest, AFinishedPointWhoseManifestCannotBeReadIsNotTakenAsDone) {
  SweepPoint point;
  point.id = "workers=1";
  point.dir_name = "workers_1";
  point.num_workers = 1;
  const std::string dir = options_.results_dir + "/" + point.dir_name;
  ASSERT_TRUE(fs_.CreateDirectories(dir).ok());
  ASSERT_TRUE(fs_.WriteFileAtomically(dir + "/summary.json", R"({"state": "DONE"})").ok());
  ASSERT_TRUE(fs_.WriteFileAtomically(dir + "/manifest.json", "{}").ok());
  fs_.HideFiles("workers_1/manifest.json");
  absl::Status status = RunExperiment(sweep_, {point}, options_);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr(dir + " holds a finished job other than point"));
}

// A finished point: manifest.json of a run of `spec` on a cluster of `num_ps` ps and
// `num_workers` workers.
void WriteFinishedPoint(FileSystem* fs, const std::string& dir, const JobSpec& spec, int num_ps,
                        int num_workers) {
  std::string ps, workers;
  for (int i = 0; i < num_ps; ++i) ps += absl::StrCat(i > 0 ? ", " : "", "\"h:", i + 1, "\"");
  for (int i = 0; i < num_workers; ++i) {
    workers += absl::StrCat(i > 0 ? ", " : "", "\"h:", i + 100, "\"");
  }
  ASSERT_TRUE(fs->CreateDirectories(dir).ok());
  ASSERT_TRUE(fs->WriteFileAtomically(dir + "/summary.json", R"({"state": "DONE"})").ok());
  ASSERT_TRUE(fs->WriteFileAtomically(
                    dir + "/manifest.json",
                    absl::StrCat(R"({"settings_hash": ")", SettingsHash(spec),
                                 R"(", "cluster": {"cluster": {"ps": [)", ps, R"(], "worker": [)",
                                 workers, "]}}}"))
                  .ok());
}

constexpr char kSpec[] = R"({"job_id": "test-1", "model": {"kind": "SOFTMAX_REGRESSION"},
    "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 100, "feature_dim": 4,
                           "num_classes": 3}},
    "consistency": {"mode": "SYNC"}, "batch_size": 8, "steps": 10})";

// A point is done earlier only on as many ps tasks as it asks for now (a sweep whose "ps"
// changed runs it again).
TEST_F(ExperimentFilesTest, AFinishedPointCountsAsDoneOnlyOnItsNumberOfPsTasks) {
  absl::StatusOr<JobSpec> spec = ParseJobSpecJson(kSpec, "kSpec");
  ASSERT_TRUE(spec.ok()) << spec.status();
  SweepPoint point;
  point.id = "ps=1";
  point.dir_name = "ps=1";
  point.num_workers = 2;
  point.num_ps = 1;
  point.spec = *spec;
  const std::string dir = options_.results_dir + "/" + point.dir_name;
  // Run earlier under another job id (each run of a sweep tags its points' ids).
  JobSpec earlier = *spec;
  earlier.set_job_id("test-1-20261123-120000");
  WriteFinishedPoint(&fs_, dir, earlier, 1, 2);
  ASSERT_TRUE(RunExperiment(sweep_, {point}, options_).ok()) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("ps=1: done earlier, skipped"));

  WriteFinishedPoint(&fs_, dir, earlier, 2, 2);
  absl::Status status = RunExperiment(sweep_, {point}, options_);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr(dir + " holds a finished job other than point ps=1"));
}

// On a running cluster, every point needs the cluster's number of ps tasks; checked before
// anything is written or contacted.
TEST_F(ExperimentFilesTest, APsSettingThatDoesNotMatchARunningClusterIsRefused) {
  absl::StatusOr<ClusterSpec> cluster = ClusterSpec::Parse(
      R"({"ps": ["127.0.0.1:1", "127.0.0.1:2"], "worker": ["127.0.0.1:3"]})", "cluster.json");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  options_.cluster = *cluster;
  SweepPoint point;
  point.id = "ps=1";
  point.num_workers = 1;
  point.num_ps = 1;
  absl::Status status = RunExperiment(sweep_, {point}, options_);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("test_sweep.json: point ps=1 needs 1 ps tasks but the cluster has 2: "
                        "sweep over \"ps\" with --local, or give the cluster that many"));
  EXPECT_FALSE(fs_.ReadFile(options_.results_dir + "/sweep.json").ok());
}

}  // namespace
}  // namespace ps
