#include "worker/data/data_roots.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ps {
namespace {

using ::testing::HasSubstr;

class DataRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = std::string(std::getenv("TEST_TMPDIR")) + "/data_roots";
    std::filesystem::remove_all(base_);
    std::filesystem::create_directories(base_ + "/data/sub");
    std::filesystem::create_directories(base_ + "/secret");
    std::ofstream(base_ + "/data/sub/train.csv") << "1,2\n";
    std::ofstream(base_ + "/secret/token") << "SECRET-TOKEN\n";
    std::filesystem::create_symlink(base_ + "/secret/token", base_ + "/data/link");
  }
  std::string base_;
};

TEST_F(DataRootsTest, FilesUnderARootPassAndOthersAreRefusedWithoutTheirContent) {
  absl::StatusOr<DataRoots> roots = DataRoots::Create({base_ + "/data"});
  ASSERT_TRUE(roots.ok()) << roots.status();
  EXPECT_TRUE(roots->Check(base_ + "/data/sub/train.csv", "data.csv").ok());
  EXPECT_TRUE(roots->Check(base_ + "/data/sub/missing.csv", "data.csv").ok())
      << "a missing file under a root is the reader's NOT_FOUND";

  for (const std::string& outside :
       {base_ + "/secret/token", base_ + "/data/../secret/token", base_ + "/data/link",
        std::string("/etc/passwd"), base_ + "/database"}) {
    absl::Status refused = roots->Check(outside, "data.csv");
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << outside;
    EXPECT_THAT(refused.message(), HasSubstr("data.csv \"" + outside + "\" is outside"));
    EXPECT_THAT(refused.message(), HasSubstr("--data_root"));
    EXPECT_THAT(refused.message(), ::testing::Not(HasSubstr("SECRET")));
  }
}

TEST_F(DataRootsTest, AWorkerWithoutRootsReadsNoFileAndSaysWhichFlagToSet) {
  absl::Status refused = DataRoots().Check(base_ + "/data/sub/train.csv", "data.libsvm");
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.message(), HasSubstr("started without --data_root"));
}

TEST_F(DataRootsTest, ARootMustBeADirectory) {
  EXPECT_EQ(DataRoots::Create({base_ + "/nowhere"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DataRoots::Create({base_ + "/data/sub/train.csv"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
