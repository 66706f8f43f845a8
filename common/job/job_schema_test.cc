#include "common/job/job_schema.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/job/job_spec.h"
#include "common/testing/schedules.h"
#include "common/job/testing/valid_job.h"
#include "common/testing/variable_defs.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

JobSpec Valid() { return testing_jobs::ValidJob(); }

using testing_variables::MakeVariable;

std::vector<VariableDef> Variables() {
  return {MakeVariable("w", {4, 3}, InitializerConfig::ZEROS, 0)};
}

// A ParameterSpec as ToParameterSpec makes it from Valid() for two workers.
ParameterSpec ValidParameters() { return ToParameterSpec(Valid(), Variables(), 2); }

using testing_schedules::Constant;
using testing_schedules::LinearWarmup;
using testing_schedules::StepDecay;

// ----- JobSpec -----

// `spec`'s model made a CNN of 4x4x1 images and one layer of `kind` with nothing else set.
void CnnOf(JobSpec* spec, LayerSpec::Kind kind) {
  ModelSpec* model = spec->mutable_model();
  model->set_kind(ModelSpec::CNN);
  model->mutable_image()->set_height(4);
  model->mutable_image()->set_width(4);
  model->mutable_image()->set_channels(1);
  model->add_layers()->set_kind(kind);
}

TEST(JobSpecTest, SemanticErrorsNameTheField) {
  struct Case {
    std::function<void(JobSpec*)> mutate;
    const char* field;
  };
  const Case kCases[] = {
      {[](JobSpec* s) { s->clear_job_id(); }, "job_id"},
      {[](JobSpec* s) { s->set_job_id("../etc"); }, "job_id \"../etc\" is not an id"},
      {[](JobSpec* s) { s->set_job_id("a b"); }, "job_id"},
      {[](JobSpec* s) { s->set_run_id("r/1"); }, "run_id"},
      {[](JobSpec* s) { s->mutable_checkpoint()->set_every_steps(-1); },
       "checkpoint.every_steps"},
      {[](JobSpec* s) { s->mutable_checkpoint()->set_every_seconds(-2); },
       "checkpoint.every_seconds"},
      {[](JobSpec* s) { s->mutable_checkpoint()->set_keep(-1); }, "checkpoint.keep"},
      {[](JobSpec* s) { s->set_worker_lease_s(-1); }, "worker_lease_s"},
      {[](JobSpec* s) { s->mutable_checkpoint()->set_dir("/shared/ckpt"); }, "no longer accepted"},
      {[](JobSpec* s) { s->mutable_model()->clear_kind(); }, "model.kind"},
      {[](JobSpec* s) { s->mutable_model()->set_kind(ModelSpec::MLP); }, "model.hidden_sizes"},
      {[](JobSpec* s) { s->mutable_model()->set_kind(ModelSpec::CNN); }, "model.image"},
      {[](JobSpec* s) { s->mutable_model()->add_layers(); }, "model.layers is for CNN"},
      {[](JobSpec* s) { CnnOf(s, LayerSpec::CONV); }, "model.layers[0].kernel"},
      {[](JobSpec* s) { CnnOf(s, LayerSpec::DENSE); }, "model.layers[0].units"},
      {[](JobSpec* s) {
         CnnOf(s, LayerSpec::DROPOUT);
         s->mutable_model()->mutable_layers(0)->set_rate(1.0f);
       },
       "model.layers[0].rate is 1: the fraction dropped is in [0, 1)"},
      {[](JobSpec* s) {
         CnnOf(s, LayerSpec::DROPOUT);
         s->mutable_model()->mutable_layers(0)->set_rate(-0.5f);
       },
       "model.layers[0].rate is -0.5"},
      {[](JobSpec* s) {
         CnnOf(s, LayerSpec::DROPOUT);
         s->mutable_model()->mutable_layers(0)->set_rate(std::nanf(""));
       },
       "model.layers[0].rate is nan"},
      {[](JobSpec* s) {
         CnnOf(s, LayerSpec::DROPOUT);
         s->mutable_model()->mutable_layers(0)->set_kernel(2);
       },
       "model.layers[0] is a DROPOUT, which takes only a rate"},
      {[](JobSpec* s) {
         CnnOf(s, LayerSpec::DENSE);
         s->mutable_model()->mutable_layers(0)->set_units(4);
         s->mutable_model()->mutable_layers(0)->set_rate(0.5f);
       },
       "model.layers[0].rate is for DROPOUT"},
      {[](JobSpec* s) { s->mutable_data()->clear_synthetic(); }, "data"},
      {[](JobSpec* s) { s->mutable_data()->set_test_fraction(1); }, "data.test_fraction"},
      {[](JobSpec* s) { s->set_batch_size(0); }, "batch_size"},
      {[](JobSpec* s) { s->set_steps(0); }, "stop condition"},
      {[](JobSpec* s) { s->mutable_consistency()->set_replicas_to_aggregate(3); },
       "consistency.replicas_to_aggregate is 3 but the cluster has 2 workers"},
      {[](JobSpec* s) { s->mutable_consistency()->clear_mode(); }, "consistency.mode"},
      {[](JobSpec* s) {
         s->mutable_consistency()->set_mode(ConsistencyConfig::SOFTSYNC);
       },
       "consistency.softsync_n"},
      {[](JobSpec* s) { s->mutable_stragglers()->add_workers(2); }, "stragglers.workers"},
      {[](JobSpec* s) { s->mutable_stragglers()->set_busy(true); }, "stragglers.busy"},
      {[](JobSpec* s) { s->mutable_learning_rate()->set_base(0); }, "learning_rate"},
      {[](JobSpec* s) { s->mutable_optimizer()->set_kind(OptimizerConfig::MOMENTUM);
                        s->mutable_optimizer()->set_momentum(2); },
       "optimizer.momentum"},
      {[](JobSpec* s) { s->set_target_loss(0.1f); }, "eval_interval"},
      {[](JobSpec* s) {
         s->mutable_consistency()->set_mode(ConsistencyConfig::ALLREDUCE);
         s->mutable_checkpoint()->set_every_seconds(10);
       },
       "checkpoint.every_seconds is not supported in ALLREDUCE"},
      {[](JobSpec* s) {
         s->mutable_consistency()->set_mode(ConsistencyConfig::LOCAL_SGD);
         s->mutable_consistency()->set_local_steps(4);
         s->mutable_checkpoint()->set_every_steps(10);
       },
       "checkpoint.every_steps is 10, not a multiple of consistency.local_steps (4)"},
      {[](JobSpec* s) {
         s->mutable_consistency()->set_mode(ConsistencyConfig::EASGD);
         s->mutable_consistency()->set_easgd_period(4);
       },
       "consistency.easgd_alpha is 0"},
      {[](JobSpec* s) {
         s->mutable_consistency()->set_mode(ConsistencyConfig::EASGD);
         s->mutable_consistency()->set_easgd_alpha(0.5f);
       },
       "consistency.easgd_period is 0"},
      {[](JobSpec* s) {
         s->mutable_consistency()->set_mode(ConsistencyConfig::DELAYED);
         s->mutable_consistency()->set_delay(-1);
       },
       "consistency.delay is -1"},
      {[](JobSpec* s) { s->set_record_apply_log(true); },
       "record_apply_log is for ASYNC"},
      {[](JobSpec* s) { s->set_replicas(3); }, "replicas is 3"},
      {[](JobSpec* s) { s->set_replicas(-1); }, "replicas is -1"},
      {[](JobSpec* s) {
         s->mutable_data()->set_sharding(DataSpec::DYNAMIC);
         s->mutable_consistency()->set_mode(ConsistencyConfig::ALLREDUCE);
       },
       "data.sharding DYNAMIC is for SYNC, ASYNC, SSP and SOFTSYNC"},
      {[](JobSpec* s) {
         s->mutable_data()->set_sharding(DataSpec::DYNAMIC);
         s->mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
         s->mutable_downpour()->set_n_push(40);
       },
       "downpour.n_push is 40: with data.sharding DYNAMIC"},
      {[](JobSpec* s) { s->mutable_compression()->set_topk_fraction(1); },
       "compression.topk_fraction is 1: give the fraction"},
      {[](JobSpec* s) { s->mutable_compression()->set_topk_fraction(-0.5f); },
       "compression.topk_fraction is -0.5"},
      {[](JobSpec* s) {
         s->mutable_compression()->set_encoding(static_cast<TensorEncoding>(9));
       },
       "compression.encoding is 9"},
      {[](JobSpec* s) {
         s->mutable_consistency()->set_mode(ConsistencyConfig::ALLREDUCE);
         s->mutable_compression()->set_encoding(FLOAT16);
       },
       "compression is for the pushes and pulls of the ps modes; ALLREDUCE's ring"},
      {[](JobSpec* s) {
         s->set_target_loss(0.1f);
         s->set_eval_interval(5);
         s->mutable_data()->set_test_fraction(0);
       },
       "target_loss needs examples to evaluate on"},
      {[](JobSpec* s) {
         s->set_early_stopping_evals(3);
         s->set_eval_interval(5);
         s->mutable_data()->set_test_fraction(0);
       },
       "set data.validation_fraction"},
      {[](JobSpec* s) { s->set_early_stopping_evals(3); }, "eval_interval must be >= 1 when "
                                                           "early_stopping_evals"},
      {[](JobSpec* s) { s->set_early_stopping_evals(-1); }, "early_stopping_evals"},
      {[](JobSpec* s) { s->mutable_data()->set_validation_fraction(1); },
       "data.validation_fraction"},
      {[](JobSpec* s) { s->mutable_data()->set_test_data("/data/test.csv"); },
       "data.test_data needs a file source"},
      {[](JobSpec* s) {
         s->mutable_data()->set_csv("/data/train.csv");
         s->mutable_data()->set_test_data("/data/test.csv");
         s->mutable_data()->set_test_fraction(0.2f);
       },
       "data.test_fraction must be unset or 0 with data.test_data"},
      {[](JobSpec* s) {
         s->mutable_data()->set_mnist_images("/data/train-images.idx");
         s->mutable_data()->set_mnist_labels("/data/train-labels.idx");
         s->mutable_data()->set_test_data("/data/t10k-images.idx");
       },
       "data.test_labels is empty"},
      {[](JobSpec* s) { s->mutable_data()->set_test_labels("/data/t10k-labels.idx"); },
       "data.test_labels is only for MNIST"},
      {[](JobSpec* s) {
         s->mutable_consistency()->set_mode(ConsistencyConfig::SSP);
         s->mutable_downpour()->set_overlap_communication(true);
       },
       "downpour.overlap_communication needs consistency mode ASYNC"},
      // Counts that size what a worker allocates, bounded before it does.
      {[](JobSpec* s) { s->set_batch_size(kMaxBatchSize + 1); },
       "batch_size is 1048577: it must be 1 to 1048576"},
      {[](JobSpec* s) {
         s->mutable_model()->set_kind(ModelSpec::MLP);
         for (int i = 0; i <= kMaxHiddenLayers; ++i) s->mutable_model()->add_hidden_sizes(8);
       },
       "model.hidden_sizes has 257 layers: at most 256"},
      {[](JobSpec* s) {
         s->mutable_model()->set_kind(ModelSpec::MLP);
         s->mutable_model()->add_hidden_sizes(kMaxLayerWidth + 1);
       },
       "model.hidden_sizes[0] is 1048577: a layer has 1 to 1048576 units"},
      {[](JobSpec* s) {
         s->mutable_data()->mutable_synthetic()->set_feature_dim(kMaxFeatureDim + 1);
       },
       "data.synthetic.feature_dim is 16777217: at most 16777216 features"},
      {[](JobSpec* s) {
         s->mutable_data()->set_libsvm("/data/a.libsvm");
         s->mutable_data()->set_feature_dim(kMaxFeatureDim + 1);
       },
       "data.feature_dim is 16777217: at most 16777216 features"},
  };
  for (const Case& c : kCases) {
    JobSpec spec = Valid();
    c.mutate(&spec);
    absl::Status status = ValidateJobSpec(spec, 2);
    ASSERT_FALSE(status.ok()) << c.field;
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find(c.field), absl::string_view::npos)
        << c.field << " not in: " << status.message();
  }
}

TEST(JobSpecTest, RingModesTakeCheckpointsEveryFewSteps) {
  JobSpec spec = Valid();
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ALLREDUCE);
  spec.mutable_checkpoint()->set_every_steps(10);
  EXPECT_TRUE(ValidateJobSpec(spec, 2).ok()) << ValidateJobSpec(spec, 2);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::LOCAL_SGD);
  spec.mutable_consistency()->set_local_steps(5);
  EXPECT_TRUE(ValidateJobSpec(spec, 2).ok()) << ValidateJobSpec(spec, 2);
}

// ----- ParameterSpec -----

// A program job (JobSpec.program): the program holds the model and reads the data.
TEST(JobSpecTest, AProgramJobNamesItsProgramAndLeavesModelAndDataToIt) {
  JobSpec job;
  job.set_job_id("mine");
  job.mutable_program()->add_argv("python3");
  job.mutable_program()->add_argv("train.py");
  job.mutable_learning_rate()->set_base(0.1f);
  job.mutable_consistency()->set_mode(ConsistencyConfig::SSP);
  job.mutable_consistency()->set_ssp_bound(2);
  EXPECT_TRUE(ValidateJobSpec(job, 4).ok()) << ValidateJobSpec(job, 4);

  auto error = [](const JobSpec& spec) { return std::string(ValidateJobSpec(spec, 4).message()); };
  JobSpec with_model = job;
  with_model.mutable_model()->set_kind(ModelSpec::MLP);
  EXPECT_NE(error(with_model).find("model is set, but a program job's model and data are its "
                                   "program's"),
            std::string::npos)
      << error(with_model);
  JobSpec no_argv = job;
  no_argv.mutable_program()->clear_argv();
  EXPECT_NE(error(no_argv).find("program.argv is empty"), std::string::npos) << error(no_argv);
  JobSpec ring = job;
  ring.mutable_consistency()->set_mode(ConsistencyConfig::ALLREDUCE);
  EXPECT_NE(error(ring).find("a program's workers pull the model from the shards"),
            std::string::npos)
      << error(ring);
  JobSpec no_rate = job;
  no_rate.clear_learning_rate();
  EXPECT_FALSE(ValidateJobSpec(no_rate, 4).ok());
}

TEST(ParameterSpecTest, AcceptsWhatToParameterSpecMakesOfAValidJob) {
  EXPECT_TRUE(ValidateParameterSpec(ValidParameters()).ok());
}

TEST(ParameterSpecTest, ErrorsNameTheJobAndTheField) {
  struct Case {
    std::function<void(ParameterSpec*)> mutate;
    const char* message;
  };
  const Case kCases[] = {
      {[](ParameterSpec* s) { s->clear_variables(); }, "job \"j\": variables is empty"},
      {[](ParameterSpec* s) { s->set_num_workers(0); }, "job \"j\": num_workers is 0"},
      {[](ParameterSpec* s) {
         s->mutable_variables(0)->mutable_initializer()->set_kind(InitializerConfig::NORMAL);
         s->mutable_variables(0)->mutable_initializer()->set_scale(-1);
       },
       "job \"j\": variable \"w\": initializer.scale"},
      {[](ParameterSpec* s) { s->mutable_learning_rate()->set_base(-1); },
       "job \"j\": learning_rate.base"},
      {[](ParameterSpec* s) { s->mutable_consistency()->set_replicas_to_aggregate(3); },
       "job \"j\": consistency.replicas_to_aggregate is 3 but the cluster has 2 workers"},
      {[](ParameterSpec* s) { s->mutable_data_handout()->set_epochs(2); },
       "job \"j\": data_handout.batches_per_epoch is 0"},
      {[](ParameterSpec* s) {
         s->mutable_data_handout()->set_batches_per_epoch(int64_t{1} << 40);
         s->mutable_data_handout()->set_epochs(int64_t{1} << 40);
       },
       "more batches than can be numbered"},
      {[](ParameterSpec* s) {
         s->mutable_data_handout()->set_batches_per_epoch(5);
         s->mutable_consistency()->set_mode(ConsistencyConfig::LOCAL_SGD);
         s->mutable_consistency()->set_local_steps(4);
       },
       "data_handout is for modes whose workers push gradients"},
      {[](ParameterSpec* s) {
         s->mutable_optimizer()->set_kind(OptimizerConfig::ADAGRAD);
         s->mutable_optimizer()->set_epsilon(-1);
       },
       "job \"j\": optimizer.epsilon"},
      {[](ParameterSpec* s) {
         s->add_sparse_tables()->set_name("w");
         s->mutable_sparse_tables(0)->set_width(4);
       },
       "sparse_tables[0].name \"w\" is taken by another table or variable"},
      {[](ParameterSpec* s) { s->add_sparse_tables()->set_name("emb"); },
       "sparse_tables[0].width is 0"},
      {[](ParameterSpec* s) {
         SparseTableDef* table = s->add_sparse_tables();
         table->set_name("emb");
         table->set_width(8);
         s->mutable_consistency()->set_mode(ConsistencyConfig::ALLREDUCE);
       },
       "sparse_tables are for SYNC, ASYNC, SSP and SOFTSYNC, not ALLREDUCE"},
  };
  for (const Case& c : kCases) {
    ParameterSpec spec = ValidParameters();
    c.mutate(&spec);
    const absl::Status status = ValidateParameterSpec(spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_NE(status.message().find(c.message), absl::string_view::npos)
        << c.message << " not in: " << status.message();
  }
  ParameterSpec spec = ValidParameters();
  spec.clear_job_id();
  EXPECT_EQ(ValidateParameterSpec(spec).message(), "job_id is empty: give the job an id");
}

// Counts that size what a ps allocates (placement, slices, the names in every response's
// header) are bounded before anything is placed; the bounds themselves are valid.
// A job that grew lists one address per worker and how many it had before; a spec a caller made
// may not list more, fewer or bad ones (a shard reads worker_addresses by worker index).
TEST(ParameterSpecTest, AGrownJobListsEachWorkersAddress) {
  ParameterSpec grown = ValidParameters();  // 2 workers.
  grown.add_worker_addresses("h1:1");
  grown.add_worker_addresses("h2:1");
  grown.set_workers_before_growth(1);
  EXPECT_TRUE(ValidateParameterSpec(grown).ok()) << ValidateParameterSpec(grown);
  ParameterSpec more = grown;
  more.add_worker_addresses("h3:1");
  EXPECT_THAT(ValidateParameterSpec(more).message(),
              HasSubstr("worker_addresses lists 3 workers and num_workers is 2"));
  ParameterSpec bad = grown;
  bad.set_worker_addresses(1, "h2");
  EXPECT_THAT(ValidateParameterSpec(bad).message(), HasSubstr("worker_addresses[1] is \"h2\""));
  ParameterSpec before = grown;
  before.set_workers_before_growth(3);
  EXPECT_THAT(ValidateParameterSpec(before).message(), HasSubstr("workers_before_growth is 3"));
  before.set_workers_before_growth(0);
  EXPECT_EQ(ValidateParameterSpec(before).code(), absl::StatusCode::kInvalidArgument);
  ParameterSpec never = ValidParameters();
  never.set_workers_before_growth(1);
  EXPECT_THAT(ValidateParameterSpec(never).message(),
              HasSubstr("workers_before_growth is set, but worker_addresses is empty"));
  // What the job computes is the same across a growth.
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      WithoutMembership(grown), WithoutMembership(ValidParameters())));
}

TEST(ParameterSpecTest, BoundsTheVariablesTheirNamesAndTheirRank) {
  ParameterSpec many = ValidParameters();
  while (many.variables_size() < kMaxVariables) *many.add_variables() = many.variables(0);
  EXPECT_TRUE(ValidateParameterSpec(many).ok());
  *many.add_variables() = many.variables(0);
  EXPECT_EQ(ValidateParameterSpec(many).message(),
            "job \"j\": variables has 65537 entries: a job has at most 65536");

  ParameterSpec named = ValidParameters();
  named.mutable_variables(0)->set_name(std::string(kMaxVariableNameBytes, 'n'));
  EXPECT_TRUE(ValidateParameterSpec(named).ok());
  named.mutable_variables(0)->mutable_name()->push_back('n');
  EXPECT_EQ(ValidateParameterSpec(named).message(),
            "job \"j\": variables[0].name has 1025 bytes: at most 1024");

  ParameterSpec deep = ValidParameters();
  deep.mutable_variables(0)->clear_shape();
  for (int d = 0; d < kMaxVariableRank; ++d) deep.mutable_variables(0)->add_shape(1);
  EXPECT_TRUE(ValidateParameterSpec(deep).ok());
  deep.mutable_variables(0)->add_shape(1);
  EXPECT_EQ(ValidateParameterSpec(deep).message(),
            "job \"j\": variable \"w\": shape has 33 dimensions: at most 32");

  // Also a spec read from a checkpoint file, which no --max_workers checked (found by
  // server/checkpoint_fuzz: 134 million workers allocated per-worker state of 1 GiB each).
  ParameterSpec crowded = ValidParameters();
  crowded.set_num_workers(kMaxWorkers);
  EXPECT_TRUE(ValidateParameterSpec(crowded).ok());
  crowded.set_num_workers(kMaxWorkers + 1);
  EXPECT_EQ(ValidateParameterSpec(crowded).message(),
            "job \"j\": num_workers is 1048577: it must be 1 to 1048576");
}

// The rules both specs carry give one message, with the job's name in front on the ps.
TEST(ParameterSpecTest, SharedRulesSayWhatTheJobSpecCheckSays) {
  const std::function<void(ConsistencyConfig*, OptimizerConfig*, LearningRateSchedule*)>
      kMutations[] = {
          [](ConsistencyConfig* c, OptimizerConfig*, LearningRateSchedule*) {
            c->set_replicas_to_aggregate(-1);
          },
          [](ConsistencyConfig* c, OptimizerConfig*, LearningRateSchedule*) {
            c->set_mode(ConsistencyConfig::ASYNC);
            c->set_max_staleness(-2);
          },
          [](ConsistencyConfig* c, OptimizerConfig*, LearningRateSchedule*) {
            c->set_mode(ConsistencyConfig::SSP);
            c->set_ssp_bound(-1);
          },
          [](ConsistencyConfig* c, OptimizerConfig*, LearningRateSchedule*) {
            c->set_mode(ConsistencyConfig::SOFTSYNC);
          },
          [](ConsistencyConfig* c, OptimizerConfig*, LearningRateSchedule*) { c->clear_mode(); },
          [](ConsistencyConfig*, OptimizerConfig* o, LearningRateSchedule*) {
            o->set_kind(OptimizerConfig::ADAM);
            o->set_beta1(1);
          },
          [](ConsistencyConfig*, OptimizerConfig*, LearningRateSchedule* l) {
            l->set_kind(LearningRateSchedule::LINEAR_WARMUP);
          },
      };
  for (const auto& mutate : kMutations) {
    JobSpec job = Valid();
    mutate(job.mutable_consistency(), job.mutable_optimizer(), job.mutable_learning_rate());
    const absl::Status job_status = ValidateJobSpec(job, 2);
    ASSERT_FALSE(job_status.ok());
    const absl::Status ps_status = ValidateParameterSpec(ToParameterSpec(job, Variables(), 2));
    EXPECT_EQ(ps_status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(ps_status.message(), "job \"j\": " + std::string(job_status.message()));
  }
}

// ----- Consistency -----

TEST(ConsistencyConfigTest, TheEdgesAreValid) {
  ConsistencyConfig consistency;
  consistency.set_mode(ConsistencyConfig::SYNC);
  for (int replicas : {0, 1, 4}) {
    consistency.set_replicas_to_aggregate(replicas);
    EXPECT_TRUE(ValidateConsistencyConfig(consistency, 4).ok()) << replicas;
  }
  consistency.set_replicas_to_aggregate(5);
  EXPECT_EQ(ValidateConsistencyConfig(consistency, 4).message(),
            "consistency.replicas_to_aggregate is 5 but the cluster has 4 workers: use 1 to 4, "
            "or 0 for all");
  consistency.Clear();
  consistency.set_mode(ConsistencyConfig::SSP);
  EXPECT_TRUE(ValidateConsistencyConfig(consistency, 1).ok());
  consistency.set_mode(ConsistencyConfig::ASYNC);
  EXPECT_TRUE(ValidateConsistencyConfig(consistency, 1).ok());
  consistency.set_mode(ConsistencyConfig::SOFTSYNC);
  consistency.set_softsync_n(1);
  EXPECT_TRUE(ValidateConsistencyConfig(consistency, 1).ok());
}

// ----- Optimizer -----

TEST(OptimizerConfigTest, UnsetSettingsTakeTheirDefaultsAndAreValid) {
  for (OptimizerConfig::Kind kind : {OptimizerConfig::SGD, OptimizerConfig::MOMENTUM,
                                     OptimizerConfig::ADAGRAD, OptimizerConfig::ADAM}) {
    OptimizerConfig config;
    config.set_kind(kind);
    EXPECT_TRUE(ValidateOptimizerConfig(config).ok()) << config.ShortDebugString();
  }
}

TEST(OptimizerConfigTest, RejectsOutOfRangeSettingsNamingTheField) {
  const float kNaN = std::numeric_limits<float>::quiet_NaN();
  const float kInfinity = std::numeric_limits<float>::infinity();
  struct Case {
    OptimizerConfig::Kind kind;
    float momentum;
    float beta1;
    float beta2;
    float epsilon;
    float initial_accumulator;
    const char* field;
  };
  const Case kCases[] = {
      {OptimizerConfig::MOMENTUM, 1.0f, 0, 0, 0, 0, "optimizer.momentum"},
      {OptimizerConfig::MOMENTUM, -0.1f, 0, 0, 0, 0, "optimizer.momentum"},
      {OptimizerConfig::MOMENTUM, kNaN, 0, 0, 0, 0, "optimizer.momentum"},
      {OptimizerConfig::ADAGRAD, 0, 0, 0, -1e-3f, 0, "optimizer.epsilon"},
      {OptimizerConfig::ADAGRAD, 0, 0, 0, kInfinity, 0, "optimizer.epsilon"},
      {OptimizerConfig::ADAGRAD, 0, 0, 0, 0, -0.1f, "optimizer.initial_accumulator"},
      {OptimizerConfig::ADAGRAD, 0, 0, 0, 0, kNaN, "optimizer.initial_accumulator"},
      {OptimizerConfig::ADAM, 0, 1.0f, 0, 0, 0, "optimizer.beta1"},
      {OptimizerConfig::ADAM, 0, -0.5f, 0, 0, 0, "optimizer.beta1"},
      {OptimizerConfig::ADAM, 0, 0, 1.5f, 0, 0, "optimizer.beta2"},
      {OptimizerConfig::ADAM, 0, 0, kNaN, 0, 0, "optimizer.beta2"},
      {OptimizerConfig::ADAM, 0, 0, 0, -1e-8f, 0, "optimizer.epsilon"},
      {static_cast<OptimizerConfig::Kind>(99), 0, 0, 0, 0, 0, "optimizer.kind"},
  };
  for (const Case& c : kCases) {
    OptimizerConfig config;
    config.set_kind(c.kind);
    config.set_momentum(c.momentum);
    config.set_beta1(c.beta1);
    config.set_beta2(c.beta2);
    config.set_epsilon(c.epsilon);
    config.set_initial_accumulator(c.initial_accumulator);
    const absl::Status status = ValidateOptimizerConfig(config);
    ASSERT_FALSE(status.ok()) << config.ShortDebugString();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find(c.field), absl::string_view::npos) << status;
  }
}

// ----- Learning-rate schedule -----

TEST(LearningRateScheduleTest, RejectsInvalidSchedulesNamingTheField) {
  const float kNaN = std::numeric_limits<float>::quiet_NaN();
  const float kInfinity = std::numeric_limits<float>::infinity();
  LearningRateSchedule unknown_kind = Constant(0.1f);
  unknown_kind.set_kind(static_cast<LearningRateSchedule::Kind>(42));
  struct Case {
    LearningRateSchedule schedule;
    const char* message_part;
  };
  const Case kCases[] = {
      {Constant(0), "learning_rate.base must be finite and > 0"},
      {Constant(-0.1f), "learning_rate.base must be finite and > 0"},
      {Constant(kNaN), "learning_rate.base must be finite and > 0"},
      {Constant(kInfinity), "learning_rate.base must be finite and > 0"},
      {StepDecay(0.1f, 0, 0.5f), "learning_rate.decay_steps must be > 0 for STEP_DECAY"},
      {StepDecay(0.1f, -5, 0.5f), "learning_rate.decay_steps must be > 0 for STEP_DECAY"},
      {StepDecay(0.1f, 10, 0), "learning_rate.decay_factor must be in (0, 1] for STEP_DECAY"},
      {StepDecay(0.1f, 10, 1.5f), "learning_rate.decay_factor must be in (0, 1] for STEP_DECAY"},
      {StepDecay(0.1f, 10, kNaN), "learning_rate.decay_factor must be in (0, 1] for STEP_DECAY"},
      {LinearWarmup(0.1f, 0), "learning_rate.warmup_steps must be > 0 for LINEAR_WARMUP"},
      {LinearWarmup(0.1f, -1), "learning_rate.warmup_steps must be > 0 for LINEAR_WARMUP"},
      {unknown_kind, "learning_rate.kind"},
  };
  for (const Case& c : kCases) {
    absl::Status status = ValidateLearningRateSchedule(c.schedule);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << c.schedule.ShortDebugString();
    EXPECT_NE(status.message().find(c.message_part), absl::string_view::npos) << status;
  }
}

// ----- Initializer -----

TEST(InitializerConfigTest, AcceptsGoodInitializers) {
  const VariableDef kGood[] = {
      MakeVariable("a", {2}, InitializerConfig::ZEROS, -1.0f),
      MakeVariable("b", {2}, InitializerConfig::CONSTANT, -1.0f),
      MakeVariable("c", {2}, InitializerConfig::UNIFORM, 0.0f),
      MakeVariable("d", {2}, InitializerConfig::NORMAL, 0.1f),
      MakeVariable("e", {2}, InitializerConfig::GLOROT_UNIFORM, 0.0f),
  };
  for (const VariableDef& variable : kGood) {
    EXPECT_TRUE(ValidateInitializer(variable).ok()) << variable.ShortDebugString();
  }
}

TEST(InitializerConfigTest, RejectsBadScalesNamingTheVariable) {
  const float kNaN = std::numeric_limits<float>::quiet_NaN();
  const float kInfinity = std::numeric_limits<float>::infinity();
  const VariableDef kBad[] = {
      MakeVariable("uniform_negative", {2}, InitializerConfig::UNIFORM, -0.1f),
      MakeVariable("uniform_infinite", {2}, InitializerConfig::UNIFORM, kInfinity),
      MakeVariable("normal_negative", {2}, InitializerConfig::NORMAL, -1.0f),
      MakeVariable("normal_nan", {2}, InitializerConfig::NORMAL, kNaN),
      MakeVariable("constant_nan", {2}, InitializerConfig::CONSTANT, kNaN),
      MakeVariable("unknown_kind", {2}, static_cast<InitializerConfig::Kind>(77), 1.0f),
  };
  for (const VariableDef& variable : kBad) {
    const absl::Status status = ValidateInitializer(variable);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << variable.ShortDebugString();
    EXPECT_NE(status.message().find("\"" + variable.name() + "\""), absl::string_view::npos)
        << status;
    EXPECT_NE(status.message().find("initializer."), absl::string_view::npos) << status;
  }
}

}  // namespace
}  // namespace ps
