#include "ctl/experiment.h"

#include <cerrno>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/fault_injecting_file_system.h"

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

TEST_F(ExperimentFilesTest, AFinishedPointWhoseJobJsonCannotBeReadIsNotTakenAsDone) {
  SweepPoint point;
  point.id = "workers=1";
  point.dir_name = "workers_1";
  point.num_workers = 1;
  const std::string dir = options_.results_dir + "/" + point.dir_name;
  ASSERT_TRUE(fs_.CreateDirectories(dir).ok());
  ASSERT_TRUE(fs_.WriteFileAtomically(dir + "/summary.json", R"({"state": "DONE"})").ok());
  ASSERT_TRUE(fs_.WriteFileAtomically(dir + "/job.json", "{}").ok());
  fs_.HideFiles("workers_1/job.json");
  absl::Status status = RunExperiment(sweep_, {point}, options_);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr(dir + " holds a finished job other than point"));
}

}  // namespace
}  // namespace ps
