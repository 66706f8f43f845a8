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
  return PushDecision::Of(PushDecision::kAssign);
}

}  // namespace ps
