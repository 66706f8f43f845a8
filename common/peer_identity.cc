#include "common/peer_identity.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ps {

std::string Peer::Describe() const {
  switch (role) {
    case Role::kUnauthenticated:
      return "an unauthenticated caller";
    case Role::kUser:
      return absl::StrCat("user ", name);
    case Role::kTask:
      return absl::StrCat("task ", name);
    case Role::kOther:
      return absl::StrCat("certificate ", name, " (neither a user's nor a task's)");
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

Peer PeerOf(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return Peer();
  std::vector<grpc::string_ref> subject = auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME);
  if (subject.empty()) return Peer();
  return PeerFromSubject(absl::string_view(subject[0].data(), subject[0].size()));
}

absl::Status RequireUser(const Peer& peer, absl::string_view method) {
  if (peer.role == Peer::Role::kUnauthenticated || peer.role == Peer::Role::kUser) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat(method, " is for users (psctl's certificate, organization \"admin\"); ",
                   peer.Describe(), " may not call it"));
}

absl::Status RequireMember(const Peer& peer, absl::string_view method) {
  if (peer.role != Peer::Role::kOther) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(method, " is for the cluster's users and tasks; ",
                                                  peer.Describe(), " is neither"));
}

absl::Status RequireOwner(const Peer& peer, const std::string& owner, absl::string_view job_id,
                          absl::string_view method) {
  if (peer.role == Peer::Role::kUnauthenticated) return absl::OkStatus();
  absl::Status user = RequireUser(peer, method);
  if (!user.ok()) return user;
  if (owner.empty() || owner == peer.name) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("job \"", job_id, "\" belongs to user ", owner,
                                                  "; ", peer.Describe(), " may not ", method,
                                                  " it"));
}

}  // namespace ps
