#include "ctl/export/npy.h"

#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "common/testing/fault_injecting_file_system.h"

namespace ps {
namespace {

std::string ReadAll(const std::string& path) {
  absl::StatusOr<std::string> bytes = FileSystem::Default()->ReadFile(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

TEST(NpyTest, WritesVersion1WithAlignedHeader) {
  std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/w.npy";
  std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  ASSERT_TRUE(WriteNpy(path, {2, 3}, values).ok());
  std::string bytes = ReadAll(path);
  ASSERT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t header_length = static_cast<unsigned char>(bytes[8]) |
                         (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + header_length) % 64, 0u);
  std::string header = bytes.substr(10, header_length);
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(header.find("'shape': (2, 3)"), std::string::npos);
  EXPECT_EQ(header.back(), '\n');
  ASSERT_EQ(bytes.size(), 10 + header_length + values.size() * 4);
  std::vector<float> read(values.size());
  std::memcpy(read.data(), bytes.data() + 10 + header_length, values.size() * 4);
  EXPECT_EQ(read, values);
}

TEST(NpyTest, VectorShapeHasTrailingComma) {
  std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/b.npy";
  ASSERT_TRUE(WriteNpy(path, {3}, std::vector<float>{1, 2, 3}).ok());
  EXPECT_NE(ReadAll(path).find("'shape': (3,)"), std::string::npos);
  EXPECT_FALSE(WriteNpy("/nonexistent/dir/x.npy", {1}, std::vector<float>{1}).ok());
}

TEST(NpyTest, AFullDiskIsResourceExhaustedNamingTheFile) {
  FaultInjectingFileSystem fs;
  fs.FailWrites(".npy");
  std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/full.npy";
  absl::Status status = WriteNpy(path, {1}, std::vector<float>{1}, &fs);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
  EXPECT_EQ(fs.failed_writes(), 1);
}

}  // namespace
}  // namespace ps
