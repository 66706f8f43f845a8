#include "server/replica_input.h"

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ps {

ReplicaInput PushInput(const ShardJob::ReadyPush& push) {
  ReplicaInput input;
  ReplicaPush* message = input.mutable_push();
  *message->mutable_header() = push.header;
  message->set_known_finite(push.known_finite);
  const std::vector<float>& gradient = *push.buffer;
  message->mutable_gradient()->assign(reinterpret_cast<const char*>(gradient.data()),
                                      gradient.size() * sizeof(float));
  return input;
}

namespace {

// A push's answer, or its error, as an input's outcome.
absl::StatusOr<ReplicaOutcome> Pushed(absl::StatusOr<PushResponse> response) {
  if (!response.ok()) return response.status();
  ReplicaOutcome outcome;
  *outcome.mutable_push() = *std::move(response);
  return outcome;
}

absl::StatusOr<ReplicaOutcome> Done(const absl::Status& status) {
  if (!status.ok()) return status;
  return ReplicaOutcome();
}

}  // namespace

absl::StatusOr<ReplicaOutcome> ApplyReplicaInput(ShardJob& job, const ReplicaInput& input,
                                                 const ShardJob::ReadyPush* push) {
  switch (input.input_case()) {
    case ReplicaInput::kPush: {
      if (push != nullptr) {
        return Pushed(job.Push(push->header, *push->buffer, push->known_finite));
      }
      const std::string& bytes = input.push().gradient();
      if (bytes.size() % sizeof(float) != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "replicated push ", input.seq(), " has ", bytes.size(),
            " gradient bytes, not a whole number of floats"));
      }
      const size_t floats = bytes.size() / sizeof(float);
      if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
        // The message's own bytes (operator new aligns them): no copy.
        return Pushed(job.Push(
            input.push().header(),
            absl::MakeConstSpan(reinterpret_cast<const float*>(bytes.data()), floats),
            input.push().known_finite()));
      }
      std::vector<float> gradient(floats);
      if (!bytes.empty()) std::memcpy(gradient.data(), bytes.data(), bytes.size());
      return Pushed(job.Push(input.push().header(), gradient, input.push().known_finite()));
    }
    case ReplicaInput::kLeave:
      return Done(job.Leave(input.leave().worker(), input.leave().run_id(),
                            input.leave().has_incarnation()
                                ? std::optional<int>(input.leave().incarnation())
                                : std::nullopt));
    case ReplicaInput::kLost:
      job.LoseWorkers({input.lost().workers().begin(), input.lost().workers().end()});
      return ReplicaOutcome();
    case ReplicaInput::kRejoin:
      return Done(job.Rejoin(input.rejoin().worker(), input.rejoin().incarnation(),
                             input.rejoin().clock()));
    case ReplicaInput::kNextBatches: {
      absl::StatusOr<NextBatchesResponse> batches = job.NextBatches(input.next_batches());
      if (!batches.ok()) return batches.status();
      ReplicaOutcome outcome;
      *outcome.mutable_batches() = *std::move(batches);
      return outcome;
    }
    case ReplicaInput::kHandBack:  // Changes the copies' roles, not the shard.
      return ReplicaOutcome();
    case ReplicaInput::kGrow: {
      std::vector<std::string> workers;
      for (const ClusterJob& cluster_job : input.grow().cluster().jobs()) {
        if (cluster_job.name() == "worker") {
          workers.assign(cluster_job.tasks().begin(), cluster_job.tasks().end());
        }
      }
      return Done(job.Grow(input.grow().run_id(), workers));
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("replicated input ", input.seq(), " is neither a push, a leave, lost "
                       "workers, a rejoin, batches handed out, a hand-back nor a growth"));
  }
}

ReplicaAck AckFor(int64_t seq, const absl::StatusOr<ReplicaOutcome>& result) {
  ReplicaAck ack;
  ack.set_seq(seq);
  ack.set_code(static_cast<int>(result.status().code()));
  if (result.ok()) {
    *ack.mutable_outcome() = *result;
  } else {
    ack.set_message(std::string(result.status().message()));
  }
  return ack;
}

bool SameOutcome(const ReplicaAck& ack, const absl::StatusOr<ReplicaOutcome>& result) {
  if (ack.code() != static_cast<int>(result.status().code())) return false;
  if (!result.ok()) return true;
  const PushResponse& theirs = ack.outcome().push();
  const PushResponse& ours = result->push();
  return theirs.outcome() == ours.outcome() && theirs.version() == ours.version() &&
         theirs.step() == ours.step() &&
         std::equal(ack.outcome().batches().batches().begin(),
                    ack.outcome().batches().batches().end(), result->batches().batches().begin(),
                    result->batches().batches().end());
}

}  // namespace ps
