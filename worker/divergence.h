// Watches a worker's training loss for the two ways a badly set job goes wrong while looking
// busy: it diverges (the loss is NaN or infinite, or its recent mean has risen well above the
// loss it started at) or it stalls (the loss has stopped falling). Known traps, such as ASYNC with
// momentum at a learning rate SYNC tolerates, do this and still end DONE unless watched.
//
// Recent losses are means over windows of kWindow steps, since one batch's loss is noisy. A
// classifier diverges when it does far worse than a uniform guess; a regression when its recent
// mean rises well above the largest loss of its first window. Neither mistakes the noise of a
// small loss for divergence: a worker that started late, on a model the others had trained
// already (ASYNC on a loaded machine), starts small and noisy.
#ifndef PS_WORKER_DIVERGENCE_H_
#define PS_WORKER_DIVERGENCE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ps {

class DivergenceWatch {
 public:
  // `guessing_loss`: for a classifier, the loss of a uniform guess (ln of the number of
  // classes). A classifier diverges when its recent mean is above kRiseFactor times both that
  // and its first loss (far worse than guessing), and only then: its loss near zero may double
  // with batch noise alone. 0: not a classifier, judged by the rise over its first window.
  explicit DivergenceWatch(double guessing_loss = 0) : guessing_loss_(guessing_loss) {}

  static constexpr int kWindow = 10;
  // Diverged: the last window's mean above the first window's largest loss by more than this
  // factor.
  static constexpr double kRiseFactor = 1.5;

  // Takes the loss of step `step`; returns why training diverged, if it has now: a NaN or
  // infinite loss, or (from the second window on, which shares no step with the first) the last
  // kWindow losses' mean above kRiseFactor times the largest of the first kWindow (regression),
  // or above kRiseFactor times both the guessing loss and the first loss (a classifier). The rise
  // is
  // judged only where the first step observed is step 0: a worker that resumes or rejoins
  // mid-run starts from a trained model.
  std::optional<std::string> Observe(int64_t step, double loss);

  // At the end: a note when the loss had stopped falling (the last window's mean no lower than
  // the window's before it, with at least 4 windows of steps), else empty.
  std::string StallNote() const;

 private:
  double MeanOf(size_t begin) const;  // Of losses_[begin, begin + kWindow).

  std::vector<double> losses_;
  int64_t first_step_ = -1;
  const double guessing_loss_;
  double start_ = 0;  // The largest of the first kWindow losses.
};

}  // namespace ps

#endif  // PS_WORKER_DIVERGENCE_H_
