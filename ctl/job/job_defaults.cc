#include "ctl/job/job_defaults.h"

#include "absl/strings/str_cat.h"
#include "common/job/job_schema.h"

namespace ps {

JobSpec WithCrashDefaults(const JobSpec& spec, int num_workers, std::vector<std::string>* applied) {
  JobSpec result = spec;
  if (!spec.has_checkpoint()) {
    JobSpec with = result;
    with.mutable_checkpoint()->set_every_seconds(kDefaultCheckpointSeconds);
    if (ValidateJobSpec(with, num_workers).ok()) {
      result = std::move(with);
      applied->push_back(absl::StrCat("a checkpoint every ", kDefaultCheckpointSeconds,
                                      " s (the job sets no \"checkpoint\"; {} for none)"));
    }
  }
  if (!spec.has_worker_lease_s()) {
    JobSpec with = result;
    with.set_worker_lease_s(kDefaultWorkerLeaseSeconds);
    if (ValidateJobSpec(with, num_workers).ok()) {
      result = std::move(with);
      applied->push_back(absl::StrCat("a worker lease of ", kDefaultWorkerLeaseSeconds,
                                      " s (the job sets no \"worker_lease_s\"; 0 for none)"));
    }
  }
  return result;
}

}  // namespace ps
