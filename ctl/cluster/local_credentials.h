// The credentials of the clusters psctl starts on this machine (psctl local, replay and
// experiment --local): unless the user gave TLS or tokens of their own, a throwaway CA, a
// certificate per task and psctl's, and tokens, so that the cluster's ports refuse every
// stranger on this host, other users' processes included (issue 30, "secure by default").
#ifndef PS_CTL_CLUSTER_LOCAL_CREDENTIALS_H_
#define PS_CTL_CLUSTER_LOCAL_CREDENTIALS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ps {

// What the daemons of a local cluster are given and how psctl speaks to them.
struct LocalCredentials {
  // Flags for every daemon: "--certs=DIR"; or the --tls_* and token flags psctl was given.
  std::vector<std::string> daemon_args;
  // "mutual TLS (a throwaway CA in DIR)", "tokens in DIR (plaintext on 127.0.0.1)", or "yours".
  std::string description;
};

// Without TLS or tokens given to psctl: writes into `dir` (created, 0700) a new CA, a
// certificate for 127.0.0.1 and one per task (ps-0 .. ps-<num_ps - 1>, worker-0 ..), psctl's,
// and new tokens, as `psctl certs` does, then deletes the CA's key (no one can issue more), and
// makes this process speak with psctl's certificate and the admin token. Without openssl, tokens
// only (said in `description`). Keys and tokens are readable by their owner only. Later psctl
// commands given --cluster_spec=DIR/cluster.json find these credentials beside it
// (CredentialsBeside). With --certs given: the daemons get --certs (each its own task's
// certificate); with other TLS flags or tokens: passes them on. Either way it writes nothing.
absl::StatusOr<LocalCredentials> MakeLocalCredentials(const std::string& dir, int num_ps,
                                                      int num_workers);

// The folder of `cluster_spec_path` when it holds the credentials MakeLocalCredentials wrote
// (psctl.crt, psctl.key and ca.crt) and is this user's, writable by no one else, for psctl's
// --certs; "" otherwise.
std::string CredentialsBeside(const std::string& cluster_spec_path);

}  // namespace ps

#endif  // PS_CTL_CLUSTER_LOCAL_CREDENTIALS_H_
