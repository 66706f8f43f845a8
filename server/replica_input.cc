#include "server/replica_input.h"

#include <cstdint>
#include <cstring>
#include <memory>
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

absl::StatusOr<PushResponse> ApplyReplicaInput(ShardJob& job, const ReplicaInput& input,
                                               const ShardJob::ReadyPush* push) {
  switch (input.input_case()) {
    case ReplicaInput::kPush: {
      if (push != nullptr) return job.Push(push->header, *push->buffer, push->known_finite);
      const std::string& bytes = input.push().gradient();
      if (bytes.size() % sizeof(float) != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "replicated push ", input.seq(), " has ", bytes.size(),
            " gradient bytes, not a whole number of floats"));
      }
      const size_t floats = bytes.size() / sizeof(float);
      if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
        // The message's own bytes (operator new aligns them): no copy.
        return job.Push(input.push().header(),
                        absl::MakeConstSpan(reinterpret_cast<const float*>(bytes.data()), floats),
                        input.push().known_finite());
      }
      std::vector<float> gradient(floats);
      if (!bytes.empty()) std::memcpy(gradient.data(), bytes.data(), bytes.size());
      return job.Push(input.push().header(), gradient, input.push().known_finite());
    }
    case ReplicaInput::kLeave: {
      absl::Status left = job.Leave(input.leave().worker(), input.leave().run_id());
      if (!left.ok()) return left;
      return PushResponse();
    }
    case ReplicaInput::kLost:
      job.LoseWorkers({input.lost().workers().begin(), input.lost().workers().end()});
      return PushResponse();
    case ReplicaInput::kRejoin: {
      absl::Status rejoined = job.Rejoin(input.rejoin().worker(), input.rejoin().incarnation(),
                                         input.rejoin().clock());
      if (!rejoined.ok()) return rejoined;
      return PushResponse();
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("replicated input ", input.seq(), " is neither a push, a leave, lost "
                       "workers nor a rejoin"));
  }
}

ReplicaAck AckFor(int64_t seq, const absl::StatusOr<PushResponse>& result) {
  ReplicaAck ack;
  ack.set_seq(seq);
  ack.set_code(static_cast<int>(result.status().code()));
  if (result.ok()) {
    *ack.mutable_push() = *result;
  } else {
    ack.set_message(std::string(result.status().message()));
  }
  return ack;
}

bool SameOutcome(const ReplicaAck& ack, const absl::StatusOr<PushResponse>& result) {
  if (ack.code() != static_cast<int>(result.status().code())) return false;
  if (!result.ok()) return true;
  return ack.push().outcome() == result->outcome() && ack.push().version() == result->version() &&
         ack.push().step() == result->step();
}

}  // namespace ps
