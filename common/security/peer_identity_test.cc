#include "common/security/peer_identity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ps {
namespace {

using ::testing::HasSubstr;

TEST(PeerIdentityTest, TheCertificateSubjectSaysWhoAndWhichRole) {
  Peer alice = PeerFromSubject("CN=alice,O=admin");
  EXPECT_EQ(alice.role, Peer::Role::kUser);
  EXPECT_EQ(alice.name, "alice");
  Peer task = PeerFromSubject("O=task, CN=10.0.0.3");
  EXPECT_EQ(task.role, Peer::Role::kTask);
  EXPECT_EQ(task.name, "10.0.0.3");
  EXPECT_EQ(PeerFromSubject("CN=mallory,O=guests").role, Peer::Role::kOther);
}

TEST(PeerIdentityTest, UsersStartAndStopTheirOwnJobsTasksNeither) {
  const Peer alice = PeerFromSubject("CN=alice,O=admin"), bob = PeerFromSubject("CN=bob,O=admin");
  const Peer task = PeerFromSubject("CN=10.0.0.3,O=task"), other = PeerFromSubject("CN=x,O=y");
  EXPECT_TRUE(RequireUser(alice, "StartJob").ok());
  EXPECT_EQ(RequireUser(task, "StartJob").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(RequireUser(task, "StopJob").message(), HasSubstr("task 10.0.0.3 may not call it"));
  EXPECT_TRUE(RequireMember(task, "Push").ok());
  EXPECT_TRUE(RequireMember(alice, "Pull").ok());
  EXPECT_EQ(RequireMember(other, "Pull").code(), absl::StatusCode::kPermissionDenied);

  EXPECT_TRUE(RequireOwner(alice, "alice", "j", "stop").ok());
  absl::Status refused = RequireOwner(bob, "alice", "j", "stop");
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.message(), HasSubstr("job \"j\" belongs to user alice; user bob may not"));
  EXPECT_EQ(RequireOwner(task, "alice", "j", "stop").code(), absl::StatusCode::kPermissionDenied);
}

TEST(PeerIdentityTest, ATaskActsOnlyAsTheWorkersOnItsOwnHost) {
  const std::vector<std::string> hosts = {"10.0.0.3", "10.0.0.4", "10.0.0.3"};
  const Peer task = PeerFromSubject("CN=10.0.0.3,O=task");
  EXPECT_TRUE(RequireWorkerHost(task, 0, hosts, "Push").ok());
  EXPECT_TRUE(RequireWorkerHost(task, 2, hosts, "Push").ok());  // Its host runs two workers.
  absl::Status posing = RequireWorkerHost(task, 1, hosts, "Push");
  EXPECT_EQ(posing.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(posing.message(), HasSubstr("task 10.0.0.3 may not Push as worker 1: the cluster "
                                          "spec runs worker:1 on 10.0.0.4"));
  // A worker the cluster lacks: no host runs it (a grown job names its new workers' hosts).
  absl::Status outside = RequireWorkerHost(task, 7, hosts, "Push");
  EXPECT_EQ(outside.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(outside.message().find("neither the cluster spec nor the job lists worker:7"),
            std::string::npos)
      << outside;
  const std::string grown_host = "10.0.0.9";
  EXPECT_FALSE(RequireWorkerOnHost(task, 7, &grown_host, "Push").ok());
  EXPECT_FALSE(RequireWorkerOnHost(task, 7, nullptr, "Push").ok());
  EXPECT_TRUE(RequireWorkerOnHost(PeerFromSubject("CN=10.0.0.9,O=task"), 7, &grown_host, "Push").ok());
  EXPECT_TRUE(RequireWorkerOnHost(PeerFromSubject("CN=worker:7,O=task"), 7, nullptr, "Push").ok());
  // Users (psctl reads results as an observer) and unauthenticated callers are not tasks.
  EXPECT_TRUE(RequireWorkerHost(PeerFromSubject("CN=alice,O=admin"), 1, hosts, "Pull").ok());
  EXPECT_TRUE(RequireWorkerHost(Peer(), 1, hosts, "Pull").ok());
  // No cluster given: not checked.
  EXPECT_TRUE(RequireWorkerHost(task, 1, {}, "Push").ok());
}

// Every call about a job (docs/ARCHITECTURE.md section 7): who may make each kind.
TEST(PeerIdentityTest, AJobIsReadAndChangedOnlyByItsOwnerItsTasksAndAdmins) {
  const Peer alice = PeerFromSubject("CN=alice,O=admin"), bob = PeerFromSubject("CN=bob,O=admin");
  const Peer task = PeerFromSubject("CN=10.0.0.3,O=task"), other = PeerFromSubject("CN=x,O=y");
  Peer root = PeerFromSubject("CN=root,O=admin");
  root.admin = true;
  const Peer no_token{Peer::Role::kNoToken, "", false};
  struct Case {
    const Peer* peer;
    JobAccess access;
    absl::StatusCode code;
  };
  const Case cases[] = {
      {&alice, JobAccess::kData, absl::StatusCode::kOk},
      {&alice, JobAccess::kRead, absl::StatusCode::kOk},
      {&alice, JobAccess::kManage, absl::StatusCode::kOk},
      {&bob, JobAccess::kData, absl::StatusCode::kPermissionDenied},
      {&bob, JobAccess::kRead, absl::StatusCode::kPermissionDenied},
      {&bob, JobAccess::kManage, absl::StatusCode::kPermissionDenied},
      {&task, JobAccess::kData, absl::StatusCode::kOk},
      {&task, JobAccess::kRead, absl::StatusCode::kOk},
      {&task, JobAccess::kManage, absl::StatusCode::kPermissionDenied},
      {&root, JobAccess::kData, absl::StatusCode::kPermissionDenied},
      {&root, JobAccess::kRead, absl::StatusCode::kOk},
      {&root, JobAccess::kManage, absl::StatusCode::kOk},
      {&other, JobAccess::kRead, absl::StatusCode::kPermissionDenied},
      {&no_token, JobAccess::kRead, absl::StatusCode::kUnauthenticated},
  };
  for (const Case& c : cases) {
    const absl::Status status = RequireJobAccess(*c.peer, "alice", "j", c.access, "Call");
    EXPECT_EQ(status.code(), c.code) << c.peer->Describe() << " " << static_cast<int>(c.access)
                                     << ": " << status;
  }
  EXPECT_THAT(RequireJobAccess(bob, "alice", "j", JobAccess::kData, "Pull").message(),
              HasSubstr("job \"j\" belongs to user alice; user bob may not call Pull on it"));
  // A job started without security has no owner: any user may.
  EXPECT_TRUE(RequireJobAccess(bob, "", "j", JobAccess::kManage, "StopJob").ok());
  EXPECT_TRUE(RequireOwner(root, "alice", "j", "stop").ok());
  EXPECT_TRUE(RequireTask(task, "Deliver").ok());
  EXPECT_EQ(RequireTask(alice, "Deliver").code(), absl::StatusCode::kPermissionDenied);
}

TEST(PeerIdentityTest, ATaskWithItsOwnCertificateActsOnlyAsItself) {
  const std::vector<std::string> hosts = {"10.0.0.3", "10.0.0.3"};  // Both workers on one host.
  const Peer worker1 = PeerFromSubject("CN=worker:1,O=task"), ps0 = PeerFromSubject("CN=ps:0,O=task");
  EXPECT_TRUE(RequireWorkerHost(worker1, 1, hosts, "Push").ok());
  EXPECT_THAT(RequireWorkerHost(worker1, 0, hosts, "Push").message(),
              HasSubstr("task worker:1 may not Push as worker 0: a task's own certificate lets it "
                        "act only as itself"));
  EXPECT_EQ(RequireWorkerHost(ps0, 0, hosts, "Pull").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(RequireWorkerHost(PeerFromSubject("CN=worker:x,O=task"), 0, hosts, "Pull").code(),
            absl::StatusCode::kPermissionDenied);
  // A host's certificate still acts as every worker of its host.
  EXPECT_TRUE(RequireWorkerHost(PeerFromSubject("CN=10.0.0.3,O=task"), 0, hosts, "Pull").ok());
}

TEST(PeerIdentityTest, WithoutMutualTlsEveryoneMayDoEverything) {
  const Peer anyone;
  EXPECT_TRUE(RequireUser(anyone, "StartJob").ok());
  EXPECT_TRUE(RequireMember(anyone, "Push").ok());
  EXPECT_TRUE(RequireOwner(anyone, "alice", "j", "stop").ok());
}

}  // namespace
}  // namespace ps
