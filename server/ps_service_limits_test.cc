// A ps refuses a job beyond its limits (ServiceLimits: ps_server --max_jobs, --max_workers,
// --max_job_mb, --max_memory_mb) with RESOURCE_EXHAUSTED naming the limit and its flag, before
// anything of the job is allocated, and has room again once jobs are deleted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/ps_client.h"
#include "proto/ps_service.pb.h"
#include "server/shard_job_testing.h"
#include "tests/in_process_ps_cluster.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// One variable of `rows` x 256 floats (1 KiB a row) with plain SGD: 2 KiB a row on the shard.
ParameterSpec Job(const std::string& id, int64_t rows, int workers = 2) {
  ParameterSpec spec = CheckpointTestSpec(ConsistencyConfig::ASYNC, OptimizerConfig::SGD);
  spec.set_job_id(id);
  spec.clear_variables();
  VariableDef* variable = spec.add_variables();
  variable->set_name("w");
  variable->add_shape(rows);
  variable->add_shape(256);
  spec.set_num_workers(workers);
  return spec;
}

class LimitsTest : public ::testing::Test {
 protected:
  void Start(const ServiceLimits& limits) {
    InProcessPsClusterOptions options;
    options.server.service.limits = limits;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    PsClientOptions client;
    client.ps_addresses = cluster_->addresses();
    absl::StatusOr<std::unique_ptr<PsClient>> created = PsClient::Create(client);
    ASSERT_TRUE(created.ok()) << created.status();
    client_ = *std::move(created);
  }
  absl::Status Create(const ParameterSpec& spec) { return client_->CreateJob(spec).status(); }
  void ExpectExhausted(const ParameterSpec& spec, const std::string& flag) {
    absl::Status status = Create(spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
    EXPECT_THAT(status.message(), HasSubstr(flag));
  }

  std::unique_ptr<InProcessPsCluster> cluster_;
  std::unique_ptr<PsClient> client_;
};

// The report that found it: a 47-byte CreateJob with ten million workers grew a ps by 6 GB.
TEST_F(LimitsTest, AJobWithTooManyWorkersIsRefusedBeforeAnythingIsAllocated) {
  Start(ServiceLimits());
  ExpectExhausted(Job("crowd", 4, 10'000'000), "--max_workers");
  EXPECT_TRUE(Create(Job("fine", 4, 8)).ok());
}

TEST_F(LimitsTest, TheNumberOfJobsIsBoundedAndDeletingOneMakesRoom) {
  ServiceLimits limits;
  limits.max_jobs = 2;
  Start(limits);
  ASSERT_TRUE(Create(Job("a", 4)).ok());
  ASSERT_TRUE(Create(Job("b", 4)).ok());
  ExpectExhausted(Job("c", 4), "--max_jobs");
  EXPECT_TRUE(Create(Job("a", 4)).ok()) << "creating a job that exists is not a new job";
  ASSERT_TRUE(client_->DeleteJob("a").ok());
  EXPECT_TRUE(Create(Job("c", 4)).ok());
}

TEST_F(LimitsTest, BytesPerJobAndInTotalAreBounded) {
  ServiceLimits limits;
  limits.max_job_bytes = 3 << 20;    // 3 MiB: 1,024 rows (2 MiB) fit, 2,048 (4 MiB) do not.
  limits.max_total_bytes = 5 << 20;  // Two jobs of 2 MiB fit, not a third.
  Start(limits);
  ExpectExhausted(Job("big", 2048), "--max_job_mb");
  ASSERT_TRUE(Create(Job("one", 1024)).ok());
  ASSERT_TRUE(Create(Job("two", 1024)).ok());
  ExpectExhausted(Job("three", 1024), "--max_memory_mb");
  ASSERT_TRUE(client_->DeleteJob("one").ok());
  EXPECT_TRUE(Create(Job("three", 1024)).ok());
}

}  // namespace
}  // namespace ps
