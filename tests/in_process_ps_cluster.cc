#include "tests/in_process_ps_cluster.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<std::unique_ptr<InProcessPsCluster>> InProcessPsCluster::Start(
    int count, int max_message_bytes) {
  std::unique_ptr<InProcessPsCluster> cluster(new InProcessPsCluster());
  for (int ps = 0; ps < count; ++ps) {
    PsServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.service.ps_index = ps;
    options.service.num_ps = count;
    options.max_message_bytes = max_message_bytes;
    absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(options);
    if (!server.ok()) return server.status();
    cluster->addresses_.push_back(absl::StrCat("127.0.0.1:", (*server)->bound_port()));
    cluster->servers_.push_back(*std::move(server));
  }
  return cluster;
}

PsClientOptions InProcessPsCluster::ClientOptions() const {
  PsClientOptions options;
  options.ps_addresses = addresses_;
  options.call_timeout = absl::Seconds(10);
  options.wait_timeout = absl::Seconds(10);
  options.max_attempts = 3;
  options.initial_backoff = absl::Milliseconds(10);
  options.max_backoff = absl::Milliseconds(100);
  return options;
}

absl::StatusOr<std::unique_ptr<PsClient>> InProcessPsCluster::NewClient() const {
  return PsClient::Create(ClientOptions());
}

}  // namespace ps
