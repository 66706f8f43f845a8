#include "server/worker_leases.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/simulated_clock.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr absl::Duration kLease = absl::Seconds(10);

TEST(WorkerLeasesTest, AWorkerNotHeardFromForLongerThanTheLeaseIsLostOnce) {
  // The leases started a lease ago; workers 0 and 2 are heard from now.
  SimulatedClock clock;
  const absl::Time start = clock.Now();
  WorkerLeases leases(3, kLease, &clock);
  clock.Advance(kLease);
  auto none = [](int) { return false; };
  EXPECT_THAT(leases.Expire(start + kLease, none), IsEmpty());  // Not longer than the lease.
  leases.Heard(0);
  leases.Heard(2);
  const absl::Time later = start + kLease + absl::Seconds(1);
  EXPECT_THAT(leases.Expire(later, none), ElementsAre(1));
  EXPECT_TRUE(leases.lost(1));
  EXPECT_FALSE(leases.lost(0));
  EXPECT_THAT(leases.Expire(later + absl::Seconds(1), none), IsEmpty());  // Once.
}

// A pause of the process (Forgive) counts as no one's silence: the silence before it and after
// it still add up, and no sign moves past now.
TEST(WorkerLeasesTest, APauseForgivenCountsAsNoWorkersSilence) {
  SimulatedClock clock;
  WorkerLeases leases(2, kLease, &clock);
  auto none = [](int) { return false; };
  clock.Advance(absl::Seconds(6));  // Both silent 6 s.
  leases.Heard(1);
  clock.Advance(absl::Seconds(30));  // Paused 30 s: worker 0 silent 36 s, worker 1 30 s.
  leases.Forgive(absl::Seconds(30));
  EXPECT_THAT(leases.Expire(clock.Now(), none), IsEmpty());  // 6 s and 0 s of silence.
  clock.Advance(absl::Seconds(5));
  EXPECT_THAT(leases.Expire(clock.Now(), none), ElementsAre(0));  // 11 s: lost; worker 1: 5 s.
  leases.Forgive(absl::Hours(1));  // Moves no sign past now.
  clock.Advance(kLease + absl::Seconds(1));
  EXPECT_THAT(leases.Expire(clock.Now(), none), ElementsAre(1));
}

TEST(WorkerLeasesTest, ARejoinedWorkerIsNoLongerLostAndItsLeaseRunsAgain) {
  SimulatedClock clock;
  WorkerLeases leases(2, kLease, &clock);
  clock.Advance(2 * kLease);
  auto none = [](int) { return false; };
  leases.Heard(0);
  ASSERT_THAT(leases.Expire(clock.Now(), none), ElementsAre(1));
  leases.Rejoined(1);
  EXPECT_FALSE(leases.lost(1));
  EXPECT_THAT(leases.Expire(clock.Now(), none), IsEmpty());
  EXPECT_THAT(leases.Expire(clock.Now() + kLease + absl::Seconds(1), none), ElementsAre(0, 1));
}

TEST(WorkerLeasesTest, AWorkerThatLeftIsNotJudged) {
  SimulatedClock clock;
  const absl::Time start = clock.Now();
  WorkerLeases leases(2, kLease, &clock);
  EXPECT_THAT(leases.Expire(start + 2 * kLease, [](int w) { return w == 0; }), ElementsAre(1));
  EXPECT_FALSE(leases.lost(0));
}

TEST(WorkerLeasesTest, WithoutALeaseNoWorkerIsEverLost) {
  SimulatedClock clock;
  WorkerLeases leases(2, absl::ZeroDuration(), &clock);
  EXPECT_FALSE(leases.enabled());
  EXPECT_THAT(leases.Expire(clock.Now() + absl::Hours(24), [](int) { return false; }), IsEmpty());
}

}  // namespace
}  // namespace ps
