// The defaults a job gets from psctl when it says nothing, so that a run survives the loss of a ps
// or a worker (docs/REFERENCE.md, "Defaults that survive a crash"): periodic checkpoints and a
// worker lease. They apply to a job psctl follows (not --detach, which cannot take checkpoints),
// and only where the job's mode and settings allow them (ValidateJobSpec).
#ifndef PS_CTL_JOB_JOB_DEFAULTS_H_
#define PS_CTL_JOB_JOB_DEFAULTS_H_

#include <string>
#include <vector>

#include "proto/job.pb.h"

namespace ps {

// A checkpoint every 10 minutes, as TensorFlow's MonitoredTrainingSession saves by default: a
// job shorter than that pays nothing, and one that loses a ps before its first checkpoint
// starts over (ctl/job/job_runner.cc's Recover).
inline constexpr float kDefaultCheckpointSeconds = 600;
// A worker no shard has heard from for 10 s is lost: SYNC waits that long for it to return
// (psctl local starts a dead worker again), the modes that can go on without it do.
inline constexpr float kDefaultWorkerLeaseSeconds = 10;

// `spec` with the defaults for what it leaves unset (`checkpoint`, `worker_lease_s`) on a
// cluster of `num_workers`; `*applied` says each one given, in a sentence for psctl's output.
JobSpec WithCrashDefaults(const JobSpec& spec, int num_workers, std::vector<std::string>* applied);

}  // namespace ps

#endif  // PS_CTL_JOB_JOB_DEFAULTS_H_
