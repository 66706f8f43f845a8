#include "worker/allreduce/ring_mailbox.h"

#include "absl/strings/str_cat.h"

namespace ps {

absl::Status RingMailbox::Put(const std::string& job_id, const std::string& run_id, uint64_t tag,
                              const grpc::ByteBuffer& message) {
  const RunKey run(job_id, run_id);
  const int64_t bytes = static_cast<int64_t>(message.Length());
  absl::MutexLock lock(&mu_);
  if (absl::Status ended = EndedLocked(run); !ended.ok()) return ended;
  if (bytes_held_ + bytes > options_.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the ring mailbox holds ", bytes_held_, " bytes of messages not yet taken; ", bytes,
        " more would pass its limit of ", options_.max_bytes,
        " (ps_worker --ring_mailbox_mb; is this worker's all-reduce stuck or far behind?)"));
  }
  auto [it, inserted] = messages_[run].try_emplace(tag, message);
  if (!inserted) {
    return absl::AlreadyExistsError(absl::StrCat("ring message ", tag, " of job \"", job_id,
                                                 "\" run \"", run_id, "\" is held already"));
  }
  bytes_held_ += bytes;
  return absl::OkStatus();
}

absl::Status RingMailbox::Take(const std::string& job_id, const std::string& run_id, uint64_t tag,
                               absl::Duration timeout, grpc::ByteBuffer* message) {
  const RunKey run(job_id, run_id);
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ended_.count(run) > 0) return true;
    auto messages = messages_.find(run);
    return messages != messages_.end() && messages->second.count(tag) > 0;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("no ring message ", tag, " after ", absl::FormatDuration(timeout)));
  }
  if (absl::Status ended = EndedLocked(run); !ended.ok()) return ended;
  auto messages = messages_.find(run);
  auto it = messages->second.find(tag);
  *message = std::move(it->second);
  bytes_held_ -= static_cast<int64_t>(message->Length());
  messages->second.erase(it);
  if (messages->second.empty()) messages_.erase(messages);
  return absl::OkStatus();
}

void RingMailbox::EndRun(const std::string& job_id, const std::string& run_id,
                         const absl::Status& reason) {
  const RunKey run(job_id, run_id);
  absl::MutexLock lock(&mu_);
  if (auto messages = messages_.find(run); messages != messages_.end()) {
    for (const auto& [tag, message] : messages->second) {
      bytes_held_ -= static_cast<int64_t>(message.Length());
    }
    messages_.erase(messages);
  }
  if (!ended_.emplace(run, reason).second) return;
  ended_order_.push_back(run);
  while (static_cast<int>(ended_order_.size()) > options_.max_ended_runs) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
}

int64_t RingMailbox::bytes_held() const {
  absl::MutexLock lock(&mu_);
  return bytes_held_;
}

absl::Status RingMailbox::EndedLocked(const RunKey& run) const {
  auto ended = ended_.find(run);
  return ended == ended_.end() ? absl::OkStatus() : ended->second;
}

}  // namespace ps
