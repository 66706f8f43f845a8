// The one place that maps between absl::Status and grpc::Status. Codes carry over one to one
// (both follow google.rpc.Code); messages are kept.
#ifndef PS_COMMON_NET_GRPC_STATUS_H_
#define PS_COMMON_NET_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace ps {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace ps

#endif  // PS_COMMON_NET_GRPC_STATUS_H_
