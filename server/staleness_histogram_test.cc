#include "server/staleness_histogram.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(StalenessHistogramTest, CountsMeanMaxAndOverflow) {
  StalenessHistogram histogram;
  for (int64_t s : {0, 0, 1, 3, 500}) histogram.Record(s);
  EXPECT_EQ(histogram.total(), 5);
  EXPECT_EQ(histogram.max(), 500);
  EXPECT_DOUBLE_EQ(histogram.mean(), 504.0 / 5);
  EXPECT_EQ(histogram.count(0), 2);
  EXPECT_EQ(histogram.count(2), 0);
  EXPECT_EQ(histogram.count(StalenessHistogram::kNumBuckets - 1), 1);

  StalenessHistogramData proto;
  histogram.ToProto(&proto);
  ASSERT_EQ(proto.counts_size(), StalenessHistogram::kNumBuckets);
  EXPECT_EQ(proto.counts(3), 1);
  EXPECT_EQ(proto.total(), 5);
  EXPECT_EQ(proto.max(), 500);
}

TEST(StalenessHistogramTest, ProtoTrimsEmptyTail) {
  StalenessHistogram histogram;
  histogram.Record(2);
  StalenessHistogramData proto;
  histogram.ToProto(&proto);
  ASSERT_EQ(proto.counts_size(), 3);
  EXPECT_EQ(proto.counts(2), 1);
  StalenessHistogram empty;
  empty.ToProto(&proto);
  EXPECT_EQ(proto.counts_size(), 0);
  EXPECT_EQ(proto.mean(), 0.0);
}

TEST(StalenessHistogramTest, FromProtoGivesBackTheHistogramExactly) {
  StalenessHistogram histogram;
  for (int64_t staleness : {0, 3, 3, 7, 1000}) histogram.Record(staleness);
  StalenessHistogramData data;
  histogram.ToProto(&data);
  absl::StatusOr<StalenessHistogram> restored = StalenessHistogram::FromProto(data);
  ASSERT_TRUE(restored.ok()) << restored.status();
  StalenessHistogramData again;
  restored->ToProto(&again);
  EXPECT_EQ(again.SerializeAsString(), data.SerializeAsString());
  EXPECT_EQ(restored->count(3), 2);
  EXPECT_EQ(restored->max(), 1000);

  data.set_total(4);  // The buckets hold 5.
  EXPECT_EQ(StalenessHistogram::FromProto(data).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ps
