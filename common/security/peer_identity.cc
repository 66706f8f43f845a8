#include "common/security/peer_identity.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/security/auth_token.h"

namespace ps {

std::string Peer::Describe() const {
  if (by_token) return role == Role::kUser ? "the admin token" : "the cluster's task token";
  switch (role) {
    case Role::kUnauthenticated:
      return "an unauthenticated caller";
    case Role::kUser:
      return absl::StrCat("user ", name);
    case Role::kTask:
      return absl::StrCat("task ", name);
    case Role::kOther:
      return absl::StrCat("certificate ", name, " (neither a user's nor a task's)");
    case Role::kNoToken:
      return "a caller without this cluster's token";
  }
  return "?";
}

Peer PeerFromSubject(absl::string_view subject) {
  Peer peer;
  peer.role = Peer::Role::kOther;
  std::string organization;
  for (absl::string_view part : absl::StrSplit(subject, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (absl::ConsumePrefix(&part, "CN=")) peer.name = std::string(part);
    if (absl::ConsumePrefix(&part, "O=")) organization = std::string(part);
  }
  if (organization == "admin") peer.role = Peer::Role::kUser;
  if (organization == "task") peer.role = Peer::Role::kTask;
  return peer;
}

namespace {

Peer CertificatePeer(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return Peer();
  std::vector<grpc::string_ref> subject = auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME);
  if (subject.empty()) return Peer();
  return PeerFromSubject(absl::string_view(subject[0].data(), subject[0].size()));
}

std::vector<std::string>& AdminUsers() {
  static auto* names = new std::vector<std::string>();
  return *names;
}

absl::Status NoToken(absl::string_view method) {
  return absl::UnauthenticatedError(
      absl::StrCat(method,
                   ": this cluster requires a token and the call's is missing or wrong: give psctl "
                   "--admin_token_file (or PS_ADMIN_TOKEN), and each task --auth_token_file (or "
                   "PS_AUTH_TOKEN), naming the cluster's token files"));
}

}  // namespace

void SetProcessAdminUsers(std::vector<std::string> names) { AdminUsers() = std::move(names); }

namespace {

// `peer` with `admin` set when it is a user --admin_users names.
Peer WithAdmin(Peer peer) {
  peer.admin = peer.role == Peer::Role::kUser &&
               std::find(AdminUsers().begin(), AdminUsers().end(), peer.name) != AdminUsers().end();
  return peer;
}

}  // namespace

Peer PeerOf(const grpc::ServerContextBase& context) {
  Peer peer = CertificatePeer(context);
  const AuthTokens& tokens = ProcessAuthTokens();
  if (!tokens.any()) return WithAdmin(std::move(peer));
  absl::string_view presented;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it != metadata.end()) presented = absl::string_view(it->second.data(), it->second.size());
  if (!absl::ConsumePrefix(&presented, "Bearer ")) presented = "";
  const bool admin = !tokens.admin.empty() && ConstantTimeEquals(presented, tokens.admin);
  const bool task = !tokens.task.empty() && ConstantTimeEquals(presented, tokens.task);
  if (!admin && !task) return Peer{Peer::Role::kNoToken, "", false};
  if (peer.role == Peer::Role::kUnauthenticated) {
    peer = admin ? Peer{Peer::Role::kUser, "admin", true} : Peer{Peer::Role::kTask, "task", true};
  }
  return WithAdmin(std::move(peer));
}

absl::Status RequireUser(const Peer& peer, absl::string_view method) {
  if (peer.role == Peer::Role::kNoToken) return NoToken(method);
  if (peer.role == Peer::Role::kUnauthenticated || peer.role == Peer::Role::kUser) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat(method,
                   " is for users (a user's certificate, organization \"admin\", or the "
                   "admin token); ",
                   peer.Describe(), " may not call it"));
}

absl::Status RequireMember(const Peer& peer, absl::string_view method) {
  if (peer.role == Peer::Role::kNoToken) return NoToken(method);
  if (peer.role != Peer::Role::kOther) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(method, " is for the cluster's users and tasks; ",
                                                  peer.Describe(), " is neither"));
}

absl::Status RequireTask(const Peer& peer, absl::string_view method) {
  if (peer.role == Peer::Role::kNoToken) return NoToken(method);
  if (peer.role == Peer::Role::kUnauthenticated || peer.role == Peer::Role::kTask) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat(method, " is for the cluster's tasks; ", peer.Describe(), " is not one"));
}

namespace {

// A certificate naming one task ("worker:1", "ps:0"), not a host.
bool IsTaskCertificate(const Peer& peer) {
  return peer.role == Peer::Role::kTask && !peer.by_token &&
         (absl::StartsWith(peer.name, "worker:") || absl::StartsWith(peer.name, "ps:"));
}

}  // namespace

absl::Status RequireWorkerHost(const Peer& peer, int worker,
                               const std::vector<std::string>& worker_hosts,
                               absl::string_view method) {
  // A task's own certificate ("worker:1", psctl certs's <job>-<index>.crt) acts only as itself,
  // whatever the hosts say.
  if (worker_hosts.empty() && !IsTaskCertificate(peer)) return absl::OkStatus();
  const bool listed = worker >= 0 && worker < static_cast<int>(worker_hosts.size());
  return RequireWorkerOnHost(peer, worker, listed ? &worker_hosts[worker] : nullptr, method);
}

absl::Status RequireWorkerOnHost(const Peer& peer, int worker, const std::string* host,
                                 absl::string_view method) {
  if (peer.role != Peer::Role::kTask || peer.by_token) return absl::OkStatus();
  // A task's own certificate ("worker:1", psctl certs's <job>-<index>.crt): only as itself.
  absl::string_view task = peer.name;
  const bool of_worker = absl::ConsumePrefix(&task, "worker:");
  int index = -1;
  if (of_worker || absl::StartsWith(peer.name, "ps:")) {
    if (of_worker && absl::SimpleAtoi(task, &index) && index == worker) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat(
        peer.Describe(), " may not ", method, " as worker ", worker,
        ": a task's own certificate lets it act only as itself"));
  }
  if (host == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat(
        peer.Describe(), " may not ", method, " as worker ", worker,
        ": neither the cluster spec nor the job lists worker:", worker,
        " (a job grows past its ClusterSpec with psctl add-worker and the grown spec)"));
  }
  if (peer.name == *host) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      peer.Describe(), " may not ", method, " as worker ", worker,
      ": the cluster spec runs worker:", worker, " on ", *host,
      ", and a task's certificate lets it act only as the workers on its own host"));
}

absl::Status RequirePsHost(const Peer& peer, int ps, const std::vector<std::string>& ps_hosts,
                           absl::string_view method) {
  if (peer.role != Peer::Role::kTask || peer.by_token) return absl::OkStatus();
  absl::string_view task = peer.name;
  int index = -1;
  if (absl::ConsumePrefix(&task, "ps:") && absl::SimpleAtoi(task, &index) && index == ps) {
    return absl::OkStatus();
  }
  if (ps >= 0 && ps < static_cast<int>(ps_hosts.size()) && peer.name == ps_hosts[ps] &&
      !absl::StartsWith(peer.name, "worker:")) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      peer.Describe(), " may not ", method, " as ps:", ps,
      ps >= 0 && ps < static_cast<int>(ps_hosts.size())
          ? absl::StrCat(", which the cluster spec runs on ", ps_hosts[ps])
          : std::string(),
      ": only that ps task's certificate (or its host's) may"));
}

absl::Status RequireOwner(const Peer& peer, const std::string& owner, absl::string_view job_id,
                          absl::string_view method) {
  if (peer.role == Peer::Role::kNoToken) return NoToken(method);
  if (peer.role == Peer::Role::kUnauthenticated) return absl::OkStatus();
  absl::Status user = RequireUser(peer, method);
  if (!user.ok()) return user;
  if (owner.empty() || owner == peer.name || peer.admin) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("job \"", job_id, "\" belongs to user ", owner,
                                                  "; ", peer.Describe(), " may not ", method,
                                                  " it"));
}

absl::Status RequireJobAccess(const Peer& peer, const std::string& owner, absl::string_view job_id,
                              JobAccess access, absl::string_view method) {
  switch (peer.role) {
    case Peer::Role::kNoToken:
      return NoToken(method);
    case Peer::Role::kUnauthenticated:
      return absl::OkStatus();
    case Peer::Role::kTask:
      if (access != JobAccess::kManage) return absl::OkStatus();
      return absl::PermissionDeniedError(absl::StrCat(
          method, " of job \"", job_id, "\" is for its owner or an admin; ", peer.Describe(),
          " is a task"));
    case Peer::Role::kUser:
      if (owner.empty() || owner == peer.name) return absl::OkStatus();
      if (peer.admin && access != JobAccess::kData) return absl::OkStatus();
      return absl::PermissionDeniedError(absl::StrCat(
          "job \"", job_id, "\" belongs to user ", owner, "; ", peer.Describe(), " may not call ",
          method, " on it", peer.admin ? " (an admin stops, deletes and reads jobs; it does "
                                         "not train them)" : ""));
    case Peer::Role::kOther:
      break;
  }
  return absl::PermissionDeniedError(absl::StrCat(method, " is for the cluster's users and tasks; ",
                                                  peer.Describe(), " is neither"));
}

}  // namespace ps
