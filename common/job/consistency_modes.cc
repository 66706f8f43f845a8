#include "common/job/consistency_modes.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", problem));
}

// Each mode's own settings.

absl::Status ValidateSync(const ConsistencyConfig& consistency, int num_workers) {
  if (consistency.replicas_to_aggregate() < 0 ||
      consistency.replicas_to_aggregate() > num_workers) {
    return FieldError("consistency.replicas_to_aggregate",
                      absl::StrCat("is ", consistency.replicas_to_aggregate(),
                                   " but the cluster has ", num_workers, " workers: use 1 to ",
                                   num_workers, ", or 0 for all"));
  }
  return absl::OkStatus();
}

absl::Status ValidateAsync(const ConsistencyConfig& consistency, int /*num_workers*/) {
  if (consistency.max_staleness() < 0) {
    return FieldError("consistency.max_staleness",
                      absl::StrCat("is ", consistency.max_staleness(),
                                   ": it must be >= 0 (0: no bound)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateSsp(const ConsistencyConfig& consistency, int /*num_workers*/) {
  if (consistency.ssp_bound() < 0) {
    return FieldError("consistency.ssp_bound",
                      absl::StrCat("is ", consistency.ssp_bound(), ": it must be >= 0"));
  }
  return absl::OkStatus();
}

absl::Status ValidateSoftsync(const ConsistencyConfig& consistency, int /*num_workers*/) {
  if (consistency.softsync_n() < 1) {
    return FieldError("consistency.softsync_n",
                      absl::StrCat("is ", consistency.softsync_n(), ": it must be >= 1"));
  }
  return absl::OkStatus();
}

absl::Status ValidateNothing(const ConsistencyConfig& /*consistency*/, int /*num_workers*/) {
  return absl::OkStatus();
}

absl::Status ValidateEasgd(const ConsistencyConfig& consistency, int /*num_workers*/) {
  if (!(consistency.easgd_alpha() > 0 && consistency.easgd_alpha() <= 1)) {
    return FieldError("consistency.easgd_alpha",
                      absl::StrCat("is ", consistency.easgd_alpha(),
                                   ": EASGD moves each copy and the center by a fraction in "
                                   "(0, 1] of their difference (0.9 / workers is usual)"));
  }
  if (consistency.easgd_period() < 1) {
    return FieldError("consistency.easgd_period",
                      absl::StrCat("is ", consistency.easgd_period(),
                                   ": a worker meets the center every easgd_period >= 1 steps"));
  }
  return absl::OkStatus();
}

absl::Status ValidateDelayed(const ConsistencyConfig& consistency, int /*num_workers*/) {
  if (consistency.delay() < 0 || consistency.delay() > kMaxDelay) {
    return FieldError("consistency.delay",
                      absl::StrCat("is ", consistency.delay(), ": DELAYED serves values 0 to ",
                                   kMaxDelay, " updates old"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLocalSgd(const ConsistencyConfig& consistency, int /*num_workers*/) {
  if (consistency.local_steps() < 1) {
    return FieldError("consistency.local_steps",
                      absl::StrCat("is ", consistency.local_steps(),
                                   ": LOCAL_SGD averages the models every local_steps >= 1 "
                                   "steps"));
  }
  return absl::OkStatus();
}

// LOCAL_SGD's workers hold one model only right after an averaging, which is when the chief
// can publish it for a checkpoint.
absl::Status ValidateLocalSgdJob(const JobSpec& spec) {
  const int64_t every = spec.checkpoint().every_steps();
  if (every > 0 && every % spec.consistency().local_steps() != 0) {
    return FieldError("checkpoint.every_steps",
                      absl::StrCat("is ", every, ", not a multiple of consistency.local_steps (",
                                   spec.consistency().local_steps(),
                                   "): LOCAL_SGD's workers hold one model only after an "
                                   "averaging"));
  }
  return absl::OkStatus();
}

// The rows. Each is complete: a field left out would read as false or null, so every one is
// given.
const ModeTraits kSync = {
    ConsistencyConfig::SYNC, ModeFamily::kPs, Staleness::kNone, CheckpointPolicy::kAgreedStep,
    LostWorkerPolicy::kBackupWorkers,
    /*shards_hold_the_model=*/true, /*barrier=*/true, /*center_moves_by_differences=*/false,
    /*downpour=*/false, /*staleness_settings=*/false, /*replayable=*/false,
    /*why_no_downpour=*/"", /*why_no_checkpoints=*/"", ValidateSync, /*validate_job=*/nullptr};
const ModeTraits kAsync = {
    ConsistencyConfig::ASYNC, ModeFamily::kPs, Staleness::kFromPace,
    CheckpointPolicy::kCurrentVersion, LostWorkerPolicy::kGoesOn,
    /*shards_hold_the_model=*/true, /*barrier=*/false, /*center_moves_by_differences=*/false,
    /*downpour=*/true, /*staleness_settings=*/true, /*replayable=*/true,
    /*why_no_downpour=*/"", /*why_no_checkpoints=*/"", ValidateAsync, /*validate_job=*/nullptr};
const ModeTraits kSsp = {
    ConsistencyConfig::SSP, ModeFamily::kPs, Staleness::kUpToBound, CheckpointPolicy::kAgreedStep,
    LostWorkerPolicy::kLeavesAfterLease,
    /*shards_hold_the_model=*/true, /*barrier=*/false, /*center_moves_by_differences=*/false,
    /*downpour=*/false, /*staleness_settings=*/false, /*replayable=*/false,
    /*why_no_downpour=*/"", /*why_no_checkpoints=*/"", ValidateSsp, /*validate_job=*/nullptr};
const ModeTraits kSoftsync = {
    ConsistencyConfig::SOFTSYNC, ModeFamily::kPs, Staleness::kFromPace,
    CheckpointPolicy::kCurrentVersion, LostWorkerPolicy::kGoesOn,
    /*shards_hold_the_model=*/true, /*barrier=*/false, /*center_moves_by_differences=*/false,
    /*downpour=*/false, /*staleness_settings=*/false, /*replayable=*/false,
    /*why_no_downpour=*/"", /*why_no_checkpoints=*/"", ValidateSoftsync,
    /*validate_job=*/nullptr};
const ModeTraits kAllreduce = {
    ConsistencyConfig::ALLREDUCE, ModeFamily::kRing, Staleness::kNone,
    CheckpointPolicy::kPublishedStep, LostWorkerPolicy::kFails,
    /*shards_hold_the_model=*/false, /*barrier=*/false, /*center_moves_by_differences=*/false,
    /*downpour=*/false, /*staleness_settings=*/false, /*replayable=*/false,
    /*why_no_downpour=*/"ALLREDUCE workers average among themselves",
    /*why_no_checkpoints=*/"", ValidateNothing,
    /*validate_job=*/nullptr};
const ModeTraits kLocalSgd = {
    ConsistencyConfig::LOCAL_SGD, ModeFamily::kRing, Staleness::kOwnCopies,
    CheckpointPolicy::kPublishedStep, LostWorkerPolicy::kFails,
    /*shards_hold_the_model=*/false, /*barrier=*/false, /*center_moves_by_differences=*/false,
    /*downpour=*/false, /*staleness_settings=*/false, /*replayable=*/false,
    /*why_no_downpour=*/"LOCAL_SGD workers average among themselves",
    /*why_no_checkpoints=*/"", ValidateLocalSgd,
    ValidateLocalSgdJob};
const ModeTraits kDelayed = {
    ConsistencyConfig::DELAYED, ModeFamily::kPs, Staleness::kFixed, CheckpointPolicy::kNone,
    LostWorkerPolicy::kGoesOn,
    /*shards_hold_the_model=*/false, /*barrier=*/false, /*center_moves_by_differences=*/false,
    /*downpour=*/false, /*staleness_settings=*/false, /*replayable=*/false,
    /*why_no_downpour=*/"DELAYED sets the delay itself",
    /*why_no_checkpoints=*/"the old values it serves are kept in memory only", ValidateDelayed,
    /*validate_job=*/nullptr};
const ModeTraits kEasgd = {
    ConsistencyConfig::EASGD, ModeFamily::kPs, Staleness::kOwnCopies, CheckpointPolicy::kNone,
    LostWorkerPolicy::kGoesOn,
    /*shards_hold_the_model=*/false, /*barrier=*/false, /*center_moves_by_differences=*/true,
    /*downpour=*/false, /*staleness_settings=*/false, /*replayable=*/false,
    /*why_no_downpour=*/
    "EASGD's workers keep copies of their own and meet the center every easgd_period steps",
    /*why_no_checkpoints=*/"the workers' copies are not in the shards", ValidateEasgd,
    /*validate_job=*/nullptr};

}  // namespace

const ModeTraits* FindModeTraits(ConsistencyConfig::Mode mode) {
  switch (mode) {  // No default: a mode without a row does not build.
    case ConsistencyConfig::SYNC:
      return &kSync;
    case ConsistencyConfig::ASYNC:
      return &kAsync;
    case ConsistencyConfig::SSP:
      return &kSsp;
    case ConsistencyConfig::SOFTSYNC:
      return &kSoftsync;
    case ConsistencyConfig::ALLREDUCE:
      return &kAllreduce;
    case ConsistencyConfig::LOCAL_SGD:
      return &kLocalSgd;
    case ConsistencyConfig::DELAYED:
      return &kDelayed;
    case ConsistencyConfig::EASGD:
      return &kEasgd;
    case ConsistencyConfig::MODE_UNSPECIFIED:
    case ConsistencyConfig_Mode_ConsistencyConfig_Mode_INT_MIN_SENTINEL_DO_NOT_USE_:
    case ConsistencyConfig_Mode_ConsistencyConfig_Mode_INT_MAX_SENTINEL_DO_NOT_USE_:
      return nullptr;
  }
  return nullptr;  // A value outside the enum (proto3 keeps unknown values).
}

const ModeTraits& ModeTraitsOf(ConsistencyConfig::Mode mode) {
  const ModeTraits* traits = FindModeTraits(mode);
  // A validated job has a mode with a row; anything else is a bug of the caller.
  if (traits == nullptr) std::abort();
  return *traits;
}

std::vector<ConsistencyConfig::Mode> AllModes() {
  std::vector<ConsistencyConfig::Mode> modes;
  for (int value = ConsistencyConfig::Mode_MIN; value <= ConsistencyConfig::Mode_MAX; ++value) {
    if (ConsistencyConfig::Mode_IsValid(value) &&
        FindModeTraits(static_cast<ConsistencyConfig::Mode>(value)) != nullptr) {
      modes.push_back(static_cast<ConsistencyConfig::Mode>(value));
    }
  }
  return modes;
}

std::string ModeNames(const std::function<bool(const ModeTraits&)>& which,
                      const std::string& last) {
  std::vector<std::string> names;
  for (ConsistencyConfig::Mode mode : AllModes()) {
    if (which(ModeTraitsOf(mode))) names.push_back(ConsistencyConfig::Mode_Name(mode));
  }
  std::string joined;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) {
      absl::StrAppend(&joined, i + 1 == names.size() ? absl::StrCat(" ", last, " ") : ", ");
    }
    absl::StrAppend(&joined, names[i]);
  }
  return joined;
}

}  // namespace ps
