// Sparse rows through WorkerSession (common/client/worker_session.h) against 2 in-process ps: keys
// split by their shard and put back in the caller's order, and sparse SYNC with 4 workers
// equal to one process's SGD on the union of their batches.
#include <map>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "server/testing/in_process_ps_cluster.h"
#include "server/testing/sparse_job.h"

namespace ps {
namespace {

constexpr int kWidth = 2;
constexpr int kWorkers = 4;
constexpr float kLearningRate = 0.5f;

ParameterSpec Spec() {
  SparseJob job;
  job.job_id = "sparse-session";
  job.mode = ConsistencyConfig::SYNC;
  job.num_workers = kWorkers;
  job.width = kWidth;
  job.initializer_scale = 1.0f;
  job.learning_rate = kLearningRate;
  job.seed = 5;
  return SparseJobSpec(job);
}

class WorkerSessionSparseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InProcessPsClusterOptions options;
    options.num_ps = 2;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    absl::StatusOr<std::unique_ptr<PsClient>> created = cluster_->NewClient();
    ASSERT_TRUE(created.ok()) << created.status();
    client_ = *std::move(created);
    ASSERT_TRUE(client_->CreateJob(Spec()).ok());
  }

  std::unique_ptr<WorkerSession> Session(int worker, int incarnation = 0) {
    absl::StatusOr<std::unique_ptr<WorkerSession>> session =
        WorkerSession::Create(client_.get(), Spec(), worker, incarnation);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? *std::move(session) : nullptr;
  }

  // The rows of `keys`, in their order, as an observer reads them.
  std::vector<float> Rows(const std::vector<uint64_t>& keys) {
    std::vector<float> bias(1), rows(keys.size() * kWidth);
    absl::StatusOr<WorkerSession::PullResult> pulled =
        Session(0, OBSERVER_INCARNATION)
            ->Pull({}, {{"b", absl::MakeSpan(bias)}},
                   {{"emb", absl::MakeConstSpan(keys), absl::MakeSpan(rows)}});
    EXPECT_TRUE(pulled.ok()) << pulled.status();
    return rows;
  }

  std::unique_ptr<InProcessPsCluster> cluster_;
  std::unique_ptr<PsClient> client_;
};

TEST_F(WorkerSessionSparseTest, RowsComeBackInTheCallersOrderFromBothShards) {
  const std::vector<uint64_t> keys = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<float> rows = Rows(keys);
  // Reversed, with a repeat: the same rows, placed as asked.
  const std::vector<uint64_t> reordered = {7, 3, 3, 0};
  const std::vector<float> again = Rows(reordered);
  for (size_t i = 0; i < reordered.size(); ++i) {
    for (int j = 0; j < kWidth; ++j) {
      EXPECT_EQ(again[i * kWidth + j], rows[reordered[i] * kWidth + j]) << i << " " << j;
    }
  }
  // Both shards hold some of them.
  absl::StatusOr<std::vector<JobStats>> stats = client_->GetJobStats("sparse-session");
  ASSERT_TRUE(stats.ok());
  EXPECT_GT((*stats)[0].sparse_rows().at("emb"), 0);
  EXPECT_GT((*stats)[1].sparse_rows().at("emb"), 0);
  EXPECT_EQ((*stats)[0].sparse_rows().at("emb") + (*stats)[1].sparse_rows().at("emb"), 8);
}

// 4 workers each push step 0's gradient rows for their own keys (some shared); the step's
// update is the mean over the 4 gradients of every row's gradient sum: one process's SGD on the
// union of the 4 batches (each batch's gradient a mean over its examples).
TEST_F(WorkerSessionSparseTest, SparseSyncEqualsSgdOnTheUnionOfTheBatches) {
  const std::vector<std::vector<uint64_t>> keys_of = {{0, 1, 2}, {2, 3}, {1, 2, 5}, {6}};
  const std::vector<float> initial = Rows({0, 1, 2, 3, 4, 5, 6});
  std::vector<std::unique_ptr<WorkerSession>> sessions;
  for (int w = 0; w < kWorkers; ++w) sessions.push_back(Session(w));
  std::map<uint64_t, std::vector<double>> sums;
  for (int w = 0; w < kWorkers; ++w) {
    std::vector<float> bias(1);
    ASSERT_TRUE(sessions[w]->Pull({}, {{"b", absl::MakeSpan(bias)}}).ok());
    std::vector<float> rows;
    for (uint64_t key : keys_of[w]) {
      for (int j = 0; j < kWidth; ++j) {
        const float g = static_cast<float>((w + 1) * (j + 1) + key);
        rows.push_back(g);
        sums[key].resize(kWidth);
        sums[key][j] += g;
      }
    }
    const std::vector<float> bias_gradient = {static_cast<float>(w)};
    absl::StatusOr<std::vector<PushResponse>> pushed = sessions[w]->Push(
        {}, {{"b", absl::MakeConstSpan(bias_gradient)}},
        {{"emb", absl::MakeConstSpan(keys_of[w]), absl::MakeConstSpan(rows)}});
    ASSERT_TRUE(pushed.ok()) << pushed.status();
  }
  const std::vector<float> after = Rows({0, 1, 2, 3, 4, 5, 6});
  for (uint64_t key = 0; key <= 6; ++key) {
    for (int j = 0; j < kWidth; ++j) {
      const double gradient = sums.count(key) ? sums[key][j] / kWorkers : 0.0;
      EXPECT_FLOAT_EQ(after[key * kWidth + j], initial[key * kWidth + j] - kLearningRate * gradient)
          << "key " << key << ", column " << j;
    }
  }
  // The bias too: the mean of 0, 1, 2, 3.
  std::vector<float> bias(1);
  ASSERT_TRUE(Session(0, OBSERVER_INCARNATION)->Pull({}, {{"b", absl::MakeSpan(bias)}}).ok());
  EXPECT_FLOAT_EQ(bias[0], -kLearningRate * 1.5f);
}

TEST_F(WorkerSessionSparseTest, BadRowsAreRefusedBeforeAnythingIsSent) {
  std::unique_ptr<WorkerSession> session = Session(0);
  std::vector<float> bias(1), rows(3);
  const std::vector<uint64_t> keys = {1, 2};
  absl::StatusOr<WorkerSession::PullResult> pulled =
      session->Pull({}, {{"b", absl::MakeSpan(bias)}},
                    {{"emb", absl::MakeConstSpan(keys), absl::MakeSpan(rows)}});
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pulled.status().message().find("need 4 floats, not 3"), absl::string_view::npos);
  pulled = session->Pull({}, {{"b", absl::MakeSpan(bias)}},
                         {{"nope", absl::MakeConstSpan(keys), absl::MakeSpan(rows)}});
  EXPECT_NE(pulled.status().message().find("no sparse table \"nope\""), absl::string_view::npos);
  EXPECT_EQ(session->bytes_sent(), 0);
}

}  // namespace
}  // namespace ps
