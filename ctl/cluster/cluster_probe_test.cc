#include "ctl/cluster/cluster_probe.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/process/subprocess.h"
#include "server/testing/in_process_ps_cluster.h"

namespace ps {
namespace {

TEST(ClusterProbeTest, NamesUnreachableTasksAndWrongRoles) {
  absl::StatusOr<std::unique_ptr<InProcessPsCluster>> server =
      InProcessPsCluster::Start(InProcessPsClusterOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<int> unused = PickUnusedPort();
  ASSERT_TRUE(unused.ok());
  std::string ps = (*server)->addresses()[0];
  std::string nothing = absl::StrCat("127.0.0.1:", *unused);
  // The ps server stands where the spec says a worker is, and nothing listens at worker:1.
  absl::StatusOr<ClusterSpec> cluster = ClusterSpec::Parse(
      absl::StrCat(R"({"ps": [")", ps, R"("], "worker": ["localhost:)",
                   (*server)->server(0).bound_port(), R"(", ")", nothing, R"("]})"),
      "test");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::vector<std::string> problems = ProbeCluster(*cluster, absl::Seconds(1));
  ASSERT_EQ(problems.size(), 2u) << absl::StrJoin(problems, "\n");
  EXPECT_NE(problems[0].find("worker:0 (localhost:"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("not a ps_worker"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("worker:1 (" + nothing + "): unreachable"), std::string::npos)
      << problems[1];
}

}  // namespace
}  // namespace ps
