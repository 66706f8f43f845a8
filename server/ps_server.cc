#include "server/ps_server.h"

#include <glog/logging.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"

namespace ps {

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::Start(const PsServerOptions& options) {
  absl::StatusOr<HostPort> address = ParseHostPort(options.listen_address, true);
  if (!address.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address: ", address.status().message()));
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  std::unique_ptr<PsServer> server(new PsServer());
  server->service_ = std::make_unique<ParameterService>(options.service);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address->ToString(), grpc::InsecureServerCredentials(),
                           &server->bound_port_);
  builder.RegisterService(server->service_.get());
  // Without this, gRPC sets SO_REUSEPORT and a second server on a taken port "succeeds".
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->bound_port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address->ToString(),
        ": the port is in use or the address is not on this host; pick another --port"));
  }
  LOG(INFO) << "ps:" << options.service.ps_index << " of " << options.service.num_ps
            << " listening on port " << server->bound_port_;
  return server;
}

PsServer::~PsServer() { Shutdown(); }

void PsServer::Shutdown(absl::Duration grace) {
  if (stopped_ || server_ == nullptr) return;  // Stopped, or never started.
  stopped_ = true;
  service_->Shutdown();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
}

void PsServer::Wait() { server_->Wait(); }

}  // namespace ps
