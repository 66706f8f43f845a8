#include "ctl/cluster/local_credentials.h"

#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/security/auth_token.h"
#include "common/cluster/cluster_spec.h"
#include "common/security/security_flags.h"
#include "common/security/transport_security.h"
#include "ctl/cluster/certs.h"

namespace ps {
namespace {

// Long enough for any run; the CA that signed them is gone with its key.
constexpr int kCertificateDays = 365;

// A ClusterSpec of `num_ps` and `num_workers` tasks on 127.0.0.1: certificates name the host
// and each task's index, never a port.
absl::StatusOr<ClusterSpec> LoopbackCluster(int num_ps, int num_workers) {
  ClusterDef def;
  int port = 1;
  for (const auto& [job, count] : {std::make_pair(std::string(kPsJob), num_ps),
                                   std::make_pair(std::string(kWorkerJob), num_workers)}) {
    ClusterJob* cluster_job = def.add_jobs();
    cluster_job->set_name(job);
    for (int i = 0; i < count; ++i) cluster_job->add_tasks(absl::StrCat("127.0.0.1:", port++));
  }
  return ClusterSpec::FromProto(def);
}

}  // namespace

absl::StatusOr<LocalCredentials> MakeLocalCredentials(const std::string& dir, int num_ps,
                                                      int num_workers) {
  LocalCredentials credentials;
  if (ProcessTransportSecurity().tls() || ProcessAuthTokens().any()) {
    credentials.daemon_args = TransportSecurityArgs(ProcessTransportSecurity());
    for (const std::string& arg : TokenFileArgs()) credentials.daemon_args.push_back(arg);
    credentials.description = "the TLS and tokens psctl was given";
    return credentials;
  }
  const std::string absolute = std::filesystem::absolute(dir).string();
  std::error_code error;
  std::filesystem::create_directories(absolute, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", absolute, ": ", error.message()));
  }
  // A new CA every time (an earlier run's left only its certificate): every earlier
  // certificate, issued by the old one, stops working.
  for (const char* file : {"/ca.crt", "/ca.key"}) std::filesystem::remove(absolute + file, error);
  absl::StatusOr<ClusterSpec> cluster = LoopbackCluster(num_ps, num_workers);
  if (!cluster.ok()) return cluster.status();
  std::ostringstream said;  // What psctl certs tells an operator; nothing to do here.
  absl::Status made = MakeClusterCertificates(*cluster, absolute, kCertificateDays, said);
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
  std::filesystem::remove(absolute + "/ca.key", error);
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
  for (const char* file : {"psctl.crt", "psctl.key", "ca.crt"}) {
    if (access(absl::StrCat(folder, "/", file).c_str(), R_OK) != 0) return "";
  }
  return folder;
}

}  // namespace ps
