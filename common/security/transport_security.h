// How a process's servers and channels protect their connections (docs/ARCHITECTURE.md section 7):
// plaintext, TLS, or mutual TLS, with certificates reloaded when their files change.
//
//   - Nothing set: plaintext (the daemons then warn when they listen beyond loopback).
//   - cert and key: this process's identity. Its servers speak TLS with it, and its channels
//     present it when a server asks (mutual TLS).
//   - ca: the cluster's certificate authority. Channels verify each server's certificate
//     against it and check that it names the host they dialed (the ClusterSpec's host name or
//     address). Servers given a ca require every client to present a certificate it signed,
//     and refuse the others at the handshake (mutual TLS).
//
// `psctl certs` makes a CA and a certificate per task host and one for psctl (ctl/cluster/certs.h).
// The files are read through gRPC's file-watcher provider, which checks them every
// kCertificateRefresh: a certificate replaced on disk is used for new connections without a
// restart.
#ifndef PS_COMMON_SECURITY_TRANSPORT_SECURITY_H_
#define PS_COMMON_SECURITY_TRANSPORT_SECURITY_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ps {

inline constexpr absl::Duration kCertificateRefresh = absl::Seconds(1);

struct TransportSecurity {
  std::string cert_file;  // PEM certificate chain of this process.
  std::string key_file;   // PEM private key of cert_file.
  std::string ca_file;    // PEM certificates of the cluster's CA.
  // A server may serve plaintext on an address other than loopback (--insecure): anyone who can
  // reach it may then act as any user. Without it such a server refuses to start.
  bool insecure = false;

  bool tls() const { return !cert_file.empty() || !ca_file.empty(); }
  // A server needs a certificate to speak TLS; with a CA it requires client certificates.
  bool mutual() const { return !cert_file.empty() && !ca_file.empty(); }
};

// INVALID_ARGUMENT naming the flag when the combination cannot work: a certificate without its
// key or the other way round, a file that cannot be read, or (`server`) a CA without a
// certificate to serve with.
absl::Status ValidateTransportSecurity(const TransportSecurity& security, bool server);

// Credentials for a server: insecure when !tls(). REQUIRES: ValidateTransportSecurity passed.
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TransportSecurity& security);
// Credentials for a channel: insecure when !tls(); otherwise TLS verifying the server against
// ca_file (the system's roots when it is empty) and its host name, presenting cert_file when set.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const TransportSecurity& security);

// psctl's identity, set once from its flags before it makes any channel, and read by every
// channel psctl makes (ctl/cluster/cluster_client.cc). Default: plaintext.
void SetProcessTransportSecurity(const TransportSecurity& security);
const TransportSecurity& ProcessTransportSecurity();

// Whether `host` (as a ClusterSpec or --bind_host names it) is this machine's loopback only.
bool IsLoopbackHost(const std::string& host);

}  // namespace ps

#endif  // PS_COMMON_SECURITY_TRANSPORT_SECURITY_H_
