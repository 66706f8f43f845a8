// Every call a gRPC server answers, counted by method and status code with its latency: a
// server interceptor (StartGrpcServer's `rpc_metrics`) updates them, WriteMetrics renders them
// (a MetricsRegistry collector). A call counts when its status is sent; one cancelled before
// that does not count.
#ifndef PS_COMMON_METRICS_RPC_METRICS_H_
#define PS_COMMON_METRICS_RPC_METRICS_H_

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/support/server_interceptor.h>

#include "common/metrics/metrics.h"

namespace ps {

// Thread-safe. Must outlive the servers whose calls it counts.
class RpcMetrics {
 public:
  // Families `prefix`_rpcs_total{method,code} and `prefix`_rpc_duration_seconds{method}. The
  // methods of `services` (full names: "ps.ParameterServer", known to the protobuf generated
  // pool) are counted each under its own name ("Pull"); every other method (health,
  // reflection) as "other".
  RpcMetrics(std::string prefix, const std::vector<std::string>& services);

  // For grpc::ServerBuilder::experimental().SetInterceptorCreators: costs each call one small
  // allocation (the interceptor) and a few atomic updates.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InterceptorFactory();

  // Writes the counts of every method and code seen (none before the first call).
  void WriteMetrics(MetricsWriter* writer) const;

  // The latency histogram's upper bounds, in seconds.
  static const std::vector<double>& LatencyBounds();

 private:
  static constexpr int kNumCodes = 17;  // grpc::StatusCode OK .. UNAUTHENTICATED.
  struct Method {
    explicit Method(std::string name) : name(std::move(name)), latency(LatencyBounds()) {}
    const std::string name;
    std::array<Counter, kNumCodes> calls;
    Histogram latency;
  };
  class Interceptor;
  class Factory;

  // The method of `path` ("/ps.ParameterServer/Pull"), or other_. No lock: by_path_ does not
  // change after construction.
  Method* Find(const char* path);

  const std::string prefix_;
  std::map<std::string, std::unique_ptr<Method>> by_path_;
  Method other_{"other"};
};

}  // namespace ps

#endif  // PS_COMMON_METRICS_RPC_METRICS_H_
