#include "common/net/grpc_server.h"

#include <glog/logging.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/net/grpc_keepalive.h"

namespace ps {
namespace {

// Takes gRPC's reflection plugin out of a server: once its library is linked, the plugin
// registers itself for every server the process builds.
class WithoutReflection : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*arguments*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    const std::string reflection = grpc::reflection::ProtoServerReflectionPlugin().name();
    plugins->erase(
        std::remove_if(plugins->begin(), plugins->end(),
                       [&reflection](const auto& plugin) { return plugin->name() == reflection; }),
        plugins->end());
  }
};

}  // namespace

absl::StatusOr<StartedServer> StartGrpcServer(const std::string& address,
                                              const std::vector<grpc::Service*>& services,
                                              int max_message_bytes,
                                              const TransportSecurity& security, bool reflection,
                                              RpcMetrics* rpc_metrics) {
  const std::string host = address.substr(0, address.rfind(':'));
  if (!security.tls() && !IsLoopbackHost(host)) {
    if (!security.insecure) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to serve ", address, " without TLS: anyone who could reach it could push "
          "gradients, read models and stop jobs as any user. Give --certs=DIR (psctl certs "
          "makes it) or --tls_cert, --tls_key and --tls_ca; or --bind_host=127.0.0.1 for a "
          "single machine; or --insecure to serve plaintext anyway on a network you trust"));
    }
    LOG(WARNING) << "listening on " << address
                 << " WITHOUT TLS (--insecure): anyone who can reach this port can push "
                    "gradients, read models and stop jobs. Give --certs=DIR (psctl certs makes "
                    "it) to turn TLS on";
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  StartedServer started;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, ServerCredentialsFor(security), &started.bound_port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  if (!reflection) builder.SetOption(std::make_unique<WithoutReflection>());
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  AcceptKeepalive(&builder);
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  builder.SetMaxSendMessageSize(max_message_bytes);
  if (rpc_metrics != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(rpc_metrics->InterceptorFactory());
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  started.server = builder.BuildAndStart();
  if (started.server == nullptr || started.bound_port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address,
        ": the port is in use or the address is not on this host; pick another --port"));
  }
  return started;
}

}  // namespace ps
