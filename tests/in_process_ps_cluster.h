// ps servers started in this process on free ports of 127.0.0.1, for tests and benchmarks that
// need a real ps service without separate processes: the one way to start them in-process.
#ifndef PS_TESTS_IN_PROCESS_PS_CLUSTER_H_
#define PS_TESTS_IN_PROCESS_PS_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ps_client.h"
#include "server/ps_server.h"

namespace ps {

// Task i is ps:i of `count`. The servers shut down when the cluster is destroyed. Thread-safe
// after Start (its accessors are const but for server()).
class InProcessPsCluster {
 public:
  // UNAVAILABLE if a server cannot start.
  static absl::StatusOr<std::unique_ptr<InProcessPsCluster>> Start(
      int count, int max_message_bytes = PsServerOptions().max_message_bytes);

  int size() const { return static_cast<int>(servers_.size()); }
  // "127.0.0.1:PORT" of each task, in ps order.
  const std::vector<std::string>& addresses() const { return addresses_; }
  PsServer& server(int ps) { return *servers_[ps]; }

  // Client options for these servers with short timeouts and backoff, so that a failure in a
  // test shows in seconds.
  PsClientOptions ClientOptions() const;
  absl::StatusOr<std::unique_ptr<PsClient>> NewClient() const;

 private:
  InProcessPsCluster() = default;

  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<PsServer>> servers_;
};

}  // namespace ps

#endif  // PS_TESTS_IN_PROCESS_PS_CLUSTER_H_
