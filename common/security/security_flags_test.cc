#include "common/security/security_flags.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gflags/gflags.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ps {
namespace {

using ::testing::ElementsAre;

TEST(SecurityFlagsTest, TheFlagsAreReadAndPassedOnToDaemonsWithAbsolutePaths) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  std::ofstream(dir + "/task.token") << "task-token-0123456789\n";
  std::filesystem::current_path(dir);
  gflags::SetCommandLineOption("tls_cert", "host.crt");
  gflags::SetCommandLineOption("tls_key", "host.key");
  gflags::SetCommandLineOption("tls_ca", "ca.crt");
  gflags::SetCommandLineOption("auth_token_file", "task.token");

  const TransportSecurity security = TransportSecurityFromFlags();
  EXPECT_EQ(security.cert_file, "host.crt");
  EXPECT_TRUE(security.mutual());
  EXPECT_THAT(TransportSecurityArgs(security),
              ElementsAre("--tls_cert=host.crt", "--tls_key=host.key", "--tls_ca=ca.crt"));
  EXPECT_THAT(TransportSecurityArgs(TransportSecurity()), ::testing::IsEmpty());

  // A daemon started elsewhere finds the token file: its path is made absolute.
  EXPECT_THAT(TokenFileArgs(), ElementsAre("--auth_token_file=" + dir + "/task.token"));
  absl::StatusOr<AuthTokens> tokens = AuthTokensFromFlags();
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->task, "task-token-0123456789");
  EXPECT_FALSE(ReflectionFromFlags());
}

}  // namespace
}  // namespace ps
