#include "server/shard_job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A power of two, so that with the dyadic gradients below SGD is exact in float and tests can
// compare weights with ==.
constexpr float kLearningRate = 0.5f;
constexpr float kInitialW = 1.0f;
constexpr float kInitialB = 2.0f;

// A job with two variables, so that the shard holds two slices and gradients have offsets:
// "w" [8, 4] (all kInitialW) and "b" [4] (all kInitialB); SGD at kLearningRate.
ParameterSpec MakeSpec(ConsistencyConfig::Mode mode, int num_workers) {
  ParameterSpec spec;
  spec.set_job_id("test-job");
  VariableDef* w = spec.add_variables();
  w->set_name("w");
  w->add_shape(8);
  w->add_shape(4);
  w->mutable_initializer()->set_kind(InitializerConfig::CONSTANT);
  w->mutable_initializer()->set_scale(kInitialW);
  VariableDef* b = spec.add_variables();
  b->set_name("b");
  b->add_shape(4);
  b->mutable_initializer()->set_kind(InitializerConfig::CONSTANT);
  b->mutable_initializer()->set_scale(kInitialB);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  spec.mutable_learning_rate()->set_kind(LearningRateSchedule::CONSTANT);
  spec.mutable_learning_rate()->set_base(kLearningRate);
  spec.mutable_consistency()->set_mode(mode);
  spec.set_num_workers(num_workers);
  spec.set_seed(7);
  spec.set_min_slice_bytes(16);
  return spec;
}

constexpr int64_t kNumParameters = 8 * 4 + 4;

std::unique_ptr<ShardJob> CreateJob(const ParameterSpec& spec, int num_ps = 1, int ps_index = 0) {
  absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec, num_ps, ps_index);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? std::move(*job) : nullptr;
}

// Gradients as a worker would send them: every slice on the shard, in placement order.
// Values in [-1, 1], different for every seed.
std::vector<float> RandomGradient(uint32_t seed, int64_t size = kNumParameters) {
  std::mt19937 rng(seed);
  std::vector<float> gradient(size);
  for (float& g : gradient) g = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 1000;
  return gradient;
}

// Multiples of 1/8 in [-1, 1]: with kLearningRate, updates and means of pairs are exact.
std::vector<float> DyadicGradient(uint32_t seed, int64_t size = kNumParameters) {
  std::mt19937 rng(seed);
  std::vector<float> gradient(size);
  for (float& g : gradient) g = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 8;
  return gradient;
}

// `weights` after one SGD step, in float as the shard computes it.
std::vector<float> SgdStep(std::vector<float> weights, float learning_rate,
                           const std::vector<float>& gradient) {
  for (size_t i = 0; i < weights.size(); ++i) weights[i] -= learning_rate * gradient[i];
  return weights;
}

std::vector<float> MeanOfPair(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> mean(a.size());
  for (size_t i = 0; i < a.size(); ++i) mean[i] = (a[i] + b[i]) * 0.5f;
  return mean;
}

PullRequest MakePull(int worker, int64_t step = 0, int64_t clock = 0) {
  PullRequest request;
  request.set_job_id("test-job");
  request.set_worker(worker);
  request.set_step(step);
  request.set_clock(clock);
  return request;
}

// Where a pull's answer lands.
struct PullOutcome {
  int calls = 0;
  absl::StatusOr<ShardJob::PullSnapshot> result = absl::UnknownError("not answered");
};

// Returns the waiter id (0: answered at once).
int64_t StartPull(ShardJob* job, const PullRequest& request, PullOutcome* outcome) {
  return job->Pull(request, [outcome](absl::StatusOr<ShardJob::PullSnapshot> result) {
    ++outcome->calls;
    outcome->result = std::move(result);
  });
}

// A pull that must be answered at once.
absl::StatusOr<ShardJob::PullSnapshot> PullNow(ShardJob* job, const PullRequest& request) {
  PullOutcome outcome;
  int64_t id = StartPull(job, request, &outcome);
  if (id != 0) {
    job->CancelWaiter(id, absl::CancelledError("test"));
    return absl::InternalError("the pull was parked");
  }
  if (outcome.calls != 1) return absl::InternalError("the pull was not answered exactly once");
  return std::move(outcome.result);
}

std::vector<float> Values(const ShardJob::PullSnapshot& snapshot) {
  std::vector<float> values;
  for (absl::Span<const float> piece : snapshot.pieces) {
    values.insert(values.end(), piece.begin(), piece.end());
  }
  return values;
}

// Every value on the shard, read by a pull of its run that never waits (worker 0, step 0,
// clock 0).
std::vector<float> Weights(ShardJob* job) {
  PullRequest pull = MakePull(0);
  pull.set_run_id(job->spec().run_id());
  absl::StatusOr<ShardJob::PullSnapshot> snapshot = PullNow(job, pull);
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  return snapshot.ok() ? Values(*snapshot) : std::vector<float>();
}

PushRequestHeader MakeHeader(const ShardJob& job, int worker, int64_t push_id, int64_t read_version,
                             int64_t step = 0, int64_t clock = 0) {
  PushRequestHeader header;
  header.set_job_id(job.spec().job_id());
  header.set_worker(worker);
  header.set_push_id(push_id);
  header.set_read_version(read_version);
  header.set_step(step);
  header.set_clock(clock);
  for (const SliceRef& ref : job.SliceRefs()) *header.add_slices() = ref;
  return header;
}

// Pushes `gradient` (every slice, in placement order) the way the service does: PushBuffer,
// fill the destinations, Push.
absl::StatusOr<PushResponse> PushGradient(ShardJob* job, const PushRequestHeader& header,
                                          const std::vector<float>& gradient) {
  std::vector<absl::Span<float>> destinations;
  absl::StatusOr<std::shared_ptr<std::vector<float>>> buffer =
      job->PushBuffer(header, &destinations);
  if (!buffer.ok()) return buffer.status();
  size_t offset = 0;
  for (absl::Span<float> destination : destinations) {
    if (offset + destination.size() > gradient.size()) {
      return absl::InternalError("the test's gradient is too short");
    }
    std::copy_n(gradient.begin() + offset, destination.size(), destination.begin());
    offset += destination.size();
  }
  if (offset != gradient.size()) return absl::InternalError("the test's gradient is too long");
  return job->Push(header, **buffer);
}

int64_t CountOf(const google::protobuf::Map<std::string, int64_t>& counts,
                const std::string& reason) {
  auto it = counts.find(reason);
  return it == counts.end() ? 0 : it->second;
}

int64_t Bucket(const StalenessHistogramData& histogram, int staleness) {
  return staleness < histogram.counts_size() ? histogram.counts(staleness) : 0;
}

// What a rejected push must leave as it was.
struct JobState {
  std::vector<float> weights;
  int64_t version = 0;
  int64_t step = 0;
  int64_t applied_gradients = 0;
  std::vector<int64_t> last_push_ids;
  std::vector<int64_t> clocks;
  std::vector<int> waiting_for;
};

JobState Observe(ShardJob* job) {
  JobState state;
  state.weights = Weights(job);
  JobStats stats = job->Stats();
  state.version = stats.version();
  state.step = stats.step();
  state.applied_gradients = stats.applied_gradients();
  for (const WorkerStats& worker : stats.workers()) {
    state.last_push_ids.push_back(worker.last_push_id());
    state.clocks.push_back(worker.clock());
  }
  state.waiting_for.assign(stats.waiting_for().begin(), stats.waiting_for().end());
  return state;
}

void ExpectUnchanged(ShardJob* job, const JobState& before) {
  JobState after = Observe(job);
  EXPECT_EQ(after.weights, before.weights);
  EXPECT_EQ(after.version, before.version);
  EXPECT_EQ(after.step, before.step);
  EXPECT_EQ(after.applied_gradients, before.applied_gradients);
  EXPECT_EQ(after.last_push_ids, before.last_push_ids);
  EXPECT_EQ(after.clocks, before.clocks);
  EXPECT_EQ(after.waiting_for, before.waiting_for);
}

TEST(ShardJobTest, CreatesAndInitializesTheSlicesOfItsTask) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::ASYNC, 1));
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->num_parameters(), kNumParameters);
  std::vector<SliceRef> refs = job->SliceRefs();
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[0].variable(), "w");
  EXPECT_EQ(refs[0].row_count(), 8);
  EXPECT_EQ(refs[1].variable(), "b");
  EXPECT_EQ(refs[1].row_count(), 4);
  std::vector<float> expected(32, kInitialW);
  expected.insert(expected.end(), 4, kInitialB);
  EXPECT_EQ(Weights(job.get()), expected);
  EXPECT_EQ(job->Stats().version(), 0);
}

TEST(ShardJobTest, HoldsOnlyItsOwnSlicesOfAPlacement) {
  ParameterSpec spec = MakeSpec(ConsistencyConfig::ASYNC, 1);
  spec.mutable_variables()->RemoveLast();  // Only "w": two slices of 4 rows on two tasks.
  std::unique_ptr<ShardJob> job0 = CreateJob(spec, 2, 0);
  std::unique_ptr<ShardJob> job1 = CreateJob(spec, 2, 1);
  ASSERT_NE(job0, nullptr);
  ASSERT_NE(job1, nullptr);
  ASSERT_EQ(job0->SliceRefs().size(), 1u);
  ASSERT_EQ(job1->SliceRefs().size(), 1u);
  EXPECT_EQ(job0->SliceRefs()[0].row_begin(), 0);
  EXPECT_EQ(job1->SliceRefs()[0].row_begin(), 4);
  EXPECT_EQ(job1->num_parameters(), 16);

  // A push laid out for task 0 does not fit task 1.
  std::vector<absl::Span<float>> destinations;
  absl::StatusOr<std::shared_ptr<std::vector<float>>> buffer =
      job1->PushBuffer(MakeHeader(*job0, 0, 1, 0), &destinations);
  EXPECT_EQ(buffer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(buffer.status().message(), HasSubstr("w[4:8]"));
  EXPECT_EQ(CountOf(job1->Stats().rejected(), "shape"), 1);
}

// ----- SYNC -----

TEST(ShardJobSyncTest, EachStepAppliesTheMeanOfAllWorkersGradients) {
  constexpr int kWorkers = 4;
  constexpr int kSteps = 5;
  ParameterSpec spec = MakeSpec(ConsistencyConfig::SYNC, kWorkers);
  spec.mutable_learning_rate()->set_base(0.1f);
  spec.mutable_consistency()->set_replicas_to_aggregate(0);  // All.
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);
  const double learning_rate = 0.1f;

  for (int step = 0; step < kSteps; ++step) {
    std::vector<int64_t> read_version(kWorkers);
    for (int w = 0; w < kWorkers; ++w) {
      absl::StatusOr<ShardJob::PullSnapshot> pulled = PullNow(job.get(), MakePull(w, step));
      ASSERT_TRUE(pulled.ok()) << pulled.status();
      EXPECT_EQ(pulled->header.version(), step);
      EXPECT_EQ(pulled->header.step(), step);
      read_version[w] = pulled->header.version();
    }
    const std::vector<float> before = Weights(job.get());
    std::vector<std::vector<float>> gradients;
    for (int w = 0; w < kWorkers; ++w) {
      gradients.push_back(RandomGradient(static_cast<uint32_t>(step * kWorkers + w + 1)));
      absl::StatusOr<PushResponse> response = PushGradient(
          job.get(), MakeHeader(*job, w, step + 1, read_version[w], step), gradients.back());
      ASSERT_TRUE(response.ok()) << response.status();
      EXPECT_EQ(response->staleness(), 0);
      if (w < kWorkers - 1) {
        EXPECT_EQ(response->outcome(), PushResponse::ACCUMULATED) << "step " << step << " w " << w;
        EXPECT_EQ(response->version(), step);
        EXPECT_EQ(Weights(job.get()), before) << "applied before the step was complete";
      } else {
        EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
        EXPECT_EQ(response->version(), step + 1);
        EXPECT_EQ(response->step(), step + 1);
      }
    }
    const std::vector<float> after = Weights(job.get());
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) {
      double sum = 0;
      for (const std::vector<float>& gradient : gradients) sum += gradient[i];
      double expected = before[i] - learning_rate * (sum / kWorkers);
      EXPECT_NEAR(after[i], expected, 1e-6 * std::abs(expected))
          << "step " << step << " [" << i << "]";
    }
    JobStats stats = job->Stats();
    EXPECT_EQ(stats.version(), step + 1);
    EXPECT_EQ(stats.step(), step + 1);
    EXPECT_EQ(stats.applied_updates(), step + 1);
    EXPECT_EQ(stats.applied_gradients(), (step + 1) * kWorkers);
    EXPECT_EQ(Bucket(stats.staleness(), 0), (step + 1) * kWorkers);
  }
}

TEST(ShardJobSyncTest, PullForTheNextStepWaitsForTheStepsLastGradient) {
  constexpr int kWorkers = 4;
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::SYNC, kWorkers));
  ASSERT_NE(job, nullptr);
  const std::vector<float> initial = Weights(job.get());

  PullOutcome waiting;
  const int64_t waiting_id = StartPull(job.get(), MakePull(0, 1), &waiting);
  EXPECT_NE(waiting_id, 0);
  EXPECT_EQ(waiting.calls, 0);
  EXPECT_EQ(job->Stats().parked_pulls(), 1);

  std::vector<std::vector<float>> gradients;
  for (int w = 0; w < kWorkers; ++w) gradients.push_back(DyadicGradient(100 + w));
  for (int w = 0; w < 2; ++w) {
    absl::StatusOr<PushResponse> response =
        PushGradient(job.get(), MakeHeader(*job, w, 1, 0, 0), gradients[w]);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->outcome(), PushResponse::ACCUMULATED);
  }
  EXPECT_EQ(waiting.calls, 0);
  EXPECT_THAT(job->Stats().waiting_for(), ElementsAre(2, 3));

  // A pull whose deadline passes hears who is missing.
  PullOutcome expired;
  const int64_t expired_id = StartPull(job.get(), MakePull(1, 1), &expired);
  ASSERT_NE(expired_id, 0);
  EXPECT_NE(expired_id, waiting_id);
  job->ExpireWaiter(expired_id);
  ASSERT_EQ(expired.calls, 1);
  EXPECT_EQ(expired.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(expired.result.status().message(), HasSubstr("missing workers 2, 3"));
  job->ExpireWaiter(expired_id);  // No longer parked: nothing happens.
  EXPECT_EQ(expired.calls, 1);
  EXPECT_FALSE(job->CancelWaiter(expired_id, absl::CancelledError("late")));
  EXPECT_EQ(job->Stats().parked_pulls(), 1);

  absl::StatusOr<PushResponse> response =
      PushGradient(job.get(), MakeHeader(*job, 2, 1, 0, 0), gradients[2]);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(waiting.calls, 0);
  response = PushGradient(job.get(), MakeHeader(*job, 3, 1, 0, 0), gradients[3]);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);

  // The last gradient answered the parked pull, with the new values.
  ASSERT_EQ(waiting.calls, 1);
  ASSERT_TRUE(waiting.result.ok()) << waiting.result.status();
  EXPECT_EQ(waiting.result->header.version(), 1);
  EXPECT_EQ(waiting.result->header.step(), 1);
  std::vector<float> mean(kNumParameters);
  for (int64_t i = 0; i < kNumParameters; ++i) {
    mean[i] = (gradients[0][i] + gradients[1][i] + gradients[2][i] + gradients[3][i]) * 0.25f;
  }
  EXPECT_EQ(Values(*waiting.result), SgdStep(initial, kLearningRate, mean));
  EXPECT_EQ(Values(*waiting.result), Weights(job.get()));
  EXPECT_EQ(job->Stats().parked_pulls(), 0);
  EXPECT_FALSE(job->CancelWaiter(waiting_id, absl::CancelledError("late")));
  EXPECT_EQ(waiting.calls, 1);

  // A pull for a step already applied does not wait.
  PullOutcome now;
  EXPECT_EQ(StartPull(job.get(), MakePull(2, 1), &now), 0);
  EXPECT_EQ(now.calls, 1);
}

TEST(ShardJobSyncTest, AStepNeedsOnlyTheWorkersStillInTheJob) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::SYNC, 3));
  ASSERT_NE(job, nullptr);
  const std::vector<float> before = Weights(job.get());
  const std::vector<float> g0 = DyadicGradient(1);
  const std::vector<float> g1 = DyadicGradient(2);
  for (int worker : {0, 1}) {
    absl::StatusOr<PushResponse> response = PushGradient(
        job.get(), MakeHeader(*job, worker, 1, 0, 0), worker == 0 ? g0 : g1);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->outcome(), PushResponse::ACCUMULATED);
  }
  PullOutcome next_step;
  ASSERT_NE(StartPull(job.get(), MakePull(0, 1), &next_step), 0);
  EXPECT_THAT(job->Stats().waiting_for(), ElementsAre(2));

  // Worker 2 stops (its time limit, say): step 0 is complete without it.
  ASSERT_TRUE(job->Leave(2, job->spec().run_id()).ok());
  EXPECT_EQ(next_step.calls, 1);
  ASSERT_TRUE(next_step.result.ok()) << next_step.result.status();
  EXPECT_EQ(next_step.result->header.step(), 1);
  const std::vector<float> after_step0 = SgdStep(before, kLearningRate, MeanOfPair(g0, g1));
  EXPECT_EQ(Weights(job.get()), after_step0);
  JobStats stats = job->Stats();
  EXPECT_EQ(stats.step(), 1);
  EXPECT_EQ(stats.applied_gradients(), 2);
  EXPECT_THAT(stats.waiting_for(), ElementsAre(0, 1));

  // Later steps need the two workers left.
  absl::StatusOr<PushResponse> response =
      PushGradient(job.get(), MakeHeader(*job, 0, 2, 1, 1), g1);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::ACCUMULATED);
  response = PushGradient(job.get(), MakeHeader(*job, 1, 2, 1, 1), g0);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  EXPECT_EQ(response->step(), 2);
  EXPECT_EQ(Weights(job.get()), SgdStep(after_step0, kLearningRate, MeanOfPair(g1, g0)));
}

TEST(ShardJobSyncTest, AWorkerThatLeavesAfterGivingItsGradientStillWaitsForTheOthers) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::SYNC, 2));
  ASSERT_NE(job, nullptr);
  const std::vector<float> before = Weights(job.get());
  const std::vector<float> g0 = DyadicGradient(3);
  const std::vector<float> g1 = DyadicGradient(4);
  // Worker 0's last step: its gradient, then it stops. The step still needs worker 1's.
  ASSERT_TRUE(PushGradient(job.get(), MakeHeader(*job, 0, 1, 0, 0), g0).ok());
  ASSERT_TRUE(job->Leave(0, job->spec().run_id()).ok());
  EXPECT_EQ(job->Stats().step(), 0);
  EXPECT_EQ(Weights(job.get()), before);
  absl::StatusOr<PushResponse> response =
      PushGradient(job.get(), MakeHeader(*job, 1, 1, 0, 0), g1);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  EXPECT_EQ(Weights(job.get()), SgdStep(before, kLearningRate, MeanOfPair(g0, g1)));
  // Then worker 1 goes on alone.
  response = PushGradient(job.get(), MakeHeader(*job, 1, 2, 1, 1), g1);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  EXPECT_EQ(job->Stats().step(), 2);
  EXPECT_TRUE(job->Stats().dropped().empty());
}

TEST(ShardJobSyncTest, CancelledPullsAreAnsweredOnceWithTheStatus) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::SYNC, 2));
  ASSERT_NE(job, nullptr);
  PullOutcome first, second, third;
  int64_t first_id = StartPull(job.get(), MakePull(0, 1), &first);
  int64_t second_id = StartPull(job.get(), MakePull(1, 1), &second);
  int64_t third_id = StartPull(job.get(), MakePull(1, 2), &third);
  ASSERT_NE(first_id, 0);
  ASSERT_NE(second_id, 0);
  ASSERT_NE(third_id, 0);

  EXPECT_TRUE(job->CancelWaiter(first_id, absl::CancelledError("client went away")));
  ASSERT_EQ(first.calls, 1);
  EXPECT_EQ(first.result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(job->CancelWaiter(first_id, absl::CancelledError("again")));

  job->CancelAllWaiters(absl::AbortedError("job deleted"));
  EXPECT_EQ(first.calls, 1);
  ASSERT_EQ(second.calls, 1);
  ASSERT_EQ(third.calls, 1);
  EXPECT_EQ(second.result.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(third.result.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(job->Stats().parked_pulls(), 0);

  // A pull that comes after (it found the copy serving just before) parks no more: nothing
  // would wake it. One that is ready is answered; after Reopen (the copy serves again) a pull
  // parks again.
  PullOutcome late, ready, reopened;
  EXPECT_EQ(StartPull(job.get(), MakePull(0, 1), &late), 0);
  ASSERT_EQ(late.calls, 1);
  EXPECT_EQ(late.result.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(StartPull(job.get(), MakePull(0, 0), &ready), 0);
  ASSERT_EQ(ready.calls, 1);
  EXPECT_TRUE(ready.result.ok()) << ready.result.status();
  job->Reopen();
  EXPECT_NE(StartPull(job.get(), MakePull(0, 1), &reopened), 0);
  EXPECT_EQ(reopened.calls, 0);
  job->CancelAllWaiters(absl::CancelledError("test over"));
  EXPECT_EQ(reopened.calls, 1);
}

TEST(ShardJobSyncTest, BackupWorkersApplyTheFirstGradientsAndDropTheRest) {
  constexpr int kWorkers = 3;
  constexpr int kStepsWithLateWorker = 4;
  constexpr int kStepsWithoutWorker2 = 3;
  ParameterSpec spec = MakeSpec(ConsistencyConfig::SYNC, kWorkers);
  spec.mutable_consistency()->set_replicas_to_aggregate(2);
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);
  std::vector<int64_t> next_push_id(kWorkers, 1);
  std::vector<int64_t> applied_by_worker(kWorkers, 0);

  int64_t step = 0;
  for (; step < kStepsWithLateWorker; ++step) {
    const int late = static_cast<int>(step % kWorkers);
    std::vector<int> on_time;
    for (int w = 0; w < kWorkers; ++w) {
      if (w != late) on_time.push_back(w);
    }
    std::vector<int64_t> read_version(kWorkers);
    for (int w = 0; w < kWorkers; ++w) {
      absl::StatusOr<ShardJob::PullSnapshot> pulled = PullNow(job.get(), MakePull(w, step));
      ASSERT_TRUE(pulled.ok()) << pulled.status();
      read_version[w] = pulled->header.version();
    }
    const std::vector<float> before = Weights(job.get());
    std::vector<std::vector<float>> gradients(kWorkers);
    for (int w = 0; w < kWorkers; ++w) {
      gradients[w] = DyadicGradient(static_cast<uint32_t>(10 * step + w));
    }

    absl::StatusOr<PushResponse> response = PushGradient(
        job.get(),
        MakeHeader(*job, on_time[0], next_push_id[on_time[0]]++, read_version[on_time[0]], step),
        gradients[on_time[0]]);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->outcome(), PushResponse::ACCUMULATED);
    response = PushGradient(
        job.get(),
        MakeHeader(*job, on_time[1], next_push_id[on_time[1]]++, read_version[on_time[1]], step),
        gradients[on_time[1]]);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
    EXPECT_EQ(response->step(), step + 1);
    ++applied_by_worker[on_time[0]];
    ++applied_by_worker[on_time[1]];
    const std::vector<float> expected =
        SgdStep(before, kLearningRate, MeanOfPair(gradients[on_time[0]], gradients[on_time[1]]));
    EXPECT_EQ(Weights(job.get()), expected) << "step " << step;

    // The late worker's gradient is for a step already applied.
    response = PushGradient(job.get(),
                            MakeHeader(*job, late, next_push_id[late]++, read_version[late], step),
                            gradients[late]);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->outcome(), PushResponse::DROPPED);
    EXPECT_EQ(response->drop_reason(), "stale_step");
    EXPECT_EQ(response->step(), step + 1);
    EXPECT_EQ(Weights(job.get()), expected) << "a dropped gradient changed the weights";

    JobStats stats = job->Stats();
    EXPECT_EQ(stats.version(), step + 1);
    EXPECT_EQ(stats.step(), step + 1);
    EXPECT_EQ(stats.applied_gradients(), 2 * (step + 1));
    EXPECT_EQ(CountOf(stats.dropped(), "stale_step"), step + 1);
  }

  // Worker 2 stops pushing: the steps go on without it.
  for (; step < kStepsWithLateWorker + kStepsWithoutWorker2; ++step) {
    const std::vector<float> before = Weights(job.get());
    std::vector<float> g0 = DyadicGradient(static_cast<uint32_t>(500 + step));
    std::vector<float> g1 = DyadicGradient(static_cast<uint32_t>(600 + step));
    absl::StatusOr<PushResponse> response =
        PushGradient(job.get(), MakeHeader(*job, 0, next_push_id[0]++, step, step), g0);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->outcome(), PushResponse::ACCUMULATED);
    response = PushGradient(job.get(), MakeHeader(*job, 1, next_push_id[1]++, step, step), g1);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
    ++applied_by_worker[0];
    ++applied_by_worker[1];
    EXPECT_EQ(Weights(job.get()), SgdStep(before, kLearningRate, MeanOfPair(g0, g1)));
  }

  JobStats stats = job->Stats();
  EXPECT_EQ(stats.step(), kStepsWithLateWorker + kStepsWithoutWorker2);
  EXPECT_EQ(stats.version(), kStepsWithLateWorker + kStepsWithoutWorker2);
  EXPECT_EQ(stats.applied_gradients(), 2 * (kStepsWithLateWorker + kStepsWithoutWorker2));
  EXPECT_EQ(CountOf(stats.dropped(), "stale_step"), kStepsWithLateWorker);
  ASSERT_EQ(stats.workers_size(), kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(stats.workers(w).applied(), applied_by_worker[w]) << "worker " << w;
  }
}

// ----- ASYNC -----

// One push of a round robin.
struct AsyncPush {
  int round = 0;
  int worker = 0;
  std::vector<float> gradient;
  std::vector<float> before;
  std::vector<float> after;
  int64_t version_before = 0;
  int64_t version_after = 0;
  absl::StatusOr<PushResponse> response = absl::UnknownError("not pushed");
};

// Drives `num_workers` workers in a fixed order: every worker pulls; then, `rounds` times,
// each worker in turn pushes a gradient computed from its last pull and pulls again. After the
// first round each gradient has num_workers - 1 updates applied since its pull.
std::vector<AsyncPush> RunRoundRobin(ShardJob* job, int num_workers, int rounds) {
  std::vector<int64_t> read_version(num_workers);
  for (int w = 0; w < num_workers; ++w) {
    absl::StatusOr<ShardJob::PullSnapshot> pulled = PullNow(job, MakePull(w));
    EXPECT_TRUE(pulled.ok()) << pulled.status();
    read_version[w] = pulled.ok() ? pulled->header.version() : 0;
  }
  std::vector<AsyncPush> pushes;
  for (int round = 0; round < rounds; ++round) {
    for (int w = 0; w < num_workers; ++w) {
      AsyncPush push;
      push.round = round;
      push.worker = w;
      push.gradient = DyadicGradient(static_cast<uint32_t>(1000 + round * num_workers + w));
      push.before = Weights(job);
      push.version_before = job->Stats().version();
      push.response =
          PushGradient(job, MakeHeader(*job, w, round + 1, read_version[w]), push.gradient);
      push.after = Weights(job);
      push.version_after = job->Stats().version();
      absl::StatusOr<ShardJob::PullSnapshot> pulled = PullNow(job, MakePull(w));
      EXPECT_TRUE(pulled.ok()) << pulled.status();
      read_version[w] = pulled.ok() ? pulled->header.version() : 0;
      pushes.push_back(std::move(push));
    }
  }
  return pushes;
}

TEST(ShardJobAsyncTest, RoundRobinGradientsHaveStalenessNumWorkersMinusOne) {
  constexpr int kWorkers = 3;
  constexpr int kRounds = 4;
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::ASYNC, kWorkers));
  ASSERT_NE(job, nullptr);
  for (const AsyncPush& push : RunRoundRobin(job.get(), kWorkers, kRounds)) {
    SCOPED_TRACE(testing::Message() << "round " << push.round << " worker " << push.worker);
    ASSERT_TRUE(push.response.ok()) << push.response.status();
    EXPECT_EQ(push.response->outcome(), PushResponse::APPLIED);
    EXPECT_EQ(push.response->staleness(), push.round == 0 ? push.worker : kWorkers - 1);
    EXPECT_EQ(push.version_after, push.version_before + 1);
    EXPECT_EQ(push.response->version(), push.version_after);
    EXPECT_EQ(push.after, SgdStep(push.before, kLearningRate, push.gradient));
  }
  JobStats stats = job->Stats();
  EXPECT_EQ(stats.version(), kWorkers * kRounds);
  EXPECT_EQ(stats.applied_gradients(), kWorkers * kRounds);
  EXPECT_EQ(stats.staleness().total(), kWorkers * kRounds);
  EXPECT_EQ(Bucket(stats.staleness(), 0), 1);
  EXPECT_EQ(Bucket(stats.staleness(), 1), 1);
  EXPECT_EQ(Bucket(stats.staleness(), 2), 1 + kWorkers * (kRounds - 1));
  EXPECT_EQ(stats.staleness().counts_size(), kWorkers);
  EXPECT_EQ(stats.staleness().max(), kWorkers - 1);
  ASSERT_EQ(stats.workers_size(), kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    const StalenessHistogramData& histogram = stats.workers(w).staleness();
    EXPECT_EQ(histogram.total(), kRounds) << "worker " << w;
    EXPECT_EQ(Bucket(histogram, kWorkers - 1), w == kWorkers - 1 ? kRounds : kRounds - 1)
        << "worker " << w;
    EXPECT_EQ(stats.workers(w).applied(), kRounds);
  }
}

TEST(ShardJobAsyncTest, APullsValuesStayAsReadWhilePushesUpdateTheSlices) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::ASYNC, 1));
  ASSERT_NE(job, nullptr);
  // A pull whose answer is still being sent (gRPC holds keep_alive) while two pushes apply.
  absl::StatusOr<ShardJob::PullSnapshot> held = PullNow(job.get(), MakePull(0));
  ASSERT_TRUE(held.ok()) << held.status();
  const std::vector<float> read = Values(*held);
  std::vector<float> expected = read;
  for (int push_id = 1; push_id <= 2; ++push_id) {
    std::vector<float> gradient = DyadicGradient(push_id);
    PushRequestHeader header = MakeHeader(*job, 0, push_id, push_id - 1);
    absl::StatusOr<PushResponse> response = PushGradient(job.get(), header, gradient);
    ASSERT_TRUE(response.ok()) << response.status();
    expected = SgdStep(expected, kLearningRate, gradient);
  }
  EXPECT_EQ(Values(*held), read);
  EXPECT_EQ(Weights(job.get()), expected);
  // Once the held pull is gone, updates go to the buffer that later pulls read.
  held = absl::CancelledError("sent");
  std::vector<float> gradient = DyadicGradient(3);
  ASSERT_TRUE(PushGradient(job.get(), MakeHeader(*job, 0, 3, 2), gradient).ok());
  EXPECT_EQ(Weights(job.get()), SgdStep(expected, kLearningRate, gradient));
}

TEST(ShardJobAsyncTest, InverseStalenessLearningRateDividesByTheStaleness) {
  constexpr int kWorkers = 3;
  ParameterSpec spec = MakeSpec(ConsistencyConfig::ASYNC, kWorkers);
  spec.mutable_consistency()->set_staleness_learning_rate(ConsistencyConfig::INVERSE);
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);
  for (const AsyncPush& push : RunRoundRobin(job.get(), kWorkers, 3)) {
    SCOPED_TRACE(testing::Message() << "round " << push.round << " worker " << push.worker);
    ASSERT_TRUE(push.response.ok()) << push.response.status();
    EXPECT_EQ(push.response->outcome(), PushResponse::APPLIED);
    const int64_t staleness = push.response->staleness();
    const float learning_rate =
        staleness > 0 ? kLearningRate / static_cast<float>(staleness) : kLearningRate;
    EXPECT_EQ(push.after, SgdStep(push.before, learning_rate, push.gradient));
  }
}

TEST(ShardJobAsyncTest, MaxStalenessDropsStalerGradients) {
  constexpr int kWorkers = 3;
  constexpr int kRounds = 4;
  ParameterSpec spec = MakeSpec(ConsistencyConfig::ASYNC, kWorkers);
  spec.mutable_consistency()->set_max_staleness(1);
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);
  int64_t dropped = 0;
  for (const AsyncPush& push : RunRoundRobin(job.get(), kWorkers, kRounds)) {
    SCOPED_TRACE(testing::Message() << "round " << push.round << " worker " << push.worker);
    ASSERT_TRUE(push.response.ok()) << push.response.status();
    if (push.worker == kWorkers - 1) {
      // Two updates (workers 0 and 1) since its pull, every round.
      EXPECT_EQ(push.response->staleness(), 2);
      EXPECT_EQ(push.response->outcome(), PushResponse::DROPPED);
      EXPECT_EQ(push.response->drop_reason(), "max_staleness");
      EXPECT_EQ(push.after, push.before);
      EXPECT_EQ(push.version_after, push.version_before);
      ++dropped;
    } else {
      EXPECT_LE(push.response->staleness(), 1);
      EXPECT_EQ(push.response->outcome(), PushResponse::APPLIED);
      EXPECT_EQ(push.after, SgdStep(push.before, kLearningRate, push.gradient));
    }
  }
  JobStats stats = job->Stats();
  EXPECT_EQ(dropped, kRounds);
  EXPECT_EQ(CountOf(stats.dropped(), "max_staleness"), kRounds);
  EXPECT_EQ(stats.version(), 2 * kRounds);
  EXPECT_EQ(stats.applied_gradients(), 2 * kRounds);
  EXPECT_EQ(stats.workers(kWorkers - 1).applied(), 0);
  EXPECT_EQ(stats.staleness().max(), 1);
}

// A traced job (ParameterSpec.trace): each gradient applied or dropped, with its staleness.
TEST(ShardJobAsyncTest, ATraceRecordsEachApplyAndDropWithItsStaleness) {
  constexpr int kWorkers = 3;
  constexpr int kRounds = 4;
  ParameterSpec spec = MakeSpec(ConsistencyConfig::ASYNC, kWorkers);
  spec.mutable_consistency()->set_max_staleness(1);
  spec.set_trace(true);
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);
  for (const AsyncPush& push : RunRoundRobin(job.get(), kWorkers, kRounds)) {
    ASSERT_TRUE(push.response.ok()) << push.response.status();
  }
  int applies = 0, drops = 0;
  const Trace trace = job->GetTrace();
  for (const TraceEvent& event : trace.events()) {
    if (event.kind() == TraceEvent::DROP) {
      ++drops;
      EXPECT_EQ(event.worker(), kWorkers - 1);  // Two updates since its pull, every round.
      EXPECT_EQ(event.staleness(), 2);
      EXPECT_EQ(event.duration_us(), 0);
    } else {
      ASSERT_EQ(event.kind(), TraceEvent::APPLY);
      ++applies;
      EXPECT_LE(event.staleness(), 1);
      EXPECT_EQ(event.version(), applies);
    }
  }
  EXPECT_EQ(drops, kRounds);
  EXPECT_EQ(applies, 2 * kRounds);
  // An untraced job's shard records nothing.
  spec.set_trace(false);
  std::unique_ptr<ShardJob> untraced = CreateJob(spec);
  ASSERT_NE(untraced, nullptr);
  RunRoundRobin(untraced.get(), kWorkers, 1);
  EXPECT_EQ(untraced->GetTrace().events_size(), 0);
}

// ----- SSP -----

TEST(ShardJobSspTest, WorkerWaitsWhenMoreThanTheBoundAheadOfTheSlowest) {
  ParameterSpec spec = MakeSpec(ConsistencyConfig::SSP, 2);
  spec.mutable_consistency()->set_ssp_bound(2);
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);

  // Worker 0 runs clocks 0, 1 and 2 while worker 1 stays at clock 0.
  for (int64_t clock = 0; clock < 3; ++clock) {
    PullOutcome pulled;
    ASSERT_EQ(StartPull(job.get(), MakePull(0, 0, clock), &pulled), 0) << "clock " << clock;
    ASSERT_EQ(pulled.calls, 1);
    ASSERT_TRUE(pulled.result.ok()) << pulled.result.status();
    absl::StatusOr<PushResponse> response = PushGradient(
        job.get(), MakeHeader(*job, 0, clock + 1, pulled.result->header.version(), 0, clock),
        DyadicGradient(static_cast<uint32_t>(clock)));
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  }
  EXPECT_EQ(job->Stats().workers(0).clock(), 3);

  // Clock 3 would be 3 ahead of worker 1.
  PullOutcome expired;
  const int64_t expired_id = StartPull(job.get(), MakePull(0, 0, 3), &expired);
  ASSERT_NE(expired_id, 0);
  job->ExpireWaiter(expired_id);
  ASSERT_EQ(expired.calls, 1);
  EXPECT_EQ(expired.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(expired.result.status().message(), HasSubstr("waiting for workers 1 "));

  PullOutcome waiting;
  const int64_t waiting_id = StartPull(job.get(), MakePull(0, 0, 3), &waiting);
  ASSERT_NE(waiting_id, 0);
  EXPECT_EQ(waiting.calls, 0);
  const std::vector<float> before = Weights(job.get());
  const std::vector<float> gradient = DyadicGradient(77);
  absl::StatusOr<PushResponse> response =
      PushGradient(job.get(), MakeHeader(*job, 1, 1, 0, 0, 0), gradient);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  EXPECT_EQ(response->staleness(), 3);

  ASSERT_EQ(waiting.calls, 1);
  ASSERT_TRUE(waiting.result.ok()) << waiting.result.status();
  EXPECT_EQ(waiting.result->header.version(), 4);
  EXPECT_EQ(Values(*waiting.result), SgdStep(before, kLearningRate, gradient));
  EXPECT_FALSE(job->CancelWaiter(waiting_id, absl::CancelledError("late")));
  EXPECT_EQ(job->Stats().workers(1).clock(), 1);
}

TEST(ShardJobSspTest, BoundZeroIsLockstep) {
  ParameterSpec spec = MakeSpec(ConsistencyConfig::SSP, 2);
  spec.mutable_consistency()->set_ssp_bound(0);
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);

  for (int64_t clock = 0; clock < 3; ++clock) {
    // Both at `clock`: both may pull.
    std::vector<int64_t> read_version(2);
    for (int w = 0; w < 2; ++w) {
      absl::StatusOr<ShardJob::PullSnapshot> pulled = PullNow(job.get(), MakePull(w, 0, clock));
      ASSERT_TRUE(pulled.ok()) << pulled.status() << " clock " << clock;
      read_version[w] = pulled->header.version();
    }
    absl::StatusOr<PushResponse> response =
        PushGradient(job.get(), MakeHeader(*job, 0, clock + 1, read_version[0], 0, clock),
                     DyadicGradient(static_cast<uint32_t>(clock)));
    ASSERT_TRUE(response.ok()) << response.status();

    // Worker 0 is at clock + 1 and must wait for worker 1 to push `clock`.
    PullOutcome waiting;
    const int64_t id = StartPull(job.get(), MakePull(0, 0, clock + 1), &waiting);
    ASSERT_NE(id, 0) << "clock " << clock;
    EXPECT_EQ(waiting.calls, 0);
    response = PushGradient(job.get(), MakeHeader(*job, 1, clock + 1, read_version[1], 0, clock),
                            DyadicGradient(static_cast<uint32_t>(clock + 50)));
    ASSERT_TRUE(response.ok()) << response.status();
    ASSERT_EQ(waiting.calls, 1);
    ASSERT_TRUE(waiting.result.ok()) << waiting.result.status();
    EXPECT_EQ(waiting.result->header.version(), 2 * (clock + 1));
  }
}

TEST(ShardJobSspTest, OutOfOrderClockIsRejectedAndChangesNothing) {
  ParameterSpec spec = MakeSpec(ConsistencyConfig::SSP, 2);
  spec.mutable_consistency()->set_ssp_bound(1);
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);

  // Ahead of its clock (0).
  JobState before = Observe(job.get());
  absl::StatusOr<PushResponse> response =
      PushGradient(job.get(), MakeHeader(*job, 0, 1, 0, 0, 1), DyadicGradient(1));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition);
  ExpectUnchanged(job.get(), before);
  EXPECT_EQ(CountOf(job->Stats().rejected(), "clock"), 1);

  // The right clock is accepted, then the same clock again is not.
  response = PushGradient(job.get(), MakeHeader(*job, 0, 1, 0, 0, 0), DyadicGradient(2));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  before = Observe(job.get());
  response = PushGradient(job.get(), MakeHeader(*job, 0, 2, 1, 0, 0), DyadicGradient(3));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition);
  ExpectUnchanged(job.get(), before);
  EXPECT_EQ(CountOf(job->Stats().rejected(), "clock"), 2);
}

// ----- SOFTSYNC -----

TEST(ShardJobSoftsyncTest, AppliesTheMeanOfEveryCGradients) {
  constexpr int kWorkers = 4;
  ParameterSpec spec = MakeSpec(ConsistencyConfig::SOFTSYNC, kWorkers);
  spec.mutable_consistency()->set_softsync_n(2);  // c = 4 / 2 = 2.
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);

  std::vector<int64_t> next_push_id(kWorkers, 1);
  std::vector<float> pending;
  std::vector<float> before;
  for (int push = 0; push < 8; ++push) {
    const int worker = (push * 3) % kWorkers;  // 0, 3, 2, 1, ...: any order counts.
    const std::vector<float> gradient = DyadicGradient(static_cast<uint32_t>(300 + push));
    if (push % 2 == 0) before = Weights(job.get());
    absl::StatusOr<ShardJob::PullSnapshot> pulled = PullNow(job.get(), MakePull(worker));
    ASSERT_TRUE(pulled.ok()) << pulled.status();
    absl::StatusOr<PushResponse> response = PushGradient(
        job.get(), MakeHeader(*job, worker, next_push_id[worker]++, pulled->header.version()),
        gradient);
    ASSERT_TRUE(response.ok()) << response.status();
    if (push % 2 == 0) {
      EXPECT_EQ(response->outcome(), PushResponse::ACCUMULATED) << "push " << push;
      EXPECT_EQ(Weights(job.get()), before);
      pending = gradient;
    } else {
      EXPECT_EQ(response->outcome(), PushResponse::APPLIED) << "push " << push;
      EXPECT_EQ(Weights(job.get()), SgdStep(before, kLearningRate, MeanOfPair(pending, gradient)));
    }
    EXPECT_EQ(job->Stats().version(), (push + 1) / 2) << "push " << push;
  }
  EXPECT_EQ(job->Stats().applied_gradients(), 8);
}

// The job's last gradients: an aggregate that no worker is left to fill (each left, or the
// last one was lost) is applied as it stands, rather than dropped with the batches it trained.
TEST(ShardJobSoftsyncTest, AnAggregateNoWorkerCanFillIsAppliedWhenTheLastWorkerGoes) {
  for (const bool last_is_lost : {false, true}) {
    SCOPED_TRACE(last_is_lost ? "the last worker is lost" : "every worker leaves");
    constexpr int kWorkers = 3;
    ParameterSpec spec = MakeSpec(ConsistencyConfig::SOFTSYNC, kWorkers);
    spec.mutable_consistency()->set_softsync_n(1);  // c = 3.
    spec.set_trace(true);
    std::unique_ptr<ShardJob> job = CreateJob(spec);
    ASSERT_NE(job, nullptr);
    const std::vector<float> before = Weights(job.get());
    std::vector<std::vector<float>> gradients;
    for (int worker = 0; worker < 2; ++worker) {
      gradients.push_back(DyadicGradient(static_cast<uint32_t>(40 + worker)));
      absl::StatusOr<PushResponse> response =
          PushGradient(job.get(), MakeHeader(*job, worker, 1, 0), gradients.back());
      ASSERT_TRUE(response.ok()) << response.status();
      EXPECT_EQ(response->outcome(), PushResponse::ACCUMULATED);
    }
    ASSERT_TRUE(job->Leave(0, spec.run_id()).ok());
    ASSERT_TRUE(job->Leave(1, spec.run_id()).ok());
    EXPECT_EQ(Weights(job.get()), before) << "worker 2 may still fill it";
    EXPECT_EQ(job->Stats().version(), 0);
    if (last_is_lost) {
      job->LoseWorkers({2});
    } else {
      ASSERT_TRUE(job->Leave(2, spec.run_id()).ok());
    }
    EXPECT_EQ(Weights(job.get()),
              SgdStep(before, kLearningRate, MeanOfPair(gradients[0], gradients[1])));
    EXPECT_EQ(job->Stats().version(), 1);
    EXPECT_EQ(job->Stats().applied_gradients(), 2);
    // The trace: the two gradients added, then the aggregate (worker -1) the last one's going
    // applied, at version 1.
    const Trace trace = job->GetTrace();
    ASSERT_EQ(trace.events_size(), 3);
    EXPECT_EQ(trace.events(0).kind(), TraceEvent::ACCUMULATE);
    EXPECT_EQ(trace.events(1).kind(), TraceEvent::ACCUMULATE);
    EXPECT_EQ(trace.events(2).kind(), TraceEvent::APPLY);
    EXPECT_EQ(trace.events(2).worker(), -1);
    EXPECT_EQ(trace.events(2).version(), 1);
  }
}

TEST(ShardJobSoftsyncTest, NAtLeastNumWorkersAppliesEachGradient) {
  ParameterSpec spec = MakeSpec(ConsistencyConfig::SOFTSYNC, 4);
  spec.mutable_consistency()->set_softsync_n(8);  // c = max(1, 4 / 8) = 1.
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);
  const std::vector<float> before = Weights(job.get());
  const std::vector<float> gradient = DyadicGradient(9);
  absl::StatusOr<PushResponse> response =
      PushGradient(job.get(), MakeHeader(*job, 0, 1, 0), gradient);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  EXPECT_EQ(Weights(job.get()), SgdStep(before, kLearningRate, gradient));
  EXPECT_EQ(job->Stats().version(), 1);
}

// ----- Bad input -----

TEST(ShardJobBadInputTest, PushBufferRejectsSlicesThatDoNotMatchThePlacement) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::ASYNC, 2));
  ASSERT_NE(job, nullptr);
  const PushRequestHeader good = MakeHeader(*job, 0, 1, 0);
  std::vector<PushRequestHeader> bad(5, good);
  bad[0].mutable_slices()->RemoveLast();        // A slice missing.
  bad[1].mutable_slices(0)->set_row_count(7);   // Wrong rows.
  bad[2].mutable_slices(1)->set_variable("c");  // Unknown variable.
  bad[3].mutable_slices()->SwapElements(0, 1);  // Wrong order.
  *bad[4].add_slices() = good.slices(0);        // A slice too many.
  const JobState before = Observe(job.get());
  for (size_t i = 0; i < bad.size(); ++i) {
    std::vector<absl::Span<float>> destinations;
    absl::StatusOr<std::shared_ptr<std::vector<float>>> buffer =
        job->PushBuffer(bad[i], &destinations);
    EXPECT_EQ(buffer.status().code(), absl::StatusCode::kInvalidArgument) << "case " << i;
  }
  ExpectUnchanged(job.get(), before);
  EXPECT_EQ(CountOf(job->Stats().rejected(), "shape"), static_cast<int64_t>(bad.size()));

  // A gradient of the wrong length handed to Push directly.
  std::vector<float> short_gradient(kNumParameters - 1, 1.0f);
  absl::StatusOr<PushResponse> response = job->Push(good, short_gradient);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  ExpectUnchanged(job.get(), before);
  EXPECT_EQ(CountOf(job->Stats().rejected(), "shape"), static_cast<int64_t>(bad.size()) + 1);
}

TEST(ShardJobBadInputTest, NonFiniteGradientsAreRejectedAndNotAggregated) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::SYNC, 2));
  ASSERT_NE(job, nullptr);
  const std::vector<float> initial = Weights(job.get());
  const JobState before = Observe(job.get());

  std::vector<float> nan_gradient = DyadicGradient(1);
  nan_gradient[5] = std::numeric_limits<float>::quiet_NaN();
  absl::StatusOr<PushResponse> response =
      PushGradient(job.get(), MakeHeader(*job, 0, 1, 0, 0), nan_gradient);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(response.status().message(), HasSubstr("NaN"));
  ExpectUnchanged(job.get(), before);

  std::vector<float> inf_gradient = DyadicGradient(2);
  inf_gradient[kNumParameters - 1] = -std::numeric_limits<float>::infinity();
  response = PushGradient(job.get(), MakeHeader(*job, 0, 2, 0, 0), inf_gradient);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(response.status().message(), HasSubstr("Inf in variable \"b\""));
  ExpectUnchanged(job.get(), before);
  EXPECT_EQ(CountOf(job->Stats().rejected(), "non_finite"), 2);

  // The step still needs both workers, and applies only their finite gradients.
  const std::vector<float> g0 = DyadicGradient(3);
  const std::vector<float> g1 = DyadicGradient(4);
  response = PushGradient(job.get(), MakeHeader(*job, 0, 3, 0, 0), g0);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::ACCUMULATED);
  response = PushGradient(job.get(), MakeHeader(*job, 1, 1, 0, 0), g1);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  EXPECT_EQ(Weights(job.get()), SgdStep(initial, kLearningRate, MeanOfPair(g0, g1)));
}

TEST(ShardJobBadInputTest, NonFiniteGradientsAreAppliedWhenAllowed) {
  ParameterSpec spec = MakeSpec(ConsistencyConfig::ASYNC, 1);
  spec.set_allow_non_finite(true);
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);
  std::vector<float> gradient(kNumParameters, 0.0f);
  gradient[3] = std::numeric_limits<float>::infinity();
  absl::StatusOr<PushResponse> response =
      PushGradient(job.get(), MakeHeader(*job, 0, 1, 0), gradient);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  std::vector<float> weights = Weights(job.get());
  EXPECT_TRUE(std::isinf(weights[3]) && weights[3] < 0);
  EXPECT_EQ(weights[2], kInitialW);
  EXPECT_EQ(job->Stats().version(), 1);
  EXPECT_EQ(CountOf(job->Stats().rejected(), "non_finite"), 0);
}

TEST(ShardJobBadInputTest, WorkerOutOfRangeIsRejected) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::ASYNC, 2));
  ASSERT_NE(job, nullptr);
  const JobState before = Observe(job.get());
  for (int worker : {-1, 2}) {
    absl::StatusOr<PushResponse> response =
        PushGradient(job.get(), MakeHeader(*job, worker, 1, 0), DyadicGradient(1));
    EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << worker;

    PullOutcome pulled;
    EXPECT_EQ(StartPull(job.get(), MakePull(worker), &pulled), 0);
    ASSERT_EQ(pulled.calls, 1);
    EXPECT_EQ(pulled.result.status().code(), absl::StatusCode::kInvalidArgument) << worker;
  }
  ExpectUnchanged(job.get(), before);
  EXPECT_EQ(CountOf(job->Stats().rejected(), "worker"), 2);
}

TEST(ShardJobBadInputTest, PushForAFutureStepIsRejected) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::SYNC, 2));
  ASSERT_NE(job, nullptr);
  const JobState before = Observe(job.get());
  absl::StatusOr<PushResponse> response =
      PushGradient(job.get(), MakeHeader(*job, 0, 1, 0, /*step=*/1), DyadicGradient(1));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition);
  ExpectUnchanged(job.get(), before);
  EXPECT_EQ(CountOf(job->Stats().rejected(), "future_step"), 1);
}

TEST(ShardJobBadInputTest, ReadVersionAheadOfTheShardIsRejected) {
  for (ConsistencyConfig::Mode mode : {ConsistencyConfig::ASYNC, ConsistencyConfig::SYNC}) {
    SCOPED_TRACE(ConsistencyConfig::Mode_Name(mode));
    std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(mode, 2));
    ASSERT_NE(job, nullptr);
    const JobState before = Observe(job.get());
    for (int64_t read_version : {int64_t{1}, int64_t{-1}}) {
      absl::StatusOr<PushResponse> response =
          PushGradient(job.get(), MakeHeader(*job, 0, 1, read_version), DyadicGradient(1));
      EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << read_version;
    }
    ExpectUnchanged(job.get(), before);
    EXPECT_EQ(CountOf(job->Stats().rejected(), "future_version"), 2);
  }
}

TEST(ShardJobBadInputTest, SecondPushForOneSyncStepIsRejected) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::SYNC, 2));
  ASSERT_NE(job, nullptr);
  const std::vector<float> initial = Weights(job.get());
  const std::vector<float> first = DyadicGradient(1);
  absl::StatusOr<PushResponse> response =
      PushGradient(job.get(), MakeHeader(*job, 0, 1, 0, 0), first);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::ACCUMULATED);

  const JobState before = Observe(job.get());
  response = PushGradient(job.get(), MakeHeader(*job, 0, 2, 0, 0), DyadicGradient(2));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition);
  ExpectUnchanged(job.get(), before);
  EXPECT_EQ(CountOf(job->Stats().rejected(), "repeated_step"), 1);

  const std::vector<float> other = DyadicGradient(3);
  response = PushGradient(job.get(), MakeHeader(*job, 1, 1, 0, 0), other);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  EXPECT_EQ(Weights(job.get()), SgdStep(initial, kLearningRate, MeanOfPair(first, other)));
}

TEST(ShardJobBadInputTest, RepeatedPushIdIsDuplicateAndAppliesNothing) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::ASYNC, 2));
  ASSERT_NE(job, nullptr);
  absl::StatusOr<PushResponse> response =
      PushGradient(job.get(), MakeHeader(*job, 0, 5, 0), DyadicGradient(1));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);

  const JobState before = Observe(job.get());
  for (int64_t push_id : {5, 4}) {
    response = PushGradient(job.get(), MakeHeader(*job, 0, push_id, 1), DyadicGradient(2));
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->outcome(), PushResponse::DUPLICATE) << push_id;
    EXPECT_EQ(response->version(), 1);
  }
  ExpectUnchanged(job.get(), before);
  EXPECT_EQ(job->Stats().workers(0).applied(), 1);
  EXPECT_EQ(job->Stats().duplicate_pushes(), 2);  // Changed nothing, and counted.

  // Ids are per worker.
  response = PushGradient(job.get(), MakeHeader(*job, 1, 5, 1), DyadicGradient(3));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
}

// A push posing as a worker with a push_id far ahead (found: one such push made the shard drop
// every later push of the real worker as a retry) is refused, counted, and changes nothing; the
// real worker's next push is applied.
TEST(ShardJobBadInputTest, APushIdFarAheadIsRefusedAndTheRealWorkerGoesOn) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::ASYNC, 2));
  ASSERT_NE(job, nullptr);
  ASSERT_TRUE(PushGradient(job.get(), MakeHeader(*job, 0, 1, 0), DyadicGradient(1)).ok());
  const JobState before = Observe(job.get());
  absl::StatusOr<PushResponse> forged =
      PushGradient(job.get(), MakeHeader(*job, 0, 1000000, 1), DyadicGradient(2));
  EXPECT_EQ(forged.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(forged.status().message(), HasSubstr("push_id 1000000 of worker 0 is more than"));
  ExpectUnchanged(job.get(), before);
  EXPECT_EQ(job->Stats().rejected().at("push_id_jump"), 1);
  absl::StatusOr<PushResponse> next =
      PushGradient(job.get(), MakeHeader(*job, 0, 2, 1), DyadicGradient(3));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->outcome(), PushResponse::APPLIED);
}

// The runs of a job id never mix: a push, pull or leave of another run (an earlier
// submission's worker still running) is refused, counted, and changes nothing.
TEST(ShardJobBadInputTest, RequestsOfAnotherRunAreRefusedAndChangeNothing) {
  ParameterSpec spec = MakeSpec(ConsistencyConfig::SYNC, 2);
  spec.set_run_id("run-2");
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);
  const JobState before = Observe(job.get());

  PushRequestHeader push = MakeHeader(*job, 0, 1, 0, 0);
  push.set_run_id("run-1");
  absl::StatusOr<PushResponse> pushed = PushGradient(job.get(), push, DyadicGradient(1));
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(pushed.status().message(),
              HasSubstr("a push of run \"run-1\" reached run \"run-2\" of this job id"));
  PullRequest pull = MakePull(0);
  pull.set_run_id("run-1");
  EXPECT_EQ(PullNow(job.get(), pull).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(job->Leave(1, "run-1").code(), absl::StatusCode::kFailedPrecondition);

  ExpectUnchanged(job.get(), before);
  JobStats stats = job->Stats();
  EXPECT_EQ(stats.rejected().at("run"), 1);
  EXPECT_FALSE(stats.workers(1).left());
  EXPECT_EQ(stats.workers(0).last_push_id(), 0);

  // The run's own requests go through.
  push.set_run_id("run-2");
  pushed = PushGradient(job.get(), push, DyadicGradient(1));
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->outcome(), PushResponse::ACCUMULATED);
  EXPECT_TRUE(job->Leave(1, "run-2").ok());
}

TEST(ShardJobSspTest, AWorkerThatLeftNoLongerHoldsTheOthersBack) {
  ParameterSpec spec = MakeSpec(ConsistencyConfig::SSP, 2);
  spec.mutable_consistency()->set_ssp_bound(0);
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);
  absl::StatusOr<PushResponse> response =
      PushGradient(job.get(), MakeHeader(*job, 0, 1, 0, 0, 0), DyadicGradient(1));
  ASSERT_TRUE(response.ok()) << response.status();
  // Worker 0 at clock 1 waits for worker 1, at clock 0, until worker 1 leaves.
  PullRequest request;
  request.set_job_id(spec.job_id());
  request.set_worker(0);
  request.set_clock(1);
  bool answered = false;
  int64_t waiter = job->Pull(request, [&](absl::StatusOr<ShardJob::PullSnapshot> result) {
    EXPECT_TRUE(result.ok()) << result.status();
    answered = true;
  });
  EXPECT_NE(waiter, 0);
  EXPECT_FALSE(answered);
  ASSERT_TRUE(job->Leave(1, job->spec().run_id()).ok());
  EXPECT_TRUE(answered);
  EXPECT_TRUE(job->Stats().workers(1).left());
  EXPECT_EQ(job->Leave(2, job->spec().run_id()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShardJobBadInputTest, PushIdBelowOneIsRejected) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::ASYNC, 2));
  ASSERT_NE(job, nullptr);
  const JobState before = Observe(job.get());
  for (int64_t push_id : {0, -3}) {
    absl::StatusOr<PushResponse> response =
        PushGradient(job.get(), MakeHeader(*job, 0, push_id, 0), DyadicGradient(1));
    ASSERT_FALSE(response.ok()) << push_id;
    EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(response.status().message().find("push_id"), absl::string_view::npos);
  }
  ExpectUnchanged(job.get(), before);
  EXPECT_EQ(CountOf(job->Stats().rejected(), "push_id"), 2);
}

TEST(ShardJobBadInputTest, RetriedSyncPushIsCountedOnce) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::SYNC, 2));
  ASSERT_NE(job, nullptr);
  const std::vector<float> initial = Weights(job.get());
  const std::vector<float> g0 = DyadicGradient(1);
  absl::StatusOr<PushResponse> response = PushGradient(job.get(), MakeHeader(*job, 0, 1, 0, 0), g0);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::ACCUMULATED);
  const JobState before = Observe(job.get());
  response = PushGradient(job.get(), MakeHeader(*job, 0, 1, 0, 0), g0);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::DUPLICATE);
  ExpectUnchanged(job.get(), before);

  const std::vector<float> g1 = DyadicGradient(2);
  response = PushGradient(job.get(), MakeHeader(*job, 1, 1, 0, 0), g1);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  EXPECT_EQ(Weights(job.get()), SgdStep(initial, kLearningRate, MeanOfPair(g0, g1)));
  EXPECT_EQ(job->Stats().applied_gradients(), 2);
}

TEST(ShardJobBadInputTest, PullOfUnknownRowsIsRejected) {
  ParameterSpec spec = MakeSpec(ConsistencyConfig::ASYNC, 1);
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);

  auto with_rows = [](const std::string& variable, int64_t row_begin, int64_t row_count) {
    PullRequest request = MakePull(0);
    SliceRef* ref = request.add_slices();
    ref->set_variable(variable);
    ref->set_row_begin(row_begin);
    ref->set_row_count(row_count);
    return request;
  };
  const JobState before = Observe(job.get());
  const std::vector<PullRequest> bad = {
      with_rows("nope", 0, 1), with_rows("w", 6, 3), with_rows("w", -1, 2),
      with_rows("w", 2, 0),    with_rows("b", 4, 1),
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    PullOutcome pulled;
    EXPECT_EQ(StartPull(job.get(), bad[i], &pulled), 0) << "case " << i;
    ASSERT_EQ(pulled.calls, 1) << "case " << i;
    EXPECT_EQ(pulled.result.status().code(), absl::StatusCode::kInvalidArgument) << "case " << i;
  }
  ExpectUnchanged(job.get(), before);

  // Rows inside a slice are fine: rows [2, 5) of "w" after one update.
  std::vector<float> gradient(kNumParameters);
  for (int64_t i = 0; i < kNumParameters; ++i) gradient[i] = static_cast<float>(i) / 8;
  ASSERT_TRUE(PushGradient(job.get(), MakeHeader(*job, 0, 1, 0), gradient).ok());
  const std::vector<float> weights = Weights(job.get());
  absl::StatusOr<ShardJob::PullSnapshot> pulled = PullNow(job.get(), with_rows("w", 2, 3));
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  ASSERT_EQ(pulled->header.slices_size(), 1);
  EXPECT_EQ(pulled->header.slices(0).row_begin(), 2);
  EXPECT_EQ(pulled->header.slices(0).row_count(), 3);
  EXPECT_EQ(Values(*pulled), std::vector<float>(weights.begin() + 8, weights.begin() + 20));
}

// A small request may not ask for an answer many times the shard's size: a pull reads each row
// once at most. Rows beyond 64 bits are refused too, their end never computed.
TEST(ShardJobBadInputTest, APullAsksForEachRowOnceAtMost) {
  std::unique_ptr<ShardJob> job = CreateJob(MakeSpec(ConsistencyConfig::ASYNC, 1));
  ASSERT_NE(job, nullptr);
  PullRequest whole = MakePull(0);
  for (const SliceRef& ref : job->SliceRefs()) *whole.add_slices() = ref;
  EXPECT_TRUE(PullNow(job.get(), whole).ok());

  PullRequest twice = whole;
  *twice.add_slices() = whole.slices(0);
  absl::StatusOr<ShardJob::PullSnapshot> refused = PullNow(job.get(), twice);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr(absl::StrCat("the pull's ", twice.slices_size(),
                                     " slices ask for more than the 36 floats ps:0 holds")));

  PullRequest far = MakePull(0);
  SliceRef* ref = far.add_slices();
  ref->set_variable("w");
  ref->set_row_begin(std::numeric_limits<int64_t>::max());
  ref->set_row_count(std::numeric_limits<int64_t>::max());
  refused = PullNow(job.get(), far);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("rows [9223372036854775807, 9223372036854775807 + 9223372036854775807) "
                        "of variable \"w\" are not inside one slice"));
}

// ----- Spec validation -----

TEST(ShardJobSpecTest, CreateRejectsInvalidSpecsNamingTheField) {
  struct Case {
    std::string field;
    std::function<void(ParameterSpec*)> mutate;
  };
  const std::vector<Case> cases = {
      {"replicas_to_aggregate",
       [](ParameterSpec* spec) {
         spec->mutable_consistency()->set_mode(ConsistencyConfig::SYNC);
         spec->mutable_consistency()->set_replicas_to_aggregate(5);
       }},
      {"replicas_to_aggregate",
       [](ParameterSpec* spec) {
         spec->mutable_consistency()->set_mode(ConsistencyConfig::SYNC);
         spec->mutable_consistency()->set_replicas_to_aggregate(-1);
       }},
      {"consistency.mode",
       [](ParameterSpec* spec) {
         spec->mutable_consistency()->set_mode(ConsistencyConfig::MODE_UNSPECIFIED);
       }},
      {"num_workers", [](ParameterSpec* spec) { spec->set_num_workers(0); }},
      {"job_id", [](ParameterSpec* spec) { spec->clear_job_id(); }},
      {"ssp_bound",
       [](ParameterSpec* spec) {
         spec->mutable_consistency()->set_mode(ConsistencyConfig::SSP);
         spec->mutable_consistency()->set_ssp_bound(-1);
       }},
      {"softsync_n",
       [](ParameterSpec* spec) {
         spec->mutable_consistency()->set_mode(ConsistencyConfig::SOFTSYNC);
         spec->mutable_consistency()->set_softsync_n(0);
       }},
      {"max_staleness",
       [](ParameterSpec* spec) { spec->mutable_consistency()->set_max_staleness(-1); }},
      {"learning_rate.base",
       [](ParameterSpec* spec) { spec->mutable_learning_rate()->clear_base(); }},
      {"variables", [](ParameterSpec* spec) { spec->clear_variables(); }},
      {"momentum",
       [](ParameterSpec* spec) {
         spec->mutable_optimizer()->set_kind(OptimizerConfig::MOMENTUM);
         spec->mutable_optimizer()->set_momentum(1.5f);
       }},
      {"dimension", [](ParameterSpec* spec) { spec->mutable_variables(0)->set_shape(1, 0); }},
  };
  for (const Case& c : cases) {
    ParameterSpec spec = MakeSpec(ConsistencyConfig::ASYNC, 4);
    c.mutate(&spec);
    absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec, 1, 0);
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(job.status().message(), HasSubstr(c.field));
  }
  // The edges that are valid.
  ParameterSpec spec = MakeSpec(ConsistencyConfig::SYNC, 4);
  spec.mutable_consistency()->set_replicas_to_aggregate(4);
  EXPECT_TRUE(ShardJob::Create(spec, 1, 0).ok());
  spec = MakeSpec(ConsistencyConfig::SSP, 4);
  spec.mutable_consistency()->set_ssp_bound(0);
  EXPECT_TRUE(ShardJob::Create(spec, 1, 0).ok());
}

TEST(ShardJobSpecTest, CreateRejectsAPsIndexOutOfRange) {
  const ParameterSpec spec = MakeSpec(ConsistencyConfig::ASYNC, 1);
  for (int ps_index : {-1, 2}) {
    absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec, 2, ps_index);
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument) << ps_index;
    EXPECT_THAT(job.status().message(), HasSubstr("ps_index"));
  }
}

// ----- Optimizers with slots -----

// Two updates through a one-worker ASYNC job with `optimizer`; `reference` gives each weight
// after them from (initial weight, first gradient, second gradient), in double.
void ExpectTwoUpdatesMatch(const OptimizerConfig& optimizer,
                           const std::function<double(double, double, double)>& reference) {
  ParameterSpec spec = MakeSpec(ConsistencyConfig::ASYNC, 1);
  *spec.mutable_optimizer() = optimizer;
  spec.mutable_learning_rate()->set_base(0.1f);
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);
  const std::vector<float> initial = Weights(job.get());
  const std::vector<float> g1 = RandomGradient(1);
  const std::vector<float> g2 = RandomGradient(2);
  ASSERT_TRUE(PushGradient(job.get(), MakeHeader(*job, 0, 1, 0), g1).ok());
  ASSERT_TRUE(PushGradient(job.get(), MakeHeader(*job, 0, 2, 1), g2).ok());
  const std::vector<float> weights = Weights(job.get());
  ASSERT_EQ(weights.size(), initial.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    double expected = reference(initial[i], g1[i], g2[i]);
    EXPECT_NEAR(weights[i], expected, 1e-6 * std::abs(expected)) << "[" << i << "]";
  }
}

TEST(ShardJobOptimizerTest, MomentumKeepsItsVelocity) {
  OptimizerConfig optimizer;
  optimizer.set_kind(OptimizerConfig::MOMENTUM);
  optimizer.set_momentum(0.9f);
  const double lr = 0.1f;
  const double momentum = 0.9f;
  ExpectTwoUpdatesMatch(optimizer, [&](double w, double g1, double g2) {
    double v = g1;
    w -= lr * v;
    v = momentum * v + g2;
    return w - lr * v;
  });
  optimizer.set_nesterov(true);
  ExpectTwoUpdatesMatch(optimizer, [&](double w, double g1, double g2) {
    double v = g1;
    w -= lr * (g1 + momentum * v);
    v = momentum * v + g2;
    return w - lr * (g2 + momentum * v);
  });
}

TEST(ShardJobOptimizerTest, AdamKeepsItsMoments) {
  OptimizerConfig optimizer;
  optimizer.set_kind(OptimizerConfig::ADAM);
  const double lr = 0.1f;
  const double beta1 = 0.9f;
  const double beta2 = 0.999f;
  const double epsilon = 1e-8f;
  ExpectTwoUpdatesMatch(optimizer, [&](double w, double g1, double g2) {
    double m = 0;
    double v = 0;
    int t = 0;
    for (double g : {g1, g2}) {
      ++t;
      m = beta1 * m + (1 - beta1) * g;
      v = beta2 * v + (1 - beta2) * g * g;
      double rate = lr * std::sqrt(1 - std::pow(beta2, t)) / (1 - std::pow(beta1, t));
      w -= rate * m / (std::sqrt(v) + epsilon);
    }
    return w;
  });
}

TEST(ShardJobOptimizerTest, AdagradKeepsItsAccumulator) {
  OptimizerConfig optimizer;
  optimizer.set_kind(OptimizerConfig::ADAGRAD);
  const double lr = 0.1f;
  const double initial_accumulator = 0.1f;
  const double epsilon = 1e-7f;
  ExpectTwoUpdatesMatch(optimizer, [&](double w, double g1, double g2) {
    double a = initial_accumulator;
    for (double g : {g1, g2}) {
      a += g * g;
      w -= lr * g / (std::sqrt(a) + epsilon);
    }
    return w;
  });
}

// ----- Concurrency -----

// MakeSpec with variables large enough that updates and reads of a slice overlap in time
// unless they are serialized: "w" [4096, 16] and "b" [16384].
ParameterSpec MakeLargeSpec(ConsistencyConfig::Mode mode, int num_workers) {
  ParameterSpec spec = MakeSpec(mode, num_workers);
  spec.mutable_variables(0)->set_shape(0, 4096);
  spec.mutable_variables(0)->set_shape(1, 16);
  spec.mutable_variables(1)->set_shape(0, 16384);
  return spec;
}

TEST(ShardJobConcurrencyTest, ConcurrentAsyncPushesAreAllApplied) {
  constexpr int kWorkers = 8;
  constexpr int kPushesPerWorker = 200;
  constexpr float kInitial = 2000.0f;
  ParameterSpec spec = MakeLargeSpec(ConsistencyConfig::ASYNC, kWorkers);
  spec.mutable_learning_rate()->set_base(1.0f);
  spec.mutable_variables(0)->mutable_initializer()->set_scale(kInitial);
  spec.mutable_variables(1)->mutable_initializer()->set_scale(kInitial);
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);
  ASSERT_GE(job->SliceRefs().size(), 2u);

  std::atomic<bool> pushing_done{false};
  std::thread puller([&] {
    int64_t last_version = 0;
    while (!pushing_done.load()) {
      absl::StatusOr<ShardJob::PullSnapshot> pulled = PullNow(job.get(), MakePull(0));
      ASSERT_TRUE(pulled.ok()) << pulled.status();
      EXPECT_GE(pulled->header.version(), last_version);
      last_version = pulled->header.version();
      // A slice is updated under its lock: every value of a slice moved together.
      for (absl::Span<const float> piece : pulled->pieces) {
        ASSERT_FALSE(piece.empty());
        EXPECT_EQ(std::count(piece.begin(), piece.end(), piece[0]),
                  static_cast<std::ptrdiff_t>(piece.size()));
        EXPECT_LE(piece[0], kInitial);
        EXPECT_GE(piece[0], kInitial - kWorkers * kPushesPerWorker);
      }
    }
  });
  std::vector<std::thread> pushers;
  for (int w = 0; w < kWorkers; ++w) {
    pushers.emplace_back([&job, w] {
      const std::vector<float> ones(job->num_parameters(), 1.0f);
      for (int i = 1; i <= kPushesPerWorker; ++i) {
        absl::StatusOr<ShardJob::PullSnapshot> pulled = PullNow(job.get(), MakePull(w));
        ASSERT_TRUE(pulled.ok()) << pulled.status();
        absl::StatusOr<PushResponse> response =
            PushGradient(job.get(), MakeHeader(*job, w, i, pulled->header.version()), ones);
        ASSERT_TRUE(response.ok()) << response.status();
        EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
      }
    });
  }
  for (std::thread& pusher : pushers) pusher.join();
  pushing_done = true;
  puller.join();

  JobStats stats = job->Stats();
  EXPECT_EQ(stats.version(), kWorkers * kPushesPerWorker);
  EXPECT_EQ(stats.applied_gradients(), kWorkers * kPushesPerWorker);
  EXPECT_EQ(stats.staleness().total(), kWorkers * kPushesPerWorker);
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(stats.workers(w).applied(), kPushesPerWorker);
    EXPECT_EQ(stats.workers(w).last_push_id(), kPushesPerWorker);
  }
  EXPECT_EQ(Weights(job.get()),
            std::vector<float>(job->num_parameters(), kInitial - kWorkers * kPushesPerWorker));
}

// A client that retries a push while the first attempt is still being handled sends the same
// push_id twice at once: exactly one attempt may count, the others are DUPLICATE.
TEST(ShardJobConcurrencyTest, ConcurrentRetriesOfOnePushCountOnce) {
  constexpr int kRounds = 100;
  constexpr int kAttempts = 4;
  for (ConsistencyConfig::Mode mode : {ConsistencyConfig::ASYNC, ConsistencyConfig::SSP,
                                       ConsistencyConfig::SYNC, ConsistencyConfig::SOFTSYNC}) {
    SCOPED_TRACE(ConsistencyConfig::Mode_Name(mode));
    // SOFTSYNC: 2 workers, n = 1, so every 2 gradients (here all from worker 0) are applied.
    const bool softsync = mode == ConsistencyConfig::SOFTSYNC;
    ParameterSpec spec = MakeLargeSpec(mode, softsync ? 2 : 1);
    spec.mutable_consistency()->set_softsync_n(1);
    spec.mutable_learning_rate()->set_base(1.0f);
    std::unique_ptr<ShardJob> job = CreateJob(spec);
    ASSERT_NE(job, nullptr);
    const std::vector<float> initial = Weights(job.get());
    for (int round = 0; round < kRounds; ++round) {
      const PushRequestHeader header =
          MakeHeader(*job, 0, round + 1, 0, /*step=*/round, /*clock=*/round);
      std::atomic<bool> go{false};
      std::atomic<int> duplicates{0};
      std::vector<std::thread> attempts;
      for (int a = 0; a < kAttempts; ++a) {
        attempts.emplace_back([&] {
          std::vector<absl::Span<float>> destinations;
          absl::StatusOr<std::shared_ptr<std::vector<float>>> buffer =
              job->PushBuffer(header, &destinations);
          ASSERT_TRUE(buffer.ok()) << buffer.status();
          std::fill((*buffer)->begin(), (*buffer)->end(), 1.0f);
          while (!go.load()) std::this_thread::yield();
          absl::StatusOr<PushResponse> response = job->Push(header, **buffer);
          ASSERT_TRUE(response.ok()) << response.status();
          if (response->outcome() == PushResponse::DUPLICATE) ++duplicates;
        });
      }
      go = true;
      for (std::thread& attempt : attempts) attempt.join();
      ASSERT_EQ(duplicates.load(), kAttempts - 1) << "round " << round;
    }
    JobStats stats = job->Stats();
    const int64_t updates = softsync ? kRounds / 2 : kRounds;
    EXPECT_EQ(stats.version(), updates);
    EXPECT_EQ(stats.applied_gradients(), kRounds);
    EXPECT_TRUE(stats.dropped().empty());
    EXPECT_TRUE(stats.rejected().empty());
    std::vector<float> expected = initial;
    for (float& value : expected) value -= static_cast<float>(updates);
    EXPECT_EQ(Weights(job.get()), expected);
  }
}

TEST(ShardJobConcurrencyTest, ConcurrentSyncWorkersWaitForEachStep) {
  constexpr int kWorkers = 4;
  constexpr int kSteps = 100;
  ParameterSpec spec = MakeLargeSpec(ConsistencyConfig::SYNC, kWorkers);
  spec.mutable_learning_rate()->set_base(1.0f);
  std::unique_ptr<ShardJob> job = CreateJob(spec);
  ASSERT_NE(job, nullptr);
  const int64_t num_parameters = job->num_parameters();

  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&job, num_parameters, w] {
      const std::vector<float> ones(num_parameters, 1.0f);
      for (int step = 0; step < kSteps; ++step) {
        absl::Notification answered;
        absl::StatusOr<ShardJob::PullSnapshot> pulled = absl::UnknownError("not answered");
        const int64_t id =
            job->Pull(MakePull(w, step), [&](absl::StatusOr<ShardJob::PullSnapshot> result) {
              pulled = std::move(result);
              answered.Notify();
            });
        // A worker that failed must not leave the others waiting forever.
        if (!answered.WaitForNotificationWithTimeout(absl::Seconds(20))) {
          job->CancelWaiter(id, absl::DeadlineExceededError("the step never completed"));
          answered.WaitForNotification();
        }
        ASSERT_TRUE(pulled.ok()) << pulled.status();
        ASSERT_EQ(pulled->header.step(), step);
        for (absl::Span<const float> piece : pulled->pieces) {
          EXPECT_EQ(std::count(piece.begin(), piece.end(), piece[0]),
                    static_cast<std::ptrdiff_t>(piece.size()));
        }
        absl::StatusOr<PushResponse> response = PushGradient(
            job.get(), MakeHeader(*job, w, step + 1, pulled->header.version(), step), ones);
        ASSERT_TRUE(response.ok()) << response.status();
        EXPECT_NE(response->outcome(), PushResponse::DROPPED);
      }
    });
  }
  for (std::thread& worker : workers) worker.join();

  JobStats stats = job->Stats();
  EXPECT_EQ(stats.step(), kSteps);
  EXPECT_EQ(stats.version(), kSteps);
  EXPECT_EQ(stats.applied_gradients(), kWorkers * kSteps);
  EXPECT_EQ(stats.parked_pulls(), 0);
  std::vector<float> expected(4096 * 16, kInitialW - kSteps);
  expected.insert(expected.end(), 16384, kInitialB - kSteps);
  EXPECT_EQ(Weights(job.get()), expected);
}

}  // namespace
}  // namespace ps
