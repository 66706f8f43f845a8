// RunTrainer with the sparse models (worker/sparse_training.h) on in-process shards: LIBSVM rows
// with ids far beyond any dense row, and CSV categories, kept sparse from the file to the
// shards' table rows.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_system.h"
#include "common/random.h"
#include "worker/trainer_testing.h"

namespace ps {
namespace trainer_testing {
namespace {

using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  absl::Status written = FileSystem::Default()->WriteFileAtomically(path, text);
  EXPECT_TRUE(written.ok()) << written;
  return path;
}

// 2,000 LIBSVM rows of 8 features each among 100 ids near 10^12 (a dense row would need 10^12
// floats), labelled +1 or -1 by a fixed linear rule with 5% of the labels flipped.
std::string HashedLibsvmFile() {
  SplitMix64 random(11);
  std::vector<double> truth(100);
  for (double& w : truth) w = random.Normal();
  std::string text;
  for (int example = 0; example < 2000; ++example) {
    std::vector<int> ids;
    while (ids.size() < 8) {
      const int id = static_cast<int>(random.Below(100));
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    double score = 0;
    std::string features;
    for (int id : ids) {
      const double value = random.Uniform() + 0.5;
      score += truth[id] * value;
      absl::StrAppend(&features, " ", int64_t{1000000000000} + id, ":", value);
    }
    const bool flip = random.Uniform() < 0.05;
    absl::StrAppend(&text, (score > 0) != flip ? "+1" : "-1", features, "\n");
  }
  return WriteFile("hashed.libsvm", text);
}

// 1,200 CSV rows of three categorical columns (a color of 6, a shape of 5, a size of 4) and a
// label in column 1: the class of (color + shape) mod 3, which no column alone tells.
std::string CategoricalCsvFile() {
  const char* colors[] = {"red", "green", "blue", "cyan", "magenta", "yellow"};
  const char* shapes[] = {"circle", "square", "star", "triangle", "hexagon"};
  const char* sizes[] = {"S", "M", "L", "XL"};
  SplitMix64 random(5);
  std::string text = "color,label,shape,size\n";
  for (int example = 0; example < 1200; ++example) {
    const int color = static_cast<int>(random.Below(6));
    const int shape = static_cast<int>(random.Below(5));
    absl::StrAppend(&text, colors[color], ",", (color + shape) % 3, ",", shapes[shape], ",",
                    sizes[random.Below(4)], "\n");
  }
  return WriteFile("categories.csv", text);
}

JobSpec SparseLogisticJob(const std::string& id, ConsistencyConfig::Mode mode) {
  JobSpec spec;
  spec.set_job_id(id);
  spec.mutable_model()->set_kind(ModelSpec::SPARSE_LOGISTIC_REGRESSION);
  spec.mutable_data()->set_libsvm(HashedLibsvmFile());
  spec.mutable_data()->set_test_fraction(0.2f);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::ADAGRAD);
  spec.mutable_learning_rate()->set_base(0.5f);
  spec.mutable_consistency()->set_mode(mode);
  spec.set_batch_size(32);
  spec.set_epochs(3);
  spec.set_seed(3);
  return spec;
}

class TrainerSparseTest : public TrainerTest {
 protected:
  // The rows of `table` on all shards together.
  int64_t TableRows(const std::string& job_id, const std::string& table) {
    int64_t rows = 0;
    for (const JobStats& shard : Stats(job_id)) {
      auto it = shard.sparse_rows().find(table);
      if (it != shard.sparse_rows().end()) rows += it->second;
    }
    return rows;
  }
};

TEST_F(TrainerSparseTest, SparseLogisticRegressionLearnsHashedIdsInEveryPsMode) {
  StartServers(2);
  for (const ConsistencyConfig::Mode mode :
       {ConsistencyConfig::SYNC, ConsistencyConfig::ASYNC, ConsistencyConfig::SSP}) {
    const JobSpec spec =
        SparseLogisticJob(absl::StrCat("sparse-lr-", ConsistencyConfig::Mode_Name(mode)), mode);
    std::vector<WorkerRun> runs = RunWorkers(spec, 2);
    for (const WorkerRun& run : runs) ASSERT_TRUE(run.status.ok()) << run.status;
    const JobProgress& chief = runs[0].last();
    EXPECT_EQ(chief.eval().examples(), 400);
    // A guess is 50%; the rule itself 95% (5% of labels flipped).
    EXPECT_GT(chief.eval().accuracy(), 0.8) << ConsistencyConfig::Mode_Name(mode);
    EXPECT_LT(chief.eval().loss(), 0.55) << ConsistencyConfig::Mode_Name(mode);
    // Every row lives on the shards: 100 ids, each key on one shard.
    EXPECT_EQ(TableRows(spec.job_id(), "weights"), 100) << ConsistencyConfig::Mode_Name(mode);
  }
}

// Two SYNC workers with batches of 16 take the same steps as one worker with batches of 32: the
// two shards of each step's examples are the one worker's batch, and the shards apply the mean of
// the two gradients.
TEST_F(TrainerSparseTest, SyncWorkersEqualOneWorkerOnTheUnionOfTheirBatches) {
  StartServers(2);
  JobSpec spec = SparseLogisticJob("sparse-two", ConsistencyConfig::SYNC);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  spec.set_batch_size(16);
  spec.clear_epochs();
  spec.set_steps(30);
  std::vector<WorkerRun> two = RunWorkers(spec, 2);
  spec.set_job_id("sparse-one");
  spec.set_batch_size(32);
  std::vector<WorkerRun> one = RunWorkers(spec, 1);
  ASSERT_TRUE(two[0].status.ok()) << two[0].status;
  ASSERT_TRUE(one[0].status.ok()) << one[0].status;
  EXPECT_NEAR(two[0].last().eval().loss(), one[0].last().eval().loss(), 1e-5);
  EXPECT_EQ(two[0].last().eval().accuracy(), one[0].last().eval().accuracy());
  EXPECT_NE(one[0].last().eval().loss(), std::log(2.0));  // It trained.
}

TEST_F(TrainerSparseTest, EmbeddingBagMlpLearnsACombinationOfCategories) {
  StartServers(2);
  JobSpec spec;
  spec.set_job_id("embedding-bag");
  spec.mutable_model()->set_kind(ModelSpec::EMBEDDING_BAG_MLP);
  spec.mutable_model()->set_embedding_dim(8);
  spec.mutable_model()->add_hidden_sizes(32);
  spec.mutable_data()->set_csv(CategoricalCsvFile());
  spec.mutable_data()->set_label_column(1);
  spec.mutable_data()->set_csv_header(true);
  spec.mutable_data()->set_validation_fraction(0.1f);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  spec.mutable_learning_rate()->set_base(0.02f);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::SSP);
  spec.mutable_consistency()->set_ssp_bound(2);
  spec.set_batch_size(32);
  spec.set_epochs(6);
  spec.set_seed(9);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  for (const WorkerRun& run : runs) ASSERT_TRUE(run.status.ok()) << run.status;
  const JobProgress& chief = runs[0].last();
  EXPECT_EQ(chief.eval().examples(), 120);
  EXPECT_GT(chief.validation().examples(), 0);
  // One column alone is right a third of the time; the rule is exact.
  EXPECT_GT(chief.eval().accuracy(), 0.9) << chief.DebugString();
  // 6 colors, 5 shapes and 4 sizes: 15 rows of embeddings.
  EXPECT_EQ(TableRows(spec.job_id(), "embeddings"), 15);
}

TEST_F(TrainerSparseTest, RefusesModesAndOptionsThatCannotCarryRows) {
  JobSpec spec = SparseLogisticJob("sparse-refused", ConsistencyConfig::ALLREDUCE);
  EXPECT_THAT(ValidateJobSpec(spec, 2).message(), HasSubstr("needs SYNC, ASYNC, SSP or SOFTSYNC"));
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  spec.mutable_downpour()->set_n_fetch(4);
  EXPECT_THAT(ValidateJobSpec(spec, 2).message(), HasSubstr("downpour is not supported"));
  spec.clear_downpour();
  spec.mutable_data()->set_normalize(true);
  EXPECT_THAT(ValidateJobSpec(spec, 2).message(), HasSubstr("data.normalize is for dense"));
  spec.mutable_data()->clear_normalize();
  spec.mutable_data()->mutable_synthetic()->set_num_examples(10);
  EXPECT_THAT(ValidateJobSpec(spec, 2).message(), HasSubstr("must be libsvm or csv"));

  // A worker given such a job anyway (no validation) refuses it before training.
  StartServers(1);
  spec = SparseLogisticJob("sparse-ring", ConsistencyConfig::ASYNC);
  spec.mutable_downpour()->set_overlap_communication(true);
  std::unique_ptr<PsClient> client = NewClient();
  std::unique_ptr<ComputeBackend> backend = CreateCpuBackend();
  std::atomic<bool> stop{false};
  TrainerContext context;
  context.spec = spec;
  context.ps = client.get();
  context.backend = backend.get();
  context.stop = &stop;
  context.report = [](const JobProgress&) {};
  absl::Status status = RunTrainer(context);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("a sparse model's rows go with every step"));
}

}  // namespace
}  // namespace trainer_testing
}  // namespace ps
