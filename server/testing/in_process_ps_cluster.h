// N ps servers in the calling process, on free ports of one host: the cluster that unit tests,
// in-process integration tests and benchmarks talk to over real gRPC. Multi-process clusters
// are ctl/cluster/local_cluster's.
#ifndef PS_SERVER_TESTING_IN_PROCESS_PS_CLUSTER_H_
#define PS_SERVER_TESTING_IN_PROCESS_PS_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/client/ps_client.h"
#include "server/ps_server.h"

namespace ps {

struct InProcessPsClusterOptions {
  int num_ps = 1;
  // The interface every server listens on; the addresses name it.
  std::string host = "127.0.0.1";
  // Every server's options but listen_address, service.ps_index and service.num_ps, which
  // Start sets for task ps:i of num_ps.
  PsServerOptions server;
};

// Not thread-safe: one thread starts, uses and shuts down a cluster. The servers themselves
// serve calls from any thread.
class InProcessPsCluster {
 public:
  // Starts ps:0 .. ps:num_ps-1 on port 0 each. INVALID_ARGUMENT when num_ps < 1; otherwise the
  // error of the first server that does not start, naming its task; those started are stopped.
  static absl::StatusOr<std::unique_ptr<InProcessPsCluster>> Start(
      const InProcessPsClusterOptions& options);
  // Shuts down the servers still running.
  ~InProcessPsCluster() { Shutdown(); }

  int num_ps() const { return static_cast<int>(servers_.size()); }
  // "host:port" of each task, ps:0 first.
  const std::vector<std::string>& addresses() const { return addresses_; }
  // REQUIRES: 0 <= ps < num_ps().
  PsServer& server(int ps) { return *servers_[ps]; }
  // A client of this cluster: `options` with ps_addresses set to addresses().
  absl::StatusOr<std::unique_ptr<PsClient>> NewClient(PsClientOptions options = {}) const;
  // Shuts every server down (PsServer::Shutdown); idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(5));
  // Starts task `ps` again, empty, on its address, as a ps started again after a crash; told
  // `addresses` for the ps tasks (addresses() when empty; others make peers out of its reach).
  // REQUIRES: server(ps) was shut down.
  absl::Status Restart(int ps, const std::vector<std::string>& addresses = {});

 private:
  InProcessPsCluster() = default;

  // Task `ps` of options_.num_ps, listening on `port` (0: any free one).
  absl::StatusOr<std::unique_ptr<PsServer>> StartServer(int ps, int port) const;

  InProcessPsClusterOptions options_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<PsServer>> servers_;
};

// The raw answer of `method` on shard `ps` to `request`, through `client`'s connections (one
// call, retried as any): for tests that send a request the worker session would not.
absl::StatusOr<grpc::ByteBuffer> CallShard(PsClient* client, int ps, const std::string& method,
                                           grpc::ByteBuffer request);

}  // namespace ps

#endif  // PS_SERVER_TESTING_IN_PROCESS_PS_CLUSTER_H_
