// The one way this project writes a gRPC deadline: a timeout from now, in the clock gRPC reads.
#ifndef PS_COMMON_NET_GRPC_DEADLINE_H_
#define PS_COMMON_NET_GRPC_DEADLINE_H_

#include <chrono>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ps {

// For ClientContext::set_deadline, Channel::WaitForConnected and Server::Shutdown.
// absl::InfiniteDuration() gives a deadline that never passes.
inline std::chrono::system_clock::time_point GrpcDeadline(absl::Duration timeout) {
  return absl::ToChronoTime(absl::Now() + timeout);
}

}  // namespace ps

#endif  // PS_COMMON_NET_GRPC_DEADLINE_H_
