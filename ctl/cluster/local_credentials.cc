#include "ctl/cluster/local_credentials.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/security/auth_token.h"
#include "common/cluster/cluster_spec.h"
#include "common/security/security_flags.h"
#include "common/security/transport_security.h"
#include "ctl/cluster/certs.h"
#include "ctl/cluster/local_cluster.h"

namespace ps {
namespace {

// Long enough for any run; the CA that signed them is gone with its key.
constexpr int kCertificateDays = 365;

}  // namespace

absl::StatusOr<LocalCredentials> MakeLocalCredentials(const std::string& dir, int num_ps,
                                                      int num_workers) {
  LocalCredentials credentials;
  if (const std::string certs = CertsDirFromFlags(); !certs.empty()) {
    // Each daemon picks its own task's certificate there, as psctl picked psctl's.
    credentials.daemon_args = {"--certs=" + certs};
    credentials.description = "the certificates and tokens in " + certs;
    return credentials;
  }
  if (ProcessTransportSecurity().tls() || ProcessAuthTokens().any()) {
    credentials.daemon_args = TransportSecurityArgs(ProcessTransportSecurity());
    for (const std::string& arg : TokenFileArgs()) credentials.daemon_args.push_back(arg);
    credentials.description = "the TLS and tokens psctl was given";
    return credentials;
  }
  const std::string absolute = std::filesystem::absolute(dir).string();
  std::error_code error;
  std::filesystem::create_directories(absolute, error);
  if (!error) {
    // Only this user may read, swap or add credentials there.
    std::filesystem::permissions(absolute, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, error);
  }
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", absolute, " for this user alone: ", error.message()));
  }
  // A new CA and new tokens every time: every earlier certificate and token stops working.
  for (const std::string file : {"ca.crt", "ca.key", kClusterTokenFile, kAdminTokenFile}) {
    std::filesystem::remove(absolute + "/" + file, error);
  }
  // Certificates name the host and each task's index, never a port.
  std::vector<int> ports(num_ps + num_workers);
  std::iota(ports.begin(), ports.end(), 1);
  absl::StatusOr<ClusterSpec> cluster = LoopbackCluster(num_ps, num_workers, ports);
  if (!cluster.ok()) return cluster.status();
  std::ostringstream said;  // What psctl certs tells an operator; nothing to do here.
  absl::Status made = MakeClusterCertificates(*cluster, absolute, kCertificateDays, said);
  // No one can issue another identity, whatever happened: the CA's key goes.
  std::filesystem::remove(absolute + "/ca.key", error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot delete the throwaway CA's key ", absolute,
                                            "/ca.key: ", error.message(), "; delete it"));
  }
  if (absl::IsUnavailable(made)) {
    // No openssl: tokens of its own still refuse strangers, in plaintext on loopback.
    absl::StatusOr<AuthTokens> tokens = WriteNewAuthTokens(absolute);
    if (!tokens.ok()) return tokens.status();
    SetProcessAuthTokens(*tokens);
    credentials.daemon_args = {
        absl::StrCat("--auth_token_file=", absolute, "/", kClusterTokenFile),
        absl::StrCat("--admin_token_file=", absolute, "/", kAdminTokenFile)};
    credentials.description = absl::StrCat("tokens in ", absolute, ", plaintext on 127.0.0.1 (",
                                           made.message(), ")");
    return credentials;
  }
  if (!made.ok()) return made;
  absl::StatusOr<AuthTokens> tokens = ReadAuthTokens(
      absl::StrCat(absolute, "/", kClusterTokenFile), absl::StrCat(absolute, "/", kAdminTokenFile));
  if (!tokens.ok()) return tokens.status();
  SetProcessAuthTokens(*tokens);
  SetProcessTransportSecurity(
      {absolute + "/psctl.crt", absolute + "/psctl.key", absolute + "/ca.crt"});
  credentials.daemon_args = {"--certs=" + absolute};
  credentials.description = absl::StrCat("mutual TLS, a throwaway CA in ", absolute);
  return credentials;
}

std::string CredentialsBeside(const std::string& cluster_spec_path) {
  if (cluster_spec_path.empty()) return "";
  const std::filesystem::path dir = std::filesystem::path(cluster_spec_path).parent_path();
  const std::string folder = dir.empty() ? "." : dir.string();
  // Only a folder this user owns and no one else may write to, as ssh asks of ~/.ssh: anyone
  // else could have put credentials of their own there.
  struct stat info;
  if (stat(folder.c_str(), &info) != 0 || info.st_uid != geteuid() ||
      (info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return "";
  }
  for (const char* file : {"psctl.crt", "psctl.key", "ca.crt"}) {
    if (access(absl::StrCat(folder, "/", file).c_str(), R_OK) != 0) return "";
  }
  return folder;
}

}  // namespace ps
