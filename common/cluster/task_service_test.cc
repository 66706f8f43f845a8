#include "common/cluster/task_service.h"

#include <unistd.h>

#include <ctime>
#include <memory>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/process/build_info.h"
#include "common/net/grpc_server.h"
#include "common/metrics/machine_info.h"

namespace ps {
namespace {

TaskInfo Ask(int port, grpc::Status* status) {
  std::unique_ptr<Task::Stub> stub = Task::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  TaskInfo info;
  *status = stub->GetTaskInfo(&context, TaskInfoRequest(), &info);
  return info;
}

TEST(TaskServiceTest, SaysWhatTheProcessIsAndWhereItsMetricsAre) {
  TaskService service("worker", 3, "cpu");
  absl::StatusOr<StartedServer> started = StartGrpcServer("127.0.0.1:0", {&service}, 1 << 20);
  ASSERT_TRUE(started.ok()) << started.status();
  grpc::Status status;
  TaskInfo info = Ask(started->bound_port, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(info.job(), "worker");
  EXPECT_EQ(info.index(), 3);
  EXPECT_EQ(info.device(), "cpu");
  EXPECT_EQ(info.machine().SerializeAsString(), DescribeMachine().SerializeAsString());
  EXPECT_GT(info.machine().cores(), 0);
  EXPECT_EQ(info.version(), VersionString());
  EXPECT_EQ(info.pid(), getpid());
  EXPECT_EQ(info.metrics_port(), 0);  // None yet.
  EXPECT_GT(info.resident_bytes(), 0);
  EXPECT_GE(info.threads(), 1);
  EXPECT_LE(info.start_time_ms(), static_cast<int64_t>(std::time(nullptr) + 1) * 1000);

  service.set_metrics_port(9100);
  info = Ask(started->bound_port, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(info.metrics_port(), 9100);
  started->server->Shutdown();
}

}  // namespace
}  // namespace ps
