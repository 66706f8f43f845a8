#include "worker/allreduce/ring_mailbox.h"

#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ps {
namespace {

using ::testing::HasSubstr;

grpc::ByteBuffer Bytes(int n) {
  grpc::Slice slice(std::string(n, 'x'));
  return grpc::ByteBuffer(&slice, 1);
}

TEST(RingMailboxTest, TakesWhatWasPutByRunAndTag) {
  RingMailbox mailbox;
  ASSERT_TRUE(mailbox.Put("job", "run-1", 5, Bytes(10)).ok());
  ASSERT_TRUE(mailbox.Put("job", "run-2", 5, Bytes(20)).ok());
  EXPECT_EQ(mailbox.bytes_held(), 30);
  grpc::ByteBuffer message;
  ASSERT_TRUE(mailbox.Take("job", "run-2", 5, absl::Seconds(1), &message).ok());
  EXPECT_EQ(message.Length(), 20u);
  EXPECT_EQ(mailbox.bytes_held(), 10);
  EXPECT_TRUE(absl::IsAlreadyExists(mailbox.Put("job", "run-1", 5, Bytes(1))));
}

TEST(RingMailboxTest, ATakeWaitsForItsMessage) {
  RingMailbox mailbox;
  std::thread putter([&] {
    absl::SleepFor(absl::Milliseconds(20));
    EXPECT_TRUE(mailbox.Put("job", "run", 1, Bytes(4)).ok());
  });
  grpc::ByteBuffer message;
  EXPECT_TRUE(mailbox.Take("job", "run", 1, absl::Seconds(30), &message).ok());
  putter.join();
  EXPECT_EQ(mailbox.bytes_held(), 0);
}

TEST(RingMailboxTest, ATakeEndsByItsTimeout) {
  RingMailbox mailbox;
  grpc::ByteBuffer message;
  absl::Status status = mailbox.Take("job", "run", 1, absl::Milliseconds(10), &message);
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
}

TEST(RingMailboxTest, RefusesMessagesBeyondItsLimit) {
  RingMailboxOptions options;
  options.max_bytes = 100;
  RingMailbox mailbox(options);
  ASSERT_TRUE(mailbox.Put("job", "run", 1, Bytes(60)).ok());
  absl::Status status = mailbox.Put("job", "run", 2, Bytes(60));
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("--ring_mailbox_mb"));
  grpc::ByteBuffer message;
  ASSERT_TRUE(mailbox.Take("job", "run", 1, absl::Seconds(1), &message).ok());
  EXPECT_TRUE(mailbox.Put("job", "run", 2, Bytes(60)).ok());
}

TEST(RingMailboxTest, AnEndedRunDropsItsMessagesAndRefusesMore) {
  RingMailbox mailbox;
  ASSERT_TRUE(mailbox.Put("job", "run-1", 1, Bytes(10)).ok());
  ASSERT_TRUE(mailbox.Put("job", "run-2", 1, Bytes(10)).ok());
  std::thread taker([&] {
    grpc::ByteBuffer message;
    absl::Status status = mailbox.Take("job", "run-1", 2, absl::Seconds(30), &message);
    EXPECT_TRUE(absl::IsAborted(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr("stopped"));
  });
  absl::SleepFor(absl::Milliseconds(20));
  mailbox.EndRun("job", "run-1", absl::AbortedError("job stopped"));
  taker.join();
  EXPECT_EQ(mailbox.bytes_held(), 10);
  EXPECT_TRUE(absl::IsAborted(mailbox.Put("job", "run-1", 3, Bytes(1))));
  grpc::ByteBuffer message;
  EXPECT_TRUE(absl::IsAborted(mailbox.Take("job", "run-1", 1, absl::Seconds(1), &message)));
  EXPECT_TRUE(mailbox.Take("job", "run-2", 1, absl::Seconds(1), &message).ok());
}

TEST(RingMailboxTest, ForgetsTheOldestEndedRuns) {
  RingMailboxOptions options;
  options.max_ended_runs = 2;
  RingMailbox mailbox(options);
  for (const char* run : {"a", "b", "c"}) mailbox.EndRun("job", run, absl::CancelledError("done"));
  EXPECT_TRUE(mailbox.Put("job", "a", 1, Bytes(1)).ok());
  EXPECT_TRUE(absl::IsCancelled(mailbox.Put("job", "b", 1, Bytes(1))));
}

}  // namespace
}  // namespace ps
