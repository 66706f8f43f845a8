#include "common/security/transport_security.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <fstream>
#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace ps {
namespace {

using Key = std::tuple<std::string, std::string, std::string>;

Key KeyOf(const TransportSecurity& security) {
  return {security.cert_file, security.key_file, security.ca_file};
}

absl::Status Readable(const std::string& path, const char* flag) {
  if (path.empty()) return absl::OkStatus();
  std::ifstream file(path);
  std::string first_line;
  if (!file || !std::getline(file, first_line)) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, "=", path, ": cannot read it; name a PEM file (psctl certs makes them)"));
  }
  if (!absl::StartsWith(first_line, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", path, ": not a PEM file (it does not start with -----BEGIN)"));
  }
  return absl::OkStatus();
}

// One file watcher per set of files in the process (each watcher is a thread that reads them
// every kCertificateRefresh), shared by every server and channel that uses them.
std::shared_ptr<grpc::experimental::CertificateProviderInterface> ProviderFor(
    const TransportSecurity& security) {
  static auto* mu = new absl::Mutex;
  static auto* providers =
      new std::map<Key, std::shared_ptr<grpc::experimental::CertificateProviderInterface>>;
  absl::MutexLock lock(mu);
  auto& provider = (*providers)[KeyOf(security)];
  if (provider == nullptr) {
    const unsigned refresh_s = static_cast<unsigned>(absl::ToInt64Seconds(kCertificateRefresh));
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        security.key_file, security.cert_file, security.ca_file, refresh_s);
  }
  return provider;
}

TransportSecurity& ProcessSecurity() {
  static auto* security = new TransportSecurity;
  return *security;
}

}  // namespace

absl::Status ValidateTransportSecurity(const TransportSecurity& security, bool server) {
  if (security.cert_file.empty() != security.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert and --tls_key go together: give both (this task's certificate and its "
        "private key) or neither");
  }
  if (server && security.cert_file.empty() && !security.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_ca without --tls_cert and --tls_key: a server needs its own certificate to "
        "speak TLS; give all three (mutual TLS) or none (plaintext)");
  }
  for (auto [path, flag] :
       {std::pair(security.cert_file, "--tls_cert"), std::pair(security.key_file, "--tls_key"),
        std::pair(security.ca_file, "--tls_ca")}) {
    absl::Status readable = Readable(path, flag);
    if (!readable.ok()) return readable;
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TransportSecurity& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(ProviderFor(security));
  options.watch_identity_key_cert_pairs();
  if (security.mutual()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const TransportSecurity& security) {
  if (!security.tls()) return grpc::InsecureChannelCredentials();
  static auto* mu = new absl::Mutex;
  static auto* cached = new std::map<Key, std::shared_ptr<grpc::ChannelCredentials>>;
  absl::MutexLock lock(mu);
  auto& credentials = (*cached)[KeyOf(security)];
  if (credentials == nullptr) {
    grpc::experimental::TlsChannelCredentialsOptions options;
    options.set_certificate_provider(ProviderFor(security));
    if (!security.ca_file.empty()) options.watch_root_certs();
    if (!security.cert_file.empty()) options.watch_identity_key_cert_pairs();
    options.set_verify_server_certs(true);
    options.set_certificate_verifier(
        std::make_shared<grpc::experimental::HostNameCertificateVerifier>());
    credentials = grpc::experimental::TlsCredentials(options);
  }
  return credentials;
}

void SetProcessTransportSecurity(const TransportSecurity& security) {
  ProcessSecurity() = security;
}

const TransportSecurity& ProcessTransportSecurity() { return ProcessSecurity(); }

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || absl::StartsWith(host, "127.");
}

}  // namespace ps
