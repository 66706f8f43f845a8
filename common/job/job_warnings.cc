#include "common/job/job_warnings.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/job/consistency_modes.h"

namespace ps {
namespace {

// Whether gradients are computed on values other workers' updates have since moved: the
// staleness that acts as momentum.
bool Asynchronous(const ConsistencyConfig& consistency) {
  const ModeTraits* mode = FindModeTraits(consistency.mode());
  if (mode == nullptr) return false;
  return mode->staleness == Staleness::kFromPace ||
         (mode->staleness == Staleness::kUpToBound && consistency.ssp_bound() > 0);
}

// The momentum-like coefficient of the job's optimizer, or 0.
double Momentum(const OptimizerConfig& optimizer) {
  switch (optimizer.kind()) {
    case OptimizerConfig::MOMENTUM:
      return optimizer.momentum() > 0 ? optimizer.momentum() : 0.9;
    case OptimizerConfig::ADAM:
      return optimizer.beta1() > 0 ? optimizer.beta1() : 0.9;
    default:
      return 0;
  }
}

}  // namespace

std::vector<std::string> JobWarnings(const JobSpec& spec, int num_workers) {
  std::vector<std::string> warnings;
  const ConsistencyConfig& consistency = spec.consistency();
  const std::string mode = ConsistencyConfig::Mode_Name(consistency.mode());
  const double momentum = Momentum(spec.optimizer());
  if (momentum > 0 && num_workers >= 2 && Asynchronous(consistency)) {
    warnings.push_back(absl::StrFormat(
        "%s with momentum %.2g on %d workers: asynchrony itself acts as momentum of about "
        "1 - 1/N = %.2g (Mitliagkas et al. 2016), so together they overshoot at a learning rate "
        "SYNC tolerates (on handwritten digits: 98%% accuracy in SYNC, 8-26%% in ASYNC). Lower "
        "the momentum or the learning rate, or use SYNC",
        mode, momentum, num_workers, 1.0 - 1.0 / num_workers));
  }
  const ModeTraits* traits = FindModeTraits(consistency.mode());
  if (traits == nullptr) return warnings;
  if (traits->staleness_settings && num_workers >= 4 &&
      spec.learning_rate().kind() == LearningRateSchedule::CONSTANT &&
      consistency.staleness_learning_rate() == ConsistencyConfig::NONE &&
      consistency.max_staleness() == 0) {
    warnings.push_back(absl::StrFormat(
        "%s on %d workers at a constant learning rate %g: each gradient is about %d updates "
        "stale, and gradient descent with delay tau is stable only below a rate about "
        "1 / (2 tau + 1) of the undelayed limit. Set consistency.staleness_learning_rate: "
        "INVERSE or max_staleness, or lower the learning rate",
        mode, num_workers, spec.learning_rate().base(), num_workers - 1));
  }
  // The optimizer lives on the workers and its state in no checkpoint.
  if (traits->family == ModeFamily::kRing && spec.checkpoint().every_steps() > 0 &&
      spec.optimizer().kind() != OptimizerConfig::SGD) {
    warnings.push_back(absl::StrCat(
        mode, " checkpoints hold the chief's weights but not the state of its ",
        OptimizerConfig::Kind_Name(spec.optimizer().kind()),
        " optimizer, which lives on the workers: a run resumed from one starts that state "
        "afresh (only plain SGD resumes exactly)"));
  }
  return warnings;
}

}  // namespace ps
