#include "worker/allreduce/grpc_ring_link.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <utility>

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/security/auth_token.h"
#include "common/net/grpc_deadline.h"
#include "common/net/grpc_keepalive.h"
#include "common/net/grpc_reconnect.h"
#include "common/net/grpc_status.h"
#include "common/cluster/host_port.h"
#include "worker/allreduce/ring_piece.h"

namespace ps {
namespace {

constexpr char kDeliverMethod[] = "/ps.Ring/Deliver";
// How long telling the next worker that this one gave up may take at most.
constexpr absl::Duration kNoticeDeadline = absl::Seconds(5);
// How long the channel waits at most between attempts to reach the next worker.
constexpr absl::Duration kMaxReconnectBackoff = absl::Milliseconds(500);
// How long a message whose first attempt could not connect waits for the connection before its
// second.
constexpr absl::Duration kConnectRetryWindow = absl::Seconds(1);

class GrpcRingLink final : public RingLink {
 public:
  GrpcRingLink(int rank, int size, std::string job_id, std::string run_id, RingMailbox* mailbox,
               absl::Duration deadline, std::string own_name, std::string next_name,
               std::string previous_name, std::shared_ptr<grpc::Channel> channel)
      : rank_(rank),
        size_(size),
        job_id_(std::move(job_id)),
        run_id_(std::move(run_id)),
        mailbox_(mailbox),
        deadline_(deadline),
        own_name_(std::move(own_name)),
        next_name_(std::move(next_name)),
        previous_name_(std::move(previous_name)),
        channel_(channel),
        stub_(std::move(channel)) {}

  // Cancels the sends in flight and waits for their calls to end.
  ~GrpcRingLink() override {
    {
      absl::MutexLock lock(&mu_);
      // A send's second attempt, issued from now on, ends at once instead of being sent.
      if (aborted_.ok()) aborted_ = absl::CancelledError("the ring link was closed");
      for (grpc::ClientContext* call : in_flight_) call->TryCancel();
      auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_.empty(); };
      mu_.Await(absl::Condition(&idle));
    }
    mailbox_->EndRun(
        job_id_, run_id_,
        absl::FailedPreconditionError(absl::StrCat("run \"", run_id_, "\" of job \"", job_id_,
                                                   "\" has ended on ", own_name_)));
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status Send(uint64_t tag, absl::Span<const float> data) override {
    absl::Notification sent;
    absl::Status status;
    SendAsync(tag, data, [&](absl::Status done) {
      status = std::move(done);
      sent.Notify();
    });
    sent.WaitForNotification();
    return status;
  }

  // One Deliver call through gRPC's callback API: `done` runs on a gRPC thread.
  void SendAsync(uint64_t tag, absl::Span<const float> data,
                 std::function<void(absl::Status)> done) override ABSL_LOCKS_EXCLUDED(mu_) {
    RingPieceHeader header;
    header.set_job_id(job_id_);
    header.set_run_id(run_id_);
    header.set_tag(tag);
    header.set_from_worker(rank_);
    const int64_t bytes = static_cast<int64_t>(data.size() * sizeof(float));
    // `data` outlives the call.
    Issue(tag, bytes, EncodeRingPiece(header, data), /*first_attempt=*/true, std::move(done));
  }

  absl::Status Receive(uint64_t tag, absl::Span<float> out) override ABSL_LOCKS_EXCLUDED(mu_) {
    if (absl::Status aborted = aborted_status(); !aborted.ok()) return aborted;
    grpc::ByteBuffer message;
    absl::Status taken = mailbox_->Take(job_id_, run_id_, tag, deadline_, &message);
    if (!taken.ok()) {
      if (absl::Status aborted = aborted_status(); !aborted.ok()) return aborted;
      if (absl::IsDeadlineExceeded(taken)) {
        return absl::DeadlineExceededError(absl::StrCat(
            "waiting for ", previous_name_, " to send ring message ", tag, " of job \"", job_id_,
            "\": nothing after ", absl::FormatDuration(deadline_), " (is it running, or slow?)"));
      }
      return taken;
    }
    if (absl::Status decoded = DecodeRingPiece(message, out); !decoded.ok()) return decoded;
    bytes_received_ += static_cast<int64_t>(out.size() * sizeof(float));
    return absl::OkStatus();
  }

  void Abort(const absl::Status& reason) override ABSL_LOCKS_EXCLUDED(mu_) {
    const std::string gave_up =
        absl::StrCat(own_name_, " gave up on the ring (", reason.ToString(), ")");
    auto* notice = new OutgoingCall;
    {
      absl::MutexLock lock(&mu_);
      if (!aborted_.ok()) {
        delete notice;
        return;
      }
      aborted_ = reason.ok() ? absl::CancelledError("aborted") : reason;
      for (grpc::ClientContext* call : in_flight_) call->TryCancel();
      in_flight_.insert(&notice->context);
    }
    mailbox_->EndRun(job_id_, run_id_, absl::FailedPreconditionError(gave_up));
    // Tells the next worker, which may be waiting for this one, so that it stops too (and so
    // on round the ring); best effort.
    RingPieceHeader header;
    header.set_job_id(job_id_);
    header.set_run_id(run_id_);
    header.set_from_worker(rank_);
    header.set_gave_up(gave_up);
    notice->request = EncodeRingPiece(header, {});
    notice->context.set_deadline(GrpcDeadline(std::min(deadline_, kNoticeDeadline)));
    stub_.UnaryCall(&notice->context, kDeliverMethod, grpc::StubOptions(), &notice->request,
                    &notice->response, [this, notice](grpc::Status) {
                      {
                        absl::MutexLock lock(&mu_);
                        in_flight_.erase(&notice->context);
                      }
                      delete notice;
                    });
  }

  int64_t bytes_sent() const override { return bytes_sent_; }
  int64_t bytes_received() const override { return bytes_received_; }

 private:
  struct OutgoingCall {
    grpc::ClientContext context;
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
  };

  // Sends `request` (ring message `tag`, `bytes` of data) to the next worker, then runs `done`
  // (never under mu_: it may call Abort). A first attempt that could not connect (the message
  // never left) is tried once more if the channel connects within kConnectRetryWindow: a peer
  // that is starting, or a connection attempt lost under load, is not taken for a dead peer.
  // That wait blocks the gRPC thread that reported the failure; it is a rare path.
  void Issue(uint64_t tag, int64_t bytes, grpc::ByteBuffer request, bool first_attempt,
             std::function<void(absl::Status)> done) ABSL_LOCKS_EXCLUDED(mu_) {
    auto* call = new OutgoingCall;
    call->request = request;  // Shares the slices.
    call->context.set_deadline(GrpcDeadline(deadline_));
    absl::Status aborted;
    {
      absl::MutexLock lock(&mu_);
      aborted = aborted_;
      if (aborted.ok()) in_flight_.insert(&call->context);
    }
    if (!aborted.ok()) {
      delete call;
      done(aborted);
      return;
    }
    stub_.UnaryCall(
        &call->context, kDeliverMethod, grpc::StubOptions(), &call->request, &call->response,
        [this, call, tag, bytes, request = std::move(request), first_attempt,
         done = std::move(done)](grpc::Status status) {
          const bool never_left = first_attempt &&
                                  status.error_code() == grpc::StatusCode::UNAVAILABLE &&
                                  absl::StrContains(status.error_message(), "failed to connect");
          bool again = false;
          absl::Status sent;
          {
            absl::MutexLock lock(&mu_);
            if (status.ok()) {
              bytes_sent_ += bytes;
            } else if (!aborted_.ok()) {
              sent = aborted_;
            } else {
              again = never_left;
              sent = SendError(tag, status);
            }
          }
          // The second attempt is issued before this call leaves in_flight_, so that the link
          // (whose destructor waits for in_flight_ to empty) outlives both.
          if (again && channel_->WaitForConnected(GrpcDeadline(kConnectRetryWindow))) {
            Issue(tag, bytes, request, /*first_attempt=*/false, done);
          } else {
            again = false;
          }
          {
            absl::MutexLock lock(&mu_);
            in_flight_.erase(&call->context);
          }
          delete call;
          if (!again) done(std::move(sent));
        });
  }

  absl::Status aborted_status() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return aborted_;
  }

  absl::Status SendError(uint64_t tag, const grpc::Status& status) const {
    const std::string what =
        absl::StrCat("ring message ", tag, " of job \"", job_id_, "\" (run \"", run_id_, "\")");
    switch (status.error_code()) {
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        return absl::DeadlineExceededError(absl::StrCat(
            next_name_, " did not take ", what, " within ", absl::FormatDuration(deadline_),
            ": is it running, or slow? (", status.error_message(), ")"));
      case grpc::StatusCode::UNAVAILABLE:
        return absl::UnavailableError(absl::StrCat(next_name_, " is unreachable: sending ", what,
                                                   " failed (", status.error_message(),
                                                   "); is it running?"));
      default: {
        absl::Status refused = FromGrpcStatus(status);
        return absl::Status(refused.code(),
                            absl::StrCat(next_name_, " refused ", what, ": ", refused.message()));
      }
    }
  }

  const int rank_;
  const int size_;
  const std::string job_id_;
  const std::string run_id_;
  RingMailbox* const mailbox_;
  const absl::Duration deadline_;
  const std::string own_name_;       // "worker:1 (host:port)".
  const std::string next_name_;      // Sent to.
  const std::string previous_name_;  // Received from.
  const std::shared_ptr<grpc::Channel> channel_;  // To the next worker.
  grpc::GenericStub stub_;                        // On channel_.
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> bytes_received_{0};

  mutable absl::Mutex mu_;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);                      // Abort's reason; OK until then.
  std::set<grpc::ClientContext*> in_flight_ ABSL_GUARDED_BY(mu_);  // Sends' calls, to cancel.
};

}  // namespace

absl::StatusOr<std::unique_ptr<RingLink>> MakeGrpcRingLink(const ClusterSpec& cluster, int worker,
                                                           const std::string& job_id,
                                                           const std::string& run_id,
                                                           RingMailbox* mailbox,
                                                           const GrpcRingLinkOptions& options) {
  const std::vector<std::string>& workers = cluster.Tasks(kWorkerJob);
  const int size = static_cast<int>(workers.size());
  if (worker < 0 || worker >= size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker:", worker, " is not a worker task of the cluster, which has ", size, " workers"));
  }
  auto name = [&](int index) { return absl::StrCat("worker:", index, " (", workers[index], ")"); };
  const int next = (worker + 1) % size;
  absl::StatusOr<HostPort> address = ParseHostPort(workers[next]);
  if (!address.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker:", next, ": ", address.status().message()));
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(options.max_message_bytes);
  arguments.SetMaxSendMessageSize(options.max_message_bytes);
  SetQuickReconnect(&arguments, kMaxReconnectBackoff);
  SetKeepalive(&arguments);
  std::shared_ptr<grpc::Channel> channel = grpc::experimental::CreateCustomChannelWithInterceptors(
      address->ToString(), ChannelCredentialsFor(options.security), arguments,
      BearerTokenInterceptors(options.token));
  return std::make_unique<GrpcRingLink>(worker, size, job_id, run_id, mailbox, options.deadline,
                                        name(worker), name(next), name((worker + size - 1) % size),
                                        std::move(channel));
}

}  // namespace ps
