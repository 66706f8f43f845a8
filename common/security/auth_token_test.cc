#include "common/security/auth_token.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace ps {
namespace {

using ::testing::HasSubstr;

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(AuthTokenTest, TokensComeFromFilesOrTheEnvironmentWithoutSurroundingSpace) {
  absl::StatusOr<AuthTokens> tokens =
      ReadAuthTokens(Write("task", "  task-token-0123456789\n"), "");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->task, "task-token-0123456789");
  EXPECT_EQ(tokens->admin, "");
  setenv("PS_ADMIN_TOKEN", "admin-token-0123456789", 1);
  tokens = ReadAuthTokens("", "");
  unsetenv("PS_ADMIN_TOKEN");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->admin, "admin-token-0123456789");
  EXPECT_EQ(PresentedToken(*tokens), "admin-token-0123456789");
  EXPECT_FALSE(ReadAuthTokens("", "")->any());
}

TEST(AuthTokenTest, AShortTokenOrAMissingFileIsRefusedWithoutTheToken) {
  absl::Status refused = ReadAuthTokens(Write("short", "s3cret\n"), "").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("shorter than 16 characters"));
  EXPECT_THAT(refused.message(), ::testing::Not(HasSubstr("s3cret")));
  EXPECT_THAT(ReadAuthTokens("", "/nonexistent/admin.token").status().message(),
              HasSubstr("--admin_token_file=/nonexistent/admin.token: cannot read it"));
}

TEST(AuthTokenTest, ConstantTimeEqualsComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("abcdef", "abcdef"));
  EXPECT_FALSE(ConstantTimeEquals("abcdef", "abcdeg"));
  EXPECT_FALSE(ConstantTimeEquals("abcdef", "abcde"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
}

}  // namespace
}  // namespace ps
