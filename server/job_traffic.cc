#include "server/job_traffic.h"

namespace ps {

const char* JobMethodName(JobMethod method) {
  switch (method) {
    case JobMethod::kPull:
      return "Pull";
    case JobMethod::kPush:
      return "Push";
    case JobMethod::kPushPull:
      return "PushPull";
  }
  return "?";
}

void JobTraffic::Count(JobMethod method, grpc::StatusCode code, int64_t received, int64_t sent) {
  const int index = code >= 0 && code < kNumCodes ? code : grpc::StatusCode::UNKNOWN;
  calls_[static_cast<int>(method)][index].Increment();
  received_.Increment(received);
  sent_.Increment(sent);
}

}  // namespace ps
