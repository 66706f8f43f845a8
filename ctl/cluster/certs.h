// psctl certs: a certificate authority for a cluster and the certificates its tasks and psctl
// present (mutual TLS, common/security/transport_security.h), made with OpenSSL's command line
// tool.
#ifndef PS_CTL_CLUSTER_CERTS_H_
#define PS_CTL_CLUSTER_CERTS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/cluster/cluster_spec.h"

namespace ps {

// Writes into `dir` (created if missing). When `dir` already holds a CA (ca.crt and ca.key),
// it is kept and the other certificates are issued anew with it: that is how certificates are
// rotated (a daemon reloads its files within seconds). Otherwise:
//   ca.crt, ca.key           the cluster's CA (EC P-256, `days` valid)
//   <host>.crt, <host>.key   one per host of the ClusterSpec's tasks: its name (DNS) or address
//                            (IP) as subjectAltName, for TLS servers and clients, signed by the CA
//   <job>-<index>.crt, .key  one per task, its common name the task ("worker:1"), for its host:
//                            a worker with its own may act only as itself
//   psctl.crt, psctl.key     psctl's identity (a client certificate; organization "admin")
//   cluster.token, admin.token  the cluster's tokens (common/security/auth_token.h), made once
// Keys are readable by their owner only. Says on `out` what to pass each daemon. UNAVAILABLE
// when openssl is missing (tools/setup.sh installs it), INTERNAL with its output when it fails.
// `users`: more user certificates, `<user>.crt` and `<user>.key` (organization "admin", common
// name the user's): each user owns the jobs it submits (common/security/peer_identity.h).
absl::Status MakeClusterCertificates(const ClusterSpec& cluster, const std::string& dir, int days,
                                     std::ostream& out, const std::vector<std::string>& users = {});

// The file name (without .crt or .key) of task `job`:`index`'s own certificate: "worker-1".
inline std::string TaskCertificateName(absl::string_view job, int index) {
  return absl::StrCat(job, "-", index);
}

// The distinct hosts of the cluster's tasks, in ClusterSpec order.
std::vector<std::string> ClusterHosts(const ClusterSpec& cluster);

}  // namespace ps

#endif  // PS_CTL_CLUSTER_CERTS_H_
