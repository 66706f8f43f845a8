// A one-variable job on an in-process ps, for driving an exchange step by step in its tests.
#ifndef PS_WORKER_EXCHANGE_EXCHANGE_TESTING_H_
#define PS_WORKER_EXCHANGE_EXCHANGE_TESTING_H_

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "proto/parameter.pb.h"
#include "server/testing/in_process_ps_cluster.h"
#include "worker/host_variables.h"

namespace ps {
namespace exchange_testing {

// SGD at this rate on "w" = [kInitial] * 4: with dyadic gradients every update is exact.
constexpr float kLearningRate = 0.5f;
constexpr float kInitial = 1.0f;

class ExchangeTest : public ::testing::Test {
 protected:
  // Starts one ps and creates the job "exchange-test" of `mode` for `num_workers` (SYNC: with
  // `replicas_to_aggregate`, 0 for all; LOCAL_SGD: averaging every `local_steps`).
  void StartJob(ConsistencyConfig::Mode mode, int num_workers = 1, int replicas_to_aggregate = 0,
                int local_steps = 0) {
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(InProcessPsClusterOptions());
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    PsClientOptions options;
    options.ps_addresses = cluster_->addresses();
    options.call_timeout = absl::Seconds(10);  // A failure shows in seconds.
    options.wait_timeout = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    parameters_.set_job_id("exchange-test");
    VariableDef* w = parameters_.add_variables();
    w->set_name("w");
    w->add_shape(4);
    w->mutable_initializer()->set_kind(InitializerConfig::CONSTANT);
    w->mutable_initializer()->set_scale(kInitial);
    parameters_.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
    parameters_.mutable_learning_rate()->set_base(kLearningRate);
    parameters_.mutable_consistency()->set_mode(mode);
    parameters_.mutable_consistency()->set_replicas_to_aggregate(replicas_to_aggregate);
    parameters_.mutable_consistency()->set_local_steps(local_steps);
    parameters_.set_num_workers(num_workers);
    variables_.assign(parameters_.variables().begin(), parameters_.variables().end());
    absl::StatusOr<Placement> placement = client_->CreateJob(parameters_);
    ASSERT_TRUE(placement.ok()) << placement.status();
  }

  std::unique_ptr<WorkerSession> NewSession(int worker = 0) {
    absl::StatusOr<std::unique_ptr<WorkerSession>> session =
        WorkerSession::Create(client_.get(), parameters_, worker);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? *std::move(session) : nullptr;
  }

  // The gradient `value` in every element of "w".
  std::unique_ptr<HostVariables> Gradient(float value) {
    auto gradient = std::make_unique<HostVariables>(variables_);
    for (std::vector<float>& array : gradient->arrays()) array.assign(array.size(), value);
    return gradient;
  }

  // The shard's statistics of the job.
  JobStats Stats() {
    absl::StatusOr<std::vector<JobStats>> stats = client_->GetJobStats(parameters_.job_id());
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? (*stats)[0] : JobStats();
  }

  std::unique_ptr<InProcessPsCluster> cluster_;
  std::unique_ptr<PsClient> client_;
  ParameterSpec parameters_;
  std::vector<VariableDef> variables_;
};

}  // namespace exchange_testing
}  // namespace ps

#endif  // PS_WORKER_EXCHANGE_EXCHANGE_TESTING_H_
