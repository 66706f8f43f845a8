// Watches a worker's training loss for the two ways a badly set job goes wrong while looking
// busy: it diverges (the loss is NaN or infinite, or its recent mean has risen well above the
// loss it started at) or it stalls (the loss has stopped falling). Known traps, such as ASYNC with
// momentum at a learning rate SYNC tolerates, do this and still end DONE unless watched.
//
// Recent losses are means over windows of kWindow steps, since one batch's loss is noisy; the
// start is the first step's loss, on the initial weights (a window of them would already hold
// the rise of a job that diverges at once).
#ifndef PS_WORKER_DIVERGENCE_H_
#define PS_WORKER_DIVERGENCE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ps {

class DivergenceWatch {
 public:
  static constexpr int kWindow = 10;
  // Diverged: the last window's mean above the first loss by more than this factor.
  static constexpr double kRiseFactor = 1.5;

  // Takes the loss of step `step`; returns why training diverged, if it has now: a NaN or
  // infinite loss, or (once kWindow losses are in) the last kWindow losses' mean above
  // kRiseFactor times the first loss. The rise is judged only where the first step observed is
  // step 0, on the initial weights: a worker that resumes or rejoins mid-run starts from a
  // trained model whose small loss is no start to rise from (its batch noise alone would).
  std::optional<std::string> Observe(int64_t step, double loss);

  // At the end: a note when the loss had stopped falling (the last window's mean no lower than
  // the window's before it, with at least 4 windows of steps), else empty.
  std::string StallNote() const;

 private:
  double MeanOf(size_t begin) const;  // Of losses_[begin, begin + kWindow).

  std::vector<double> losses_;
  int64_t first_step_ = -1;
};

}  // namespace ps

#endif  // PS_WORKER_DIVERGENCE_H_
