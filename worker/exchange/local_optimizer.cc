#include "worker/exchange/local_optimizer.h"

#include <utility>

#include "common/job/learning_rate.h"

namespace ps {

absl::StatusOr<std::unique_ptr<LocalOptimizer>> LocalOptimizer::Create(
    const OptimizerConfig& optimizer, const LearningRateSchedule& schedule,
    const std::vector<VariableDef>& variables, int64_t first_step) {
  absl::StatusOr<std::unique_ptr<Optimizer>> created = Optimizer::Create(optimizer);
  if (!created.ok()) return created.status();
  return std::unique_ptr<LocalOptimizer>(
      new LocalOptimizer(*std::move(created), schedule, variables, first_step));
}

LocalOptimizer::LocalOptimizer(std::unique_ptr<Optimizer> optimizer,
                               const LearningRateSchedule& schedule,
                               const std::vector<VariableDef>& variables, int64_t first_step)
    : optimizer_(std::move(optimizer)),
      schedule_(schedule),
      first_step_(first_step),
      updates_(first_step) {
  const HostVariables shapes(variables);
  for (const std::vector<float>& array : shapes.arrays()) {
    slots_.emplace_back(optimizer_->num_slots(), std::vector<float>(array.size()));
    std::vector<absl::Span<float>> views;
    for (std::vector<float>& slot : slots_.back()) views.emplace_back(slot);
    optimizer_->InitializeSlots(views);
  }
}

void LocalOptimizer::Apply(const std::vector<std::vector<float>>& gradient,
                           HostVariables* weights) {
  const float learning_rate = LearningRateAt(schedule_, updates_);
  for (size_t v = 0; v < gradient.size(); ++v) {
    std::vector<absl::Span<float>> slots;
    for (std::vector<float>& slot : slots_[v]) slots.emplace_back(slot);
    // The slots began at first_step_ (they are not checkpointed).
    optimizer_->Apply(learning_rate, gradient[v], absl::MakeSpan(weights->arrays()[v]), slots,
                      updates_ - first_step_);
  }
  ++updates_;
}

}  // namespace ps
