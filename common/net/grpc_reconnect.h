// How a channel reaches a task again after the task went away and was started again.
#ifndef PS_COMMON_NET_GRPC_RECONNECT_H_
#define PS_COMMON_NET_GRPC_RECONNECT_H_

#include <grpcpp/support/channel_arguments.h>

#include <algorithm>

#include "absl/time/time.h"

namespace ps {

// Channel arguments under which a task started again on its address is reached within about
// `max_backoff` of listening (gRPC's own backoff grows to two minutes).
//
// gRPC reads GRPC_ARG_MIN_RECONNECT_BACKOFF_MS as the least time one connection attempt is
// given (TCP connect and the HTTP/2 handshake); that stays long. Were it as short as the
// backoff, an attempt made while no call is active (no thread polls the new connection, so the
// server's settings frame is not read) would time out before its handshake is read, again and
// again: a call made in between fails at once on the channel's TRANSIENT_FAILURE, and a restarted
// ps stayed out of reach for tens of seconds under chaos (bench/RESULTS.md).
inline void SetQuickReconnect(grpc::ChannelArguments* arguments, absl::Duration max_backoff) {
  const int max_ms = static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(max_backoff)));
  arguments->SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, std::min(100, max_ms));
  arguments->SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_ms);
  arguments->SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 10000);  // The least connect timeout.
}

}  // namespace ps

#endif  // PS_COMMON_NET_GRPC_RECONNECT_H_
