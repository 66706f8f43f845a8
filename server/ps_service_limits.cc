// ParameterService's limits on what jobs may hold (ServiceLimits): the room a new job reserves,
// and the bytes the jobs and backups on this ps hold.
#include "server/ps_service.h"

#include "server/mib_text.h"

#include "absl/strings/str_cat.h"

namespace ps {

ParameterService::Reservation::~Reservation() {
  absl::MutexLock lock(&service_->mu_);
  --service_->reserved_jobs_;
  service_->reserved_bytes_ -= bytes_;
}

absl::StatusOr<std::unique_ptr<ParameterService::Reservation>> ParameterService::Reserve(
    const ParameterSpec& spec) {
  const ServiceLimits& limits = options_.limits;
  if (spec.num_workers() > limits.max_workers) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "job \"", spec.job_id(), "\" has ", spec.num_workers(), " workers; ", TaskName(),
        " takes at most ", limits.max_workers, " per job (ps_server --max_workers)"));
  }
  absl::StatusOr<int64_t> bytes = ShardJob::MemoryBytes(spec, options_.num_ps, options_.ps_index);
  if (!bytes.ok()) return bytes.status();
  // A replicated job's ps also holds the backup of the previous ps's shard.
  const int previous = (options_.ps_index + options_.num_ps - 1) % options_.num_ps;
  absl::StatusOr<int64_t> backup = spec.replicas() > 1 && options_.num_ps > 1
                                       ? ShardJob::MemoryBytes(spec, options_.num_ps, previous)
                                       : absl::StatusOr<int64_t>(0);
  if (!backup.ok()) return backup.status();
  if (*bytes > limits.max_job_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("job \"", spec.job_id(), "\" needs ", MibText(*bytes), " on ", TaskName(),
                     " (values and optimizer slots, twice); one job may hold at most ",
                     MibText(limits.max_job_bytes),
                     " (ps_server --max_job_mb): use more ps tasks or a smaller "
                     "model"));
  }
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(jobs_.size()) + reserved_jobs_ >= limits.max_jobs) {
    return absl::ResourceExhaustedError(
        absl::StrCat(TaskName(), " holds ", jobs_.size() + reserved_jobs_,
                     " jobs, its limit (ps_server "
                     "--max_jobs); delete finished ones (psctl stop) first"));
  }
  const int64_t used = HeldBytesLocked();
  if (used + *bytes + *backup > max_total_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "job \"", spec.job_id(), "\" needs ", MibText(*bytes + *backup), " on ", TaskName(),
        *backup > 0 ? absl::StrCat(" (", MibText(*backup), " of it for the backup of shard ",
                                   previous, ")")
                    : "",
        ", which holds ", MibText(used), " of its ", MibText(max_total_bytes_),
        " for all jobs (ps_server --max_memory_mb); "
        "delete finished jobs (psctl stop) or add ps tasks"));
  }
  ++reserved_jobs_;
  reserved_bytes_ += *bytes + *backup;
  return std::make_unique<Reservation>(this, *bytes + *backup);
}

int64_t ParameterService::HeldBytesLocked(const ShardKey* replacing) {
  int64_t used = reserved_bytes_;
  for (const auto& [id, job] : jobs_) {
    if (replacing != nullptr && replacing->second == options_.ps_index &&
        replacing->first == id) {
      continue;  // Its own shard, which the copy comes to replace.
    }
    absl::StatusOr<int64_t> held =
        ShardJob::MemoryBytes(job->spec(), options_.num_ps, options_.ps_index);
    if (held.ok()) used += *held;
  }
  auto add_copy = [&](const ShardKey& key, const std::shared_ptr<ShardJob>& job) {
    if (job == nullptr || (replacing != nullptr && key == *replacing)) return;
    absl::StatusOr<int64_t> held = ShardJob::MemoryBytes(job->spec(), options_.num_ps, key.second);
    if (held.ok()) used += *held;
  };
  for (const auto& [key, copy] : backups_) add_copy(key, copy.job);
  for (const auto& [key, move] : incoming_) add_copy(key, move.job);
  return used;
}

}  // namespace ps
