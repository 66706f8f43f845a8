// What one job's shard knows of its periodic checkpoints (docs/checkpoints.md): those armed and
// waiting for the shard's clock, how the latest few writes ended, how long writes took, and,
// for a resumed run, where it started. Taking a checkpoint (the values between updates) and
// deciding the clock are ShardJob's; this keeps the book.
//
// Thread-safe, under a lock of its own. ShardJob calls Arm and TakeDue while holding its own
// lock, so that a checkpoint cannot be armed for a clock an update is reaching meanwhile.
#ifndef PS_SERVER_SHARD_CHECKPOINTS_H_
#define PS_SERVER_SHARD_CHECKPOINTS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/checkpoint/checkpoint_file.h"
#include "common/metrics/metrics.h"
#include "proto/ps_service.pb.h"

namespace ps {

// A checkpoint taken at an agreed point: its blocks (values held by reference, as pulls hold
// them: a push meanwhile writes to a fresh copy), and its entry with seq, version, clock and
// min_steps_pushed filled (the file's fields are the writer's). It is a resume point: it holds
// no open aggregate (the workers resuming from it push that step again).
struct TakenCheckpoint {
  std::vector<CheckpointBlock> blocks;
  ShardCheckpoint entry;
};
// Gets a taken checkpoint on the thread that took it; must not block (queue the write).
using CheckpointSink = std::function<void(TakenCheckpoint)>;

// Checkpoint `seq`, to be taken once the shard's clock reaches `at_clock`.
struct ArmedCheckpoint {
  int64_t seq = 0;
  int64_t at_clock = 0;
  CheckpointSink sink;
};

class ShardCheckpoints {
 public:
  ShardCheckpoints() = default;
  ShardCheckpoints(const ShardCheckpoints&) = delete;
  ShardCheckpoints& operator=(const ShardCheckpoints&) = delete;

  // Holds `armed` until TakeDue reaches its clock.
  void Arm(ArmedCheckpoint armed) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether any is armed, without the lock: an update that finds none need not read the clock.
  bool any_armed() const { return any_armed_.load(std::memory_order_relaxed); }
  // The armed checkpoints whose at_clock is at most `clock`, taken out, in arming order.
  std::vector<ArmedCheckpoint> TakeDue(int64_t clock) ABSL_LOCKS_EXCLUDED(mu_);

  // Records how writing a checkpoint ended (entry.error set when it failed): the latest
  // kRemembered are kept, failures counted, and a written one's time observed.
  static constexpr size_t kRemembered = 8;
  void Written(const ShardCheckpoint& entry) ABSL_LOCKS_EXCLUDED(mu_);
  // A resumed run: the checkpoint it started from, at which version and step.
  void Resumed(const std::string& checkpoint, int64_t version, int64_t step)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Fills JobStats' checkpoints, failed_checkpoints and restored_* fields.
  void AddTo(JobStats* stats) const ABSL_LOCKS_EXCLUDED(mu_);
  // How long writing each checkpoint file took (written ones), in seconds.
  const Histogram& write_seconds() const { return write_seconds_; }
  static const std::vector<double>& WriteSecondsBounds();

 private:
  mutable absl::Mutex mu_;
  std::atomic<bool> any_armed_{false};  // !armed_.empty(), read without mu_.
  std::vector<ArmedCheckpoint> armed_ ABSL_GUARDED_BY(mu_);
  std::vector<ShardCheckpoint> written_ ABSL_GUARDED_BY(mu_);  // The latest kRemembered.
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  std::string restored_from_ ABSL_GUARDED_BY(mu_);
  int64_t restored_version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t restored_step_ ABSL_GUARDED_BY(mu_) = 0;
  Histogram write_seconds_{WriteSecondsBounds()};
};

}  // namespace ps

#endif  // PS_SERVER_SHARD_CHECKPOINTS_H_
