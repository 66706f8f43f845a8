#include "server/shard_checkpoints.h"

#include <utility>

namespace ps {

void ShardCheckpoints::Arm(ArmedCheckpoint armed) {
  absl::MutexLock lock(&mu_);
  armed_.push_back(std::move(armed));
  any_armed_.store(true, std::memory_order_relaxed);
}

std::vector<ArmedCheckpoint> ShardCheckpoints::TakeDue(int64_t clock) {
  std::vector<ArmedCheckpoint> due;
  absl::MutexLock lock(&mu_);
  for (auto it = armed_.begin(); it != armed_.end();) {
    if (it->at_clock <= clock) {
      due.push_back(std::move(*it));
      it = armed_.erase(it);
    } else {
      ++it;
    }
  }
  any_armed_.store(!armed_.empty(), std::memory_order_relaxed);
  return due;
}

void ShardCheckpoints::Written(const ShardCheckpoint& entry) {
  if (entry.error().empty()) write_seconds_.Observe(entry.write_ms() / 1000.0);
  absl::MutexLock lock(&mu_);
  if (!entry.error().empty()) ++failed_;
  written_.push_back(entry);
  if (written_.size() > kRemembered) written_.erase(written_.begin());
}

void ShardCheckpoints::Resumed(const std::string& checkpoint, int64_t version, int64_t step) {
  absl::MutexLock lock(&mu_);
  restored_from_ = checkpoint;
  restored_version_ = version;
  restored_step_ = step;
}

void ShardCheckpoints::AddTo(JobStats* stats) const {
  absl::MutexLock lock(&mu_);
  for (const ShardCheckpoint& checkpoint : written_) *stats->add_checkpoints() = checkpoint;
  stats->set_failed_checkpoints(failed_);
  stats->set_restored_from(restored_from_);
  stats->set_restored_version(restored_version_);
  stats->set_restored_step(restored_step_);
}

const std::vector<double>& ShardCheckpoints::WriteSecondsBounds() {
  static const std::vector<double>* const bounds =
      new std::vector<double>{0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100, 300};
  return *bounds;
}

}  // namespace ps
