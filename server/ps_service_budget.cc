// ParameterService within its byte budget (server/byte_budget.h): pushes parked until their push
// buffer fits, and the window every data call's answer gives its client.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/ps_service.h"

namespace ps {
namespace {

// The metadata a client names itself with (common/client/ps_connections.h), and the one that
// answers it with its window.
constexpr char kClientIdKey[] = "ps-client-id";
constexpr char kWindowKey[] = "ps-window-bytes";
// On an UNAVAILABLE answer: the ps is up but was too busy; retry the same copy.
constexpr char kRetryHereKey[] = "ps-retry-here";

// A parked push is answered this long before its client's own deadline, so that the client
// gets the reason rather than a bare DEADLINE_EXCEEDED.
constexpr absl::Duration kParkMargin = absl::Milliseconds(100);

// The client a call comes from, as it names itself; one that does not is its connection.
std::string ClientOf(grpc::CallbackServerContext* context) {
  const auto& metadata = context->client_metadata();
  auto id = metadata.find(kClientIdKey);
  return id != metadata.end() ? std::string(id->second.data(), id->second.size())
                              : context->peer();
}

}  // namespace

void ParameterService::DecodePushInBudget(grpc::CallbackServerContext* context, const Peer& peer,
                                          const grpc::ByteBuffer* request, bool allow_chunks,
                                          ByteBudget::Charge reservation, PushDecoded then) {
  PushRequestHeader header;
  std::shared_ptr<ShardJob> job;
  PushAdmission admission;
  // A call let in by the budget holds its reservation (or its push's pass) and is not checked
  // again.
  const bool check = byte_budget_->enabled() && reservation == nullptr;
  absl::StatusOr<DecodedPush> decoded =
      DoDecodePush(peer, *request, allow_chunks, &header, &job, check ? &admission : nullptr);
  if (admission.wait_bytes == 0) {
    // The buffer a reservation made room for holds its own charge now.
    reservation.reset();
    admission.reservation.reset();
    if (job != nullptr) SendWindow(context, header.job_id());
    then(std::move(job), header, std::move(decoded));
    return;
  }
  // The budget's clock (a test's simulated one) for the wait; the client's deadline is real.
  const absl::Duration left = std::min(
      options_.default_wait_timeout,
      absl::FromChrono(context->deadline()) - absl::Now() - kParkMargin);
  byte_budget_->WaitForBuffer(
      header.job_id(), ClientOf(context), ShardJob::PushGroup(header), admission.wait_bytes,
      options_.clock->Now() + std::max(left, absl::ZeroDuration()),
      [this, context, peer, request, allow_chunks, job_id = header.job_id(),
       parked = std::move(admission.parked),
       then = std::move(then)](absl::StatusOr<ByteBudget::Charge> room) mutable {
        parked.reset();
        if (!room.ok()) {
          // Not a ps gone: a client of a replicated job retries here, not on the other copy.
          context->AddTrailingMetadata(kRetryHereKey, "1");
          SendWindow(context, job_id);
          then(nullptr, PushRequestHeader(), room.status());
          return;
        }
        DecodePushInBudget(context, peer, request, allow_chunks, *std::move(room),
                           std::move(then));
      });
}

void ParameterService::SendWindow(grpc::CallbackServerContext* context,
                                  const std::string& job_id) {
  if (!byte_budget_->enabled()) return;
  context->AddTrailingMetadata(kWindowKey,
                               absl::StrCat(byte_budget_->Window(ClientOf(context), job_id)));
}

}  // namespace ps
