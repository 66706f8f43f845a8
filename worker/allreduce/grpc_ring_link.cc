#include "worker/allreduce/grpc_ring_link.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <utility>

#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/auth_token.h"
#include "common/grpc_reconnect.h"
#include "common/grpc_status.h"
#include "common/host_port.h"
#include "worker/allreduce/ring_piece.h"

namespace ps {
namespace {

constexpr char kDeliverMethod[] = "/ps.Ring/Deliver";
// A Send that finds the next worker unreachable tries again this often, backing off.
constexpr int kSendAttempts = 5;
constexpr absl::Duration kInitialBackoff = absl::Milliseconds(50);
constexpr absl::Duration kMaxBackoff = absl::Milliseconds(400);

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
        stub_(std::move(channel)) {}

  ~GrpcRingLink() override {
    mailbox_->EndRun(
        job_id_, run_id_,
        absl::FailedPreconditionError(absl::StrCat("run \"", run_id_, "\" of job \"", job_id_,
                                                   "\" has ended on ", own_name_)));
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status Send(uint64_t tag, absl::Span<const float> data) override ABSL_LOCKS_EXCLUDED(mu_) {
    RingPieceHeader header;
    header.set_job_id(job_id_);
    header.set_run_id(run_id_);
    header.set_tag(tag);
    header.set_from_worker(rank_);
    const absl::Time deadline = absl::Now() + deadline_;
    absl::Duration backoff = kInitialBackoff;
    for (int attempt = 1;; ++attempt) {
      grpc::Status status = Deliver(header, data, deadline);
      // ALREADY_EXISTS after an attempt that failed: that attempt had delivered it.
      if (status.ok() || (attempt > 1 && status.error_code() == grpc::StatusCode::ALREADY_EXISTS)) {
        bytes_sent_ += static_cast<int64_t>(data.size() * sizeof(float));
        return absl::OkStatus();
      }
      if (absl::Status aborted = aborted_status(); !aborted.ok()) return aborted;
      if (status.error_code() == grpc::StatusCode::UNAVAILABLE && attempt < kSendAttempts &&
          absl::Now() + backoff < deadline) {
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(this, &GrpcRingLink::AbortedLocked), backoff);
        backoff = std::min(2 * backoff, kMaxBackoff);
        continue;
      }
      return SendError(tag, status, attempt);
    }
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
    {
      absl::MutexLock lock(&mu_);
      if (aborted_.ok()) aborted_ = reason.ok() ? absl::CancelledError("aborted") : reason;
      for (grpc::ClientContext* call : in_flight_) call->TryCancel();
    }
    mailbox_->EndRun(job_id_, run_id_,
                     absl::FailedPreconditionError(absl::StrCat(own_name_, " gave up on the ring (",
                                                                reason.ToString(), ")")));
  }

  int64_t bytes_sent() const override { return bytes_sent_; }
  int64_t bytes_received() const override { return bytes_received_; }

 private:
  bool AbortedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !aborted_.ok(); }
  absl::Status aborted_status() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return aborted_;
  }

  // One Deliver call, made on this thread through a completion queue of its own; Abort
  // cancels it.
  grpc::Status Deliver(const RingPieceHeader& header, absl::Span<const float> data,
                       absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_) {
    grpc::ByteBuffer request = EncodeRingPiece(header, data);  // `data` outlives the call.
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    {
      absl::MutexLock lock(&mu_);
      if (!aborted_.ok()) return grpc::Status(grpc::StatusCode::CANCELLED, "aborted");
      in_flight_.insert(&context);
    }
    grpc::CompletionQueue queue;
    grpc::ByteBuffer response;
    grpc::Status status;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader =
        stub_.PrepareUnaryCall(&context, kDeliverMethod, request, &queue);
    reader->StartCall();
    reader->Finish(&response, &status, this);
    void* event = nullptr;
    bool ok = false;
    queue.Next(&event, &ok);  // Finish's event, the only one this queue gets.
    queue.Shutdown();
    while (queue.Next(&event, &ok)) {
    }
    absl::MutexLock lock(&mu_);
    in_flight_.erase(&context);
    return status;
  }

  absl::Status SendError(uint64_t tag, const grpc::Status& status, int attempts) const {
    const std::string what =
        absl::StrCat("ring message ", tag, " of job \"", job_id_, "\" (run \"", run_id_, "\")");
    switch (status.error_code()) {
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        return absl::DeadlineExceededError(absl::StrCat(
            next_name_, " did not take ", what, " within ", absl::FormatDuration(deadline_),
            ": is it running, or slow? (", status.error_message(), ")"));
      case grpc::StatusCode::UNAVAILABLE:
        return absl::UnavailableError(absl::StrCat(next_name_, " is unreachable: sending ", what,
                                                   " failed ", attempts, " times (",
                                                   status.error_message(), "); is it running?"));
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
  grpc::GenericStub stub_;           // To the next worker.
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> bytes_received_{0};

  mutable absl::Mutex mu_;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);                      // Abort's reason; OK until then.
  std::set<grpc::ClientContext*> in_flight_ ABSL_GUARDED_BY(mu_);  // Sends' calls.
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
  SetQuickReconnect(&arguments, kMaxBackoff);
  std::shared_ptr<grpc::Channel> channel = grpc::experimental::CreateCustomChannelWithInterceptors(
      address->ToString(), ChannelCredentialsFor(options.security), arguments,
      BearerTokenInterceptors(options.token));
  return std::make_unique<GrpcRingLink>(worker, size, job_id, run_id, mailbox, options.deadline,
                                        name(worker), name(next), name((worker + size - 1) % size),
                                        std::move(channel));
}

}  // namespace ps
