#include "ctl/job/exit_code.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(ExitCodeTest, EachKindOfEndHasItsCode) {
  EXPECT_EQ(ExitCode(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCode(absl::CancelledError("interrupted")), 130);
  // Bad input: every data error alike, a truncated IDX file (DATA_LOSS) as a malformed CSV line.
  EXPECT_EQ(ExitCode(absl::DataLossError("t.idx is truncated")), 2);
  EXPECT_EQ(ExitCode(absl::InvalidArgumentError("line 3: not a number")), 2);
  EXPECT_EQ(ExitCode(absl::NotFoundError("no such file")), 2);
  EXPECT_EQ(ExitCode(absl::FailedPreconditionError("results exist")), 2);
  EXPECT_EQ(ExitCode(absl::AlreadyExistsError("job exists")), 2);
  EXPECT_EQ(ExitCode(absl::PermissionDeniedError("not yours")), 2);
  EXPECT_EQ(ExitCode(absl::UnauthenticatedError("no token")), 2);
  // The cluster, not the job: retry.
  EXPECT_EQ(ExitCode(absl::UnavailableError("ps:0 is down")), 138);
  EXPECT_EQ(ExitCode(absl::DeadlineExceededError("barrier")), 138);
  EXPECT_EQ(ExitCode(absl::ResourceExhaustedError("--max_jobs")), 138);
  // The job itself failed.
  EXPECT_EQ(ExitCode(absl::AbortedError("training diverged")), 1);
  EXPECT_EQ(ExitCode(absl::InternalError("bug")), 1);
  EXPECT_EQ(ExitCode(absl::UnknownError("?")), 1);
}

TEST(ExitCodeTest, AStatusMayCarryItsExitCode) {
  const absl::Status stopped =
      WithExitCode(absl::AbortedError("job j was stopped on worker:0 by alice"), kExitStopped);
  EXPECT_EQ(ExitCode(stopped), 4);
  EXPECT_EQ(stopped.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(stopped.message(), "job j was stopped on worker:0 by alice");
  EXPECT_EQ(ExitCode(absl::AbortedError("training diverged")), 1) << "only the marked one";
}

}  // namespace
}  // namespace ps
