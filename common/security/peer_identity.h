// Who is calling, and what they may do (docs/ARCHITECTURE.md section 7). Under mutual TLS a
// caller is the certificate it presented (`psctl certs` makes them):
//   organization "admin": a user (psctl); its common name is the user's name. Users start,
//                         stop and delete jobs, and only their own.
//   organization "task":  a ps or worker daemon (its host). Tasks push, pull and create shards
//                         on behalf of a job a user started, and may not start, stop or delete
//                         jobs.
// A server without mutual TLS cannot tell callers apart and lets everyone do everything (as
// on a trusted network or loopback); it warns when it listens elsewhere (common/net/grpc_server).
#ifndef PS_COMMON_SECURITY_PEER_IDENTITY_H_
#define PS_COMMON_SECURITY_PEER_IDENTITY_H_

#include <grpcpp/server_context.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ps {

struct Peer {
  enum class Role {
    kUnauthenticated,  // No client certificate: the server does not use mutual TLS.
    kUser,             // O=admin.
    kTask,             // O=task.
    kOther,            // A certificate of the cluster's CA with another organization.
    kNoToken,          // The server requires a token (common/security/auth_token.h) and the call's
                       // was missing or wrong: refused with UNAUTHENTICATED.
  };
  Role role = Role::kUnauthenticated;
  std::string name;       // The certificate's common name; empty when unauthenticated.
  bool by_token = false;  // Known by the token it presented, not by a certificate.
  bool admin = false;     // A user this process's --admin_users names: may act on every job.

  std::string Describe() const;  // "user alice", "task 10.0.0.3", "an unauthenticated caller".
};

// The users who may act on every job (stop, delete, read stats and checkpoints of any), from
// the daemons' --admin_users; set once at start-up, before serving. Empty: none.
void SetProcessAdminUsers(std::vector<std::string> names);

// The caller of the call `context` serves. When this process has tokens (ProcessAuthTokens),
// the call must carry one of them: the admin token makes an unauthenticated caller a user
// ("admin token"), the cluster's token a task ("task token"); under mutual TLS the certificate
// says who, and the token must still be right.
Peer PeerOf(const grpc::ServerContextBase& context);
// The same from the certificate subject gRPC reports ("CN=alice,O=admin"); for tests.
Peer PeerFromSubject(absl::string_view subject);

// Every Require* is UNAUTHENTICATED for kNoToken, saying what to set.
// OK when `peer` may call a user's method (start, stop, delete a job, arm or restore its
// checkpoints): a user, or anyone when unauthenticated. PERMISSION_DENIED naming the method.
absl::Status RequireUser(const Peer& peer, absl::string_view method);
// OK when `peer` may call a cluster member's method (push, pull, status): a user or a task,
// or anyone when unauthenticated.
absl::Status RequireMember(const Peer& peer, absl::string_view method);
// OK when `peer` may call a method only the cluster's tasks call (the ring's Deliver): a task,
// or anyone when unauthenticated. PERMISSION_DENIED naming the method for users and others.
absl::Status RequireTask(const Peer& peer, absl::string_view method);
// OK when `peer` may push, pull or leave as worker `worker` of a job: anyone but a task known by
// its certificate. A task's own certificate (common name "worker:N", `psctl certs`'s
// <job>-<index>.crt) acts only as worker N (a ps's, "ps:N", as no worker); a host's certificate
// acts only as the workers the cluster places on its own host
// (`worker_hosts[i]` is the host of task worker:i in the ClusterSpec; empty: not checked). A
// certificate names a host, not a task, so a host running several workers may act as any of
// them; a task known by the cluster's token has no host and is not checked either. A host's
// certificate may not act as a worker the cluster lacks (an index out of range: a job that grew
// past the ClusterSpec checks its new workers with RequireWorkerOnHost). PERMISSION_DENIED naming
// the worker's host.
absl::Status RequireWorkerHost(const Peer& peer, int worker,
                               const std::vector<std::string>& worker_hosts,
                               absl::string_view method);
// The same for a worker whose host is `host` (the ClusterSpec's, or a grown job's:
// ParameterSpec.worker_addresses), or null where neither lists the worker: a host's certificate
// may then not act as it.
absl::Status RequireWorkerOnHost(const Peer& peer, int worker, const std::string* host,
                                 absl::string_view method);
// OK when `peer` may act as ps task `ps` (a primary replicating its shard): anyone but a task
// known by its certificate, which must be that ps's own ("ps:N") or its host's (`ps_hosts[ps]`,
// from the ClusterSpec). PERMISSION_DENIED naming the ps otherwise.
absl::Status RequirePsHost(const Peer& peer, int ps, const std::vector<std::string>& ps_hosts,
                           absl::string_view method);
// OK when `peer` may stop or delete a job owned by `owner` ("" when the job has none: it was
// started unauthenticated): its owner or an admin, or anyone when unauthenticated.
absl::Status RequireOwner(const Peer& peer, const std::string& owner, absl::string_view job_id,
                          absl::string_view method);

// What a call does with a job, for RequireJobAccess (docs/ARCHITECTURE.md section 7).
enum class JobAccess {
  kData,    // Pull, push, leave: the job's tasks and its owner (psctl's observer pulls).
  kRead,    // Statistics and apply logs: the job's tasks, its owner and admins.
  kManage,  // Stop, delete, checkpoints: its owner and admins; never a task.
};

// Checked on every call about a job before anything of it is read or changed. OK when `peer`
// may make a call of `access` on job `job_id`, owned by `owner` ("" for a job started without
// security: any user). Tasks (the cluster's daemons) may make kData and kRead calls; a user
// only on their own jobs (an admin on every job, but never kData: an admin's psctl does not
// train). Anyone when the server is unauthenticated. UNAUTHENTICATED for kNoToken;
// PERMISSION_DENIED naming the job, its owner and the caller otherwise.
absl::Status RequireJobAccess(const Peer& peer, const std::string& owner, absl::string_view job_id,
                              JobAccess access, absl::string_view method);

}  // namespace ps

#endif  // PS_COMMON_SECURITY_PEER_IDENTITY_H_
