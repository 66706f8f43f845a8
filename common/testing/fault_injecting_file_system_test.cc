#include "common/testing/fault_injecting_file_system.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

std::string TestPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

TEST(FaultInjectingFileSystemTest, AFullDiskRefusesTheWriteAndKeepsTheOldFile) {
  FaultInjectingFileSystem fs;
  const std::string path = TestPath("kept.txt");
  ASSERT_TRUE(fs.WriteFileAtomically(path, "old").ok());
  fs.FailWrites("kept.txt");
  absl::Status status = fs.WriteFileAtomically(path, "new");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
  EXPECT_NE(status.message().find("No space left on device"), std::string::npos) << status;
  EXPECT_EQ(fs.failed_writes(), 1);
  EXPECT_EQ(*fs.ReadFile(path), "old");
  // Other paths are written as usual, and clearing the fault lets the write through.
  EXPECT_TRUE(fs.WriteFileAtomically(TestPath("other.txt"), "x").ok());
  fs.ClearFaults();
  EXPECT_TRUE(fs.WriteFileAtomically(path, "new").ok());
  EXPECT_EQ(*fs.ReadFile(path), "new");
}

TEST(FaultInjectingFileSystemTest, FailsWritesWithTheGivenError) {
  FaultInjectingFileSystem fs;
  fs.FailWrites("", EACCES);
  EXPECT_EQ(fs.WriteFileAtomically(TestPath("any.txt"), "x").code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(FaultInjectingFileSystemTest, AHiddenFileReadsAsMissing) {
  FaultInjectingFileSystem fs;
  const std::string path = TestPath("hidden.txt");
  ASSERT_TRUE(fs.WriteFileAtomically(path, "there").ok());
  fs.HideFiles("hidden.txt");
  absl::StatusOr<std::string> read = fs.ReadFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find(path), std::string::npos) << read.status();
}

TEST(FaultInjectingFileSystemTest, AFaultReachesAnAppendableFileAlreadyOpen) {
  FaultInjectingFileSystem fs;
  const std::string path = TestPath("appended.csv");
  absl::StatusOr<std::unique_ptr<AppendableFile>> file = fs.NewAppendableFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Append("header\n").ok());
  fs.FailWrites("appended.csv");
  absl::Status status = (*file)->Append("row\n");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
  EXPECT_EQ((*file)->Flush().code(), absl::StatusCode::kResourceExhausted);
  fs.ClearFaults();
  ASSERT_TRUE((*file)->Flush().ok());
  EXPECT_EQ(*fs.ReadFile(path), "header\n");
}

}  // namespace
}  // namespace ps
