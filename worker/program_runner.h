// A program job's run on one worker (JobSpec.program, issue 32): ps_worker starts the user's
// program (a Python or PyTorch worker through python/ps) in place of the built-in trainer,
// with the job and this worker's task in its environment (the variables proto/job.proto's
// ProgramSpec lists), relays the progress the program reports as the job's JobProgress, stops
// it when the job is stopped, and says how it ended. The program talks to the shards itself,
// with the same client, TLS files and token as this daemon.
#ifndef PS_WORKER_PROGRAM_RUNNER_H_
#define PS_WORKER_PROGRAM_RUNNER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/client/ps_connections.h"  // PsClientOptions.
#include "common/clock.h"
#include "proto/job.pb.h"
#include "proto/worker_service.pb.h"

namespace ps {

struct ProgramContext {
  JobSpec spec;  // REQUIRES: ValidateJobSpec(spec, num_workers).ok(), spec.has_program().
  int worker = 0;
  int num_workers = 1;
  int64_t first_step = 0;  // A resumed run's (StartJobRequest.first_step).
  int incarnation = 0;
  // The ps tasks, how to reach them (TLS files) and the token, handed to the program.
  PsClientOptions ps;
  // Set to ask the program to stop: it gets SIGTERM, and SIGKILL `stop_grace` later.
  const std::atomic<bool>* stop = nullptr;
  absl::Duration stop_grace = absl::Seconds(10);
  // Called with each report the program makes (job_id, worker and state set here), on the
  // calling thread; must not block for long.
  std::function<void(const JobProgress&)> report;
  Clock* clock = Clock::Real();
};

// Runs the program to its end in a fresh folder of its own (its output and progress files,
// removed afterwards): OK when it exits 0; CANCELLED when asked to stop; UNAVAILABLE when it
// died of a signal (killed, crashed), ABORTED when it exited with a failure, either saying how
// with the last lines it wrote; NOT_FOUND when argv[0] cannot be found. Bad progress lines are
// logged and skipped.
absl::Status RunProgram(const ProgramContext& context);

// argv[0] as a path: itself when it holds a '/', else the first executable of that name on
// `path` (PATH's form); NOT_FOUND naming both otherwise.
absl::StatusOr<std::string> FindProgram(const std::string& name, const std::string& path);

// The environment RunProgram gives the program ("NAME=value"), with the token in `token_file`.
std::vector<std::string> ProgramEnvironment(const ProgramContext& context,
                                            const std::string& token_file,
                                            const std::string& progress_file);

}  // namespace ps

#endif  // PS_WORKER_PROGRAM_RUNNER_H_
