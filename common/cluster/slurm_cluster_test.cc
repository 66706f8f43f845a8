#include "common/cluster/slurm_cluster.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_join.h"

namespace ps {
namespace {

// "node/local_id" of each rank.
std::string Layout(const SlurmStep& step) {
  std::vector<std::string> tasks;
  for (const SlurmTask& task : step.tasks) {
    tasks.push_back(task.node + "/" + std::to_string(task.local_id));
  }
  return absl::StrJoin(tasks, " ");
}

void ExpectError(const absl::Status& status, absl::StatusCode code,
                 const std::vector<std::string>& message_parts) {
  EXPECT_EQ(status.code(), code) << status;
  for (const std::string& part : message_parts) {
    EXPECT_NE(status.message().find(part), absl::string_view::npos)
        << status.message() << "\n  lacks: " << part;
  }
}

// What a task of `srun` sees for rank 3 of a step with two tasks on each of n1 and n2, inside a
// job of three nodes (as in an allocation larger than the step).
Environment StepEnvironment() {
  return {{"SLURM_JOB_NODELIST", "n[1-3]"},
          {"SLURM_TASKS_PER_NODE", "2(x3)"},
          {"SLURM_STEP_NODELIST", "n[1-2]"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
          {"SLURM_PROCID", "3"},
          {"SLURM_LOCALID", "1"},
          {"SLURMD_NODENAME", "n2"}};
}

TEST(ReadSlurmStepTest, InsideAStepReadsTheStepsVariables) {
  absl::StatusOr<SlurmStep> step = ReadSlurmStep(StepEnvironment());
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(Layout(*step), "n1/0 n1/1 n2/0 n2/1");
  EXPECT_EQ(step->rank, 3);
  EXPECT_EQ(step->source, "SLURM_STEP_NODELIST=n[1-2], SLURM_STEP_TASKS_PER_NODE=2(x2)");
}

TEST(ReadSlurmStepTest, ElsewhereInAJobReadsTheJobsVariables) {
  // The batch script: no SLURM_STEP_* (Slurm 22.05 sets SLURM_PROCID=0 there).
  Environment batch = {{"SLURM_JOB_NODELIST", "gpu[01-02],cpu-a1"},
                       {"SLURM_TASKS_PER_NODE", "2,1(x2)"},
                       {"SLURM_PROCID", "0"},
                       {"SLURM_LOCALID", "0"},
                       {"SLURMD_NODENAME", "gpu01"}};
  absl::StatusOr<SlurmStep> step = ReadSlurmStep(batch);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(Layout(*step), "gpu01/0 gpu01/1 gpu02/0 cpu-a1/0");
  EXPECT_EQ(step->rank, 0);
  EXPECT_EQ(step->source, "SLURM_JOB_NODELIST=gpu[01-02],cpu-a1, SLURM_TASKS_PER_NODE=2,1(x2)");

  // psctl outside any step may see no rank at all.
  batch.erase("SLURM_PROCID");
  step = ReadSlurmStep(batch);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_FALSE(step->rank.has_value());
}

TEST(ReadSlurmStepTest, KeepsTheNodeListsOrderAsSlurmNumbersRanks) {
  // TensorFlow's resolver sorts the names, which would put n10 before n9.
  absl::StatusOr<SlurmStep> step =
      ReadSlurmStep({{"SLURM_JOB_NODELIST", "n[9-10]"}, {"SLURM_TASKS_PER_NODE", "1,2"}});
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(Layout(*step), "n9/0 n10/0 n10/1");
}

TEST(ReadSlurmStepTest, OutsideSlurmSaysWhereToRun) {
  ExpectError(ReadSlurmStep({}).status(), absl::StatusCode::kFailedPrecondition,
              {"SLURM_STEP_NODELIST and SLURM_JOB_NODELIST are unset", "inside a Slurm job",
               "--cluster_spec"});
  ExpectError(
      ReadSlurmStep({{"SLURM_STEP_NODELIST", "n1"}, {"SLURM_TASKS_PER_NODE", "1"}}).status(),
      absl::StatusCode::kFailedPrecondition,
      {"SLURM_STEP_NODELIST is set but SLURM_STEP_TASKS_PER_NODE is not"});
}

TEST(ReadSlurmStepTest, MalformedValuesNameTheVariable) {
  Environment environment = StepEnvironment();
  environment["SLURM_STEP_NODELIST"] = "n[2-1]";
  ExpectError(ReadSlurmStep(environment).status(), absl::StatusCode::kInvalidArgument,
              {"SLURM_STEP_NODELIST: \"n[2-1]\": reversed range \"2-1\" at character 3"});

  environment = StepEnvironment();
  environment["SLURM_STEP_TASKS_PER_NODE"] = "2(x2";
  ExpectError(ReadSlurmStep(environment).status(), absl::StatusCode::kInvalidArgument,
              {"SLURM_STEP_TASKS_PER_NODE: \"2(x2\": task count \"2(x2\" is not N or N(xR)"});

  environment = StepEnvironment();
  environment["SLURM_STEP_TASKS_PER_NODE"] = "2(x3)";
  ExpectError(ReadSlurmStep(environment).status(), absl::StatusCode::kInvalidArgument,
              {"SLURM_STEP_NODELIST=n[1-2], SLURM_STEP_TASKS_PER_NODE=2(x3): the node list names 2 "
               "nodes but the task counts are for 3"});

  environment = StepEnvironment();
  environment["SLURM_PROCID"] = "4";
  ExpectError(ReadSlurmStep(environment).status(), absl::StatusCode::kInvalidArgument,
              {"SLURM_PROCID=4 is not a rank of the 4 tasks of SLURM_STEP_NODELIST=n[1-2]"});

  environment = StepEnvironment();
  environment["SLURM_PROCID"] = "-1";
  ExpectError(ReadSlurmStep(environment).status(), absl::StatusCode::kInvalidArgument,
              {"SLURM_PROCID=\"-1\" is not a non-negative integer"});

  environment = StepEnvironment();
  environment["SLURM_LOCALID"] = "x";
  ExpectError(ReadSlurmStep(environment).status(), absl::StatusCode::kInvalidArgument,
              {"SLURM_LOCALID=\"x\" is not a non-negative integer"});
}

TEST(ReadSlurmStepTest, RefusesATaskThatIsNotWhereBlockDistributionPutsIt) {
  // srun --distribution=cyclic puts rank 3 on n2 as its second task too, but rank 1 on n2.
  Environment environment = StepEnvironment();
  environment["SLURM_PROCID"] = "1";
  environment["SLURM_LOCALID"] = "0";
  ExpectError(ReadSlurmStep(environment).status(), absl::StatusCode::kFailedPrecondition,
              {"SLURM_PROCID=1 runs on n2 as local task 0 (SLURMD_NODENAME, SLURM_LOCALID)",
               "puts it on n1 as local task 1", "--distribution=block"});

  environment = StepEnvironment();
  environment["SLURMD_NODENAME"] = "n1";
  ExpectError(ReadSlurmStep(environment).status(), absl::StatusCode::kFailedPrecondition,
              {"runs on n1 as local task 1", "puts it on n2 as local task 1"});

  // Without SLURMD_NODENAME and SLURM_LOCALID there is nothing to check.
  environment = StepEnvironment();
  environment.erase("SLURMD_NODENAME");
  environment.erase("SLURM_LOCALID");
  EXPECT_TRUE(ReadSlurmStep(environment).ok());
}

TEST(SlurmTaskAddressesTest, ANodesTasksTakeConsecutivePortsFromTheBase) {
  absl::StatusOr<SlurmStep> step = ReadSlurmStep(
      {{"SLURM_JOB_NODELIST", "gpu[07-08],cpu1"}, {"SLURM_TASKS_PER_NODE", "3,1(x2)"}});
  ASSERT_TRUE(step.ok()) << step.status();
  absl::StatusOr<std::vector<std::string>> addresses = SlurmTaskAddresses(*step, 8888);
  ASSERT_TRUE(addresses.ok()) << addresses.status();
  EXPECT_EQ(absl::StrJoin(*addresses, " "),
            "gpu07:8888 gpu07:8889 gpu07:8890 gpu08:8888 cpu1:8888");

  addresses = SlurmTaskAddresses(*step, 65534);
  ExpectError(addresses.status(), absl::StatusCode::kInvalidArgument,
              {"--slurm_base_port=65534 gives local task 2 of node gpu07 port 65536",
               "between 1 and 65535"});
  ExpectError(SlurmTaskAddresses(*step, 0).status(), absl::StatusCode::kInvalidArgument,
              {"--slurm_base_port=0"});
}

TEST(NodeWorkerIndexTest, CountsOnlyTheWorkersOfTheSameNode) {
  // Four tasks on each of n1 and n2; ranks 0 and 1 are the ps tasks.
  absl::StatusOr<SlurmStep> step =
      ReadSlurmStep({{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_TASKS_PER_NODE", "4(x2)"}});
  ASSERT_TRUE(step.ok()) << step.status();
  const int kNumPs = 2;
  std::vector<int> indices;
  for (int rank = kNumPs; rank < 8; ++rank) indices.push_back(NodeWorkerIndex(*step, rank, kNumPs));
  EXPECT_EQ(indices, (std::vector<int>{0, 1, 0, 1, 2, 3}));
}

TEST(SlurmWorkerDeviceTest, TheNodesWorkersSpreadOverTheVisibleGpus) {
  EXPECT_EQ(SlurmWorkerDevice(0, 0), "auto");  // No GPU: the CPU, with auto's reason.
  EXPECT_EQ(SlurmWorkerDevice(3, 0), "auto");
  EXPECT_EQ(SlurmWorkerDevice(0, 4), "cuda:0");
  EXPECT_EQ(SlurmWorkerDevice(3, 4), "cuda:3");
  EXPECT_EQ(SlurmWorkerDevice(5, 4), "cuda:1");  // More workers than GPUs: they share.
  // Slurm bound one GPU to the task (CUDA_VISIBLE_DEVICES=5): CUDA calls it device 0.
  EXPECT_EQ(SlurmWorkerDevice(2, 1), "cuda:0");
}

}  // namespace
}  // namespace ps
