#include "common/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<StartedServer> StartGrpcServer(const std::string& address, grpc::Service* service,
                                              int max_message_bytes) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  StartedServer started;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &started.bound_port);
  builder.RegisterService(service);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  builder.SetMaxSendMessageSize(max_message_bytes);
  started.server = builder.BuildAndStart();
  if (started.server == nullptr || started.bound_port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address,
        ": the port is in use or the address is not on this host; pick another --port"));
  }
  return started;
}

}  // namespace ps
