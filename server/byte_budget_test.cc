#include "server/byte_budget.h"

#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/testing/simulated_clock.h"
#include "server/io_thread.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Resumes on `thread`, off the caller's, as on the service's pool.
ByteBudget::Executor RunOn(IoThread* thread) {
  return [thread](std::function<void()> work) { thread->Schedule(std::move(work)); };
}

// A parked call's outcome, once its resume has run.
struct Parked {
  absl::Notification resumed;
  absl::StatusOr<ByteBudget::Charge> result = absl::UnknownError("not resumed");

  ByteBudget::Resume Resume() {
    return [this](absl::StatusOr<ByteBudget::Charge> charge) {
      result = std::move(charge);
      resumed.Notify();
    };
  }
};

TEST(ByteBudgetTest, OffGrantsEverythingAndSendsNoWindow) {
  DeadlineTimer timer;
  IoThread pool;
  std::shared_ptr<ByteBudget> budget = ByteBudget::Create(0, "ps:0", &timer, RunOn(&pool));
  EXPECT_FALSE(budget->enabled());
  EXPECT_EQ(budget->TryReserveBuffer(kMiB, ""), nullptr);  // Null: nothing to hold, as documented.
  EXPECT_EQ(budget->ChargeBuffer(kMiB, ""), nullptr);
  EXPECT_EQ(budget->Window("a", "job"), 0);
}

TEST(ByteBudgetTest, BuffersTakeThreeQuartersAndTheRestWaitsUntilOneIsFreed) {
  DeadlineTimer timer;
  IoThread pool;
  std::shared_ptr<ByteBudget> budget = ByteBudget::Create(256 * kMiB, "ps:0", &timer, RunOn(&pool));
  ASSERT_EQ(budget->buffer_part(), 192 * kMiB);
  std::vector<ByteBudget::Charge> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(budget->TryReserveBuffer(64 * kMiB, ""));
    ASSERT_NE(held.back(), nullptr) << i;
  }
  EXPECT_EQ(budget->TryReserveBuffer(64 * kMiB, ""), nullptr);
  Parked parked;
  budget->WaitForBuffer("job", "", "", 64 * kMiB, absl::Now() + absl::Seconds(30), parked.Resume());
  EXPECT_FALSE(parked.resumed.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  EXPECT_EQ(budget->GetStats().waiting, 1);
  // A call that comes later waits behind the parked one even where it would fit.
  held.pop_back();
  ASSERT_TRUE(parked.resumed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(parked.result.ok()) << parked.result.status();
  EXPECT_NE(*parked.result, nullptr);
  EXPECT_EQ(budget->GetStats().buffer_bytes, 192 * kMiB);
  EXPECT_EQ(budget->GetStats().waits, 1);
  parked.result = absl::UnknownError("dropped");  // Gives the reservation back.
  EXPECT_EQ(budget->GetStats().buffer_bytes, 128 * kMiB);
  held.clear();
  EXPECT_EQ(budget->GetStats().buffer_bytes, 0);
  EXPECT_EQ(budget->GetStats().peak_bytes, 192 * kMiB);
}

TEST(ByteBudgetTest, ABufferLargerThanThePartIsLetInAlone) {
  DeadlineTimer timer;
  IoThread pool;
  std::shared_ptr<ByteBudget> budget = ByteBudget::Create(64 * kMiB, "ps:0", &timer, RunOn(&pool));
  ByteBudget::Charge big = budget->TryReserveBuffer(100 * kMiB, "");
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(budget->TryReserveBuffer(kMiB, ""), nullptr);
  big.reset();
  EXPECT_NE(budget->TryReserveBuffer(kMiB, ""), nullptr);
}

TEST(ByteBudgetTest, ChargesCountWhateverTheRoomAndAreGivenBackWhenDropped) {
  DeadlineTimer timer;
  IoThread pool;
  std::shared_ptr<ByteBudget> budget = ByteBudget::Create(4 * kMiB, "ps:0", &timer, RunOn(&pool));
  ByteBudget::Charge a = budget->ChargeBuffer(3 * kMiB, "");
  ByteBudget::Charge b = budget->ChargeBuffer(3 * kMiB, "");
  ByteBudget::Charge request = budget->ChargeRequest(kMiB);
  ByteBudget::Stats stats = budget->GetStats();
  EXPECT_EQ(stats.buffer_bytes, 6 * kMiB);
  EXPECT_EQ(stats.request_bytes, kMiB);
  EXPECT_EQ(stats.peak_bytes, 7 * kMiB);
  a.reset();
  b.reset();
  request.reset();
  stats = budget->GetStats();
  EXPECT_EQ(stats.buffer_bytes, 0);
  EXPECT_EQ(stats.request_bytes, 0);
}

TEST(ByteBudgetTest, JobsWithCallsWaitingTakeTurns) {
  DeadlineTimer timer;
  IoThread pool;
  std::shared_ptr<ByteBudget> budget = ByteBudget::Create(4 * kMiB, "ps:0", &timer, RunOn(&pool));  // One 3 MiB.
  ByteBudget::Charge first = budget->TryReserveBuffer(3 * kMiB, "");
  ASSERT_NE(first, nullptr);
  // Job "a" parks three calls before job "b" parks one: b's goes second, not fourth.
  std::vector<std::string> order;
  absl::Mutex mu;
  std::vector<ByteBudget::Charge> reservations;
  absl::Notification all;
  auto park = [&](const std::string& job) {
    budget->WaitForBuffer(job, "", "", 3 * kMiB, absl::Now() + absl::Seconds(30),
                          [&, job](absl::StatusOr<ByteBudget::Charge> charge) {
                            ASSERT_TRUE(charge.ok());
                            absl::MutexLock lock(&mu);
                            order.push_back(job);
                            // Each lets the next in as soon as it is let in itself.
                            charge->reset();
                            if (order.size() == 4) all.Notify();
                          });
  };
  park("a");
  park("a");
  park("a");
  park("b");
  first.reset();
  ASSERT_TRUE(all.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "a", "a"}));
}

// The deadlock this prevents: a push's first chunk is let in and its buffer fills the budget,
// while the push's later chunks wait for room that only the push's own apply would free.
TEST(ByteBudgetTest, TheChunksOfAnAdmittedPushPassWithoutRoom) {
  DeadlineTimer timer;
  IoThread pool;
  std::shared_ptr<ByteBudget> budget = ByteBudget::Create(4 * kMiB, "ps:0", &timer, RunOn(&pool));
  ByteBudget::Charge other = budget->TryReserveBuffer(3 * kMiB, "job/1/0/7");
  ASSERT_NE(other, nullptr);
  // Two chunks of worker 2's push park; the budget is full.
  Parked first, second;
  budget->WaitForBuffer("job", "", "job/2/0/9", 3 * kMiB, absl::Now() + absl::Seconds(30),
                        first.Resume());
  budget->WaitForBuffer("job", "", "job/2/0/9", 3 * kMiB, absl::Now() + absl::Seconds(30),
                        second.Resume());
  other.reset();
  // Both resume: the first with the room, the second with a pass of no bytes.
  ASSERT_TRUE(first.resumed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(second.resumed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(first.result.ok() && second.result.ok());
  EXPECT_EQ(budget->GetStats().buffer_bytes, 3 * kMiB);
  // The push's buffer, charged as its first chunk is decoded, keeps the push admitted after the
  // reservation goes: a third chunk passes, while another push must wait.
  ByteBudget::Charge buffer = budget->ChargeBuffer(3 * kMiB, "job/2/0/9");
  first.result = absl::UnknownError("reservation dropped");
  second.result = absl::UnknownError("pass dropped");
  EXPECT_NE(budget->TryReserveBuffer(3 * kMiB, "job/2/0/9"), nullptr);
  EXPECT_EQ(budget->TryReserveBuffer(3 * kMiB, "job/3/0/4"), nullptr);
  buffer.reset();
  EXPECT_NE(budget->TryReserveBuffer(3 * kMiB, "job/3/0/4"), nullptr);
}

// A reservation made into its push's buffer is counted once: the buffer takes its bytes over,
// whichever of the two is dropped first.
TEST(ByteBudgetTest, ABufferTakesItsReservationsBytesOver) {
  DeadlineTimer timer;
  IoThread pool;
  std::shared_ptr<ByteBudget> budget = ByteBudget::Create(8 * kMiB, "ps:0", &timer, RunOn(&pool));
  for (bool buffer_first : {false, true}) {
    SCOPED_TRACE(buffer_first ? "buffer freed first" : "reservation dropped first");
    ByteBudget::Charge reservation = budget->TryReserveBuffer(3 * kMiB, "job/0/1/2");
    ASSERT_NE(reservation, nullptr);
    ByteBudget::Charge buffer = budget->ChargeBuffer(3 * kMiB, "job/0/1/2");
    EXPECT_EQ(budget->GetStats().buffer_bytes, 3 * kMiB);
    // The room is the buffer's alone: another 3 MiB push fits, a third does not.
    ByteBudget::Charge other = budget->TryReserveBuffer(3 * kMiB, "job/0/2/2");
    EXPECT_NE(other, nullptr);
    EXPECT_EQ(budget->TryReserveBuffer(3 * kMiB, "job/0/3/2"), nullptr);
    other.reset();
    if (buffer_first) {
      buffer.reset();
      EXPECT_EQ(budget->GetStats().buffer_bytes, 0);
      reservation.reset();
    } else {
      reservation.reset();
      EXPECT_EQ(budget->GetStats().buffer_bytes, 3 * kMiB);
      buffer.reset();
    }
    EXPECT_EQ(budget->GetStats().buffer_bytes, 0);
  }
  EXPECT_EQ(budget->GetStats().peak_bytes, 6 * kMiB);
  // A buffer larger than its reservation counts the difference; one of another group, all.
  ByteBudget::Charge reservation = budget->TryReserveBuffer(2 * kMiB, "job/0/1/3");
  ByteBudget::Charge larger = budget->ChargeBuffer(3 * kMiB, "job/0/1/3");
  ByteBudget::Charge stranger = budget->ChargeBuffer(kMiB, "job/0/4/1");
  EXPECT_EQ(budget->GetStats().buffer_bytes, 4 * kMiB);
  reservation.reset();
  larger.reset();
  stranger.reset();
  EXPECT_EQ(budget->GetStats().buffer_bytes, 0);
}

TEST(ByteBudgetTest, AParkedCallIsAnsweredUnavailableAtItsDeadlineSayingWhatItWaitedFor) {
  SimulatedClock clock;
  DeadlineTimer timer(DeadlineTimerOptions{&clock});
  IoThread pool;
  std::shared_ptr<ByteBudget> budget = ByteBudget::Create(4 * kMiB, "ps:3", &timer, RunOn(&pool), &clock);
  ByteBudget::Charge held = budget->TryReserveBuffer(3 * kMiB, "");
  Parked parked;
  budget->WaitForBuffer("mlp", "", "", 3 * kMiB, clock.Now() + absl::Seconds(5), parked.Resume());
  clock.Advance(absl::Seconds(5));
  ASSERT_TRUE(parked.resumed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(absl::IsUnavailable(parked.result.status())) << parked.result.status();
  const std::string message(parked.result.status().message());
  EXPECT_NE(message.find("ps:3 waited 5s for room for a push buffer of 3 MiB of job \"mlp\""),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("--max_inflight_mb"), std::string::npos) << message;
  ByteBudget::Stats stats = budget->GetStats();
  EXPECT_EQ(stats.waiting, 0);
  EXPECT_EQ(stats.timeouts, 1);
  // The buffer's release after the timeout lets nobody in twice.
  held.reset();
  EXPECT_EQ(budget->GetStats().buffer_bytes, 0);
}

TEST(ByteBudgetTest, CancelWaitersAnswersEveryParkedCall) {
  DeadlineTimer timer;
  IoThread pool;
  std::shared_ptr<ByteBudget> budget = ByteBudget::Create(4 * kMiB, "ps:0", &timer, RunOn(&pool));
  ByteBudget::Charge held = budget->TryReserveBuffer(3 * kMiB, "");
  Parked parked;
  budget->WaitForBuffer("job", "", "", 3 * kMiB, absl::Now() + absl::Seconds(30), parked.Resume());
  budget->CancelWaiters(absl::UnavailableError("ps:0 is shutting down"));
  ASSERT_TRUE(parked.resumed.HasBeenNotified());
  EXPECT_TRUE(absl::IsUnavailable(parked.result.status()));
  // Later calls are not parked.
  Parked late;
  budget->WaitForBuffer("job", "", "", 3 * kMiB, absl::Now() + absl::Seconds(30), late.Resume());
  ASSERT_TRUE(late.resumed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(absl::IsUnavailable(late.result.status()));
}

TEST(ByteBudgetTest, WindowsShareTheRequestPartBetweenJobsThenClients) {
  SimulatedClock clock;
  DeadlineTimer timer(DeadlineTimerOptions{&clock});
  IoThread pool;
  std::shared_ptr<ByteBudget> budget = ByteBudget::Create(256 * kMiB, "ps:0", &timer, RunOn(&pool), &clock);
  ASSERT_EQ(budget->request_part(), 64 * kMiB);
  EXPECT_EQ(budget->Window("a1", "big"), 64 * kMiB);
  for (int i = 2; i <= 4; ++i) budget->Window("a" + std::to_string(i), "big");
  EXPECT_EQ(budget->Window("a1", "big"), 16 * kMiB);
  // A second job with one client gets half of the part, the first job's four the other half.
  EXPECT_EQ(budget->Window("b1", "small"), 32 * kMiB);
  EXPECT_EQ(budget->Window("a1", "big"), 8 * kMiB);
  EXPECT_EQ(budget->GetStats().clients, 5);
  EXPECT_EQ(budget->GetStats().jobs, 2);
  // Clients quiet for longer than kClientIdle give their share back.
  clock.Advance(ByteBudget::kClientIdle + absl::Seconds(1));
  EXPECT_EQ(budget->Window("b1", "small"), 64 * kMiB);
}

// A client whose call is parked is not idle, however long it waits: the clients answered
// meanwhile keep to their share rather than take its part too.
TEST(ByteBudgetTest, AClientWithACallParkedKeepsItsShare) {
  SimulatedClock clock;
  DeadlineTimer timer(DeadlineTimerOptions{&clock});
  IoThread pool;
  std::shared_ptr<ByteBudget> budget =
      ByteBudget::Create(8 * kMiB, "ps:0", &timer, RunOn(&pool), &clock);
  ASSERT_EQ(budget->request_part(), 2 * kMiB);
  ByteBudget::Charge full = budget->TryReserveBuffer(6 * kMiB, "");
  ASSERT_NE(full, nullptr);
  budget->Window("a", "job");
  Parked parked;
  budget->WaitForBuffer("job", "b", "", kMiB, clock.Now() + absl::Seconds(60), parked.Resume());
  EXPECT_EQ(budget->Window("a", "job"), kMiB);  // Shared with b.
  clock.Advance(ByteBudget::kClientIdle + absl::Seconds(1));
  EXPECT_EQ(budget->Window("a", "job"), kMiB);  // b waits still: it is not idle.
  EXPECT_EQ(budget->GetStats().clients, 2);
  full.reset();  // b is let in, and seen then.
  ASSERT_TRUE(parked.resumed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  parked.result = absl::UnknownError("dropped");
  clock.Advance(ByteBudget::kClientIdle + absl::Seconds(1));
  EXPECT_EQ(budget->Window("a", "job"), 2 * kMiB);  // b quiet since: a has the part.
}

}  // namespace
}  // namespace ps
