#include "server/ps_server.h"

#include <string>
#include <vector>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "common/net/grpc_deadline.h"
#include "common/net/grpc_server.h"
#include "common/cluster/host_port.h"
#include "common/metrics/process_stats.h"

namespace ps {

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::Start(const PsServerOptions& options) {
  absl::StatusOr<HostPort> address = ParseHostPort(options.listen_address, true);
  if (!address.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address: ", address.status().message()));
  }
  std::unique_ptr<PsServer> server(new PsServer());
  ParameterServiceOptions service = options.service;
  // A ps calls the next one (replicated shards) with the security it serves with.
  if (!service.security.tls()) service.security = options.security;
  service.bulk_host = address->host;
  service.bulk_port = options.security.tls() ? -1 : options.bulk_port;
  if (options.security.tls() && options.bulk_port >= 0) {
    LOG(INFO) << "ps:" << options.service.ps_index << ": no bulk streams: this ps serves TLS, "
              << "which they would leave (they are plaintext); pulls' values go in their answers";
  }
  server->service_ = std::make_unique<ParameterService>(service);
  server->task_service_ = std::make_unique<TaskService>("ps", options.service.ps_index);
  server->task_service_->set_insecure(!options.security.tls() && !IsLoopbackHost(address->host));
  if (options.metrics_port >= 0) {
    const std::vector<std::string> services = {ParameterServer::service_full_name(),
                                               Task::service_full_name()};
    server->rpc_metrics_ = std::make_unique<RpcMetrics>("ps", services);
  }
  absl::StatusOr<StartedServer> started =
      StartGrpcServer(address->ToString(), {server->service_.get(), server->task_service_.get()},
                      options.max_message_bytes,
                      options.security, options.reflection, server->rpc_metrics_.get());
  if (!started.ok()) return started.status();
  server->server_ = std::move(started->server);
  server->bound_port_ = started->bound_port;
  if (options.metrics_port >= 0) {
    ParameterService* service = server->service_.get();
    RpcMetrics* rpc_metrics = server->rpc_metrics_.get();
    server->metrics_.AddCollector([service, rpc_metrics](MetricsWriter* writer) {
      WriteProcessMetrics(writer);
      rpc_metrics->WriteMetrics(writer);
      service->WriteMetrics(writer);
    });
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> metrics =
        MetricsHttpServer::Start(options.metrics_host, options.metrics_port, &server->metrics_);
    if (!metrics.ok()) return metrics.status();
    server->metrics_server_ = std::move(*metrics);
    server->task_service_->set_metrics_port(server->metrics_server_->bound_port());
    LOG(INFO) << "metrics at http://"
              << HostPort{options.metrics_host, server->metrics_server_->bound_port(),
                          options.metrics_host.find(':') != std::string::npos}
                     .ToString()
              << "/metrics";
  }
  LOG(INFO) << "ps:" << options.service.ps_index << " of " << options.service.num_ps
            << " listening on port " << server->bound_port_ << "; jobs may hold "
            << (server->service_->max_total_bytes() >> 20) << " MiB here";
  return server;
}

PsServer::~PsServer() { Shutdown(); }

void PsServer::Shutdown(absl::Duration grace) {
  if (stopped_ || server_ == nullptr) return;  // Stopped, or never started.
  stopped_ = true;
  if (metrics_server_ != nullptr) metrics_server_->Stop();
  service_->Shutdown();
  server_->Shutdown(GrpcDeadline(grace));
}

void PsServer::Wait() { server_->Wait(); }

}  // namespace ps
