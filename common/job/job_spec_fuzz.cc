// Fuzzes the JobSpec reader (psctl submit's job files, protobuf's JSON mapping) and the checks
// every worker makes of a job before starting it (ValidateJobSpec): any text is a job or an
// INVALID_ARGUMENT, and a job that parses also validates or not without harm.
//
// Input: the JSON; its length picks the cluster's number of workers (1 to 16).
#include <string>
#include <vector>

#include <glog/logging.h>

#include "common/job/job_schema.h"
#include "common/job/job_spec.h"
#include "common/testing/fuzz_target.h"

namespace ps {

std::vector<std::string> FuzzSeeds() {
  return {
      R"({"job_id": "j", "model": {"kind": "SOFTMAX_REGRESSION"},
          "consistency": {"mode": "SSP", "ssp_bound": 3}, "batch_size": 32, "max_steps": 10})",
  };
}

}  // namespace ps

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int num_workers = 1 + static_cast<int>(size % 16);
  absl::StatusOr<ps::JobSpec> spec = ps::ParseJobSpecJson(ps::AsText(data, size), "fuzz");
  if (!spec.ok()) {
    CHECK(absl::IsInvalidArgument(spec.status())) << spec.status();
    return 0;
  }
  absl::Status valid = ps::ValidateJobSpec(*spec, num_workers);
  CHECK(valid.ok() || absl::IsInvalidArgument(valid)) << valid;
  (void)ps::DataFiles(spec->data());
  return 0;
}
