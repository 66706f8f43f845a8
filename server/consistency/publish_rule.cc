#include "server/consistency/publish_rule.h"

#include "absl/strings/str_cat.h"

namespace ps {

PushDecision PublishRule::Admit(const PushRequestHeader& header, int64_t staleness) {
  (void)staleness;
  if (header.worker() != 0) {
    return PushDecision::Reject(
        "publisher", absl::FailedPreconditionError(absl::StrCat(
                         "worker ", header.worker(),
                         " pushed to a job whose workers average among themselves (ALLREDUCE, "
                         "LOCAL_SGD): only the chief, worker 0, publishes the model")));
  }
  if (header.step() < step_) {
    return PushDecision::Reject(
        "step", absl::FailedPreconditionError(absl::StrCat(
                    "the chief published the model after ", header.step(),
                    " steps, but the shard holds it after ", step_,
                    " already: a chief of an earlier run, or one that went back")));
  }
  return PushDecision::Of(PushDecision::kAssign);
}

void PublishRule::SaveState(ShardCheckpointState* state) const {
  ConsistencyRule::SaveState(state);
  state->set_step(step_);
}

absl::Status PublishRule::RestoreState(const ShardCheckpointState& state) {
  if (state.step() < 0) return absl::DataLossError("the checkpoint's step is negative");
  step_ = state.step();
  return ConsistencyRule::RestoreState(state);
}

}  // namespace ps
