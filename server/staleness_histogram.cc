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
  out->set_sum(sum_);
}

absl::StatusOr<StalenessHistogram> StalenessHistogram::FromProto(
    const StalenessHistogramData& data) {
  if (data.counts_size() > kNumBuckets || data.total() < 0 || data.sum() < 0 || data.max() < 0) {
    return absl::DataLossError("a staleness histogram with more buckets than this ps keeps or "
                               "negative counts");
  }
  StalenessHistogram histogram;
  int64_t total = 0;
  for (int i = 0; i < data.counts_size(); ++i) {
    if (data.counts(i) < 0) return absl::DataLossError("a staleness bucket below zero");
    histogram.counts_[i] = data.counts(i);
    total += data.counts(i);
  }
  if (total != data.total()) {
    return absl::DataLossError("a staleness histogram whose buckets do not add up to its total");
  }
  histogram.total_ = data.total();
  histogram.sum_ = data.sum();
  histogram.max_ = data.max();
  return histogram;
}

}  // namespace ps
