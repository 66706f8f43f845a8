#include "server/worker_leases.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr absl::Duration kLease = absl::Seconds(10);

TEST(WorkerLeasesTest, AWorkerNotHeardFromForLongerThanTheLeaseIsLostOnce) {
  // The leases started a lease ago; workers 0 and 2 are heard from now.
  const absl::Time start = absl::Now() - kLease;
  WorkerLeases leases(3, kLease, start);
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
  const absl::Time start = absl::Now() - 2 * kLease;
  WorkerLeases leases(2, kLease, start);
  auto none = [](int) { return false; };
  leases.Heard(0);
  ASSERT_THAT(leases.Expire(absl::Now(), none), ElementsAre(1));
  leases.Rejoined(1);
  EXPECT_FALSE(leases.lost(1));
  EXPECT_THAT(leases.Expire(absl::Now(), none), IsEmpty());
  EXPECT_THAT(leases.Expire(absl::Now() + kLease + absl::Seconds(1), none), ElementsAre(0, 1));
}

TEST(WorkerLeasesTest, AWorkerThatLeftIsNotJudged) {
  const absl::Time start = absl::Now();
  WorkerLeases leases(2, kLease, start);
  EXPECT_THAT(leases.Expire(start + 2 * kLease, [](int w) { return w == 0; }), ElementsAre(1));
  EXPECT_FALSE(leases.lost(0));
}

TEST(WorkerLeasesTest, WithoutALeaseNoWorkerIsEverLost) {
  WorkerLeases leases(2, absl::ZeroDuration(), absl::Now());
  EXPECT_FALSE(leases.enabled());
  EXPECT_THAT(leases.Expire(absl::Now() + absl::Hours(24), [](int) { return false; }), IsEmpty());
}

}  // namespace
}  // namespace ps
