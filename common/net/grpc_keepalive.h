// How a task finds, while a call is open, that its peer hangs or vanished: HTTP/2 pings.
//
// A peer whose process is stopped (SIGSTOP, a paused VM, a debugger) or whose host lost power
// or its network closes nothing: TCP keeps the connection for many minutes, and a call to it
// (a pull parked at a barrier, a replication stream) would wait for its deadline, or forever
// where it has none. With these arguments each side of a connection pings the other every
// kKeepaliveInterval while a call is open on it, and a ping unanswered for its timeout closes
// the connection: its calls end UNAVAILABLE (a worker's then go to the shard's other copy;
// docs/replication.md), on the server's side too (a backup's stream from a primary that hangs
// ends, so the backup may take the shard over).
//
// A server gives up on a client sooner (kServerKeepaliveTimeout) than a client on a server
// (kKeepaliveTimeout): the backup's end of a hung primary's Replicate stream closes (about 4 s)
// before the workers' calls to that primary fail over (about 7 s), so the first worker to fail
// over finds the copy free to take the shard over. The other way round the copy would send it
// back to the hung primary, where a new connection waits out the 10 s connect timeout.
//
// A live peer answers a ping from gRPC's polling threads, which also run the callback
// handlers: a handler that holds them for seconds (a large install applied inline), or a ping
// queued behind a large message on a slow link, can delay the answer. The timeouts are seconds
// for that reason; a connection closed by mistake costs its calls a retry (pushes are
// deduplicated).
//
// Every channel between the cluster's tasks sets SetKeepalive, and every server
// (StartGrpcServer) AcceptKeepalive, which also lets clients ping that often: gRPC's default
// server answers pings more frequent than every five minutes with GOAWAY ("too_many_pings").
#ifndef PS_COMMON_NET_GRPC_KEEPALIVE_H_
#define PS_COMMON_NET_GRPC_KEEPALIVE_H_

#include <grpcpp/server_builder.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/time/time.h"

namespace ps {

inline constexpr absl::Duration kKeepaliveInterval = absl::Seconds(1);
// A client's: above gRPC's backup poll (every 5 s), which reads a ping on a connection no
// thread polls.
inline constexpr absl::Duration kKeepaliveTimeout = absl::Seconds(6);
// A server's: every client of the cluster's has a thread in each open call (a blocking read or
// gRPC's callback threads), which reads the pings.
inline constexpr absl::Duration kServerKeepaliveTimeout = absl::Seconds(3);

// A client channel: pings while calls are open, however long they send nothing (a pull parked
// at a barrier), and closes the connection on an unanswered one.
inline void SetKeepalive(grpc::ChannelArguments* arguments) {
  arguments->SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
                    static_cast<int>(absl::ToInt64Milliseconds(kKeepaliveInterval)));
  arguments->SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                    static_cast<int>(absl::ToInt64Milliseconds(kKeepaliveTimeout)));
  arguments->SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  arguments->SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // No limit.
}

// A server: pings its clients while their calls are open (a client that hangs ends its calls
// here too), and accepts their pings at SetKeepalive's rate.
inline void AcceptKeepalive(grpc::ServerBuilder* builder) {
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                              static_cast<int>(absl::ToInt64Milliseconds(kKeepaliveInterval)));
  builder->AddChannelArgument(
      GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
      static_cast<int>(absl::ToInt64Milliseconds(kServerKeepaliveTimeout)));
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder->AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      static_cast<int>(absl::ToInt64Milliseconds(kKeepaliveInterval / 2)));
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);  // Never GOAWAY for pings.
}

}  // namespace ps

#endif  // PS_COMMON_NET_GRPC_KEEPALIVE_H_
