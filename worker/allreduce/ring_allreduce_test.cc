#include "worker/allreduce/ring_allreduce.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/allreduce/local_ring.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// Runs `member(rank)` on a thread per member of `links`; returns each member's status.
std::vector<absl::Status> RunMembers(const std::vector<std::unique_ptr<RingLink>>& links,
                                     const std::function<absl::Status(int rank)>& member) {
  std::vector<absl::Status> statuses(links.size());
  std::vector<std::thread> threads;
  for (size_t rank = 0; rank < links.size(); ++rank) {
    threads.emplace_back([&, rank] { statuses[rank] = member(static_cast<int>(rank)); });
  }
  for (std::thread& thread : threads) thread.join();
  return statuses;
}

std::vector<std::vector<float>> RandomData(int members, int64_t length, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> value(-10.0f, 10.0f);
  std::vector<std::vector<float>> data(members, std::vector<float>(length));
  for (std::vector<float>& member : data) {
    for (float& x : member) x = value(random);
  }
  return data;
}

// Checks that every member's result is bitwise the same, and within float rounding of the
// mean computed in double: a float sum of n terms in any order is within (n - 1) u times the
// sum of their magnitudes of the exact sum (u = FLT_EPSILON / 2, the unit roundoff), and the
// division by n adds at most u of the result: n u times the mean magnitude in all.
void ExpectMean(const std::vector<std::vector<float>>& before,
                const std::vector<std::vector<float>>& after) {
  const int n = static_cast<int>(before.size());
  const size_t length = before[0].size();
  for (int rank = 1; rank < n; ++rank) {
    ASSERT_EQ(after[rank].size(), length);
    EXPECT_EQ(std::memcmp(after[rank].data(), after[0].data(), length * sizeof(float)), 0)
        << "member " << rank << " differs from member 0";
  }
  for (size_t i = 0; i < length; ++i) {
    double sum = 0, magnitude = 0;
    for (int rank = 0; rank < n; ++rank) {
      sum += before[rank][i];
      magnitude += std::fabs(before[rank][i]);
    }
    const double tolerance = n * (FLT_EPSILON / 2) * (magnitude / n) + FLT_MIN;
    ASSERT_NEAR(after[0][i], sum / n, tolerance) << "element " << i << " of " << length;
  }
}

// Runs one all-reduce over a local ring of `n` members with `options`; returns their results.
std::vector<std::vector<float>> AllReduce(const std::vector<std::vector<float>>& before,
                                          const RingOptions& options) {
  const int n = static_cast<int>(before.size());
  std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(n, absl::Seconds(30));
  std::vector<std::vector<float>> data = before;
  std::vector<absl::Status> statuses = RunMembers(links, [&](int rank) {
    return RingAllReduceMean(links[rank].get(), /*step=*/7, absl::MakeSpan(data[rank]), options);
  });
  for (int rank = 0; rank < n; ++rank) EXPECT_TRUE(statuses[rank].ok()) << statuses[rank];
  return data;
}

TEST(RingAllReduceTest, EveryMemberGetsTheMeanForOneToFiveMembersAndUnevenLengths) {
  for (int n = 1; n <= 5; ++n) {
    for (int64_t length :
         {int64_t{0}, int64_t{1}, int64_t{n - 1}, int64_t{n + 1}, int64_t{100003}}) {
      for (int64_t piece_bytes : {int64_t{1} << 20, int64_t{4}, int64_t{4 * 997}}) {
        if (piece_bytes == 4 && length > 1000) continue;  // A message a float: too slow.
        SCOPED_TRACE(testing::Message() << n << " members, " << length << " floats, pieces of "
                                        << piece_bytes << " bytes");
        std::vector<std::vector<float>> before = RandomData(n, length, 100 * n + length);
        RingOptions options;
        options.piece_bytes = piece_bytes;
        ExpectMean(before, AllReduce(before, options));
      }
    }
  }
}

TEST(RingAllReduceTest, OneSendInFlightGivesTheSameResult) {
  std::vector<std::vector<float>> before = RandomData(4, 10007, 3);
  RingOptions options;
  options.piece_bytes = 4000;
  options.sends_in_flight = 1;
  std::vector<std::vector<float>> one = AllReduce(before, options);
  ExpectMean(before, one);
  options.sends_in_flight = 3;
  std::vector<std::vector<float>> three = AllReduce(before, options);
  EXPECT_EQ(std::memcmp(one[0].data(), three[0].data(), one[0].size() * sizeof(float)), 0);
}

TEST(RingAllReduceTest, BytesThroughEachLinkFollowTheFormula) {
  for (int n = 2; n <= 5; ++n) {
    for (int64_t length : {int64_t{0}, int64_t{1}, int64_t{n - 1}, int64_t{n + 1},
                           int64_t{1000 * n}, int64_t{100003}}) {
      SCOPED_TRACE(testing::Message() << n << " members, " << length << " floats");
      std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(n, absl::Seconds(30));
      std::vector<std::vector<float>> data = RandomData(n, length, 11);
      RingOptions options;
      options.piece_bytes = 4096;
      std::vector<absl::Status> statuses = RunMembers(links, [&](int rank) {
        for (uint64_t step = 0; step < 3; ++step) {
          absl::Status status =
              RingAllReduceMean(links[rank].get(), step, absl::MakeSpan(data[rank]), options);
          if (!status.ok()) return status;
        }
        return absl::OkStatus();
      });
      int64_t total_sent = 0, total_received = 0;
      for (int rank = 0; rank < n; ++rank) {
        ASSERT_TRUE(statuses[rank].ok()) << statuses[rank];
        const RingTraffic expected = RingAllReduceTraffic(length, n, rank);
        EXPECT_EQ(links[rank]->bytes_sent(), 3 * expected.bytes_sent) << "member " << rank;
        EXPECT_EQ(links[rank]->bytes_received(), 3 * expected.bytes_received) << "member " << rank;
        if (length % n == 0) {
          EXPECT_EQ(expected.bytes_sent, 2 * (n - 1) * 4 * length / n);
          EXPECT_EQ(expected.bytes_received, 2 * (n - 1) * 4 * length / n);
        }
        // Never more than the even share plus one float per chunk sent.
        EXPECT_LE(expected.bytes_sent, 2 * (n - 1) * 4 * length / n + 8);
        total_sent += links[rank]->bytes_sent();
        total_received += links[rank]->bytes_received();
      }
      EXPECT_EQ(total_sent, total_received);
      EXPECT_EQ(total_sent, 3 * 2 * (n - 1) * 4 * length);  // Every chunk 2 (n-1) times a call.
    }
  }
}

TEST(RingAllReduceTest, TheTrafficOfOneMemberIsZero) {
  EXPECT_EQ(RingAllReduceTraffic(1000, 1, 0).bytes_sent, 0);
  EXPECT_EQ(RingAllReduceTraffic(1000, 1, 0).bytes_received, 0);
}

TEST(RingAllReduceTest, ConsecutiveStepsAtDifferentPacesDoNotMix) {
  const int n = 3;
  std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(n, absl::Seconds(30));
  std::vector<std::vector<std::vector<float>>> before;
  for (uint32_t step = 0; step < 4; ++step) before.push_back(RandomData(n, 1001, step));
  std::vector<std::vector<std::vector<float>>> after(4, std::vector<std::vector<float>>(n));
  RingOptions options;
  options.piece_bytes = 400;
  std::vector<absl::Status> statuses = RunMembers(links, [&](int rank) {
    for (int step = 0; step < 4; ++step) {
      if (rank == 1) absl::SleepFor(absl::Milliseconds(5));  // Others run ahead.
      after[step][rank] = before[step][rank];
      absl::Status status =
          RingAllReduceMean(links[rank].get(), step, absl::MakeSpan(after[step][rank]), options);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  });
  for (const absl::Status& status : statuses) ASSERT_TRUE(status.ok()) << status;
  for (int step = 0; step < 4; ++step) ExpectMean(before[step], after[step]);
}

TEST(RingAllReduceTest, AClosedPeerEndsTheCallWithItsName) {
  std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(3, absl::Seconds(30));
  links[2].reset();  // worker:2 is gone.
  std::vector<std::vector<float>> data = RandomData(3, 1000, 5);
  std::vector<absl::Status> statuses(2);
  const absl::Time start = absl::Now();
  std::thread member0(
      [&] { statuses[0] = RingAllReduceMean(links[0].get(), 0, absl::MakeSpan(data[0])); });
  statuses[1] = RingAllReduceMean(links[1].get(), 0, absl::MakeSpan(data[1]));
  member0.join();
  // worker:1's send to worker:2 fails; worker:0 learns it from worker:1, which refuses its
  // messages from then on (or directly, if it was waiting on worker:2 by then): both at once,
  // not by the 30 s deadline.
  EXPECT_TRUE(absl::IsUnavailable(statuses[1])) << statuses[1];
  for (const absl::Status& status : statuses) {
    EXPECT_THAT(status.message(), HasSubstr("worker:2 (in-process) is gone")) << status;
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(RingAllReduceTest, ASilentPeerEndsTheCallByTheDeadlineWithItsName) {
  std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(2, absl::Milliseconds(50));
  std::vector<float> data(100, 1.0f);
  // worker:1 never calls.
  absl::Status status = RingAllReduceMean(links[0].get(), 0, absl::MakeSpan(data));
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("waiting for worker:1 (in-process)"));
}

TEST(RingAllReduceTest, BadOptionsAndStepsAreRefused) {
  std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(1, absl::Seconds(1));
  std::vector<float> data(10);
  RingOptions options;
  options.piece_bytes = 2;
  absl::Status status = RingAllReduceMean(links[0].get(), 0, absl::MakeSpan(data), options);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("piece_bytes"));
  options = RingOptions();
  options.sends_in_flight = 0;
  status = RingAllReduceMean(links[0].get(), 0, absl::MakeSpan(data), options);
  EXPECT_THAT(status.message(), HasSubstr("sends_in_flight"));
  status = RingAllReduceMean(links[0].get(), uint64_t{1} << 40, absl::MakeSpan(data));
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("2^40"));
}

TEST(RingAllReduceTest, TooManyPiecesAreRefusedNamingTheOption) {
  std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(2, absl::Seconds(1));
  std::vector<float> data(int64_t{1} << 24);
  RingOptions options;
  options.piece_bytes = 4;
  absl::Status status = RingAllReduceMean(links[0].get(), 0, absl::MakeSpan(data), options);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("raise RingOptions.piece_bytes"));
}

}  // namespace
}  // namespace ps
