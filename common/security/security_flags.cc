#include "common/security/security_flags.h"

#include <gflags/gflags.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <utility>

#include "absl/strings/str_split.h"

DEFINE_string(tls_cert, "",
              "PEM certificate of this process (with --tls_key): servers speak TLS with it and "
              "channels present it; reloaded when the file changes");
DEFINE_string(tls_key, "", "PEM private key of --tls_cert");
DEFINE_string(auth_token_file, "",
              "file holding the cluster's token: tasks present it and servers require it (or "
              "the admin token) on every call; PS_AUTH_TOKEN when empty");
DEFINE_string(admin_token_file, "",
              "file holding the users' token: psctl presents it (start, stop, delete jobs) and "
              "servers accept it; PS_ADMIN_TOKEN when empty");
DEFINE_bool(reflection, false,
            "serve gRPC server reflection (grpc_cli, grpcurl list the services): for debugging");
DEFINE_string(certs, "",
              "a directory `psctl certs` wrote: TLS and tokens in one flag, in place of "
              "--tls_cert, --tls_key, --tls_ca, --auth_token_file and --admin_token_file (a "
              "daemon takes its host's certificate, psctl psctl.crt)");
DEFINE_bool(insecure, false,
            "the daemons: serve plaintext on an address other than loopback (refused without "
            "this: give TLS, or bind 127.0.0.1); anyone who reaches the port may act as any user");
DEFINE_string(admin_users, "",
              "the daemons: users (certificate common names; \"admin\" for the admin token) who "
              "may stop, delete and read every job, comma-separated; others only their own");
DEFINE_string(tls_ca, "",
              "PEM certificate of the cluster's CA: channels verify servers against it (and "
              "their host names); servers require client certificates it signed (mutual TLS)");

namespace ps {

TransportSecurity TransportSecurityFromFlags() {
  return TransportSecurity{FLAGS_tls_cert, FLAGS_tls_key, FLAGS_tls_ca, FLAGS_insecure};
}

bool ReflectionFromFlags() { return FLAGS_reflection; }

absl::Status ApplyCertsFlag(const std::vector<std::string>& identities,
                            const std::string& default_dir) {
  if (FLAGS_certs.empty() && FLAGS_tls_cert.empty() && FLAGS_tls_key.empty() &&
      FLAGS_tls_ca.empty() && FLAGS_auth_token_file.empty() && FLAGS_admin_token_file.empty() &&
      std::getenv("PS_AUTH_TOKEN") == nullptr && std::getenv("PS_ADMIN_TOKEN") == nullptr) {
    FLAGS_certs = default_dir;
  }
  if (FLAGS_certs.empty()) return absl::OkStatus();
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string*>("--tls_cert", &FLAGS_tls_cert),
        {"--tls_key", &FLAGS_tls_key},
        {"--tls_ca", &FLAGS_tls_ca},
        {"--auth_token_file", &FLAGS_auth_token_file},
        {"--admin_token_file", &FLAGS_admin_token_file}}) {
    if (!value->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--certs=", FLAGS_certs, " stands for ", flag, ": give one or the other"));
    }
  }
  const std::string dir = std::filesystem::absolute(FLAGS_certs).string();
  std::string identity = identities.empty() ? "" : identities.front();
  for (const std::string& candidate : identities) {
    if (access(absl::StrCat(dir, "/", candidate, ".crt").c_str(), R_OK) == 0) {
      identity = candidate;
      break;
    }
  }
  const std::string cert = absl::StrCat(dir, "/", identity, ".crt");
  for (const std::string& file : {cert, absl::StrCat(dir, "/", identity, ".key"),
                                  absl::StrCat(dir, "/ca.crt")}) {
    if (access(file.c_str(), R_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--certs=", FLAGS_certs, ": cannot read ", file, " (`psctl certs --cluster_spec=F "
          "--out=DIR` writes a certificate per host of the ClusterSpec, psctl's and the CA's)"));
    }
  }
  FLAGS_tls_cert = cert;
  FLAGS_tls_key = absl::StrCat(dir, "/", identity, ".key");
  FLAGS_tls_ca = absl::StrCat(dir, "/ca.crt");
  for (const auto& [name, value] :
       {std::pair<const char*, std::string*>(kClusterTokenFile, &FLAGS_auth_token_file),
        {kAdminTokenFile, &FLAGS_admin_token_file}}) {
    const std::string file = absl::StrCat(dir, "/", name);
    if (access(file.c_str(), R_OK) == 0) *value = file;
  }
  return absl::OkStatus();
}

std::vector<std::string> AdminUsersFromFlags() {
  return absl::StrSplit(FLAGS_admin_users, ',', absl::SkipWhitespace());
}

absl::StatusOr<AuthTokens> AuthTokensFromFlags() {
  return ReadAuthTokens(FLAGS_auth_token_file, FLAGS_admin_token_file);
}

std::string CertsDirFromFlags() {
  return FLAGS_certs.empty() ? "" : std::filesystem::absolute(FLAGS_certs).string();
}

std::vector<std::string> TokenFileArgs() {
  std::vector<std::string> args;
  for (const auto& [flag, file] :
       {std::pair<const char*, std::string>("--auth_token_file=", FLAGS_auth_token_file),
        std::pair<const char*, std::string>("--admin_token_file=", FLAGS_admin_token_file)}) {
    if (!file.empty()) args.push_back(flag + std::filesystem::absolute(file).string());
  }
  return args;
}

std::vector<std::string> TransportSecurityArgs(const TransportSecurity& security) {
  std::vector<std::string> args;
  if (!security.cert_file.empty()) args.push_back("--tls_cert=" + security.cert_file);
  if (!security.key_file.empty()) args.push_back("--tls_key=" + security.key_file);
  if (!security.ca_file.empty()) args.push_back("--tls_ca=" + security.ca_file);
  return args;
}

}  // namespace ps
