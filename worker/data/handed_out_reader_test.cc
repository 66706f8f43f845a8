#include "worker/data/handed_out_reader.h"

#include <map>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// 10 examples of one feature whose value is the example's index.
Dataset Numbered() {
  Dataset data;
  data.num_examples = 10;
  data.feature_dim = 1;
  for (int i = 0; i < 10; ++i) {
    data.features.push_back(static_cast<float>(i));
    data.labels.push_back(static_cast<float>(i % 2));
  }
  return data;
}

// A first shard handing out batches 0, 1, 2, ... of `epochs` epochs, in turn to whoever asks.
struct FakeShard {
  int64_t per_epoch = 0;
  int64_t total = 0;
  int64_t next = 0;
  absl::StatusOr<NextBatchesResponse> Fetch(int count) {
    NextBatchesResponse response;
    response.set_batches_per_epoch(per_epoch);
    for (int i = 0; i < count && next < total; ++i) response.add_batches(next++);
    return response;
  }
};

// Two workers reading alternately see every example once per epoch, in batches of 3, 3, 3, 1.
TEST(HandedOutReaderTest, WorkersTogetherReadEveryExampleOncePerEpoch) {
  const Dataset data = Numbered();
  FakeShard shard{HandedOutReader::BatchesPerEpoch(10, 3), 2 * 4};
  ASSERT_EQ(shard.per_epoch, 4);
  auto fetch = [&shard](int64_t, int count) { return shard.Fetch(count); };
  std::vector<HandedOutReader> readers;
  for (int w = 0; w < 2; ++w) readers.emplace_back(&data, 3, /*seed=*/5, /*shuffle=*/true, fetch);
  std::map<int64_t, std::map<int, int>> seen;  // Epoch -> example -> times.
  std::vector<float> features, labels;
  bool more = true;
  while (more) {
    more = false;
    for (HandedOutReader& reader : readers) {
      int64_t batch = -1;
      absl::StatusOr<int> size = reader.NextBatch(&features, &labels, &batch);
      ASSERT_TRUE(size.ok()) << size.status();
      if (*size == 0) continue;
      more = true;
      EXPECT_EQ(*size, batch % 4 == 3 ? 1 : 3);
      ASSERT_EQ(features.size(), static_cast<size_t>(*size));
      for (float feature : features) ++seen[batch / 4][static_cast<int>(feature)];
    }
  }
  ASSERT_EQ(seen.size(), 2u);
  for (const auto& [epoch, examples] : seen) {
    ASSERT_EQ(examples.size(), 10u) << "epoch " << epoch;
    for (const auto& [example, times] : examples) EXPECT_EQ(times, 1);
  }
}

// A batch is the same examples whoever reads it, and epochs are ordered differently.
TEST(HandedOutReaderTest, ABatchIsTheSameExamplesForEveryReader) {
  const Dataset data = Numbered();
  auto only = [](int64_t batch) {
    return [batch](int64_t, int) {
      NextBatchesResponse response;
      response.set_batches_per_epoch(4);
      response.add_batches(batch);
      return absl::StatusOr<NextBatchesResponse>(response);
    };
  };
  std::vector<float> a, b, labels;
  int64_t batch;
  HandedOutReader first(&data, 3, 5, true, only(5)), second(&data, 3, 5, true, only(5));
  ASSERT_TRUE(first.NextBatch(&a, &labels, &batch).ok());
  ASSERT_TRUE(second.NextBatch(&b, &labels, &batch).ok());
  EXPECT_EQ(a, b);
  HandedOutReader other_epoch(&data, 3, 5, true, only(1));
  std::vector<float> c;
  ASSERT_TRUE(other_epoch.NextBatch(&c, &labels, &batch).ok());
  EXPECT_NE(a, c);
}

TEST(HandedOutReaderTest, RefusesAHandoutForOtherData) {
  const Dataset data = Numbered();
  HandedOutReader reader(&data, 3, 5, true, [](int64_t, int) {
    NextBatchesResponse response;
    response.set_batches_per_epoch(5);
    response.add_batches(0);
    return absl::StatusOr<NextBatchesResponse>(response);
  });
  std::vector<float> features, labels;
  int64_t batch;
  absl::StatusOr<int> size = reader.NextBatch(&features, &labels, &batch);
  EXPECT_EQ(size.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(size.status().message(), HasSubstr("same data"));
}

}  // namespace
}  // namespace ps
