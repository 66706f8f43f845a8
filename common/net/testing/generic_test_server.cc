#include "common/net/testing/generic_test_server.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/server_callback.h>

#include "absl/strings/str_cat.h"
#include "common/net/grpc_deadline.h"
#include "common/net/grpc_keepalive.h"

namespace ps {

class GenericTestServer::Service : public grpc::CallbackGenericService {
 public:
  explicit Service(GenericTestServer::DeferredHandler handler) : handler_(std::move(handler)) {}

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    return new Reactor(&handler_, context->method());
  }

 private:
  // One unary call: reads the request, answers through the handler, deletes itself when done.
  class Reactor : public grpc::ServerGenericBidiReactor {
   public:
    Reactor(const GenericTestServer::DeferredHandler* handler, std::string method)
        : handler_(handler), method_(std::move(method)) {
      StartRead(&request_);
    }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::INTERNAL, "no request"));
        return;
      }
      (*handler_)(method_, request_,
                  [this](const grpc::Status& status, grpc::ByteBuffer response) {
                    if (status.ok()) {
                      response_ = std::move(response);
                      StartWriteAndFinish(&response_, grpc::WriteOptions(), status);
                    } else {
                      Finish(status);
                    }
                  });
    }
    void OnDone() override { delete this; }

   private:
    const GenericTestServer::DeferredHandler* const handler_;
    const std::string method_;
    grpc::ByteBuffer request_;
    grpc::ByteBuffer response_;
  };

  const GenericTestServer::DeferredHandler handler_;
};

GenericTestServer::GenericTestServer(Handler handler)
    : GenericTestServer(DeferredHandler(
          [handler = std::move(handler)](const std::string& method,
                                         const grpc::ByteBuffer& request, Answer answer) {
            grpc::ByteBuffer response;
            grpc::Status status = handler(method, request, &response);
            answer(status, std::move(response));
          })) {}

GenericTestServer::GenericTestServer(DeferredHandler handler)
    : service_(std::make_unique<Service>(std::move(handler))) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterCallbackGenericService(service_.get());
  AcceptKeepalive(&builder);  // As every daemon's server: the clients under test ping.
  server_ = builder.BuildAndStart();
}

GenericTestServer::~GenericTestServer() { server_->Shutdown(GrpcDeadline(absl::Seconds(1))); }

std::string GenericTestServer::address() const { return absl::StrCat("127.0.0.1:", port_); }

}  // namespace ps
