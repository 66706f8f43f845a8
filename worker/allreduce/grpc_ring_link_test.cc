// Rings of workers served in this process (a Ring service and mailbox each, on free ports of
// 127.0.0.1), linked over gRPC.
#include "worker/allreduce/grpc_ring_link.h"

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/security/auth_token.h"
#include "common/net/grpc_deadline.h"
#include "common/net/grpc_server.h"
#include "worker/allreduce/ring_allreduce.h"
#include "worker/allreduce/ring_service.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// `n` workers' Ring services, each with its own mailbox.
class ServedRing {
 public:
  explicit ServedRing(int n, const RingMailboxOptions& mailbox = {}) {
    std::vector<std::string> addresses;
    for (int i = 0; i < n; ++i) {
      workers_.push_back(std::make_unique<Worker>(mailbox));
      absl::StatusOr<StartedServer> started =
          StartGrpcServer("127.0.0.1:0", {&workers_.back()->service}, 64 << 20);
      EXPECT_TRUE(started.ok()) << started.status();
      workers_.back()->server = std::move(started->server);
      addresses.push_back(absl::StrCat("\"127.0.0.1:", started->bound_port, "\""));
    }
    // The ps is never dialed.
    absl::StatusOr<ClusterSpec> cluster =
        ClusterSpec::Parse(absl::StrCat(R"({"ps": ["127.0.0.1:1"], "worker": [)",
                                        absl::StrJoin(addresses, ", "), "]}"),
                           "test");
    EXPECT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::make_unique<ClusterSpec>(*std::move(cluster));
  }
  ~ServedRing() {
    for (int i = 0; i < static_cast<int>(workers_.size()); ++i) Stop(i);
  }

  const ClusterSpec& cluster() const { return *cluster_; }
  RingMailbox* mailbox(int i) { return &workers_[i]->mailbox; }
  std::string name(int i) const {
    return absl::StrCat("worker:", i, " (", cluster_->Tasks(kWorkerJob)[i], ")");
  }
  // Worker i's server goes away, as if its process died.
  void Stop(int i) {
    if (workers_[i]->server == nullptr) return;
    workers_[i]->server->Shutdown(GrpcDeadline(absl::ZeroDuration()));
    workers_[i]->server.reset();
  }
  // Worker i's server, stopped, listens again on its port, as if its process had just started.
  void Restart(int i) {
    absl::StatusOr<StartedServer> started = StartGrpcServer(
        std::string(cluster_->Tasks(kWorkerJob)[i]), {&workers_[i]->service}, 64 << 20);
    ASSERT_TRUE(started.ok()) << started.status();
    workers_[i]->server = std::move(started->server);
  }

  absl::StatusOr<std::unique_ptr<RingLink>> Link(int i, absl::Duration deadline,
                                                 const std::string& token = "") {
    GrpcRingLinkOptions options;
    options.deadline = deadline;
    options.token = token;
    return MakeGrpcRingLink(*cluster_, i, "job", "run-1", mailbox(i), options);
  }

 private:
  struct Worker {
    explicit Worker(const RingMailboxOptions& options) : mailbox(options), service(&mailbox) {}
    RingMailbox mailbox;
    RingService service;
    std::unique_ptr<grpc::Server> server;
  };
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<ClusterSpec> cluster_;
};

// Runs `member(i)` for every i in `members` on threads of its own.
std::vector<absl::Status> RunMembers(const std::vector<int>& members,
                                     const std::function<absl::Status(int)>& member) {
  std::vector<absl::Status> statuses(members.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < members.size(); ++i) {
    threads.emplace_back([&, i] { statuses[i] = member(members[i]); });
  }
  for (std::thread& thread : threads) thread.join();
  return statuses;
}

TEST(GrpcRingLinkTest, ThreeWorkersAverageOverGrpc) {
  const int n = 3;
  ServedRing ring(n);
  std::vector<std::unique_ptr<RingLink>> links;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::unique_ptr<RingLink>> link = ring.Link(i, absl::Seconds(30));
    ASSERT_TRUE(link.ok()) << link.status();
    EXPECT_EQ((*link)->rank(), i);
    EXPECT_EQ((*link)->size(), n);
    links.push_back(*std::move(link));
  }
  const int64_t length = 100003;
  std::mt19937 random(1);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<std::vector<float>> data(n, std::vector<float>(length));
  for (auto& member : data) {
    for (float& x : member) x = value(random);
  }
  const std::vector<std::vector<float>> before = data;
  RingOptions options;
  options.piece_bytes = 40000;  // Several pieces a chunk.
  std::vector<absl::Status> statuses = RunMembers({0, 1, 2}, [&](int i) {
    for (uint64_t step = 0; step < 2; ++step) {
      data[i] = before[i];
      absl::Status status =
          RingAllReduceMean(links[i].get(), step, absl::MakeSpan(data[i]), options);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  });
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i];
    EXPECT_EQ(std::memcmp(data[i].data(), data[0].data(), length * sizeof(float)), 0);
    const RingTraffic traffic = RingAllReduceTraffic(length, n, i);
    EXPECT_EQ(links[i]->bytes_sent(), 2 * traffic.bytes_sent);
    EXPECT_EQ(links[i]->bytes_received(), 2 * traffic.bytes_received);
    EXPECT_EQ(ring.mailbox(i)->bytes_held(), 0);
  }
  for (int64_t j = 0; j < length; ++j) {
    const double mean = (double{before[0][j]} + before[1][j] + before[2][j]) / 3;
    ASSERT_NEAR(data[0][j], mean, 3e-7);
  }
}

TEST(GrpcRingLinkTest, AStoppedWorkerIsNamedByTheOthers) {
  ServedRing ring(3);
  ring.Stop(2);
  std::vector<std::unique_ptr<RingLink>> links;
  for (int i = 0; i < 2; ++i) links.push_back(*ring.Link(i, absl::Seconds(2)));
  std::vector<std::vector<float>> data(2, std::vector<float>(1000, 1.0f));
  std::vector<absl::Status> statuses = RunMembers(
      {0, 1}, [&](int i) { return RingAllReduceMean(links[i].get(), 0, absl::MakeSpan(data[i])); });
  // worker:1 cannot reach it; worker:0 waits for it, or hears from worker:1 that it gave up.
  EXPECT_TRUE(absl::IsUnavailable(statuses[1])) << statuses[1];
  EXPECT_THAT(statuses[1].message(), HasSubstr(ring.name(2) + " is unreachable"));
  EXPECT_FALSE(statuses[0].ok());
  EXPECT_THAT(statuses[0].message(), HasSubstr(ring.name(2))) << statuses[0];
}

TEST(GrpcRingLinkTest, AWorkerThatStartsListeningWithinASecondIsReached) {
  ServedRing ring(2);
  ring.Stop(1);
  std::vector<std::unique_ptr<RingLink>> links;
  for (int i = 0; i < 2; ++i) links.push_back(*ring.Link(i, absl::Seconds(10)));
  std::vector<std::vector<float>> data = {std::vector<float>(1000, 1.0f),
                                          std::vector<float>(1000, 3.0f)};
  std::vector<absl::Status> statuses = RunMembers({0, 1}, [&](int i) {
    // worker:0's first message finds no one listening; its second attempt waits for the
    // connection, which worker:1's server, started meanwhile, accepts.
    if (i == 1) {
      absl::SleepFor(absl::Milliseconds(300));
      ring.Restart(1);
    }
    return RingAllReduceMean(links[i].get(), 0, absl::MakeSpan(data[i]));
  });
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i];
    EXPECT_EQ(data[i], std::vector<float>(1000, 2.0f));
  }
}

TEST(GrpcRingLinkTest, ASilentWorkerIsNamedByTheDeadline) {
  ServedRing ring(2);
  std::unique_ptr<RingLink> link = *ring.Link(0, absl::Milliseconds(300));
  std::vector<float> data(1000, 1.0f);
  absl::Status status = RingAllReduceMean(link.get(), 0, absl::MakeSpan(data));  // worker:1 idle.
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("waiting for " + ring.name(1)));
  // worker:0 told worker:1, whose mailbox dropped worker:0's half and refuses the run's
  // messages from then on, saying why.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (ring.mailbox(1)->bytes_held() > 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(ring.mailbox(1)->bytes_held(), 0);
  absl::Status refused = ring.mailbox(1)->Put("job", "run-1", 99, grpc::ByteBuffer());
  EXPECT_THAT(refused.message(), HasSubstr(ring.name(0) + " gave up on the ring"));
}

TEST(GrpcRingLinkTest, AFullMailboxRefusesNamingTheWorker) {
  RingMailboxOptions small;
  small.max_bytes = 1000;
  ServedRing ring(2, small);
  std::unique_ptr<RingLink> link = *ring.Link(0, absl::Seconds(5));
  std::vector<float> data(1000, 1.0f);
  absl::Status status = link->Send(1, data);
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(ring.name(1) + " refused ring message 1"));
  EXPECT_THAT(status.message(), HasSubstr("--ring_mailbox_mb"));
}

TEST(GrpcRingLinkTest, AnAbortedWorkerRefusesMessagesSayingWhy) {
  ServedRing ring(2);
  std::unique_ptr<RingLink> sender = *ring.Link(0, absl::Seconds(5));
  std::unique_ptr<RingLink> receiver = *ring.Link(1, absl::Seconds(30));
  std::vector<float> out(1);
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    receiver->Abort(absl::UnavailableError("worker:7 is gone"));
  });
  absl::Status waited = receiver->Receive(3, absl::MakeSpan(out));
  aborter.join();
  EXPECT_THAT(waited.message(), HasSubstr("worker:7 is gone"));
  absl::Status refused = sender->Send(3, out);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr(ring.name(1) + " gave up on the ring"));
  EXPECT_THAT(refused.message(), HasSubstr("worker:7 is gone"));
}

TEST(GrpcRingLinkTest, AnAbortEndsTheNextWorkersReceive) {
  ServedRing ring(3);
  std::unique_ptr<RingLink> first = *ring.Link(0, absl::Seconds(30));
  std::unique_ptr<RingLink> second = *ring.Link(1, absl::Seconds(30));
  std::vector<float> out(1);
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    first->Abort(absl::DeadlineExceededError("waiting for worker:2"));
  });
  absl::Status received = second->Receive(1, absl::MakeSpan(out));  // Waits on worker:0.
  aborter.join();
  EXPECT_TRUE(absl::IsFailedPrecondition(received)) << received;
  EXPECT_THAT(received.message(), HasSubstr(ring.name(0) + " gave up on the ring"));
  EXPECT_THAT(received.message(), HasSubstr("waiting for worker:2"));
}

TEST(GrpcRingLinkTest, TheClusterTokenIsRequiredWhenTheWorkersHaveOne) {
  const std::string token = "0123456789abcdef-cluster";
  SetProcessAuthTokens(AuthTokens{token, ""});
  ServedRing ring(2);
  const std::vector<float> data = {1, 2};
  absl::Status refused = (*ring.Link(0, absl::Seconds(5)))->Send(1, data);
  EXPECT_TRUE(absl::IsUnauthenticated(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr(ring.name(1)));
  EXPECT_TRUE((*ring.Link(0, absl::Seconds(5), token))->Send(2, data).ok());
  SetProcessAuthTokens(AuthTokens{});
}

TEST(GrpcRingLinkTest, AWorkerOutsideTheClusterIsRefused) {
  ServedRing ring(2);
  absl::StatusOr<std::unique_ptr<RingLink>> link = ring.Link(2, absl::Seconds(1));
  EXPECT_TRUE(absl::IsInvalidArgument(link.status())) << link.status();
  EXPECT_THAT(link.status().message(), HasSubstr("has 2 workers"));
}

}  // namespace
}  // namespace ps
