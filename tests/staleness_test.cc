// Measured staleness and convergence in ASYNC mode, through psctl experiment on local
// clusters (the whole machine to itself: this target is exclusive).
//
// Staleness: N workers of equal speed each push once per step, so while one computes, each of
// the N - 1 others pushes once on average: the mean staleness is N - 1. It is measured so only
// when a step's time is spent between the pull and the push: on a 2-core machine running
// 2 ps and N workers, computing a small model takes a fraction of a step's gRPC time, so every
// worker here sleeps a random U(0, 40 ms) after computing (a UNIFORM straggler delay, mean
// 20 ms, on every worker): equal speed in distribution, with the pull-to-push window about
// 94% of a step or more. Measured 0.93 to 0.96 (N = 2) and 2.81 to 2.87 (N = 4) in 8 runs,
// under a load average of 2.5 to 6 from other work.
//
// Convergence: linear regression with plain SGD at α0 = 0.5 is stable on one worker, but on 8
// the gradients are several updates stale and the iterates blow up until a gradient holds NaN
// or Inf, which the ps rejects (INVALID_ARGUMENT), failing the job. α0/τ
// (staleness_learning_rate INVERSE) converges to the noise floor (test loss about 0.005).
#include <iostream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/experiment_testing.h"

namespace ps {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr absl::Duration kTimeout = absl::Seconds(200);

// Runs `sweep` (JSON) with --local; returns the sweep table's rows.
std::vector<std::map<std::string, std::string>> RunSweep(const std::string& sweep,
                                                         const std::string& dir) {
  WriteFile(dir + "/sweep.json", sweep);
  PsctlRun run = RunPsctl({"experiment", "--sweep=" + dir + "/sweep.json", "--local",
                           "--results=" + dir + "/results", "--device=cpu"},
                          dir, kTimeout);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return ReadCsvRows(dir + "/results/sweep.csv");
}

TEST(StalenessTest, AsyncWorkersOfEqualSpeedSeeAMeanStalenessOfWorkersMinusOne) {
  const std::string dir = TestDir();
  auto rows = RunSweep(R"({"name": "staleness", "base_job": {
      "model": {"kind": "MLP", "hidden_sizes": [128], "activation": "TANH"},
      "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 20000,
                             "feature_dim": 64, "num_classes": 10, "separation": 0.5}},
      "learning_rate": {"base": 0.05},
      "consistency": {"mode": "ASYNC"},
      "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 20},
      "batch_size": 64, "steps": 200, "seed": 1},
    "axes": {"workers": [2, 4]}})",
                       dir);
  ASSERT_THAT(rows, SizeIs(2));
  for (const auto& row : rows) {
    const int workers = std::stoi(row.at("workers"));
    EXPECT_EQ(row.at("state"), "DONE");
    // Every applied gradient of every worker on both shards: 2 x N x 200 of them.
    nlohmann::json summary = ReadSummary(dir + "/results/" + row.at("dir"));
    EXPECT_EQ(summary["applied_updates"], workers * 200) << summary.dump();
    std::cout << "workers=" << workers << ": mean staleness " << row.at("staleness_mean") << "\n";
    EXPECT_NEAR(std::stod(row.at("staleness_mean")), workers - 1, 0.5)
        << "workers=" << workers << ": " << summary.dump();
  }
}

TEST(StalenessTest, EightAsyncWorkersDivergeWithAFixedRateAndConvergeWithRateOverStaleness) {
  const std::string dir = TestDir();
  auto rows = RunSweep(R"({"name": "inverse", "base_job": {
      "model": {"kind": "LINEAR_REGRESSION"},
      "data": {"synthetic": {"kind": "LINEAR", "num_examples": 10000, "feature_dim": 10,
                             "noise": 0.1}},
      "optimizer": {"kind": "SGD"},
      "learning_rate": {"base": 0.5},
      "consistency": {"mode": "ASYNC"},
      "batch_size": 32, "steps": 300, "eval_interval": 25, "min_slice_bytes": 16, "seed": 1,
      "continue_on_divergence": true},
    "axes": {"workers": [8], "consistency.staleness_learning_rate": ["NONE", "INVERSE"]}})",
                       dir);
  ASSERT_THAT(rows, SizeIs(2));
  // α0: the job fails because a worker's gradient held NaN or Inf (the shards refuse it; the
  // workers' divergence rule, which would end it earlier, is off for this).
  const auto& fixed = rows[0];
  EXPECT_EQ(fixed.at("consistency.staleness_learning_rate"), "NONE");
  EXPECT_EQ(fixed.at("state"), "FAILED");
  std::string log = ReadFile(dir + "/results/logs/" + fixed.at("dir") + ".log");
  EXPECT_THAT(log, ContainsRegex("(NaN|Inf) in variable"));
  EXPECT_THAT(log, HasSubstr("nothing was applied"));
  // α0/τ: every step done, and the test loss at the noise floor.
  const auto& inverse = rows[1];
  EXPECT_EQ(inverse.at("consistency.staleness_learning_rate"), "INVERSE");
  EXPECT_EQ(inverse.at("state"), "DONE");
  EXPECT_EQ(inverse.at("steps"), "300");
  EXPECT_LT(std::stod(inverse.at("final_eval_loss")), 0.02);
  EXPECT_GT(std::stod(inverse.at("staleness_mean")), 1);  // The gradients were stale.
}

// DELAYED: staleness as a controlled variable. One worker, each pull served the values `delay`
// updates old: step t's gradient has staleness min(t, delay) exactly, on every shard.
TEST(StalenessTest, DelayedServesEveryWorkerValuesExactlyDelayUpdatesOld) {
  const std::string dir = TestDir();
  auto rows = RunSweep(R"({"name": "delayed", "base_job": {
      "model": {"kind": "LINEAR_REGRESSION"},
      "data": {"synthetic": {"kind": "LINEAR", "num_examples": 2000, "feature_dim": 10,
                             "noise": 0.1}},
      "optimizer": {"kind": "SGD"},
      "learning_rate": {"base": 0.05},
      "consistency": {"mode": "DELAYED"},
      "batch_size": 32, "steps": 100, "eval_interval": 50, "min_slice_bytes": 16, "seed": 1},
    "axes": {"workers": [1], "consistency.delay": [0, 3]}})",
                       dir);
  ASSERT_THAT(rows, SizeIs(2));
  for (const auto& row : rows) {
    const int delay = std::stoi(row.at("consistency.delay"));
    EXPECT_EQ(row.at("state"), "DONE") << delay;
    nlohmann::json summary = ReadSummary(dir + "/results/" + row.at("dir"));
    // Steps 0..delay-1 see every update; the rest exactly `delay`.
    const double expected_mean = (delay * (delay - 1) / 2.0 + (100 - delay) * delay) / 100;
    EXPECT_NEAR(summary["staleness_mean"].get<double>(), expected_mean, 1e-9) << summary.dump();
    EXPECT_EQ(summary["staleness_max"], delay) << summary.dump();
    EXPECT_LT(std::stod(row.at("final_eval_loss")), 0.1) << delay;  // Still converges.
  }
}

}  // namespace
}  // namespace ps
