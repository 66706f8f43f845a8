#include "server/testing/in_process_ps_cluster.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<std::unique_ptr<PsClient>> InProcessPsCluster::NewClient(
    PsClientOptions options) const {
  options.ps_addresses = addresses_;
  return PsClient::Create(options);
}

absl::StatusOr<std::unique_ptr<InProcessPsCluster>> InProcessPsCluster::Start(
    const InProcessPsClusterOptions& options) {
  if (options.num_ps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "InProcessPsClusterOptions.num_ps is ", options.num_ps, "; give at least 1"));
  }
  std::unique_ptr<InProcessPsCluster> cluster(new InProcessPsCluster());
  cluster->options_ = options;
  for (int ps = 0; ps < options.num_ps; ++ps) {
    absl::StatusOr<std::unique_ptr<PsServer>> server = cluster->StartServer(ps, 0);
    if (!server.ok()) return server.status();
    cluster->addresses_.push_back(absl::StrCat(options.host, ":", (*server)->bound_port()));
    cluster->servers_.push_back(*std::move(server));
  }
  // Known only now that every server has bound its port (replicated shards call the next ps).
  for (std::unique_ptr<PsServer>& server : cluster->servers_) {
    server->service().SetPsAddresses(cluster->addresses_);
  }
  return cluster;
}

absl::StatusOr<std::unique_ptr<PsServer>> InProcessPsCluster::StartServer(int ps,
                                                                         int port) const {
  PsServerOptions server_options = options_.server;
  server_options.listen_address = absl::StrCat(options_.host, ":", port);
  server_options.service.ps_index = ps;
  server_options.service.num_ps = options_.num_ps;
  absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(server_options);
  if (!server.ok()) {
    return absl::Status(server.status().code(),
                        absl::StrCat("ps:", ps, ": ", server.status().message()));
  }
  return server;
}

absl::Status InProcessPsCluster::Restart(int ps, const std::vector<std::string>& addresses) {
  const int port = servers_[ps]->bound_port();
  servers_[ps].reset();
  absl::StatusOr<std::unique_ptr<PsServer>> server = StartServer(ps, port);
  if (!server.ok()) return server.status();
  (*server)->service().SetPsAddresses(addresses.empty() ? addresses_ : addresses);
  servers_[ps] = *std::move(server);
  return absl::OkStatus();
}

void InProcessPsCluster::Shutdown(absl::Duration grace) {
  // Every service first: their replication streams to each other end (a server waits for the
  // calls still open, up to `grace`, as it shuts down).
  for (std::unique_ptr<PsServer>& server : servers_) server->service().Shutdown();
  for (std::unique_ptr<PsServer>& server : servers_) server->Shutdown(grace);
}

absl::StatusOr<grpc::ByteBuffer> CallShard(PsClient* client, int ps, const std::string& method,
                                           grpc::ByteBuffer request) {
  grpc::ByteBuffer answer;
  std::vector<PsConnections::Call> calls;
  calls.push_back(PsConnections::Call{
      ps, method, [request] { return request; },
      [&answer](const grpc::ByteBuffer& bytes) {
        answer = bytes;
        return absl::OkStatus();
      },
      absl::Seconds(10), 0});
  absl::Status status = client->connections()->RunCalls(std::move(calls));
  if (!status.ok()) return status;
  return answer;
}

}  // namespace ps
