#include "worker/data/file_contents.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/fault_injecting_file_system.h"
#include "worker/data/test_files.h"

namespace ps {
namespace data_internal {
namespace {

using ::testing::HasSubstr;
using testing_files::WriteGzipTestFile;
using testing_files::WriteTestFile;

TEST(ReadFileContentsTest, ReadsPlainAndGzipFilesThroughTheFileSystem) {
  FaultInjectingFileSystem fs;
  const std::string plain = WriteTestFile("contents.txt", "plain bytes");
  absl::StatusOr<FileContents> read = ReadFileContents(plain, &fs);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->bytes, "plain bytes");
  EXPECT_FALSE(read->gzipped);

  const std::string gzipped = WriteGzipTestFile("contents.txt.gz", "packed bytes");
  read = ReadFileContents(gzipped, &fs);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->bytes, "packed bytes");
  EXPECT_TRUE(read->gzipped);
}

TEST(ReadFileContentsTest, AFileTheFileSystemCannotFindIsNotFoundNamingThePath) {
  FaultInjectingFileSystem fs;
  const std::string path = WriteTestFile("vanished.txt", "bytes");
  fs.HideFiles("vanished.txt");
  absl::StatusOr<FileContents> read = ReadFileContents(path, &fs);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(read.status().message(), HasSubstr(path));
}

}  // namespace
}  // namespace data_internal
}  // namespace ps
