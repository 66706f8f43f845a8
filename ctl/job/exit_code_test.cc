#include "ctl/job/exit_code.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(ExitCodeTest, InputErrorsAreTwoRunFailuresOne) {
  EXPECT_EQ(ExitCode(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCode(absl::CancelledError("interrupted")), 130);
  // Every data error alike, a truncated IDX file (DATA_LOSS) as a malformed CSV line.
  EXPECT_EQ(ExitCode(absl::DataLossError("t.idx is truncated")), 2);
  EXPECT_EQ(ExitCode(absl::InvalidArgumentError("line 3: not a number")), 2);
  EXPECT_EQ(ExitCode(absl::NotFoundError("no such file")), 2);
  EXPECT_EQ(ExitCode(absl::FailedPreconditionError("results exist")), 2);
  EXPECT_EQ(ExitCode(absl::AlreadyExistsError("job exists")), 2);
  EXPECT_EQ(ExitCode(absl::PermissionDeniedError("not yours")), 2);
  EXPECT_EQ(ExitCode(absl::UnauthenticatedError("no token")), 2);
  EXPECT_EQ(ExitCode(absl::UnavailableError("ps:0 is down")), 1);
  EXPECT_EQ(ExitCode(absl::DeadlineExceededError("barrier")), 1);
  EXPECT_EQ(ExitCode(absl::AbortedError("diverged")), 1);
  EXPECT_EQ(ExitCode(absl::ResourceExhaustedError("too big")), 1);
  EXPECT_EQ(ExitCode(absl::InternalError("bug")), 1);
}

}  // namespace
}  // namespace ps
