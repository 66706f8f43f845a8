// The rules a job must satisfy, in one place: the JobSpec a user submits (checked by psctl and
// by every worker daemon) and the ParameterSpec a ps shard is created with (checked by
// ShardJob::Create). The parts they share (consistency, optimizer, learning-rate schedule)
// share their code, so each rule has one message. Every check is pure: no I/O, no state.
//
// Every failure is INVALID_ARGUMENT and its message names the field and the fix. Messages
// about a ParameterSpec start with JobPrefix(job_id); those about a JobSpec do not (the
// caller names the file or the sweep point).
#ifndef PS_COMMON_JOB_JOB_SCHEMA_H_
#define PS_COMMON_JOB_JOB_SCHEMA_H_

#include <string>

#include "absl/status/status.h"
#include "common/job/consistency_modes.h"
#include "proto/job.pb.h"
#include "proto/parameter.pb.h"

namespace ps {

// Bounds on the counts and sizes in a job, checked here before anything is allocated from them
// (docs/ARCHITECTURE.md section 3). What a ps holds of a job is bounded by its own limits too
// (ps_server --max_workers, --max_job_mb, ...), and a worker's data and model by theirs
// (worker/data/dataset.h, worker/model/model.h).
inline constexpr int kMaxVariables = 1 << 16;       // ParameterSpec.variables.
// ParameterSpec.num_workers, whoever sends the spec (a ps's --max_workers is lower, 4096 by
// default; this bounds what a spec read from a checkpoint file may ask for too).
inline constexpr int kMaxWorkers = 1 << 20;
inline constexpr int kMaxVariableRank = 32;         // Dimensions of a VariableDef.shape.
inline constexpr int kMaxVariableNameBytes = 1024;  // VariableDef.name.
inline constexpr int kMaxBatchSize = 1 << 20;       // JobSpec.batch_size.
inline constexpr int kMaxHiddenLayers = 256;        // ModelSpec.hidden_sizes.
inline constexpr int kMaxLayerWidth = 1 << 20;      // Each of ModelSpec.hidden_sizes.
inline constexpr int kMaxFeatureDim = 1 << 24;      // DataSpec.feature_dim, synthetic's too.

// Whether `kind` is a sparse model (SPARSE_LOGISTIC_REGRESSION, EMBEDDING_BAG_MLP:
// worker/model/sparse_model.h), whose weights include a sparse table.
bool IsSparseModel(ModelSpec::Kind kind);

// "job \"ID\": ", the start of every message about a job on a ps.
std::string JobPrefix(const std::string& job_id);

// A job id (or run id): letters, digits, '.', '_' and '-', not starting with '.', at most 128
// characters, since it names directories (checkpoints, results). `field` names it in the error.
absl::Status ValidateId(const std::string& id, const std::string& field);

// A job the ps can serve: job_id, variables (at most kMaxVariables, each with a name of at most
// kMaxVariableNameBytes, at most kMaxVariableRank dimensions and a valid initializer), 1 <=
// num_workers <= kMaxWorkers, optimizer, learning-rate schedule and consistency settings against
// num_workers. Placement (dimensions, names, slice sizes) is checked by PlaceVariables.
absl::Status ValidateParameterSpec(const ParameterSpec& spec);

// `spec` without who is in the job (num_workers, worker_addresses, workers_before_growth): what
// the job computes, which a growth does not change. Two shards' specs of one job, or a
// checkpoint's and a resumed run's, compare equal this way across a growth.
ParameterSpec WithoutMembership(ParameterSpec spec);

// A job a cluster of `num_workers` workers can run: job_id, model (at most kMaxHiddenLayers
// hidden layers of at most kMaxLayerWidth units; a sparse model's data, mode and options),
// data (feature_dim at most kMaxFeatureDim),
// batch size (1 to kMaxBatchSize), stop rules, checkpoints, evaluation, consistency against
// `num_workers`, Downpour settings, stragglers, learning-rate schedule and optimizer. E.g.
// "consistency.replicas_to_aggregate is 5 but the cluster has 4 workers: use 1 to 4, or 0 for
// all".
absl::Status ValidateJobSpec(const JobSpec& spec, int num_workers);

// The settings of `consistency.mode` for `num_workers` workers: replicas_to_aggregate from 0
// (all) to num_workers for SYNC, max_staleness >= 0 for ASYNC, ssp_bound >= 0 for SSP,
// softsync_n >= 1 for SOFTSYNC, local_steps >= 1 for LOCAL_SGD, 0 <= delay <= kMaxDelay for
// DELAYED; the mode must be set.
absl::Status ValidateConsistencyConfig(const ConsistencyConfig& consistency, int num_workers);

// The settings `config.kind` uses, as given (a 0 stands for the default in parameter.proto,
// which is in range): momentum, beta1 and beta2 in [0, 1); epsilon and initial_accumulator
// finite and >= 0; a known kind.
absl::Status ValidateOptimizerConfig(const OptimizerConfig& config);

// base finite and > 0; STEP_DECAY with decay_steps > 0 and decay_factor in (0, 1];
// LINEAR_WARMUP with warmup_steps > 0; a known kind.
absl::Status ValidateLearningRateSchedule(const LearningRateSchedule& schedule);

// Names the variable: a known kind; a finite scale for CONSTANT; a finite scale >= 0 for
// UNIFORM and NORMAL.
absl::Status ValidateInitializer(const VariableDef& variable);

}  // namespace ps

#endif  // PS_COMMON_JOB_JOB_SCHEMA_H_
