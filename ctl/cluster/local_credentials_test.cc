#include "ctl/cluster/local_credentials.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gflags/gflags.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/security/auth_token.h"
#include "common/security/transport_security.h"

DECLARE_string(certs);

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class LocalCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Process-wide: every test starts as a psctl given no security flag.
    SetProcessTransportSecurity({});
    SetProcessAuthTokens({});
    dir_ = std::string(std::getenv("TEST_TMPDIR")) + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  void TearDown() override {
    SetProcessTransportSecurity({});
    SetProcessAuthTokens({});
  }
  std::string dir_;
};

TEST_F(LocalCredentialsTest, AThrowawayCaACertificatePerTaskAndNoCaKey) {
  if (access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "no openssl (tools/setup.sh)";
  absl::StatusOr<LocalCredentials> credentials = MakeLocalCredentials(dir_, 2, 3);
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  EXPECT_THAT(credentials->daemon_args, ElementsAre("--certs=" + dir_));
  EXPECT_THAT(credentials->description, HasSubstr("mutual TLS, a throwaway CA"));
  for (const char* name :
       {"127.0.0.1", "ps-0", "ps-1", "worker-0", "worker-1", "worker-2", "psctl"}) {
    EXPECT_TRUE(std::filesystem::exists(dir_ + "/" + name + ".crt")) << name;
    struct stat info;
    ASSERT_EQ(stat((dir_ + "/" + name + ".key").c_str(), &info), 0) << name;
    EXPECT_EQ(info.st_mode & 0777, 0600u) << name;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/worker-3.crt"));
  // No one can issue another identity: the CA's key is gone.
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/ca.key"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/ca.crt"));
  // psctl speaks as itself, with the admin token.
  EXPECT_TRUE(ProcessTransportSecurity().mutual());
  EXPECT_EQ(ProcessTransportSecurity().cert_file, dir_ + "/psctl.crt");
  EXPECT_FALSE(ProcessAuthTokens().admin.empty());
  // Later commands find them beside the ClusterSpec.
  EXPECT_EQ(CredentialsBeside(dir_ + "/cluster.json"), dir_);

  // Again in the same folder (psctl local --overwrite): a new CA, which the old certificates
  // no longer match.
  const std::string old_ca = ReadAll(dir_ + "/ca.crt");
  const std::string old_admin_token = ReadAll(dir_ + "/admin.token");
  SetProcessTransportSecurity({});
  SetProcessAuthTokens({});
  credentials = MakeLocalCredentials(dir_, 1, 1);
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  EXPECT_NE(ReadAll(dir_ + "/ca.crt"), old_ca);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/ca.key"));
  EXPECT_NE(ReadAll(dir_ + "/admin.token"), old_admin_token) << "the tokens were kept";
  struct stat folder;
  ASSERT_EQ(stat(dir_.c_str(), &folder), 0);
  EXPECT_EQ(folder.st_mode & 0777, 0700u);

  // A folder others may write to is not trusted for credentials.
  chmod(dir_.c_str(), 0770);
  EXPECT_EQ(CredentialsBeside(dir_ + "/cluster.json"), "");
}

TEST_F(LocalCredentialsTest, TokensGivenToPsctlArePassedOnAndNothingIsWritten) {
  SetProcessAuthTokens({"task-token", "admin-token"});
  absl::StatusOr<LocalCredentials> credentials = MakeLocalCredentials(dir_, 1, 1);
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  EXPECT_EQ(credentials->description, "the TLS and tokens psctl was given");
  EXPECT_FALSE(std::filesystem::exists(dir_));
  EXPECT_FALSE(ProcessTransportSecurity().tls());
}

TEST_F(LocalCredentialsTest, CertsGivenToPsctlAreEachDaemonsToo) {
  FLAGS_certs = dir_ + "/given";
  absl::StatusOr<LocalCredentials> credentials = MakeLocalCredentials(dir_ + "/local", 1, 1);
  FLAGS_certs = "";
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  EXPECT_THAT(credentials->daemon_args, ElementsAre("--certs=" + dir_ + "/given"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/local"));
}

TEST_F(LocalCredentialsTest, NoCredentialsBesideAClusterSpecWithoutThem) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ + "/cluster.json") << "{}";
  EXPECT_EQ(CredentialsBeside(dir_ + "/cluster.json"), "");
  EXPECT_EQ(CredentialsBeside(""), "");
  // A certificate without the CA's is not a set of credentials.
  std::ofstream(dir_ + "/psctl.crt") << "x";
  std::ofstream(dir_ + "/psctl.key") << "x";
  EXPECT_EQ(CredentialsBeside(dir_ + "/cluster.json"), "");
}

}  // namespace
}  // namespace ps
