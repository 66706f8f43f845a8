#include "common/client/ps_connections.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/net/grpc_status.h"
#include "common/net/proto_byte_buffer.h"
#include "common/net/testing/generic_test_server.h"
#include "google/protobuf/wrappers.pb.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

grpc::ByteBuffer Text(const std::string& text) {
  google::protobuf::StringValue value;
  value.set_value(text);
  return SerializeToByteBuffer(value);
}

std::string TextOf(const grpc::ByteBuffer& buffer) {
  google::protobuf::StringValue value;
  if (!ParseFromByteBuffer(buffer, &value).ok()) return "<unparsable>";
  return value.value();
}

PsClientOptions FastOptions(std::vector<std::string> addresses) {
  PsClientOptions options;
  options.ps_addresses = std::move(addresses);
  options.call_timeout = absl::Seconds(10);
  options.max_attempts = 3;
  options.initial_backoff = absl::Milliseconds(1);
  return options;
}

// A call of `method` sending `text` whose response lands in `*got`.
PsConnections::Call TextCall(int ps, const std::string& method, const std::string& text,
                             std::string* got, absl::Duration timeout = absl::Seconds(10)) {
  return PsConnections::Call{ps, method, [text] { return Text(text); },
                             [got](const grpc::ByteBuffer& response) {
                               *got = TextOf(response);
                               return absl::OkStatus();
                             },
                             timeout, 0};
}

// Echoes "Echo" calls, prefixed with the server's name; fails "Unavailable" calls with
// UNAVAILABLE and "Refuse" calls with FAILED_PRECONDITION, counting each call by method. "Hold"
// calls are echoed 50 ms later, without holding a gRPC thread meanwhile, counting how many are
// held at once.
class FakeShard {
 public:
  explicit FakeShard(std::string name)
      : name_(std::move(name)),
        server_([this](const std::string& method, const grpc::ByteBuffer& request,
                       GenericTestServer::Answer answer) {
          if (absl::EndsWith(method, "/Hold")) {
            Hold(request, std::move(answer));
            return;
          }
          grpc::ByteBuffer response;
          grpc::Status status = Handle(method, request, &response);
          answer(status, std::move(response));
        }) {}
  ~FakeShard() {
    std::vector<std::thread> holders;
    {
      absl::MutexLock lock(&mu_);
      holders.swap(holders_);
    }
    for (std::thread& holder : holders) holder.join();
  }

  std::string address() const { return server_.address(); }
  int calls(const std::string& method) {
    absl::MutexLock lock(&mu_);
    return calls_[method];
  }
  // The next `n` Echo calls fail with UNAVAILABLE, saying `why` (and, for the caller's program,
  // `status`'s detail: common/net/grpc_status.h).
  void FailNextEchoes(int n, const std::string& why = "shard restarting",
                      const absl::Status& status = absl::OkStatus()) {
    absl::MutexLock lock(&mu_);
    echo_failures_ = n;
    echo_failure_ = why;
    echo_failure_details_ = ToGrpcStatus(status).error_details();
  }
  // The most Hold calls this shard has held at once.
  int most_held() {
    absl::MutexLock lock(&mu_);
    return most_held_;
  }

 private:
  void Hold(const grpc::ByteBuffer& request, GenericTestServer::Answer answer) {
    const std::string text = absl::StrCat(name_, ":", TextOf(request));
    absl::MutexLock lock(&mu_);
    ++calls_["Hold"];
    most_held_ = std::max(most_held_, ++held_);
    holders_.emplace_back([this, text, answer = std::move(answer)] {
      absl::SleepFor(absl::Milliseconds(50));
      {
        absl::MutexLock lock(&mu_);
        --held_;
      }
      answer(grpc::Status::OK, Text(text));
    });
  }

  grpc::Status Handle(const std::string& method, const grpc::ByteBuffer& request,
                      grpc::ByteBuffer* response) {
    const std::string name = method.substr(method.rfind('/') + 1);
    absl::MutexLock lock(&mu_);
    ++calls_[name];
    if (name == "Unavailable") {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shard restarting");
    }
    if (name == "Echo" && echo_failures_-- > 0) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, echo_failure_, echo_failure_details_);
    }
    if (name == "Refuse") return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no job");
    if (name == "Slow") absl::SleepFor(absl::Milliseconds(500));
    *response = Text(absl::StrCat(name_, ":", TextOf(request)));
    return grpc::Status::OK;
  }

  const std::string name_;
  absl::Mutex mu_;
  std::map<std::string, int> calls_ ABSL_GUARDED_BY(mu_);
  int echo_failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::string echo_failure_ ABSL_GUARDED_BY(mu_);
  std::string echo_failure_details_ ABSL_GUARDED_BY(mu_);
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  int most_held_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> holders_ ABSL_GUARDED_BY(mu_);  // Answer held calls.
  GenericTestServer server_;
};

TEST(PsConnectionsTest, RefusesNoAddressAndNamesTheMalformedOne) {
  EXPECT_EQ(PsConnections::Create(PsClientOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<PsConnections>> connections =
      PsConnections::Create(FastOptions({"127.0.0.1:1", "no-port"}));
  ASSERT_EQ(connections.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(connections.status().message().rfind("ps:1: ", 0), 0u)
      << connections.status().message();
}

TEST(PsConnectionsTest, MakesEveryCallToItsShardAndHandsEachItsOwnResponse) {
  FakeShard a("a"), b("b");
  std::unique_ptr<PsConnections> connections =
      *PsConnections::Create(FastOptions({a.address(), b.address()}));
  std::vector<std::string> got(4);
  std::vector<PsConnections::Call> calls;
  for (int i = 0; i < 4; ++i) calls.push_back(TextCall(i % 2, "Echo", absl::StrCat(i), &got[i]));
  ASSERT_TRUE(connections->RunCalls(std::move(calls)).ok());
  EXPECT_EQ(got, (std::vector<std::string>{"a:0", "b:1", "a:2", "b:3"}));
}

TEST(PsConnectionsTest, HandlesTheLastCallOnTheCallingThread) {
  FakeShard shard("a");
  PsClientOptions options = FastOptions({shard.address()});
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(options);
  options.max_bytes_in_flight_per_ps = 1;  // Each call alone: the last waits for the others.
  std::unique_ptr<PsConnections> one_at_a_time = *PsConnections::Create(options);
  for (int batch : {1, 3, -3}) {
    PsConnections* through = batch > 0 ? connections.get() : one_at_a_time.get();
    batch = std::abs(batch);
    std::vector<std::thread::id> threads(batch);
    std::vector<PsConnections::Call> calls;
    for (int i = 0; i < batch; ++i) {
      calls.push_back(PsConnections::Call{0, "Echo", [] { return Text("x"); },
                                          [&threads, i](const grpc::ByteBuffer&) {
                                            threads[i] = std::this_thread::get_id();
                                            return absl::OkStatus();
                                          },
                                          absl::Seconds(10), 0});
    }
    ASSERT_TRUE(through->RunCalls(std::move(calls)).ok());
    EXPECT_EQ(threads.back(), std::this_thread::get_id()) << "batch of " << batch;
  }
}

TEST(PsConnectionsTest, RetriesUnavailableWithANewRequestEachAttempt) {
  FakeShard shard("a");
  shard.FailNextEchoes(2);
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(FastOptions({shard.address()}));
  int requests_made = 0;
  std::string got;
  PsConnections::Call call = TextCall(0, "Echo", "x", &got);
  call.make_request = [&requests_made] {
    ++requests_made;
    return Text("x");
  };
  ASSERT_TRUE(connections->RunCalls({call}).ok());
  EXPECT_EQ(got, "a:x");
  EXPECT_EQ(shard.calls("Echo"), 3);
  EXPECT_EQ(requests_made, 3);
}

TEST(PsConnectionsTest, GivesUpAfterMaxAttemptsNamingShardAndMethod) {
  FakeShard shard("a");
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(FastOptions({shard.address()}));
  std::string got;
  absl::Status status = connections->RunCalls({TextCall(0, "Unavailable", "x", &got)});
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(),
            absl::StrCat("ps:0 (", shard.address(),
                         "): Unavailable: shard restarting (after 3 attempts; is the ps task "
                         "running there?)"));
  EXPECT_EQ(shard.calls("Unavailable"), 3);
}

TEST(PsConnectionsTest, ACallMadeOnceIsNotRetried) {
  FakeShard shard("a");
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(FastOptions({shard.address()}));
  std::string got;
  PsConnections::Call call = TextCall(0, "Unavailable", "x", &got);
  call.once = true;
  EXPECT_EQ(connections->RunCalls({call}).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(shard.calls("Unavailable"), 1);
}

// A routed call whose ps answers UNAVAILABLE with no word of a move: the finder is asked where
// the shard is (naming the ps that failed), and the call goes there; where it knows nothing,
// the call fails as before.
TEST(PsConnectionsTest, ARoutedCallThatCannotReachItsPsGoesWhereTheFinderSays) {
  FakeShard a("a"), b("b");
  a.FailNextEchoes(100);
  std::unique_ptr<PsConnections> connections =
      *PsConnections::Create(FastOptions({a.address(), b.address()}));
  std::vector<std::set<int>> asked;
  bool knows = true;
  connections->SetMovedShardFinder(
      [&](const std::vector<PsConnections::JobShard>& shards, const std::set<int>& unreached) {
        asked.push_back(unreached);
        std::map<PsConnections::JobShard, int> found;
        if (knows) {
          for (const PsConnections::JobShard& shard : shards) found[shard] = 1;
        }
        return found;
      });
  std::string got;
  PsConnections::Call call = TextCall(0, "Echo", "x", &got);
  call.routed = true;
  call.job_id = "j";
  ASSERT_TRUE(connections->RunCalls({call}).ok());
  EXPECT_EQ(got, "b:x");
  EXPECT_EQ(connections->MovedRoute("j", 0), 1);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], std::set<int>({0}));

  knows = false;
  call.job_id = "k";
  EXPECT_EQ(connections->RunCalls({call}).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(connections->MovedRoute("k", 0), 0);
  EXPECT_EQ(asked.size(), 3u) << "asked at each attempt but the last";
}

// A shard on the move refuses calls at both its copies for a while: a replicated call goes back
// and forth past max_attempts, for failover_patience, where a plain one gives up.
TEST(PsConnectionsTest, AReplicatedCallTriesBothCopiesForItsPatience) {
  FakeShard a("a"), b("b");
  PsClientOptions options = FastOptions({a.address(), b.address()});
  options.failover_patience = absl::Seconds(20);
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(options);
  a.FailNextEchoes(6);
  b.FailNextEchoes(6);
  std::string got;
  PsConnections::Call call = TextCall(0, "Echo", "x", &got);
  call.replicated = true;
  absl::Status status = connections->RunCalls({call});
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(a.calls("Echo") + b.calls("Echo"), 13);  // 12 refused, then one answered.
  EXPECT_GE(b.calls("Echo"), 6);

  // Past its patience it gives up as a plain call does.
  options.failover_patience = absl::ZeroDuration();
  connections = *PsConnections::Create(options);
  a.FailNextEchoes(6);
  b.FailNextEchoes(6);
  status = connections->RunCalls({call});
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("(after 3 attempts"), std::string::npos) << status;
}

// A copy whose call failed as a hung ps's do (keepalive found the connection dead) is not gone
// back to on the other copy's UNAVAILABLE ("still replicates": its stream from the hung ps is
// not found dead yet) for half the patience: the call retries at the other copy, which takes the
// shard over once it finds the hung one gone too. Later, it is a copy like any other.
TEST(PsConnectionsTest, AReplicatedCallDoesNotGoBackToACopyThatJustHung) {
  FakeShard a("a"), b("b");
  PsClientOptions options = FastOptions({a.address(), b.address()});
  options.failover_patience = absl::Seconds(4);
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(options);
  a.FailNextEchoes(1, "keepalive watchdog timeout");
  b.FailNextEchoes(5, "ps:0 still replicates shard 0 to ps:1, so it is alive: retry it there");
  std::string got;
  PsConnections::Call call = TextCall(0, "Echo", "x", &got);
  call.replicated = true;
  absl::Status status = connections->RunCalls({call});
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(got, "b:x");
  EXPECT_EQ(a.calls("Echo"), 1) << "the call went back to the copy that hung";
  EXPECT_EQ(b.calls("Echo"), 6);

  absl::SleepFor(options.failover_patience / 2);
  b.FailNextEchoes(1, "ps:0 still replicates shard 0 to ps:1, so it is alive: retry it there");
  status = connections->RunCalls({call});
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(got, "a:x");
  EXPECT_EQ(a.calls("Echo"), 2);
}

// The other copy's refusal says how long the hung copy's stream to it has been open: one opened
// after the hang (the hung ps went on and took its shard back) sends the call back at once; one
// older than the hang (not yet found dead) does not.
TEST(PsConnectionsTest, ACopyThatHungIsTriedAgainOnceItsStreamIsNewerThanTheHang) {
  FakeShard a("a"), b("b");
  PsClientOptions options = FastOptions({a.address(), b.address()});
  options.failover_patience = absl::Seconds(20);
  const std::string still = "ps:0 still replicates shard 0 to ps:1, so it is alive: retry it there";
  std::string got;
  PsConnections::Call call = TextCall(0, "Echo", "x", &got);
  call.replicated = true;

  std::unique_ptr<PsConnections> connections = *PsConnections::Create(options);
  a.FailNextEchoes(1, "keepalive watchdog timeout");
  b.FailNextEchoes(3, still, WithPrimaryStreamAge(absl::UnavailableError(still), absl::Hours(1)));
  ASSERT_TRUE(connections->RunCalls({call}).ok());
  EXPECT_EQ(got, "b:x") << "an old stream does not show the hung copy back";
  EXPECT_EQ(a.calls("Echo"), 1);

  connections = *PsConnections::Create(options);
  a.FailNextEchoes(1, "keepalive watchdog timeout");
  b.FailNextEchoes(3, still,
                   WithPrimaryStreamAge(absl::UnavailableError(still), absl::ZeroDuration()));
  ASSERT_TRUE(connections->RunCalls({call}).ok());
  EXPECT_EQ(got, "a:x") << "a stream opened after the hang shows the hung copy back";
  EXPECT_EQ(a.calls("Echo"), 3);
  EXPECT_EQ(b.calls("Echo"), 5);  // 4 before, and the one refusal.
}

TEST(PsConnectionsTest, DoesNotRetryOtherErrorsAndKeepsTheirCode) {
  FakeShard a("a"), b("b");
  std::unique_ptr<PsConnections> connections =
      *PsConnections::Create(FastOptions({a.address(), b.address()}));
  std::string got_a, got_b;
  absl::Status status = connections->RunCalls(
      {TextCall(0, "Echo", "x", &got_a), TextCall(1, "Refuse", "y", &got_b)});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), absl::StrCat("ps:1 (", b.address(), "): Refuse: no job"));
  EXPECT_EQ(b.calls("Refuse"), 1);
  EXPECT_EQ(got_a, "a:x");
}

TEST(PsConnectionsTest, AHandlersErrorFailsTheCallWithoutARetry) {
  FakeShard shard("a");
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(FastOptions({shard.address()}));
  PsConnections::Call call{0, "Echo", [] { return Text("x"); },
                           [](const grpc::ByteBuffer&) { return absl::DataLossError("bad bytes"); },
                           absl::Seconds(10), 0};
  absl::Status status = connections->RunCalls({call});
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(), absl::StrCat("ps:0 (", shard.address(), "): Echo: bad bytes"));
  EXPECT_EQ(shard.calls("Echo"), 1);
}

// A handler's UNAVAILABLE (a pull whose values, sent beside the answer, were lost) makes its
// call again, and the calls its shard's window held back meanwhile are all made.
TEST(PsConnectionsTest, AHandlersUnavailableMakesItsCallAgainAndTheOthersGoOn) {
  FakeShard shard("a");
  PsClientOptions options = FastOptions({shard.address()});
  options.max_bytes_in_flight_per_ps = 1;  // One call at a time: the others wait their turn.
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(options);
  int handled = 0;
  std::vector<std::string> got(3);
  std::vector<PsConnections::Call> calls = {
      PsConnections::Call{0, "Echo", [] { return Text("lost"); },
                          [&handled](const grpc::ByteBuffer&) {
                            return ++handled == 1 ? absl::UnavailableError("frame lost")
                                                  : absl::OkStatus();
                          },
                          absl::Seconds(10), 0},
      TextCall(0, "Echo", "1", &got[1]), TextCall(0, "Echo", "2", &got[2])};
  ASSERT_TRUE(connections->RunCalls(std::move(calls)).ok());
  EXPECT_EQ(handled, 2);
  EXPECT_EQ(got[1], "a:1");
  EXPECT_EQ(got[2], "a:2");
  EXPECT_EQ(shard.calls("Echo"), 4);
}

TEST(PsConnectionsTest, EveryCallCarriesItsDeadline) {
  FakeShard shard("a");
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(FastOptions({shard.address()}));
  std::string fast, slow;
  absl::Status status =
      connections->RunCalls({TextCall(0, "Slow", "x", &slow, absl::Milliseconds(50)),
                             TextCall(0, "Echo", "y", &fast)});
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_EQ(fast, "a:y");
  EXPECT_EQ(slow, "");
}

// The text of call `i` of a batch: `bytes` long whatever `i` (< 100), so that every request has
// the same size.
std::string Numbered(int i, size_t bytes) {
  return absl::StrCat(std::string(bytes - 2, 'x'), i / 10, i % 10);
}

TEST(PsConnectionsTest, KeepsAtMostTheWindowInFlightPerShardAndMakesEveryCall) {
  FakeShard a("a"), b("b");
  PsClientOptions options = FastOptions({a.address(), b.address()});
  const int64_t request_bytes = static_cast<int64_t>(Text(Numbered(0, 1000)).Length());
  options.max_bytes_in_flight_per_ps = 3 * request_bytes;
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(options);
  constexpr int kCalls = 24;
  std::vector<std::string> got(kCalls);
  std::vector<PsConnections::Call> calls;
  for (int i = 0; i < kCalls; ++i) {
    calls.push_back(TextCall(i % 2, "Hold", Numbered(i, 1000), &got[i]));
    calls.back().connection = i / 2;  // Over both connections of the shard.
  }
  ASSERT_TRUE(connections->RunCalls(std::move(calls)).ok());
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(got[i], absl::StrCat(i % 2 == 0 ? "a:" : "b:", Numbered(i, 1000)));
  }
  EXPECT_EQ(a.calls("Hold"), kCalls / 2);
  EXPECT_EQ(b.calls("Hold"), kCalls / 2);
  EXPECT_EQ(a.most_held(), 3);
  EXPECT_EQ(b.most_held(), 3);
}

TEST(PsConnectionsTest, ACallCountsTheResponseItExpectsWhenLarger) {
  FakeShard shard("a");
  PsClientOptions options = FastOptions({shard.address()});
  options.max_bytes_in_flight_per_ps = 8 << 20;
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(options);
  std::vector<std::string> got(8);
  std::vector<PsConnections::Call> calls;
  for (int i = 0; i < 8; ++i) {
    calls.push_back(TextCall(0, "Hold", Numbered(i, 10), &got[i]));
    calls.back().response_bytes = 4 << 20;  // As a pull's chunk of 4 MiB.
  }
  ASSERT_TRUE(connections->RunCalls(std::move(calls)).ok());
  EXPECT_EQ(got[7], absl::StrCat("a:", Numbered(7, 10)));
  EXPECT_EQ(shard.most_held(), 2);
}

TEST(PsConnectionsTest, AWindowSmallerThanOneCallSendsEveryCallAlone) {
  FakeShard shard("a");
  PsClientOptions options = FastOptions({shard.address()});
  options.max_bytes_in_flight_per_ps = 10;
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(options);
  std::vector<std::string> got(5);
  std::vector<PsConnections::Call> calls;
  for (int i = 0; i < 5; ++i) calls.push_back(TextCall(0, "Hold", Numbered(i, 100), &got[i]));
  ASSERT_TRUE(connections->RunCalls(std::move(calls)).ok());
  EXPECT_EQ(shard.calls("Hold"), 5);
  EXPECT_EQ(shard.most_held(), 1);
  EXPECT_EQ(got[4], absl::StrCat("a:", Numbered(4, 100)));
}

TEST(PsConnectionsTest, RetriesThroughTheWindow) {
  FakeShard shard("a");
  shard.FailNextEchoes(2);
  PsClientOptions options = FastOptions({shard.address()});
  options.max_bytes_in_flight_per_ps = 1;
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(options);
  std::vector<std::string> got(4);
  std::vector<PsConnections::Call> calls;
  for (int i = 0; i < 4; ++i) calls.push_back(TextCall(0, "Echo", absl::StrCat(i), &got[i]));
  ASSERT_TRUE(connections->RunCalls(std::move(calls)).ok());
  EXPECT_EQ(got, (std::vector<std::string>{"a:0", "a:1", "a:2", "a:3"}));
  EXPECT_EQ(shard.calls("Echo"), 6);
}

TEST(PsConnectionsTest, CallsNotYetMadeAreDroppedOnceOneFailsForGood) {
  FakeShard a("a"), b("b");
  PsClientOptions options = FastOptions({a.address(), b.address()});
  options.max_bytes_in_flight_per_ps = 1;
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(options);
  std::string got_a1, got_a2, got_a3, got_b;
  absl::Status status = connections->RunCalls(
      {TextCall(0, "Refuse", "x", &got_a1), TextCall(0, "Echo", "y", &got_a2),
       TextCall(0, "Echo", "z", &got_a3), TextCall(1, "Echo", "w", &got_b)});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), absl::StrCat("ps:0 (", a.address(), "): Refuse: no job"));
  EXPECT_EQ(a.calls("Echo"), 0) << "ps:0's window held them back, then they were dropped";
  EXPECT_EQ(got_b, "b:w") << "ps:1's call went out at once";
}

}  // namespace
}  // namespace ps
