// SetKeepalive and AcceptKeepalive between two processes: a call open on a server that hangs
// (SIGSTOP) ends UNAVAILABLE within the keepalive's interval and timeout, and one open on a live
// server for several intervals is not cut by the pings (gRPC's default server would answer them
// with GOAWAY "too_many_pings").
#include "common/net/grpc_keepalive.h"

#include <signal.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/net/grpc_deadline.h"
#include "common/process/subprocess.h"
#include "proto/health.grpc.pb.h"

namespace ps {
namespace {

class KeepaliveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = ::testing::TempDir();
    const std::string port_file = absl::StrCat(dir, "/keepalive_port");
    std::remove(port_file.c_str());
    absl::StatusOr<Subprocess> started =
        Subprocess::Start({"common/net/testing/keepalive_test_server", port_file},
                          absl::StrCat(dir, "/keepalive_server.log"));
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::make_unique<Subprocess>(*std::move(started));
    absl::StatusOr<int> port = WaitForPortFile(port_file, absl::Seconds(30));
    ASSERT_TRUE(port.ok()) << port.status() << "\n" << server_->Output();
    grpc::ChannelArguments arguments;
    SetKeepalive(&arguments);
    stub_ = grpc::health::v1::Health::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", *port), grpc::InsecureChannelCredentials(), arguments));
  }

  // Opens a health Watch, a call that stays open sending nothing after its first answer; the
  // deadline only keeps a failing test from hanging.
  std::unique_ptr<grpc::ClientReader<grpc::health::v1::HealthCheckResponse>> Watch() {
    context_.set_deadline(GrpcDeadline(absl::Seconds(30)));
    auto reader = stub_->Watch(&context_, grpc::health::v1::HealthCheckRequest());
    grpc::health::v1::HealthCheckResponse first;
    EXPECT_TRUE(reader->Read(&first));
    EXPECT_EQ(first.status(), grpc::health::v1::HealthCheckResponse::SERVING);
    return reader;
  }

  std::unique_ptr<Subprocess> server_;
  std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
  grpc::ClientContext context_;
};

// Each test waits in Read on a thread of its own, as a worker waits for a parked pull.
TEST_F(KeepaliveTest, ACallOnAServerThatHangsEndsUnavailableWithinTheTimeout) {
  auto reader = Watch();
  absl::Mutex mu;
  std::optional<absl::Time> ended;
  std::thread waiting([&] {
    grpc::health::v1::HealthCheckResponse more;
    reader->Read(&more);
    absl::MutexLock lock(&mu);
    ended = absl::Now();
  });
  // Pinged for a while first: a server that refused the pings (gRPC's default answers them with
  // GOAWAY "too_many_pings", and the client then pings less often) is found later.
  absl::SleepFor(4 * kKeepaliveInterval);
  {
    absl::MutexLock lock(&mu);
    EXPECT_FALSE(ended.has_value()) << "the call on the live server ended";
  }
  server_->Signal(SIGSTOP);
  const absl::Time stopped = absl::Now();
  waiting.join();
  const grpc::Status status = reader->Finish();
  server_->Signal(SIGCONT);
  ASSERT_TRUE(ended.has_value());
  const absl::Duration took = *ended - stopped;
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_LT(took, kKeepaliveInterval + kKeepaliveTimeout + absl::Milliseconds(1500));
  EXPECT_GT(took, kKeepaliveTimeout - absl::Seconds(1)) << "ended before any ping could time out";
  std::cout << "a call on a stopped server ended " << took << " after the stop ("
            << status.error_message() << ")\n";
}

TEST_F(KeepaliveTest, ACallOnALiveServerOutlivesManyPings) {
  auto reader = Watch();
  bool read = true;
  std::thread waiting([&] {
    grpc::health::v1::HealthCheckResponse more;
    read = reader->Read(&more);
  });
  absl::SleepFor(4 * kKeepaliveInterval + absl::Seconds(2));
  context_.TryCancel();
  waiting.join();
  EXPECT_FALSE(read);
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
}

}  // namespace
}  // namespace ps
