// What the ShardJob tests share.
#ifndef PS_SERVER_SHARD_JOB_TESTING_H_
#define PS_SERVER_SHARD_JOB_TESTING_H_

#include <vector>

#include <gtest/gtest.h>

#include "server/shard_job.h"

namespace ps {

// Every value the shard holds, slice after slice, as a pull of the job's run reads them now.
inline std::vector<float> AllValues(ShardJob* job) {
  PullRequest pull;
  pull.set_job_id(job->spec().job_id());
  pull.set_run_id(job->spec().run_id());
  std::vector<float> values;
  job->Pull(pull, [&values](absl::StatusOr<ShardJob::PullSnapshot> snapshot) {
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    for (absl::Span<const float> piece : snapshot->pieces) {
      values.insert(values.end(), piece.begin(), piece.end());
    }
  });
  return values;
}

}  // namespace ps

#endif  // PS_SERVER_SHARD_JOB_TESTING_H_
