// The ring all-reduce over gRPC between processes (tests/ring_member_main.cc, each serving the
// Ring service as a ps_worker does), on loopback: results checked in every process, over
// plaintext and mutual TLS (certificates from `psctl certs`' code), and a member killed with
// SIGKILL named by the others.
#include <signal.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/cluster/cluster_spec.h"
#include "common/process/subprocess.h"
#include "ctl/cluster/certs.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr char kMember[] = "tests/ring_member";

// `n` ring_member processes on free ports, with `flags` added.
class Ring {
 public:
  // `extra` adds a flag to one member's (a later flag wins).
  Ring(int n, const std::vector<std::string>& flags,
       const std::vector<std::pair<int, std::string>>& extra = {}) {
    absl::StatusOr<std::vector<int>> ports = PickUnusedPorts(n);
    EXPECT_TRUE(ports.ok()) << ports.status();
    ports_ = *ports;
    for (int rank = 0; rank < n; ++rank) {
      std::vector<std::string> argv = {kMember,
                                       absl::StrCat("--ports=", absl::StrJoin(ports_, ",")),
                                       absl::StrCat("--rank=", rank)};
      argv.insert(argv.end(), flags.begin(), flags.end());
      for (const auto& [member, flag] : extra) {
        if (member == rank) argv.push_back(flag);
      }
      absl::StatusOr<Subprocess> member = Subprocess::Start(
          argv, absl::StrCat(std::getenv("TEST_TMPDIR"), "/member-", rank, ".log"));
      EXPECT_TRUE(member.ok()) << member.status();
      members_.push_back(*std::move(member));
    }
  }

  Subprocess& member(int rank) { return members_[rank]; }
  std::string name(int rank) const {
    return absl::StrCat("worker:", rank, " (127.0.0.1:", ports_[rank], ")");
  }

 private:
  std::vector<int> ports_;
  std::vector<Subprocess> members_;
};

TEST(RingProcessTest, ThreeProcessesAverageOverLoopback) {
  Ring ring(3, {"--calls=4", "--length=100003"});
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(ring.member(rank).Wait(absl::Minutes(2)), 0) << ring.member(rank).Output();
    EXPECT_THAT(ring.member(rank).Output(), HasSubstr("call 3 ok"));
  }
}

TEST(RingProcessTest, ThreeProcessesAverageOverMutualTls) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/certs");
  absl::StatusOr<ClusterSpec> cluster = ClusterSpec::Parse(
      R"({"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"]})",
      "test");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::ostringstream said;
  absl::Status made = MakeClusterCertificates(*cluster, dir, 1, said);
  if (absl::IsUnavailable(made)) GTEST_SKIP() << made;  // No openssl here.
  ASSERT_TRUE(made.ok()) << made;
  Ring ring(3, {"--calls=2", "--length=10007", absl::StrCat("--tls_cert=", dir, "/127.0.0.1.crt"),
                absl::StrCat("--tls_key=", dir, "/127.0.0.1.key"),
                absl::StrCat("--tls_ca=", dir, "/ca.crt")});
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(ring.member(rank).Wait(absl::Minutes(2)), 0) << ring.member(rank).Output();
    EXPECT_THAT(ring.member(rank).Output(), HasSubstr("call 1 ok"));
  }
}

TEST(RingProcessTest, AKilledMemberIsNamedByTheOthers) {
  // worker:0 waits for worker:2 at most 3 s, worker:1 (which waits for worker:0) 20 s: worker:1
  // learns from worker:0, when it gives up, what it waited for.
  Ring ring(3, {"--calls=0", "--length=10007", "--deadline_ms=3000"}, {{1, "--deadline_ms=20000"}});
  // Once every member has finished a call, worker:2 dies mid-run.
  const absl::Time give_up = absl::Now() + absl::Minutes(1);
  auto finished_a_call = [&](int rank) {
    return ring.member(rank).Output().find("call 1 ok") != std::string::npos;
  };
  while (!(finished_a_call(0) && finished_a_call(1) && finished_a_call(2))) {
    ASSERT_LT(absl::Now(), give_up) << ring.member(0).Output() << ring.member(2).Output();
    absl::SleepFor(absl::Milliseconds(10));
  }
  const absl::Time killed = absl::Now();
  ring.member(2).Signal(SIGKILL);
  EXPECT_EQ(ring.member(2).Wait(absl::Seconds(10)), 128 + SIGKILL);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(ring.member(rank).Wait(absl::Seconds(30)), 1);
    EXPECT_THAT(ring.member(rank).Output(), HasSubstr(ring.name(2)));
  }
  // worker:0 by its deadline at the latest, worker:1 as soon as it sends to worker:2 (whose
  // port refuses) or hears from worker:0: not by its own.
  EXPECT_LT(absl::Now() - killed, absl::Seconds(15));
}

}  // namespace
}  // namespace ps
