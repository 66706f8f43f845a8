// The one rule for psctl's exit codes (docs/REFERENCE.md, "Exit codes"), which scripts and the
// restart policies of deploy/ (a Kubernetes Job's podFailurePolicy, a TFJob's ExitCode policy) act
// on:
//   0    the command did what it was asked (a job: every worker DONE, or DONE without the
//        workers its mode let it lose);
//   1    the job ran and failed on its own: it diverged, a worker's computation failed. Running
//        it again as it is fails again;
//   2    what was given is wrong: a flag, a ClusterSpec, a JobSpec, a data or checkpoint file
//        (missing, malformed, truncated), credentials, a daemon of the wrong role at a task's
//        address; fix it and run again;
//   4    someone else stopped the job (psctl stop, an admin): do not run it again by itself;
//   130  interrupted (Ctrl-C, SIGTERM), after stopping what it started;
//   138  the cluster is not ready, out of reach or full: a task down or unreachable, a deadline,
//        a limit of the cluster reached. The same command may succeed later: retry. 138
//        (128 + SIGUSR1) is the code Kubeflow's operators set aside for "retryable": with
//        restartPolicy ExitCode they restart 130, 137, 143 and 138, and no other.
// By the status's code (ExitCode), unless the status carries its exit code (WithExitCode).
#ifndef PS_CTL_JOB_EXIT_CODE_H_
#define PS_CTL_JOB_EXIT_CODE_H_

#include "absl/status/status.h"

namespace ps {

inline constexpr int kExitDone = 0;
inline constexpr int kExitJobFailed = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitStopped = 4;
inline constexpr int kExitInterrupted = 130;
inline constexpr int kExitRetry = 138;

// The exit code of a command that ended with `status`.
int ExitCode(const absl::Status& status);

// `status` (not OK) ending its command with `exit_code`, whatever its code says: a job stopped
// by someone else (ABORTED, as a diverged one) exits kExitStopped.
absl::Status WithExitCode(absl::Status status, int exit_code);

}  // namespace ps

#endif  // PS_CTL_JOB_EXIT_CODE_H_
