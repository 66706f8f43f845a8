// ALLREDUCE and LOCAL_SGD (what users compare the ps modes with): the workers keep copies
// of their own and average among themselves over a ring of their daemons
// (worker/allreduce/ring_allreduce.h), applying the job's optimizer themselves, the same code the
// ps applies (common/job/optimizer.h). The shards hold what the workers need of them: the initial
// values, pulled once before the first step (a resumed run's: the checkpoint's), and the model
// the chief (worker 0) publishes (server/consistency/publish_rule.h) every
// checkpoint.every_steps steps, for the checkpoint the shards then take, and when the job ends,
// for the results. The optimizer's state is each worker's own and is not checkpointed: a
// resumed run starts it afresh (Adam's bias correction counts from the resume too).
//   ALLREDUCE  each step: the ring averages the gradients, then every worker applies the mean
//              with the schedule's rate at its step, so with the same seed the copies stay equal
//              and equal to SYNC's with every worker's gradient (to float rounding).
//   LOCAL_SGD  each worker applies its own gradient; every local_steps steps (and after the
//              last) the ring averages the weights. The averaging is by all-reduce, not on the
//              ps: it moves 2 (N - 1) / N of the model per worker instead of 2, and needs no
//              round of pushes and pulls through one shard. The optimizer's state (momentum,
//              Adam's moments) stays each worker's own, as in Stich 2019's local SGD.
#ifndef PS_WORKER_EXCHANGE_RING_EXCHANGE_H_
#define PS_WORKER_EXCHANGE_RING_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "common/client/worker_session.h"
#include "proto/job.pb.h"
#include "worker/allreduce/ring_link.h"
#include "worker/exchange/exchange.h"
#include "worker/exchange/local_optimizer.h"
#include "worker/host_variables.h"

namespace ps {

class RingExchange : public Exchange {
 public:
  // `session`: the worker's calls to the shards (the initial pull; the chief's publish);
  // `ring`: its links to the other workers, not owned, outliving the exchange; `first_step`:
  // the step the worker starts at (a resumed run's), whose model the shards hold.
  // INVALID_ARGUMENT for an optimizer the spec's config does not make.
  static absl::StatusOr<std::unique_ptr<RingExchange>> Create(
      std::unique_ptr<WorkerSession> session, RingLink* ring,
      const std::vector<VariableDef>& variables, const JobSpec& spec, int worker,
      int64_t first_step = 0);

  absl::Status BeforeCompute(int64_t step) override;
  absl::Status AfterCompute(int64_t step, const HostVariables& gradients) override;
  absl::Status Finish() override;
  const HostVariables& weights() const override { return weights_; }
  int64_t global_step() const override { return optimizer_->updates(); }
  double mean_staleness() const override { return 0; }
  absl::Duration parked_time() const override { return absl::ZeroDuration(); }
  int64_t bytes_sent() const override;
  int64_t bytes_received() const override;

 private:
  RingExchange(std::unique_ptr<WorkerSession> session, RingLink* ring,
               const std::vector<VariableDef>& variables, const JobSpec& spec, int worker,
               int64_t first_step, std::unique_ptr<LocalOptimizer> optimizer);
  // Replaces `arrays` by their mean over the ring (call `tag`).
  absl::Status AverageOverRing(uint64_t tag, std::vector<std::vector<float>>* arrays);
  // The chief, every worker holding the same model after the optimizer's updates(): publishes
  // it where a checkpoint is due (a multiple of checkpoint.every_steps), or always when
  // `final`.
  absl::Status MaybePublish(bool final);

  const std::unique_ptr<WorkerSession> session_;
  RingLink* const ring_;
  const JobSpec spec_;
  const int worker_;
  const std::unique_ptr<LocalOptimizer> optimizer_;
  HostVariables weights_;
  // Each worker trains a copy of its own and the copies are averaged every local_steps
  // (LOCAL_SGD); otherwise the gradients are averaged every step (ALLREDUCE).
  const bool own_copies_;
  std::vector<std::vector<float>> mean_;  // Averaging gradients: the step's mean gradient.
  std::vector<float> flat_;               // The ring's buffer.
  bool pulled_ = false;
  int64_t averaged_at_;           // LOCAL_SGD: the optimizer's updates() at the last averaging.
  int64_t published_at_ = -1;     // updates() at the chief's last publish.
  uint64_t ring_calls_ = 0;       // Tags of the ring's calls.
};

}  // namespace ps

#endif  // PS_WORKER_EXCHANGE_RING_EXCHANGE_H_
