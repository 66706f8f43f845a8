#include "worker/exchange/ring_exchange.h"

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/allreduce/local_ring.h"
#include "worker/exchange/exchange_testing.h"

namespace ps {
namespace {

using exchange_testing::kInitial;
using exchange_testing::kLearningRate;
using ::testing::Each;
using ::testing::HasSubstr;

// Two workers on an in-process ring; worker w's gradient is kGradients[w] in every element, so
// the mean is 2 and every update below is exact in float.
constexpr float kGradients[] = {1.0f, 3.0f};
constexpr int kWorkers = 2;
constexpr int kModelBytes = 4 * 4;  // "w": 4 floats.

class RingExchangeTest : public exchange_testing::ExchangeTest {
 protected:
  // With `checkpoint_every` steps (checkpoint.every_steps), from `first_step`.
  void StartRing(ConsistencyConfig::Mode mode, int local_steps = 0, int checkpoint_every = 0,
                 int64_t first_step = 0) {
    StartJob(mode, kWorkers, 0, local_steps);
    ring_ = MakeLocalRing(kWorkers, absl::Seconds(10));
    JobSpec spec;
    *spec.mutable_optimizer() = parameters_.optimizer();
    *spec.mutable_learning_rate() = parameters_.learning_rate();
    *spec.mutable_consistency() = parameters_.consistency();
    spec.mutable_checkpoint()->set_every_steps(checkpoint_every);
    for (int w = 0; w < kWorkers; ++w) {
      absl::StatusOr<std::unique_ptr<RingExchange>> exchange =
          RingExchange::Create(NewSession(w), ring_[w].get(), variables_, spec, w, first_step);
      ASSERT_TRUE(exchange.ok()) << exchange.status();
      exchanges_.push_back(*std::move(exchange));
    }
  }
  // Runs `call(w)` for every worker at once (the ring needs them all) and expects each OK.
  void OnEveryWorker(const std::function<absl::Status(int)>& call) {
    std::vector<absl::Status> statuses(kWorkers);
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; ++w) {
      threads.emplace_back([&, w] { statuses[w] = call(w); });
    }
    for (std::thread& thread : threads) thread.join();
    for (int w = 0; w < kWorkers; ++w) EXPECT_TRUE(statuses[w].ok()) << w << ": " << statuses[w];
  }
  // Every worker takes step `step` with its own gradient.
  void Step(int64_t step) {
    OnEveryWorker([&](int w) {
      absl::Status before = exchanges_[w]->BeforeCompute(step);
      if (!before.ok()) return before;
      return exchanges_[w]->AfterCompute(step, *Gradient(kGradients[w]));
    });
  }
  std::vector<float> W(int worker) const { return exchanges_[worker]->weights().arrays()[0]; }
  // The values the shard holds.
  std::vector<float> ShardValues() {
    std::vector<float> values(4);
    absl::StatusOr<WorkerSession::PullResult> pulled =
        NewSession(0)->Pull(WorkerSession::PullOptions(), {{"w", absl::MakeSpan(values)}});
    EXPECT_TRUE(pulled.ok()) << pulled.status();
    return values;
  }

  std::vector<std::unique_ptr<RingLink>> ring_;
  std::vector<std::unique_ptr<RingExchange>> exchanges_;
};

TEST_F(RingExchangeTest, AllReduceAppliesTheMeanGradientOnEveryWorkerAndTheChiefPublishes) {
  StartRing(ConsistencyConfig::ALLREDUCE);
  Step(0);
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_THAT(W(w), Each(kInitial - kLearningRate * 2.0f)) << w;
    EXPECT_EQ(exchanges_[w]->global_step(), 1);
  }
  Step(1);
  for (int w = 0; w < kWorkers; ++w) EXPECT_THAT(W(w), Each(kInitial - 2 * kLearningRate * 2.0f));
  // Until the chief publishes, the shard holds the initial values.
  EXPECT_THAT(ShardValues(), Each(kInitial));
  OnEveryWorker([&](int w) { return exchanges_[w]->Finish(); });
  EXPECT_THAT(ShardValues(), Each(kInitial - 2 * kLearningRate * 2.0f));
}

TEST_F(RingExchangeTest, LocalSgdTakesLocalStepsThenAveragesTheModels) {
  StartRing(ConsistencyConfig::LOCAL_SGD, /*local_steps=*/2);
  Step(0);
  // Each worker applied its own gradient: the copies differ until the averaging.
  EXPECT_THAT(W(0), Each(kInitial - kLearningRate * kGradients[0]));
  EXPECT_THAT(W(1), Each(kInitial - kLearningRate * kGradients[1]));
  Step(1);
  // Worker 0 at 1 - 2 * 0.5 * 1 = 0, worker 1 at 1 - 2 * 0.5 * 3 = -2: averaged to -1.
  for (int w = 0; w < kWorkers; ++w) EXPECT_THAT(W(w), Each(-1.0f)) << w;
  // A third step, not averaged yet; Finish averages it so that every worker ends equal.
  Step(2);
  EXPECT_THAT(W(0), Each(-1.0f - kLearningRate * kGradients[0]));
  OnEveryWorker([&](int w) { return exchanges_[w]->Finish(); });
  for (int w = 0; w < kWorkers; ++w) EXPECT_THAT(W(w), Each(-1.0f - kLearningRate * 2.0f)) << w;
  EXPECT_THAT(ShardValues(), Each(-1.0f - kLearningRate * 2.0f));
}

TEST_F(RingExchangeTest, TheChiefPublishesWhereACheckpointIsDueWithItsSteps) {
  StartRing(ConsistencyConfig::ALLREDUCE, 0, /*checkpoint_every=*/2);
  Step(0);
  EXPECT_EQ(Stats().step(), 0);  // Not due: the initial values.
  EXPECT_THAT(ShardValues(), Each(kInitial));
  Step(1);
  // Published after 2 steps: the shard's step (its checkpoint clock) and values are the model's.
  EXPECT_EQ(Stats().step(), 2);
  EXPECT_THAT(ShardValues(), Each(kInitial - 2 * kLearningRate * 2.0f));
  Step(2);
  EXPECT_EQ(Stats().step(), 2);
  OnEveryWorker([&](int w) { return exchanges_[w]->Finish(); });  // The final publish.
  EXPECT_EQ(Stats().step(), 3);
  EXPECT_EQ(Stats().version(), 2);  // Two publishes.
}

TEST_F(RingExchangeTest, LocalSgdPublishesAfterTheAveragingThatACheckpointFollows) {
  StartRing(ConsistencyConfig::LOCAL_SGD, /*local_steps=*/2, /*checkpoint_every=*/2);
  Step(0);
  Step(1);
  EXPECT_EQ(Stats().step(), 2);
  EXPECT_THAT(ShardValues(), Each(-1.0f));  // The average, not the chief's own copy.
}

TEST_F(RingExchangeTest, AResumedRunCountsItsStepsFromTheResume) {
  StartRing(ConsistencyConfig::ALLREDUCE, 0, /*checkpoint_every=*/2, /*first_step=*/4);
  Step(4);
  EXPECT_EQ(exchanges_[0]->global_step(), 5);
  Step(5);
  EXPECT_EQ(Stats().step(), 6);  // Due at 6, a multiple of 2 counted from the job's start.
}

TEST_F(RingExchangeTest, CountsTheRingsBytesAsTheFormulaSays) {
  StartRing(ConsistencyConfig::ALLREDUCE);
  OnEveryWorker([&](int w) { return exchanges_[w]->BeforeCompute(0); });
  const int64_t pull_sent = exchanges_[1]->bytes_sent();
  const int64_t pull_received = exchanges_[1]->bytes_received();
  EXPECT_GT(pull_received, kModelBytes);  // The initial pull: the model and its header.
  constexpr int kSteps = 3;
  for (int step = 0; step < kSteps; ++step) {
    OnEveryWorker([&](int w) { return exchanges_[w]->AfterCompute(step, *Gradient(1.0f)); });
  }
  // A ring member sends and receives 2 (N - 1) / N of the model per step: here exactly 1.
  const int64_t ring_bytes = kSteps * 2 * (kWorkers - 1) * kModelBytes / kWorkers;
  EXPECT_EQ(exchanges_[1]->bytes_sent() - pull_sent, ring_bytes);
  EXPECT_EQ(exchanges_[1]->bytes_received() - pull_received, ring_bytes);
}

TEST_F(RingExchangeTest, AWorkerWithoutRingLinksIsRefusedSayingWhy) {
  StartJob(ConsistencyConfig::ALLREDUCE, kWorkers);
  JobSpec spec;
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ALLREDUCE);
  absl::StatusOr<std::unique_ptr<RingExchange>> exchange =
      RingExchange::Create(NewSession(0), nullptr, variables_, spec, 0);
  EXPECT_EQ(exchange.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(exchange.status().message(), HasSubstr("links to the other workers"));
}

TEST_F(RingExchangeTest, APeerThatIsGoneEndsTheStepWithItsName) {
  StartRing(ConsistencyConfig::ALLREDUCE);
  OnEveryWorker([&](int w) { return exchanges_[w]->BeforeCompute(0); });
  ring_[1].reset();  // Worker 1's process died.
  absl::Status status = exchanges_[0]->AfterCompute(0, *Gradient(1.0f));
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("worker:1"));
}

}  // namespace
}  // namespace ps
