#include "server/testing/in_process_ps_cluster.h"

#include <set>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

bool Connects(const std::string& address) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  return channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
}

TEST(InProcessPsClusterTest, StartsEachTaskOnAPortOfItsOwnAndNamesItsAddress) {
  InProcessPsClusterOptions options;
  options.num_ps = 3;
  absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster = InProcessPsCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_EQ((*cluster)->num_ps(), 3);
  ASSERT_EQ((*cluster)->addresses().size(), 3u);
  std::set<int> ports;
  for (int ps = 0; ps < 3; ++ps) {
    int port = (*cluster)->server(ps).bound_port();
    EXPECT_GT(port, 0);
    ports.insert(port);
    EXPECT_EQ((*cluster)->addresses()[ps], absl::StrCat("127.0.0.1:", port));
    EXPECT_TRUE(Connects((*cluster)->addresses()[ps])) << (*cluster)->addresses()[ps];
  }
  EXPECT_EQ(ports.size(), 3u);
  (*cluster)->Shutdown(absl::ZeroDuration());
  (*cluster)->Shutdown();  // Idempotent.
}

TEST(InProcessPsClusterTest, RefusesAnEmptyClusterAndNamesTheTaskThatDoesNotStart) {
  InProcessPsClusterOptions options;
  options.num_ps = 0;
  absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster = InProcessPsCluster::Start(options);
  EXPECT_EQ(cluster.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cluster.status().message(), HasSubstr("num_ps"));

  options.num_ps = 2;
  options.host = "not a host";
  cluster = InProcessPsCluster::Start(options);
  EXPECT_FALSE(cluster.ok());
  EXPECT_THAT(cluster.status().message(), HasSubstr("ps:0: "));
}

}  // namespace
}  // namespace ps
