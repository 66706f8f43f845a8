// The one rule for psctl's exit codes (README, "Exit codes"):
//   0    the command did what it was asked (a job: every worker DONE, or DONE without the
//        workers its mode let it lose);
//   1    the cluster or the run failed: a task down or unreachable, a deadline, a job that ran
//        and FAILED on its own (diverged, a worker died), a limit of the cluster reached;
//   2    what was given is wrong: a flag, a ClusterSpec, a JobSpec, a data or checkpoint file
//        (missing, malformed, truncated), credentials; fix it and run again;
//   130  interrupted (Ctrl-C), after stopping what it started.
#ifndef PS_CTL_JOB_EXIT_CODE_H_
#define PS_CTL_JOB_EXIT_CODE_H_

#include "absl/status/status.h"

namespace ps {

// The exit code of a command that ended with `status`, by its code alone.
int ExitCode(const absl::Status& status);

}  // namespace ps

#endif  // PS_CTL_JOB_EXIT_CODE_H_
