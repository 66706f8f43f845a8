// grpc_keepalive_test's peer: a server started as every daemon starts its own (StartGrpcServer,
// with the standard health service, whose Watch
// calls the test holds open), in a process of its own that the test can stop. Writes
// its port to argv[1], then serves until killed.
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "common/net/grpc_server.h"
#include "proto/task.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: keepalive_test_server PORT_FILE\n";
    return 2;
  }
  // Any service: gRPC starts no server without one. Its calls answer UNIMPLEMENTED.
  ps::Task::Service unimplemented;
  absl::StatusOr<ps::StartedServer> started =
      ps::StartGrpcServer("127.0.0.1:0", {&unimplemented}, 4 << 20);
  if (!started.ok()) {
    std::cerr << started.status() << "\n";
    return 1;
  }
  std::ofstream(argv[1]) << started->bound_port << "\n";
  while (true) pause();
}
