#include "worker/allreduce/local_ring.h"

#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(LocalRingTest, MessagesGoToTheNextMemberInAnyOrderOfTags) {
  std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(3, absl::Seconds(5));
  ASSERT_EQ(links.size(), 3u);
  EXPECT_EQ(links[2]->rank(), 2);
  EXPECT_EQ(links[2]->size(), 3);
  const std::vector<float> first = {1, 2, 3}, second = {4};
  ASSERT_TRUE(links[2]->Send(10, first).ok());
  ASSERT_TRUE(links[2]->Send(11, second).ok());
  std::vector<float> out(1);
  ASSERT_TRUE(links[0]->Receive(11, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(4));
  out.resize(3);
  ASSERT_TRUE(links[0]->Receive(10, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(1, 2, 3));
  EXPECT_EQ(links[2]->bytes_sent(), 16);
  EXPECT_EQ(links[0]->bytes_received(), 16);
  EXPECT_EQ(links[1]->bytes_received(), 0);
}

TEST(LocalRingTest, AReceiveWaitsForItsMessage) {
  std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(2, absl::Seconds(5));
  std::vector<float> out(2);
  std::thread sender([&] {
    absl::SleepFor(absl::Milliseconds(20));
    const std::vector<float> data = {5, 6};
    EXPECT_TRUE(links[0]->Send(1, data).ok());
  });
  EXPECT_TRUE(links[1]->Receive(1, absl::MakeSpan(out)).ok());
  sender.join();
  EXPECT_THAT(out, ElementsAre(5, 6));
}

TEST(LocalRingTest, AMessageOfAnotherSizeIsRefused) {
  std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(2, absl::Seconds(5));
  const std::vector<float> data = {1, 2, 3};
  ASSERT_TRUE(links[0]->Send(1, data).ok());
  std::vector<float> out(2);
  absl::Status status = links[1]->Receive(1, absl::MakeSpan(out));
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("has 3 floats where 2 were expected"));
}

TEST(LocalRingTest, ATagSentTwiceIsAnError) {
  std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(2, absl::Seconds(5));
  const std::vector<float> data = {1};
  ASSERT_TRUE(links[0]->Send(1, data).ok());
  EXPECT_THAT(links[0]->Send(1, data).message(), HasSubstr("twice"));
}

TEST(LocalRingTest, ADeadlineNamesThePeerWaitedFor) {
  std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(3, absl::Milliseconds(20));
  std::vector<float> out(1);
  absl::Status status = links[0]->Receive(4, absl::MakeSpan(out));
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("waiting for worker:2 (in-process)"));
}

TEST(LocalRingTest, AClosedMemberFailsSendsToItAndReceivesFromIt) {
  std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(3, absl::Seconds(30));
  std::vector<float> out(1);
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    links[1].reset();
  });
  absl::Status received = links[2]->Receive(1, absl::MakeSpan(out));  // Waits on worker:1.
  closer.join();
  EXPECT_TRUE(absl::IsUnavailable(received)) << received;
  EXPECT_THAT(received.message(), HasSubstr("worker:1 (in-process) is gone"));
  absl::Status sent = links[0]->Send(1, out);
  EXPECT_TRUE(absl::IsUnavailable(sent)) << sent;
  EXPECT_THAT(sent.message(), HasSubstr("worker:1 (in-process) is gone"));
}

TEST(LocalRingTest, AnAbortedLinkFailsItsCallsAndRefusesMessages) {
  std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(2, absl::Seconds(30));
  std::vector<float> out(1);
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(20));
    links[1]->Abort(absl::UnavailableError("worker:0 is gone"));
  });
  absl::Status received = links[1]->Receive(1, absl::MakeSpan(out));  // Ended by the abort.
  aborter.join();
  EXPECT_TRUE(absl::IsUnavailable(received)) << received;
  EXPECT_THAT(received.message(), HasSubstr("worker:0 is gone"));
  EXPECT_THAT(links[1]->Send(2, out).message(), HasSubstr("worker:0 is gone"));
  absl::Status refused = links[0]->Send(3, out);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("worker:1 (in-process) gave up on the ring"));
  EXPECT_THAT(refused.message(), HasSubstr("worker:0 is gone"));
}

TEST(LocalRingTest, AnAbortEndsTheNextMembersReceive) {
  std::vector<std::unique_ptr<RingLink>> links = MakeLocalRing(3, absl::Seconds(30));
  std::vector<float> out(1);
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(20));
    links[0]->Abort(absl::DeadlineExceededError("waiting for worker:2"));
  });
  absl::Status received = links[1]->Receive(1, absl::MakeSpan(out));  // Waits on worker:0.
  aborter.join();
  EXPECT_TRUE(absl::IsFailedPrecondition(received)) << received;
  EXPECT_THAT(received.message(), HasSubstr("worker:0 (in-process) gave up on the ring"));
  EXPECT_THAT(received.message(), HasSubstr("waiting for worker:2"));
}

}  // namespace
}  // namespace ps
