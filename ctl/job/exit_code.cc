#include "ctl/job/exit_code.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ps {
namespace {

constexpr char kExitCodePayload[] = "type.googleapis.com/ps.ExitCode";

}  // namespace

int ExitCode(const absl::Status& status) {
  if (auto payload = status.GetPayload(kExitCodePayload)) {
    int code;
    if (absl::SimpleAtoi(std::string(*payload), &code)) return code;
  }
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitDone;
    case absl::StatusCode::kCancelled:
      return kExitInterrupted;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return kExitBadInput;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
      return kExitRetry;
    default:  // ABORTED (diverged), INTERNAL, UNKNOWN, UNIMPLEMENTED.
      return kExitJobFailed;
  }
}

absl::Status WithExitCode(absl::Status status, int exit_code) {
  status.SetPayload(kExitCodePayload, absl::Cord(absl::StrCat(exit_code)));
  return status;
}

}  // namespace ps
