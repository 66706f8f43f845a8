#include "common/process/build_info.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/process/version.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Tests are unstamped builds (only --config=release stamps); tools/release.sh checks that its
// binaries' --version names the commit.
TEST(BuildInfoTest, AnUnstampedBuildSaysSo) {
  EXPECT_THAT(VersionString(), StartsWith(std::string(kVersion) + " ("));
  if (BuildCommit().empty()) {
    EXPECT_THAT(VersionString(), HasSubstr("commit unknown: an unstamped build"));
  } else {
    EXPECT_THAT(VersionString(), HasSubstr("commit " + BuildCommit() + ", built 20"));
  }
  EXPECT_THAT(VersionString(), HasSubstr(OptimizedBuild() ? "optimized)" : "unoptimized)"));
}

}  // namespace
}  // namespace ps
