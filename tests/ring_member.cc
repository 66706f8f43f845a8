#include "tests/ring_member.h"

#include <grpcpp/create_channel.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cluster/cluster_spec.h"
#include "common/net/grpc_deadline.h"
#include "common/net/grpc_server.h"
#include "worker/allreduce/grpc_ring_link.h"

namespace ps {

absl::StatusOr<std::unique_ptr<GrpcRingMember>> GrpcRingMember::Start(
    const std::vector<int>& ports, int rank, absl::Duration deadline,
    const TransportSecurity& security) {
  std::unique_ptr<GrpcRingMember> member(new GrpcRingMember());
  absl::StatusOr<StartedServer> server = StartGrpcServer(absl::StrCat("127.0.0.1:", ports[rank]),
                                                         {&member->service_}, 1 << 30, security);
  if (!server.ok()) return server.status();
  member->server_ = std::move(server->server);
  std::vector<std::string> workers;
  for (int port : ports) workers.push_back(absl::StrCat("\"127.0.0.1:", port, "\""));
  // The ps is never dialed.
  absl::StatusOr<ClusterSpec> cluster = ClusterSpec::Parse(
      absl::StrCat(R"({"ps": ["127.0.0.1:1"], "worker": [)", absl::StrJoin(workers, ","), "]}"),
      "ring member");
  if (!cluster.ok()) return cluster.status();
  GrpcRingLinkOptions options;
  options.deadline = deadline;
  options.security = security;
  absl::StatusOr<std::unique_ptr<RingLink>> link =
      MakeGrpcRingLink(*cluster, rank, "job", "run-1", &member->mailbox_, options);
  if (!link.ok()) return link.status();
  member->link_ = *std::move(link);
  const int next = ports[(rank + 1) % ports.size()];
  if (!grpc::CreateChannel(absl::StrCat("127.0.0.1:", next), ChannelCredentialsFor(security))
           ->WaitForConnected(GrpcDeadline(absl::Minutes(1)))) {
    return absl::DeadlineExceededError(
        absl::StrCat("the next ring member never listened on port ", next));
  }
  return member;
}

GrpcRingMember::~GrpcRingMember() {
  link_.reset();
  if (server_ != nullptr) server_->Shutdown(GrpcDeadline(absl::Seconds(5)));
}

}  // namespace ps
