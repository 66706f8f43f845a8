#include "worker/background_task.h"

#include <utility>

namespace ps {

BackgroundTask::BackgroundTask() : thread_([this] { Loop(); }) {}

BackgroundTask::~BackgroundTask() {
  Wait().IgnoreError();  // Whatever it returned, its owner is going away.
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void BackgroundTask::Start(std::function<absl::Status()> task) {
  busy_ = true;
  absl::MutexLock lock(&mu_);
  task_ = std::move(task);
  result_.reset();
}

absl::Status BackgroundTask::Wait() {
  if (!busy_) return absl::OkStatus();
  busy_ = false;
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](std::optional<absl::Status>* result) { return result->has_value(); }, &result_));
  absl::Status status = *std::move(result_);
  result_.reset();
  return status;
}

void BackgroundTask::Loop() {
  while (true) {
    std::function<absl::Status()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](BackgroundTask* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->task_ != nullptr || self->stopping_;
          },
          this));
      if (task_ == nullptr) return;  // Stopping, and nothing left to run.
      task = std::move(task_);
      task_ = nullptr;
    }
    absl::Status status = task();
    absl::MutexLock lock(&mu_);
    result_ = std::move(status);
  }
}

}  // namespace ps
