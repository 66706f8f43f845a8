#include "common/ps_connections.h"

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/proto_byte_buffer.h"
#include "common/testing/generic_test_server.h"
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
// UNAVAILABLE and "Refuse" calls with FAILED_PRECONDITION, counting each call by method.
class FakeShard {
 public:
  explicit FakeShard(std::string name)
      : name_(std::move(name)),
        server_([this](const std::string& method, const grpc::ByteBuffer& request,
                       grpc::ByteBuffer* response) { return Handle(method, request, response); }) {}

  std::string address() const { return server_.address(); }
  int calls(const std::string& method) {
    absl::MutexLock lock(&mu_);
    return calls_[method];
  }
  // The next `n` Echo calls fail with UNAVAILABLE.
  void FailNextEchoes(int n) {
    absl::MutexLock lock(&mu_);
    echo_failures_ = n;
  }

 private:
  grpc::Status Handle(const std::string& method, const grpc::ByteBuffer& request,
                      grpc::ByteBuffer* response) {
    const std::string name = method.substr(method.rfind('/') + 1);
    absl::MutexLock lock(&mu_);
    ++calls_[name];
    if (name == "Unavailable" || (name == "Echo" && echo_failures_-- > 0)) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shard restarting");
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
  std::unique_ptr<PsConnections> connections = *PsConnections::Create(FastOptions({shard.address()}));
  for (int batch : {1, 3}) {
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
    ASSERT_TRUE(connections->RunCalls(std::move(calls)).ok());
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

}  // namespace
}  // namespace ps
