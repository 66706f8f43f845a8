#include "common/cluster/cluster_flags.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(ClusterFlagsTest, DefaultsAreTheFileOrTfConfig) {
  ClusterSource source = ClusterSourceFromFlags("cluster.json", "ps:0");
  EXPECT_EQ(source.cluster_spec_path, "cluster.json");
  EXPECT_EQ(source.task_flag, "ps:0");
  EXPECT_EQ(source.resolver, "");
  EXPECT_EQ(source.slurm.num_ps, 1);
  EXPECT_EQ(source.slurm.base_port, 8888);  // TensorFlow's SlurmClusterResolver's default.
}

TEST(ClusterFlagsTest, TheSlurmFlagsAreRead) {
  gflags::SetCommandLineOption("cluster_resolver", "slurm");
  gflags::SetCommandLineOption("slurm_num_ps", "2");
  gflags::SetCommandLineOption("slurm_base_port", "7000");
  ClusterSource source = ClusterSourceFromFlags("", "");
  EXPECT_EQ(source.resolver, "slurm");
  EXPECT_EQ(source.slurm.num_ps, 2);
  EXPECT_EQ(source.slurm.base_port, 7000);
}

TEST(ClusterFlagsTest, TaskFromHostnameReadsTheHostOrTheTestName) {
  EXPECT_FALSE(ClusterSourceFromFlags("", "").task_from_hostname);
  gflags::SetCommandLineOption("task_from_hostname", "true");
  ClusterSource source = ClusterSourceFromFlags("", "");
  EXPECT_TRUE(source.task_from_hostname);
  EXPECT_FALSE(source.hostname.empty());  // This machine's name.
  gflags::SetCommandLineOption("task_hostname", "ps-3");
  EXPECT_EQ(ClusterSourceFromFlags("", "").hostname, "ps-3");
  gflags::SetCommandLineOption("task_from_hostname", "false");
  EXPECT_EQ(ClusterSourceFromFlags("", "").hostname, "");
}

}  // namespace
}  // namespace ps
