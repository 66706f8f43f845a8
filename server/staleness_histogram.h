// Counts of gradient staleness (version at apply time minus version read), with mean and max.
#ifndef PS_SERVER_STALENESS_HISTOGRAM_H_
#define PS_SERVER_STALENESS_HISTOGRAM_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps_service.pb.h"

namespace ps {

// Not thread-safe: the owner guards it.
class StalenessHistogram {
 public:
  // Staleness 0 .. num_buckets - 2 get their own bucket; the last holds everything beyond.
  static constexpr int kNumBuckets = 64;

  // REQUIRES: staleness >= 0.
  void Record(int64_t staleness);

  int64_t total() const { return total_; }
  int64_t max() const { return max_; }
  double mean() const { return total_ == 0 ? 0.0 : static_cast<double>(sum_) / total_; }
  // How many recorded values equal `staleness` (for the last bucket: are >= it).
  int64_t count(int64_t staleness) const;

  // Fills `out`, trimming trailing empty buckets.
  void ToProto(StalenessHistogramData* out) const;
  // The histogram ToProto wrote (a checkpoint's); DATA_LOSS for one that cannot be.
  static absl::StatusOr<StalenessHistogram> FromProto(const StalenessHistogramData& data);

 private:
  std::vector<int64_t> counts_ = std::vector<int64_t>(kNumBuckets, 0);
  int64_t total_ = 0;
  int64_t sum_ = 0;
  int64_t max_ = 0;
};

}  // namespace ps

#endif  // PS_SERVER_STALENESS_HISTOGRAM_H_
