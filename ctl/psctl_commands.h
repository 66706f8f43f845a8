// psctl's commands (ctl/psctl_main.cc runs them from its command table), in two files:
// psctl_job_commands.cc runs jobs and sweeps (local, submit, status, stop, check, experiment,
// report); psctl_worker_commands.cc moves workers out of and into a running job (remove-worker,
// add-worker); psctl_cluster_commands.cc serves and sets up a cluster (export, certs, slurm-spec,
// dashboard, top, prometheus-config). Each reads its flags (ctl/psctl_flags.h) and returns
// psctl's exit status (ctl/job/exit_code.h).
#ifndef PS_CTL_PSCTL_COMMANDS_H_
#define PS_CTL_PSCTL_COMMANDS_H_

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cluster/cluster_spec.h"

namespace ps {

// Set once Ctrl-C or SIGTERM arrives (main's signal thread): commands stop what they run.
extern std::atomic<bool> interrupted;

// Prints "psctl: MESSAGE" on stderr and returns the status's exit code.
int Fail(const absl::Status& status);
// The cluster of --cluster_spec, TF_CONFIG or --cluster_resolver.
absl::StatusOr<ClusterSpec> Cluster();

int Local();
// Runs a recorded run (its results directory) again on a local cluster of its size, every
// shard serving and applying in the recorded order: the same final weights, bit for bit.
int Replay(const std::string& recorded);
int SubmitCommand();
int Status();
int Stop();
// The worker of --task leaves the running job --job, which goes on without it (StopJob with
// leave); AddWorker takes a worker that left back (RejoinJob, then the following psctl).
int RemoveWorker();
int AddWorker();
// The shard of --task's ps moves to the ps --to while job --job trains on (MoveShard), from
// wherever it is (a moved shard moves on, or back to its own ps).
int MoveShard();
int DrainPs();
int UndrainPs();
int Check();
int Experiment();
// One directory with sweep.csv: the sweep's report; else the runs side by side.
int Report(const std::vector<std::string>& dirs);

int Export();
int Certs();
int SlurmSpec();
int Dashboard();
int Top();
int PrometheusConfigCommand();

}  // namespace ps

#endif  // PS_CTL_PSCTL_COMMANDS_H_
