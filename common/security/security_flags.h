// The security flags ps_server, ps_worker and psctl share: --tls_cert, --tls_key and --tls_ca
// (common/security/transport_security.h says what each combination means), --auth_token_file and
// --admin_token_file (common/security/auth_token.h), and the daemons' --reflection.
#ifndef PS_COMMON_SECURITY_SECURITY_FLAGS_H_
#define PS_COMMON_SECURITY_SECURITY_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/security/auth_token.h"
#include "common/security/transport_security.h"

namespace ps {

// --certs=DIR: sets --tls_cert and --tls_key to DIR/<identity>.crt and .key for the first of
// `identities` whose certificate is there, --tls_ca to DIR/ca.crt, and the token files to DIR's
// cluster.token and admin.token where they exist (as `psctl certs` writes them). A daemon's
// identities: its task's own ("worker-1"), then its host as the ClusterSpec names it; psctl's:
// "psctl". Call before the *FromFlags functions. INVALID_ARGUMENT when a flag it stands for is
// given too, or no certificate, key or CA is there. `default_dir` ("": none) stands for --certs
// when no security flag at all is given, nor a token in the environment (psctl: the credentials
// beside its ClusterSpec).
absl::Status ApplyCertsFlag(const std::vector<std::string>& identities,
                            const std::string& default_dir = "");

// The flags' values.
TransportSecurity TransportSecurityFromFlags();
// --reflection (the daemons' servers only).
bool ReflectionFromFlags();
// --admin_users (the daemons only; common/security/peer_identity.h's SetProcessAdminUsers).
std::vector<std::string> AdminUsersFromFlags();
// --certs, absolute; "" when not given (nor stood for by ApplyCertsFlag's default).
std::string CertsDirFromFlags();
// --auth_token_file and --admin_token_file read (or the environment; common/security/auth_token.h).
absl::StatusOr<AuthTokens> AuthTokensFromFlags();
// Those two flags again, with absolute paths, for daemons this process starts (psctl local).
std::vector<std::string> TokenFileArgs();

// The flags again, as a daemon started by this process takes them (psctl local); none when
// plaintext.
std::vector<std::string> TransportSecurityArgs(const TransportSecurity& security);

}  // namespace ps

#endif  // PS_COMMON_SECURITY_SECURITY_FLAGS_H_
