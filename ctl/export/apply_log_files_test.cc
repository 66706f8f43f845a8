#include "ctl/export/apply_log_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/fault_injecting_file_system.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

TEST(ApplyLogFilesTest, WritesAndReadsBackEveryFieldAndLearningRatesExactly) {
  FaultInjectingFileSystem fs;
  const std::string dir = ::testing::TempDir() + "/apply_log_round_trip";
  ParameterSpec parameters;
  parameters.set_job_id("j");
  parameters.set_record_apply_log(true);
  std::vector<ApplyLog> logs(2);
  ApplyLogEntry* pull = logs[0].add_entries();
  pull->set_kind(ApplyLogEntry::PULL);
  pull->set_worker(3);
  pull->set_version(17);
  ApplyLogEntry* apply = logs[0].add_entries();
  apply->set_kind(ApplyLogEntry::APPLY);
  apply->set_worker(1);
  apply->set_push_id(9);
  apply->set_clock(8);
  apply->set_version(15);
  apply->set_learning_rate(0.1f / 3.0f);  // Not a short decimal.
  ApplyLogEntry* drop = logs[1].add_entries();
  drop->set_kind(ApplyLogEntry::DROP);
  drop->set_worker(0);
  drop->set_push_id(2);
  drop->set_drop_reason("max_staleness");
  ASSERT_TRUE(WriteApplyLogFiles(dir, parameters, logs, &fs).ok());
  absl::StatusOr<std::string> csv = fs.ReadFile(dir + "/apply_log/ps-0.csv");
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(*csv, "kind,worker,push_id,clock,version,learning_rate,drop_reason\n"
                  "PULL,3,0,0,17,,\n"
                  "APPLY,1,9,8,15,0.0333333351,\n");
  absl::StatusOr<ApplyLogFiles> read = ReadApplyLogFiles(dir, 2, &fs);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->parameters.SerializeAsString(), parameters.SerializeAsString());
  ASSERT_EQ(read->logs.size(), 2u);
  for (int ps = 0; ps < 2; ++ps) {
    EXPECT_EQ(read->logs[ps].SerializeAsString(), logs[ps].SerializeAsString()) << ps;
  }
}

TEST(ApplyLogFilesTest, AMissingOrMalformedFileIsNamed) {
  FaultInjectingFileSystem fs;
  const std::string dir = ::testing::TempDir() + "/apply_log_bad";
  absl::StatusOr<ApplyLogFiles> read = ReadApplyLogFiles(dir, 1, &fs);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(read.status().message(), HasSubstr("record_apply_log"));
  ASSERT_TRUE(WriteApplyLogFiles(dir, ParameterSpec(), {ApplyLog()}, &fs).ok());
  ASSERT_TRUE(fs.WriteFileAtomically(dir + "/apply_log/ps-0.csv",
                                     "kind,worker,push_id,clock,version,learning_rate,drop_reason\n"
                                     "APPLY,1,x,8,15,0.1,\n")
                  .ok());
  read = ReadApplyLogFiles(dir, 1, &fs);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr("ps-0.csv line 2: a number that does not parse"));
}

}  // namespace
}  // namespace ps
