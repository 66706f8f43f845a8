// Files the data tests write into the test's temporary directory.
#ifndef PS_WORKER_DATA_TEST_FILES_H_
#define PS_WORKER_DATA_TEST_FILES_H_

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <utility>

#include "common/file_system.h"

namespace ps {
namespace testing_files {

// Writes `contents` to the file `name` in TEST_TMPDIR and returns its path.
inline std::string WriteTestFile(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + name;
  absl::Status written = FileSystem::Default()->WriteFileAtomically(path, contents);
  EXPECT_TRUE(written.ok()) << written;
  return path;
}

// Writes `contents` gzip-compressed, through zlib's gzopen, and returns the path.
inline std::string WriteGzipTestFile(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + name;
  gzFile file = gzopen(path.c_str(), "wb");
  EXPECT_NE(file, nullptr) << path;
  if (file == nullptr) return path;
  EXPECT_EQ(gzwrite(file, contents.data(), static_cast<unsigned>(contents.size())),
            static_cast<int>(contents.size()))
      << path;
  EXPECT_EQ(gzclose(file), Z_OK) << path;
  return path;
}

// The bytes of the file at `path` (empty when it cannot be read).
inline std::string ReadTestFile(const std::string& path) {
  absl::StatusOr<std::string> contents = FileSystem::Default()->ReadFile(path);
  EXPECT_TRUE(contents.ok()) << contents.status();
  return contents.ok() ? *std::move(contents) : "";
}

}  // namespace testing_files
}  // namespace ps

#endif  // PS_WORKER_DATA_TEST_FILES_H_
