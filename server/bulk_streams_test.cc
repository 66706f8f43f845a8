#include "server/bulk_streams.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/net/bulk_frame.h"
#include "common/net/testing/ticket_peer.h"
#include "common/net/ticket_door.h"

namespace ps {
namespace {

class BulkStreamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<BulkStreams>> started = BulkStreams::Start("127.0.0.1", 0);
    ASSERT_TRUE(started.ok()) << started.status();
    streams_ = *std::move(started);
    ASSERT_GT(streams_->port(), 0);
  }

  // A worker's end of a stream it opened: connected, `ticket` sent; -1 where it was refused.
  int Connect(const std::string& ticket) {
    const TicketPeer peer = PresentTicket(streams_->port(), ticket);
    if (peer.reply != TicketDoor::kGranted) {
      if (peer.fd >= 0) close(peer.fd);
      return -1;
    }
    fds_.push_back(peer.fd);
    return peer.fd;
  }

  // Opens a stream for (job, worker) and connects to it; its id.
  uint64_t OpenAndConnect(const std::string& job, int worker, int* fd = nullptr) {
    absl::StatusOr<BulkStreams::Opened> opened = streams_->Open(job, worker);
    EXPECT_TRUE(opened.ok()) << opened.status();
    if (!opened.ok()) return 0;
    const int connected = Connect(opened->ticket);
    EXPECT_GE(connected, 0);
    if (fd != nullptr) *fd = connected;
    // The door's thread attaches the stream right after it answers.
    for (int i = 0; i < 200 && !streams_->Find(opened->stream, job, worker).ok(); ++i) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    return opened->stream;
  }

  void TearDown() override {
    streams_.reset();
    for (int fd : fds_) close(fd);
  }

  std::unique_ptr<BulkStreams> streams_;
  std::vector<int> fds_;
};

TEST_F(BulkStreamsTest, AFrameSentOnAStreamArrivesWholeAtItsWorker) {
  int fd = -1;
  const uint64_t id = OpenAndConnect("job", 1, &fd);
  absl::StatusOr<std::shared_ptr<BulkStream>> stream = streams_->Find(id, "job", 1);
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto values = std::make_shared<std::vector<float>>(3 << 20);  // 12 MiB.
  std::iota(values->begin(), values->end(), 0.0f);
  const absl::Span<const float> all(*values);
  ASSERT_TRUE((*stream)->Send(7, {all.subspan(0, 100), all.subspan(100)}, values).ok());
  absl::StatusOr<BulkFrameHeader> header = ReadBulkFrameHeader(fd);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->frame, 7u);
  ASSERT_EQ(header->bytes, values->size() * sizeof(float));
  std::vector<float> first(100), rest(values->size() - 100);
  ASSERT_TRUE(ReadBulkValues(fd, {absl::MakeSpan(first), absl::MakeSpan(rest)}).ok());
  EXPECT_EQ(first[99], 99.0f);
  EXPECT_EQ(rest.back(), static_cast<float>(values->size() - 1));
}

TEST_F(BulkStreamsTest, AWorkerThatDoesNotReadHoldsNoMoreThanItsQueuedFrames) {
  const uint64_t id = OpenAndConnect("job", 0);  // Connected, and never read.
  absl::StatusOr<std::shared_ptr<BulkStream>> stream = streams_->Find(id, "job", 0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  // 16 MiB a frame, more than the sockets' buffers hold: the first stays in the sender's write.
  auto values = std::make_shared<std::vector<float>>(4 << 20, 1.0f);
  const absl::Span<const float> all(*values);
  ASSERT_TRUE((*stream)->Send(1, {all}, values).ok());
  absl::SleepFor(absl::Milliseconds(100));  // The sender takes it and waits on the socket.
  for (int frame = 2; frame < 2 + BulkStream::kMaxQueuedFrames; ++frame) {
    EXPECT_TRUE((*stream)->Send(frame, {all}, values).ok()) << frame;
  }
  const absl::Status refused = (*stream)->Send(9, {all}, values);
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_FALSE((*stream)->closed());
}

TEST_F(BulkStreamsTest, TheStreamsOfAWorkerThatHungUpHoldNoPlace) {
  int fd = -1;
  const uint64_t gone = OpenAndConnect("job", 0, &fd);
  close(fd);
  fds_.clear();
  absl::SleepFor(absl::Milliseconds(50));
  const uint64_t next = OpenAndConnect("job", 1);  // An Open reaps the streams hung up.
  EXPECT_EQ(streams_->Find(gone, "job", 0).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(streams_->Find(next, "job", 1).ok());
  EXPECT_EQ(streams_->streams(), 1);
}

TEST_F(BulkStreamsTest, AStreamServesOnlyItsOwnWorkerOfItsOwnJob) {
  const uint64_t id = OpenAndConnect("alice", 0);
  EXPECT_TRUE(streams_->Find(id, "alice", 0).ok());
  EXPECT_EQ(streams_->Find(id, "alice", 1).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(streams_->Find(id, "bob", 0).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(streams_->Find(id + 1, "alice", 0).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(BulkStreamsTest, AWrongTicketGetsNoStream) {
  absl::StatusOr<BulkStreams::Opened> opened = streams_->Open("job", 0);
  ASSERT_TRUE(opened.ok());
  std::string wrong = opened->ticket;
  wrong[3] = static_cast<char>(wrong[3] ^ 0x40);
  EXPECT_EQ(Connect(wrong), -1);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(streams_->Find(opened->stream, "job", 0).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(streams_->streams(), 0);
}

TEST_F(BulkStreamsTest, AWorkersNextStreamBeyondItsLimitClosesItsOldest) {
  std::vector<uint64_t> ids;
  for (int i = 0; i <= BulkStreams::kStreamsPerWorker; ++i) ids.push_back(OpenAndConnect("j", 0));
  EXPECT_EQ(streams_->Find(ids[0], "j", 0).status().code(), absl::StatusCode::kUnavailable);
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_TRUE(streams_->Find(ids[i], "j", 0).ok()) << i;
  EXPECT_EQ(streams_->streams(), BulkStreams::kStreamsPerWorker);
}

TEST_F(BulkStreamsTest, DroppingAWorkerOrAJobEndsItsStreams) {
  int fd = -1;
  const uint64_t left = OpenAndConnect("j", 0, &fd);
  const uint64_t stays = OpenAndConnect("j", 1);
  const uint64_t other = OpenAndConnect("k", 0);
  streams_->DropWorker("j", 0);
  EXPECT_EQ(streams_->Find(left, "j", 0).status().code(), absl::StatusCode::kUnavailable);
  char byte = 0;
  EXPECT_EQ(recv(fd, &byte, 1, 0), 0);  // The worker sees its stream end.
  EXPECT_TRUE(streams_->Find(stays, "j", 1).ok());
  streams_->DropJob("j");
  EXPECT_EQ(streams_->Find(stays, "j", 1).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(streams_->Find(other, "k", 0).ok());
}

TEST_F(BulkStreamsTest, AStreamWhoseWorkerHungUpClosesAtItsNextFrame) {
  int fd = -1;
  const uint64_t id = OpenAndConnect("j", 0, &fd);
  absl::StatusOr<std::shared_ptr<BulkStream>> stream = streams_->Find(id, "j", 0);
  ASSERT_TRUE(stream.ok());
  close(fd);
  fds_.clear();
  auto values = std::make_shared<std::vector<float>>(1 << 20, 1.0f);
  for (int i = 0; i < 50 && !(*stream)->closed(); ++i) {
    (*stream)->Send(i, {absl::MakeConstSpan(*values)}, values).IgnoreError();
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE((*stream)->closed());
  EXPECT_EQ((*stream)->Send(99, {}, nullptr).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(streams_->Find(id, "j", 0).status().code(), absl::StatusCode::kUnavailable);
}

// What a Receive's callback was told, waited for.
class Outcome {
 public:
  BulkStream::Received Callback() {
    return [this](absl::Status status, bool finite) {
      absl::MutexLock lock(&mu_);
      status_ = status;
      finite_ = finite;
      ++calls_;
    };
  }
  // The status once called (within `wait`), or DEADLINE_EXCEEDED.
  absl::Status Wait(absl::Duration wait = absl::Seconds(10)) {
    absl::MutexLock lock(&mu_);
    auto called = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_ > 0; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&called), wait)) {
      return absl::DeadlineExceededError("not called");
    }
    return status_;
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  bool finite() {
    absl::MutexLock lock(&mu_);
    return finite_;
  }

 private:
  absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool finite_ ABSL_GUARDED_BY(mu_) = false;
};

TEST_F(BulkStreamsTest, APushsFrameIsReadIntoItsDestinationsWhicheverComesFirst) {
  int fd = -1;
  const uint64_t id = OpenAndConnect("job", 0, &fd);
  absl::StatusOr<std::shared_ptr<BulkStream>> stream = streams_->Find(id, "job", 0);
  ASSERT_TRUE(stream.ok());
  std::vector<float> sent(3 << 20);  // 12 MiB.
  std::iota(sent.begin(), sent.end(), 1.0f);
  const absl::Span<const float> all(sent);
  // Frame 1 registered before it comes, into two pieces.
  auto first = std::make_shared<std::vector<float>>(sent.size());
  Outcome one;
  (*stream)->Receive(1, {absl::MakeSpan(*first).subspan(0, 10), absl::MakeSpan(*first).subspan(10)},
                     first, one.Callback());
  ASSERT_TRUE(SendBulkFrame(fd, 1, {all}).ok());
  EXPECT_TRUE(one.Wait().ok());
  EXPECT_TRUE(one.finite());
  EXPECT_EQ(*first, sent);
  // Frame 2 comes before its call registers (within kClaimTimeout).
  ASSERT_TRUE(SendBulkFrame(fd, 2, {all.subspan(0, 1000)}).ok());
  absl::SleepFor(absl::Milliseconds(200));
  auto second = std::make_shared<std::vector<float>>(1000);
  Outcome two;
  (*stream)->Receive(2, {absl::MakeSpan(*second)}, second, two.Callback());
  EXPECT_TRUE(two.Wait().ok());
  EXPECT_TRUE(std::equal(second->begin(), second->end(), sent.begin()));
  EXPECT_EQ((*stream)->traffic().frames_received, 2);
  EXPECT_EQ((*stream)->traffic().bytes_received, static_cast<int64_t>((sent.size() + 1000) * 4));
  EXPECT_EQ(streams_->traffic().frames_received, 2);
  EXPECT_EQ(one.calls(), 1);
  // A NaN anywhere (here in the last piece) is told, the values read whole all the same.
  sent.back() = std::nanf("");
  Outcome three;
  (*stream)->Receive(3, {absl::MakeSpan(*first)}, first, three.Callback());
  ASSERT_TRUE(SendBulkFrame(fd, 3, {absl::MakeConstSpan(sent)}).ok());
  EXPECT_TRUE(three.Wait().ok());
  EXPECT_FALSE(three.finite());
  EXPECT_TRUE(std::isnan(first->back()));
  EXPECT_FALSE((*stream)->closed());
}

TEST_F(BulkStreamsTest, ARefusedPushsFrameIsReadPastAndTheNextStillArrives) {
  int fd = -1;
  const uint64_t id = OpenAndConnect("job", 0, &fd);
  absl::StatusOr<std::shared_ptr<BulkStream>> stream = streams_->Find(id, "job", 0);
  ASSERT_TRUE(stream.ok());
  std::vector<float> refused(1 << 20, 7.0f), wanted(1 << 20, 3.0f);
  (*stream)->Refuse(1);
  auto into = std::make_shared<std::vector<float>>(wanted.size());
  Outcome two;
  (*stream)->Receive(2, {absl::MakeSpan(*into)}, into, two.Callback());
  ASSERT_TRUE(SendBulkFrame(fd, 1, {absl::MakeConstSpan(refused)}).ok());
  ASSERT_TRUE(SendBulkFrame(fd, 2, {absl::MakeConstSpan(wanted)}).ok());
  EXPECT_TRUE(two.Wait().ok());
  EXPECT_EQ(*into, wanted);
  EXPECT_FALSE((*stream)->closed());
}

TEST_F(BulkStreamsTest, AFrameNoCallTakesInTimeIsReadPastAndItsLateCallToldToResend) {
  int fd = -1;
  const uint64_t id = OpenAndConnect("job", 0, &fd);
  absl::StatusOr<std::shared_ptr<BulkStream>> stream = streams_->Find(id, "job", 0);
  ASSERT_TRUE(stream.ok());
  std::vector<float> values(1000, 1.0f);
  ASSERT_TRUE(SendBulkFrame(fd, 1, {absl::MakeConstSpan(values)}).ok());
  absl::SleepFor(BulkStream::kClaimTimeout + absl::Milliseconds(300));
  auto late = std::make_shared<std::vector<float>>(values.size());
  Outcome outcome;
  (*stream)->Receive(1, {absl::MakeSpan(*late)}, late, outcome.Callback());
  const absl::Status status = outcome.Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("send the gradient in the request"), std::string::npos)
      << status;
  EXPECT_FALSE((*stream)->closed());  // Later frames still come.
  auto next = std::make_shared<std::vector<float>>(values.size());
  Outcome second;
  (*stream)->Receive(2, {absl::MakeSpan(*next)}, next, second.Callback());
  ASSERT_TRUE(SendBulkFrame(fd, 2, {absl::MakeConstSpan(values)}).ok());
  EXPECT_TRUE(second.Wait().ok());
}

TEST_F(BulkStreamsTest, AFrameOfTheWrongSizeOrAWorkerGoneFailsTheCallsWaiting) {
  int fd = -1;
  const uint64_t id = OpenAndConnect("job", 0, &fd);
  absl::StatusOr<std::shared_ptr<BulkStream>> stream = streams_->Find(id, "job", 0);
  ASSERT_TRUE(stream.ok());
  auto into = std::make_shared<std::vector<float>>(100);
  Outcome wrong_size, after;
  (*stream)->Receive(1, {absl::MakeSpan(*into)}, into, wrong_size.Callback());
  (*stream)->Receive(2, {absl::MakeSpan(*into)}, into, after.Callback());
  std::vector<float> values(99, 1.0f);
  ASSERT_TRUE(SendBulkFrame(fd, 1, {absl::MakeConstSpan(values)}).ok());
  EXPECT_EQ(wrong_size.Wait().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(after.Wait().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE((*stream)->closed());
  Outcome closed;
  (*stream)->Receive(3, {absl::MakeSpan(*into)}, into, closed.Callback());
  EXPECT_EQ(closed.Wait().code(), absl::StatusCode::kUnavailable);

  int gone_fd = -1;
  const uint64_t gone = OpenAndConnect("job", 1, &gone_fd);
  absl::StatusOr<std::shared_ptr<BulkStream>> hung_up = streams_->Find(gone, "job", 1);
  ASSERT_TRUE(hung_up.ok());
  Outcome waiting;
  (*hung_up)->Receive(1, {absl::MakeSpan(*into)}, into, waiting.Callback());
  shutdown(gone_fd, SHUT_RDWR);
  EXPECT_EQ(waiting.Wait().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE((*hung_up)->closed());
}

TEST_F(BulkStreamsTest, ClosingAStreamFailsItsWaitingPushesOnce) {
  const uint64_t id = OpenAndConnect("job", 0);
  absl::StatusOr<std::shared_ptr<BulkStream>> stream = streams_->Find(id, "job", 0);
  ASSERT_TRUE(stream.ok());
  auto into = std::make_shared<std::vector<float>>(100);
  Outcome outcome;
  (*stream)->Receive(1, {absl::MakeSpan(*into)}, into, outcome.Callback());
  streams_->DropAll();
  EXPECT_EQ(outcome.Wait().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(streams_->streams(), 0);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(outcome.calls(), 1);
}

}  // namespace
}  // namespace ps
