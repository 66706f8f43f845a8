#include "server/staleness_histogram.h"

#include <algorithm>

namespace ps {

void StalenessHistogram::Record(int64_t staleness) {
  int64_t bucket = std::min<int64_t>(staleness, kNumBuckets - 1);
  ++counts_[bucket];
  ++total_;
  sum_ += staleness;
  max_ = std::max(max_, staleness);
}

int64_t StalenessHistogram::count(int64_t staleness) const {
  if (staleness < 0) return 0;
  return counts_[std::min<int64_t>(staleness, kNumBuckets - 1)];
}

void StalenessHistogram::ToProto(StalenessHistogramData* out) const {
  out->Clear();
  int last = kNumBuckets - 1;
  while (last >= 0 && counts_[last] == 0) --last;
  for (int i = 0; i <= last; ++i) out->add_counts(counts_[i]);
  out->set_total(total_);
  out->set_mean(mean());
  out->set_max(max_);
}

}  // namespace ps
