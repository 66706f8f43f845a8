#include "common/ps_connections.h"

#include <algorithm>

#include <grpc/grpc.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_deadline.h"
#include "common/auth_token.h"
#include "common/grpc_reconnect.h"
#include "common/grpc_status.h"
#include "common/host_port.h"

namespace ps {
namespace {

constexpr char kServicePrefix[] = "/ps.ParameterServer/";

}  // namespace

struct PsConnections::InFlight {
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Status handled;  // What on_response returned, for an OK status.

  // Runs the call's handler on an OK response, then frees the response.
  void Handle(const Call& call) {
    if (status.ok()) {
      handled = call.on_response(response);
      response.Clear();
    }
  }
};

absl::StatusOr<std::unique_ptr<PsConnections>> PsConnections::Create(
    const PsClientOptions& options) {
  if (options.ps_addresses.empty()) {
    return absl::InvalidArgumentError("no ps addresses: the cluster needs at least one ps task");
  }
  std::unique_ptr<PsConnections> connections(new PsConnections(options));
  for (size_t ps = 0; ps < options.ps_addresses.size(); ++ps) {
    absl::StatusOr<HostPort> address = ParseHostPort(options.ps_addresses[ps]);
    if (!address.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ps:", ps, ": ", address.status().message()));
    }
    connections->connections_.emplace_back();
    for (int c = 0; c < std::max(1, options.connections_per_ps); ++c) {
      grpc::ChannelArguments arguments;
      arguments.SetMaxReceiveMessageSize(options.max_message_bytes);
      arguments.SetMaxSendMessageSize(options.max_message_bytes);
      // A distinct argument per connection keeps gRPC from sharing one TCP connection.
      arguments.SetInt("ps.connection_index", c);
      SetQuickReconnect(&arguments, options.max_reconnect_backoff);
      Connection connection;
      connection.channel = grpc::experimental::CreateCustomChannelWithInterceptors(
          address->ToString(), ChannelCredentialsFor(options.security), arguments,
          BearerTokenInterceptors(options.token));
      connection.stub = std::make_unique<grpc::GenericStub>(connection.channel);
      connections->connections_.back().push_back(std::move(connection));
    }
  }
  return connections;
}

std::string PsConnections::ShardName(int ps) const {
  return absl::StrCat("ps:", ps, " (", options_.ps_addresses[ps], ")");
}

const PsConnections::Connection& PsConnections::ConnectionFor(const Call& call) const {
  const std::vector<Connection>& shard = connections_[call.ps];
  return shard[call.connection % shard.size()];
}

std::vector<std::unique_ptr<PsConnections::InFlight>> PsConnections::Attempt(
    const std::vector<Call>& calls, const std::vector<size_t>& pending) const {
  std::vector<std::unique_ptr<InFlight>> in_flight;
  for (size_t index : pending) {
    auto state = std::make_unique<InFlight>();
    state->context.set_deadline(GrpcDeadline(calls[index].timeout));
    state->request = calls[index].make_request();
    in_flight.push_back(std::move(state));
  }
  // Every call but the last goes out through the callback API and is handled on a gRPC thread
  // as soon as its response is in, so that decoding one overlaps the others.
  absl::Mutex mu;
  size_t remaining = pending.size() - 1;
  for (size_t i = 0; i + 1 < pending.size(); ++i) {
    const Call& call = calls[pending[i]];
    InFlight* raw = in_flight[i].get();
    ConnectionFor(call).stub->UnaryCall(&raw->context, kServicePrefix + call.method,
                                        grpc::StubOptions(), &raw->request, &raw->response,
                                        [raw, &call, &mu, &remaining](grpc::Status status) {
                                          raw->status = std::move(status);
                                          raw->Handle(call);
                                          absl::MutexLock lock(&mu);
                                          --remaining;
                                        });
  }
  // The last is made on a completion queue that this thread drives, which saves a thread
  // switch on each side of the common single call.
  {
    const Call& call = calls[pending.back()];
    InFlight* raw = in_flight.back().get();
    grpc::CompletionQueue queue;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader =
        ConnectionFor(call).stub->PrepareUnaryCall(&raw->context, kServicePrefix + call.method,
                                                   raw->request, &queue);
    reader->StartCall();
    reader->Finish(&raw->response, &raw->status, raw);
    void* tag = nullptr;
    bool ok = false;
    queue.Next(&tag, &ok);  // Finish's event, the only one this queue gets.
    queue.Shutdown();
    while (queue.Next(&tag, &ok)) {
    }
    raw->Handle(call);
  }
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(
      +[](size_t* left) { return *left == 0; }, &remaining));
  return in_flight;
}

absl::Status PsConnections::RunCalls(std::vector<Call> calls) {
  if (calls.empty()) return absl::OkStatus();
  std::vector<size_t> pending(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) pending[i] = i;
  absl::Duration backoff = options_.initial_backoff;
  for (int attempt = 1;; ++attempt) {
    std::vector<std::unique_ptr<InFlight>> in_flight = Attempt(calls, pending);
    absl::Status first_error;
    std::vector<size_t> retry;
    for (size_t i = 0; i < pending.size(); ++i) {
      const Call& call = calls[pending[i]];
      absl::Status status = FromGrpcStatus(in_flight[i]->status);
      if (status.ok()) {
        status = in_flight[i]->handled;
      } else if (absl::IsUnavailable(status) && attempt < options_.max_attempts) {
        retry.push_back(pending[i]);
        continue;
      } else if (absl::IsUnavailable(status)) {
        status = absl::UnavailableError(absl::StrCat(
            status.message(), " (after ", attempt, " attempts; is the ps task running there?)"));
      }
      if (!status.ok() && first_error.ok()) {
        first_error = absl::Status(
            status.code(),
            absl::StrCat(ShardName(call.ps), ": ", call.method, ": ", status.message()));
      }
    }
    if (!first_error.ok()) return first_error;
    if (retry.empty()) return absl::OkStatus();
    absl::SleepFor(backoff);
    backoff = std::min(2 * backoff, options_.max_backoff);
    pending = std::move(retry);
  }
}

}  // namespace ps
