// An in-process gRPC server for client tests: answers every method of every service through
// one handler, so a test states what each call gets back (a response, an error, a delay)
// without a real ps or worker behind it.
#ifndef PS_COMMON_NET_TESTING_GENERIC_TEST_SERVER_H_
#define PS_COMMON_NET_TESTING_GENERIC_TEST_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/server.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

namespace ps {

class GenericTestServer {
 public:
  // Called once per unary call on a gRPC thread, with the full method name
  // ("/ps.ParameterServer/Pull"); fills `response` when it returns OK. Must be thread-safe.
  using Handler = std::function<grpc::Status(const std::string& method,
                                             const grpc::ByteBuffer& request,
                                             grpc::ByteBuffer* response)>;
  // Answers a call, once, from any thread; `response` is sent when `status` is OK.
  using Answer = std::function<void(const grpc::Status& status, grpc::ByteBuffer response)>;
  // Like Handler, but may answer later (as a ps answers a parked pull), through `answer`,
  // without holding the gRPC thread. Every call must be answered before the server goes.
  using DeferredHandler = std::function<void(const std::string& method,
                                             const grpc::ByteBuffer& request, Answer answer)>;

  // Listens on a free loopback port.
  explicit GenericTestServer(Handler handler);
  explicit GenericTestServer(DeferredHandler handler);
  ~GenericTestServer();

  std::string address() const;  // "127.0.0.1:port".

 private:
  class Service;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace ps

#endif  // PS_COMMON_NET_TESTING_GENERIC_TEST_SERVER_H_
