// Settings that are valid but known to make training diverge or stall: psctl warns of them when
// a job is submitted (ValidateJobSpec accepts them; the worker's divergence rule catches what
// then goes wrong, worker/divergence.h).
#ifndef PS_COMMON_JOB_JOB_WARNINGS_H_
#define PS_COMMON_JOB_JOB_WARNINGS_H_

#include <string>
#include <vector>

#include "proto/job.pb.h"

namespace ps {

// One sentence per trap `spec` falls into on `num_workers` workers, each naming the setting,
// what the literature and this project measured, and what to change; empty when none.
//  - momentum (MOMENTUM, or ADAM's beta1) with asynchronous updates (ASYNC, SOFTSYNC, SSP with a
//    bound) on 2+ workers: asynchrony itself acts as momentum (Mitliagkas et al. 2016), so the
//    sum overshoots at a learning rate SYNC tolerates;
//  - ASYNC on 4+ workers at a constant rate with neither staleness_learning_rate nor
//    max_staleness: each gradient is about N - 1 updates stale, and gradient descent with delay
//    tau is stable only below a rate that falls as 1 / (2 tau + 1);
//  - checkpoints of ALLREDUCE or LOCAL_SGD with an optimizer that keeps state (MOMENTUM,
//    ADAGRAD, ADAM): the state lives on the workers, not in the checkpoints, so a resumed run
//    starts it afresh (its weights are the checkpoint's; plain SGD resumes exactly).
std::vector<std::string> JobWarnings(const JobSpec& spec, int num_workers);

}  // namespace ps

#endif  // PS_COMMON_JOB_JOB_WARNINGS_H_
