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

}  // namespace
}  // namespace ps
