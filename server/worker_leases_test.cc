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
