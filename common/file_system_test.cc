#include "common/file_system.h"

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ps {
namespace {

std::string TestPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

// Whether a temporary file of `path`'s writers ("<path>.tmp.*") is left beside it.
bool TemporaryLeft(const std::string& path) {
  const std::filesystem::path file(path);
  const std::string prefix = file.filename().string() + ".tmp";
  for (const auto& entry : std::filesystem::directory_iterator(file.parent_path())) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) return true;
  }
  return false;
}

TEST(FileSystemTest, AnAtomicWriteReplacesTheFileAndLeavesNoTemporaryFile) {
  FileSystem* fs = FileSystem::Default();
  const std::string path = TestPath("replaced.txt");
  ASSERT_TRUE(fs->WriteFileAtomically(path, "first version, longer").ok());
  ASSERT_TRUE(fs->WriteFileAtomically(path, std::string("second\0bytes", 12)).ok());
  absl::StatusOr<std::string> read = fs->ReadFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, std::string("second\0bytes", 12));
  EXPECT_FALSE(TemporaryLeft(path));
}

// Writers of one path at once (ps daemons sharing a checkpoint directory write its MANIFEST)
// each write a temporary file of their own: the path ends whole, as one of them wrote it.
TEST(FileSystemTest, AtomicWritersOfOnePathAtOnceLeaveOneWholeFile) {
  FileSystem* fs = FileSystem::Default();
  const std::string path = TestPath("shared.bin");
  std::vector<std::string> contents;
  for (int w = 0; w < 4; ++w) contents.push_back(std::string(1 << 16, static_cast<char>('a' + w)));
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int round = 0; round < 20; ++round) {
        EXPECT_TRUE(fs->WriteFileAtomically(path, contents[w]).ok());
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  absl::StatusOr<std::string> read = fs->ReadFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(contents, ::testing::Contains(*read));
  EXPECT_FALSE(TemporaryLeft(path));
}

TEST(FileSystemTest, AnAtomicFileReplacesThePathOnlyWhenCommitted) {
  FileSystem* fs = FileSystem::Default();
  const std::string path = TestPath("pieces.bin");
  ASSERT_TRUE(fs->WriteFileAtomically(path, "old").ok());
  {
    absl::StatusOr<std::unique_ptr<AtomicFile>> file = fs->NewAtomicFile(path);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE((*file)->Append("abandoned").ok());
  }  // Never committed.
  EXPECT_EQ(*fs->ReadFile(path), "old");
  EXPECT_FALSE(TemporaryLeft(path));

  absl::StatusOr<std::unique_ptr<AtomicFile>> file = fs->NewAtomicFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Append("new ").ok());
  ASSERT_TRUE((*file)->Append("in pieces").ok());
  EXPECT_EQ(*fs->ReadFile(path), "old");  // Not before the commit.
  ASSERT_TRUE((*file)->Commit().ok());
  EXPECT_EQ(*fs->ReadFile(path), "new in pieces");
  EXPECT_FALSE(TemporaryLeft(path));
}

TEST(FileSystemTest, ReadingAMissingFileIsNotFoundNamingThePath) {
  const std::string path = TestPath("no_such_file.txt");
  absl::StatusOr<std::string> read = FileSystem::Default()->ReadFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find(path), std::string::npos) << read.status();
}

TEST(FileSystemTest, AWriteIntoAMissingDirectoryFailsNamingThePath) {
  const std::string path = TestPath("no_such_dir/file.txt");
  absl::Status status = FileSystem::Default()->WriteFileAtomically(path, "x");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
}

TEST(FileSystemTest, CreatesDirectoriesWithTheirParentsAndAcceptsExistingOnes) {
  FileSystem* fs = FileSystem::Default();
  const std::string dir = TestPath("a/b/c");
  ASSERT_TRUE(fs->CreateDirectories(dir).ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_TRUE(fs->CreateDirectories(dir).ok());
  ASSERT_TRUE(fs->WriteFileAtomically(TestPath("a/file"), "x").ok());
  absl::Status status = fs->CreateDirectories(TestPath("a/file/d"));
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(TestPath("a/file/d")), std::string::npos) << status;
}

TEST(FileSystemTest, ListsADirectorySortedAndDeletesATreeOnce) {
  FileSystem* fs = FileSystem::Default();
  const std::string dir = TestPath("tree");
  ASSERT_TRUE(fs->CreateDirectories(dir + "/sub").ok());
  ASSERT_TRUE(fs->WriteFileAtomically(dir + "/b", "x").ok());
  ASSERT_TRUE(fs->WriteFileAtomically(dir + "/sub/a", "y").ok());
  absl::StatusOr<std::vector<std::string>> names = fs->ListDirectory(dir);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"b", "sub"}));
  ASSERT_TRUE(fs->DeleteRecursively(dir).ok());
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_TRUE(fs->DeleteRecursively(dir).ok());  // Gone already: nothing to do.
  EXPECT_TRUE(absl::IsNotFound(fs->ListDirectory(dir).status()));
}

TEST(FileSystemTest, AnAppendableFileGrowsWithEachAppendAndStartsEmpty) {
  FileSystem* fs = FileSystem::Default();
  const std::string path = TestPath("growing.csv");
  ASSERT_TRUE(fs->WriteFileAtomically(path, "old contents\n").ok());
  absl::StatusOr<std::unique_ptr<AppendableFile>> file = fs->NewAppendableFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Append("a,b\n").ok());
  ASSERT_TRUE((*file)->Flush().ok());
  EXPECT_EQ(*fs->ReadFile(path), "a,b\n");
  ASSERT_TRUE((*file)->Append("1,2\n").ok());
  file->reset();  // Closing flushes.
  EXPECT_EQ(*fs->ReadFile(path), "a,b\n1,2\n");

  const std::string missing = TestPath("no_such_dir/growing.csv");
  file = fs->NewAppendableFile(missing);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find(missing), std::string::npos) << file.status();
}

}  // namespace
}  // namespace ps
