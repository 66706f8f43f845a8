#include "worker/divergence.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_format.h"

namespace ps {

double DivergenceWatch::MeanOf(size_t begin) const {
  return std::accumulate(losses_.begin() + begin, losses_.begin() + begin + kWindow, 0.0) /
         kWindow;
}

std::optional<std::string> DivergenceWatch::Observe(int64_t step, double loss) {
  if (!std::isfinite(loss)) {
    return absl::StrFormat("the training loss is %f at step %d", loss, step + 1);
  }
  if (first_step_ < 0) first_step_ = step;
  losses_.push_back(loss);
  if (losses_.size() <= kWindow) start_ = std::max(start_, loss);
  if (first_step_ != 0 || losses_.size() < 2 * kWindow) return std::nullopt;
  const double recent = MeanOf(losses_.size() - kWindow);
  // A classifier diverges when it does far worse than guessing; one whose tiny loss doubles
  // (its batch noise, once the model is trained) has not.
  if (guessing_loss_ <= 0 && recent > kRiseFactor * start_) {
    return absl::StrFormat(
        "the training loss rose: its mean over steps %d-%d is %.6g, above %.6g, the largest "
        "over steps %d-%d where it started",
        step + 2 - kWindow, step + 1, recent, start_, first_step_ + 1, first_step_ + kWindow);
  }
  if (guessing_loss_ > 0 && recent > kRiseFactor * std::max(guessing_loss_, losses_[0])) {
    return absl::StrFormat(
        "the training loss rose: its mean over steps %d-%d is %.6g, above %.6g at step %d where "
        "it started and far worse than guessing (%.6g)",
        step + 2 - kWindow, step + 1, recent, losses_[0], first_step_ + 1, guessing_loss_);
  }
  return std::nullopt;
}

std::string DivergenceWatch::StallNote() const {
  if (losses_.size() < 4 * kWindow) return "";
  const double recent = MeanOf(losses_.size() - kWindow);
  const double before = MeanOf(losses_.size() - 2 * kWindow);
  if (recent < before) return "";
  return absl::StrFormat(
      "the training loss had stopped falling: %.6g over the last %d steps, %.6g over the %d "
      "before",
      recent, kWindow, before, kWindow);
}

}  // namespace ps
