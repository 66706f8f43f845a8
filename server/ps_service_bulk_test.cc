// Pulls whose values come on a bulk stream, and pushes whose gradients go on them
// (docs/bulk_streams.md): the values of the messages' path, a stream that serves only the
// worker it was opened for, a pull naming a stream the ps does not have answered in the
// message, a push whose frame does not come applied nowhere, and a session whose streams the
// ps closed opening others.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <glog/logging.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "common/net/bulk_frame.h"
#include "common/net/proto_byte_buffer.h"
#include "common/tensor/tensor_coding.h"
#include "common/net/testing/ticket_peer.h"
#include "common/net/ticket_door.h"
#include "proto/ps_service.pb.h"
#include "server/bulk_streams.h"
#include "server/testing/in_process_ps_cluster.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kRows = 1024;
constexpr int64_t kColumns = 256;  // 1 MiB of floats, over two shards.

ParameterSpec MakeSpec(const std::string& job_id, ConsistencyConfig::Mode mode) {
  ParameterSpec spec;
  spec.set_job_id(job_id);
  spec.set_run_id("run-1");
  spec.set_num_workers(2);
  spec.set_min_slice_bytes(64);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  spec.mutable_learning_rate()->set_base(0.5f);
  spec.mutable_consistency()->set_mode(mode);
  VariableDef* w = spec.add_variables();
  w->set_name("w");
  w->add_shape(kRows);
  w->add_shape(kColumns);
  w->mutable_initializer()->set_kind(InitializerConfig::NORMAL);
  w->mutable_initializer()->set_scale(1.0f);
  return spec;
}

class BulkStreamTest : public testing::Test {
 protected:
  void SetUp() override {
    InProcessPsClusterOptions options;
    options.num_ps = 2;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    ASSERT_GT(cluster_->server(0).bulk_port(), 0);
  }

  // Shared memory off, as between hosts.
  std::unique_ptr<PsClient> Client(bool bulk_streams) {
    PsClientOptions options;
    options.call_timeout = absl::Seconds(10);
    options.wait_timeout = absl::Seconds(10);
    options.shared_memory = false;
    options.bulk_streams = bulk_streams;
    options.bulk_min_bytes = 64 << 10;
    options.initial_backoff = absl::Milliseconds(10);
    absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient(options);
    CHECK(client.ok()) << client.status();
    return *std::move(client);
  }

  std::unique_ptr<WorkerSession> Session(PsClient* client, const ParameterSpec& spec, int worker) {
    absl::StatusOr<std::unique_ptr<WorkerSession>> session =
        WorkerSession::Create(client, spec, worker);
    CHECK(session.ok()) << session.status();
    return *std::move(session);
  }

  int64_t FramesReceived() {
    return cluster_->server(0).service().bulk_frames_received() +
           cluster_->server(1).service().bulk_frames_received();
  }
  int64_t FramesSent() {
    return cluster_->server(0).service().bulk_frames_sent() +
           cluster_->server(1).service().bulk_frames_sent();
  }
  // FramesSent once it reaches `expected`, or after 5 s: a stream's thread counts a frame once
  // its write returned, which may be just after the worker has read it.
  int64_t FramesSentOnceAt(int64_t expected) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (FramesSent() < expected && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
    return FramesSent();
  }


  // Opens a stream on shard `ps` as `worker` of `spec`'s job and connects to it with its
  // ticket; its id (the connection is kept in fds_).
  absl::StatusOr<uint64_t> OpenStream(PsClient* client, const ParameterSpec& spec, int ps,
                                      int worker) {
    OpenBulkStreamRequest request;
    request.set_job_id(spec.job_id());
    request.set_worker(worker);
    request.set_run_id(spec.run_id());
    absl::StatusOr<grpc::ByteBuffer> answer =
        CallShard(client, ps, "OpenBulkStream", SerializeToByteBuffer(request));
    if (!answer.ok()) return answer.status();
    OpenBulkStreamResponse response;
    absl::Status parsed = ParseFromByteBuffer(*answer, &response);
    if (!parsed.ok()) return parsed;
    const TicketPeer peer = PresentTicket(response.port(), response.ticket());
    if (peer.reply != TicketDoor::kGranted) {
      if (peer.fd >= 0) close(peer.fd);
      return absl::InternalError("the stream's ticket did not let it in");
    }
    fds_.push_back(peer.fd);
    absl::SleepFor(absl::Milliseconds(20));  // The door attaches it right after answering.
    return response.stream();
  }

  // The answer of a raw pull of every slice of shard `ps` as `worker` of `job_id` naming
  // stream `stream`.
  absl::StatusOr<grpc::ByteBuffer> PullAnswer(PsClient* client, const std::string& job_id, int ps,
                                              int worker, uint64_t stream) {
    PullRequest request;
    request.set_job_id(job_id);
    request.set_run_id("run-1");
    request.set_worker(worker);
    request.set_bulk_stream(stream);
    request.set_bulk_frame(1);
    return CallShard(client, ps, "Pull", SerializeToByteBuffer(request));
  }
  absl::Status PullNaming(PsClient* client, const std::string& job_id, int ps, int worker,
                          uint64_t stream) {
    return PullAnswer(client, job_id, ps, worker, stream).status();
  }

  // Two one-worker jobs, `name`-streams through a client with bulk streams and
  // `name`-messages through one without, each with its worker's session: the same calls must
  // give both the same values.
  struct Twins {
    std::unique_ptr<PsClient> on_streams, in_messages;
    ParameterSpec stream_spec, message_spec;
    std::unique_ptr<WorkerSession> streams, messages;
  };
  Twins MakeTwins(const std::string& name) {
    Twins twins;
    twins.on_streams = Client(true);
    twins.in_messages = Client(false);
    twins.stream_spec = MakeSpec(name + "-streams", ConsistencyConfig::ASYNC);
    twins.message_spec = MakeSpec(name + "-messages", ConsistencyConfig::ASYNC);
    twins.stream_spec.set_num_workers(1);
    twins.message_spec.set_num_workers(1);
    CHECK(twins.on_streams->CreateJob(twins.stream_spec).ok());
    CHECK(twins.in_messages->CreateJob(twins.message_spec).ok());
    twins.streams = Session(twins.on_streams.get(), twins.stream_spec, 0);
    twins.messages = Session(twins.in_messages.get(), twins.message_spec, 0);
    return twins;
  }

  std::vector<float> PullAll(WorkerSession* session) {
    std::vector<float> values(kRows * kColumns, -1.0f);
    absl::StatusOr<WorkerSession::PullResult> pulled =
        session->Pull({}, {{"w", absl::MakeSpan(values)}});
    CHECK(pulled.ok()) << pulled.status();
    return values;
  }

  void TearDown() override {
    cluster_.reset();
    for (int fd : fds_) close(fd);
  }

  std::unique_ptr<InProcessPsCluster> cluster_;
  std::vector<int> fds_;
};

TEST_F(BulkStreamTest, PullsOnStreamsGiveTheValuesOfTheAnswersPathInEveryMode) {
  for (ConsistencyConfig::Mode mode : {ConsistencyConfig::ASYNC, ConsistencyConfig::SSP}) {
    SCOPED_TRACE(ConsistencyConfig::Mode_Name(mode));
    std::unique_ptr<PsClient> on_streams = Client(true);
    std::unique_ptr<PsClient> in_answers = Client(false);
    ParameterSpec stream_spec = MakeSpec(absl::StrCat("streams-", mode), mode);
    ParameterSpec answer_spec = MakeSpec(absl::StrCat("answers-", mode), mode);
    stream_spec.set_num_workers(1);  // No clock waits for a worker that never comes.
    answer_spec.set_num_workers(1);
    ASSERT_TRUE(on_streams->CreateJob(stream_spec).ok());
    ASSERT_TRUE(in_answers->CreateJob(answer_spec).ok());
    std::unique_ptr<WorkerSession> streams = Session(on_streams.get(), stream_spec, 0);
    std::unique_ptr<WorkerSession> answers = Session(in_answers.get(), answer_spec, 0);
    const int64_t frames_before = FramesSent();
    const int64_t received_before = FramesReceived();
    std::vector<float> gradient(kRows * kColumns);
    for (int step = 0; step < 4; ++step) {
      for (size_t i = 0; i < gradient.size(); ++i) gradient[i] = 0.001f * ((i * 7 + step) % 13);
      WorkerSession::PushOptions push;
      push.clock = step;
      WorkerSession::PullOptions pull;
      pull.clock = step;
      std::vector<float> a(gradient.size()), b(gradient.size());
      ASSERT_TRUE(streams->Pull(pull, {{"w", absl::MakeSpan(a)}}).ok());
      ASSERT_TRUE(answers->Pull(pull, {{"w", absl::MakeSpan(b)}}).ok());
      ASSERT_EQ(a, b) << "step " << step;
      ASSERT_TRUE(streams->Push(push, {{"w", absl::MakeConstSpan(gradient)}}).ok());
      ASSERT_TRUE(answers->Push(push, {{"w", absl::MakeConstSpan(gradient)}}).ok());
    }
    EXPECT_EQ(PullAll(streams.get()), PullAll(answers.get()));
    // Every pull of the streams' session went on its streams: two per shard, each with half
    // the shard's rows.
    EXPECT_EQ(FramesSentOnceAt(frames_before + 2 * 2 * 5) - frames_before, 2 * 2 * 5);
    // And every push's gradient: a chunk on each of the shard's two streams. The ps counts a
    // frame before it answers its push.
    EXPECT_EQ(FramesReceived() - received_before, 2 * 2 * 4);
  }
}

// A push naming a bulk stream, made by hand: only the stream's own worker may name it, only in
// Push; its frame is applied once it comes, and a frame that never comes applies nothing.
TEST_F(BulkStreamTest, APushsGradientComesOnlyOnItsOwnWorkersStreamAndOnlyWhenItCame) {
  std::unique_ptr<PsClient> client = Client(true);
  ParameterSpec spec = MakeSpec("raw-push", ConsistencyConfig::ASYNC);
  ASSERT_TRUE(client->CreateJob(spec).ok());
  std::unique_ptr<PsClient> reference = Client(false);
  std::unique_ptr<WorkerSession> observer = Session(reference.get(), spec, 1);
  absl::StatusOr<uint64_t> stream = OpenStream(client.get(), spec, 0, 0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const int fd = fds_.back();
  absl::StatusOr<Placement> placement = PlaceVariables(spec, 2);
  ASSERT_TRUE(placement.ok());
  PushRequestHeader header;
  header.set_job_id(spec.job_id());
  header.set_run_id(spec.run_id());
  header.set_worker(0);
  header.set_bulk_stream(*stream);
  int64_t floats = 0;
  for (int index : placement->SlicesOn(0)) {
    const SlicePlacement& slice = placement->slices[index];
    SliceRef* ref = header.add_slices();
    ref->set_variable(slice.variable);
    ref->set_row_begin(slice.row_begin);
    ref->set_row_count(slice.row_count);
    floats += slice.row_count * kColumns;
  }
  ASSERT_GT(floats, 0);
  std::vector<float> gradient(floats, 0.25f);
  auto push = [&](const PushRequestHeader& h, const std::string& method) {
    return CallShard(client.get(), 0, method, EncodeTensorMessage(h, {}, nullptr)).status();
  };
  const std::vector<float> before = PullAll(observer.get());

  PushRequestHeader stranger = header;  // Another worker naming worker 0's stream.
  stranger.set_worker(1);
  stranger.set_push_id(1);
  stranger.set_bulk_frame(1);
  absl::Status refused = push(stranger, "Push");
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  PushRequestHeader push_pull = header;
  push_pull.set_push_id(1);
  push_pull.set_bulk_frame(1);
  refused = push(push_pull, "PushPull");
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("PushPull takes its gradient in the request"));
  EXPECT_EQ(PullAll(observer.get()), before);

  // Frame 1 written by the worker while its call goes (either may come first).
  std::thread writer([&] {
    ASSERT_TRUE(SendBulkFrame(fd, 1, {absl::MakeConstSpan(gradient)}).ok());
  });
  PushRequestHeader first = header;
  first.set_push_id(1);
  first.set_bulk_frame(1);
  EXPECT_TRUE(push(first, "Push").ok());
  writer.join();
  const std::vector<float> applied = PullAll(observer.get());
  const SlicePlacement& slice = placement->slices[placement->SlicesOn(0)[0]];
  const int64_t at = slice.row_begin * kColumns;
  EXPECT_FLOAT_EQ(applied[at], before[at] - 0.5f * 0.25f);
  EXPECT_EQ(cluster_->server(0).service().bulk_frames_received(), 1);

  // A NaN in frame 2: refused as in a request, nothing changed.
  std::vector<float> poisoned = gradient;
  poisoned[floats / 2] = std::nanf("");
  std::thread poisoner([&] {
    ASSERT_TRUE(SendBulkFrame(fd, 2, {absl::MakeConstSpan(poisoned)}).ok());
  });
  PushRequestHeader nan_push = header;
  nan_push.set_push_id(2);
  nan_push.set_bulk_frame(2);
  const absl::Status nan_refused = push(nan_push, "Push");
  poisoner.join();
  EXPECT_EQ(nan_refused.code(), absl::StatusCode::kInvalidArgument) << nan_refused;
  EXPECT_THAT(nan_refused.message(), HasSubstr("NaN"));
  EXPECT_EQ(PullAll(observer.get()), applied);

  // Frame 3 never comes: the push fails UNAVAILABLE (the worker would send it again in the
  // request) and changes nothing.
  PushRequestHeader second = header;
  second.set_push_id(3);
  second.set_bulk_frame(3);
  const absl::Time start = absl::Now();
  const absl::Status lost = push(second, "Push");
  EXPECT_EQ(lost.code(), absl::StatusCode::kUnavailable) << lost;
  EXPECT_LT(absl::Now() - start, BulkStream::ReceiveTimeout(floats * 4) + absl::Seconds(2));
  EXPECT_EQ(PullAll(observer.get()), applied);
  // The same push in the request is applied (a push id never seen applied).
  second.clear_bulk_stream();
  second.clear_bulk_frame();
  std::vector<absl::Span<const float>> pieces = {gradient};
  absl::StatusOr<grpc::ByteBuffer> resent =
      CallShard(client.get(), 0, "Push", EncodeTensorMessage(second, pieces, nullptr));
  ASSERT_TRUE(resent.ok()) << resent.status();
  PushResponse response;
  ASSERT_TRUE(ParseFromByteBuffer(*resent, &response).ok());
  EXPECT_EQ(response.outcome(), PushResponse::APPLIED);
}

// The ps closes a session's streams while it pushes: each push is applied once, its gradient
// sent again in the request where its frame could not be taken.
TEST_F(BulkStreamTest, PushesWhoseStreamsThePsClosedAreAppliedOnce) {
  Twins twins = MakeTwins("closed");
  WorkerSession* streams = twins.streams.get();
  WorkerSession* requests = twins.messages.get();
  std::vector<float> gradient(kRows * kColumns);
  for (int step = 0; step < 6; ++step) {
    for (size_t i = 0; i < gradient.size(); ++i) gradient[i] = 0.001f * ((i * 3 + step) % 11);
    const ConstVariables grads = {{"w", absl::MakeConstSpan(gradient)}};
    std::vector<float> a(gradient.size()), b(gradient.size());
    ASSERT_TRUE(streams->Pull({}, {{"w", absl::MakeSpan(a)}}).ok());
    ASSERT_TRUE(requests->Pull({}, {{"w", absl::MakeSpan(b)}}).ok());
    ASSERT_EQ(a, b) << "step " << step;
    if (step % 2 == 1) {
      // The worker's next streams on shard 0 push the session's out.
      for (int i = 0; i < BulkStreams::kStreamsPerWorker; ++i) {
        ASSERT_TRUE(OpenStream(twins.on_streams.get(), twins.stream_spec, 0, 0).ok());
      }
    }
    absl::StatusOr<std::vector<PushResponse>> x = streams->Push({}, grads);
    absl::StatusOr<std::vector<PushResponse>> y = requests->Push({}, grads);
    ASSERT_TRUE(x.ok()) << x.status();
    ASSERT_TRUE(y.ok()) << y.status();
    for (const PushResponse& pushed : *x) EXPECT_EQ(pushed.outcome(), PushResponse::APPLIED);
  }
  EXPECT_EQ(PullAll(streams), PullAll(requests));
}

// A PushPull's pull (a step's push and the next step's values in one call) takes its values on
// the shard's first stream, and the push is applied once.
TEST_F(BulkStreamTest, APushPullsValuesComeOnTheStreamAndItsPushIsAppliedOnce) {
  Twins twins = MakeTwins("push-pull");
  std::unique_ptr<PsClient>& on_streams = twins.on_streams;
  const ParameterSpec& stream_spec = twins.stream_spec;
  std::unique_ptr<WorkerSession>& streams = twins.streams;
  std::unique_ptr<WorkerSession>& answers = twins.messages;
  std::vector<float> a(kRows * kColumns), b(kRows * kColumns), gradient(kRows * kColumns);
  // Counted before the first pull: its frames may be counted only after it returned.
  const int64_t frames_before = FramesSent();
  ASSERT_TRUE(streams->Pull({}, {{"w", absl::MakeSpan(a)}}).ok());
  ASSERT_TRUE(answers->Pull({}, {{"w", absl::MakeSpan(b)}}).ok());
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < gradient.size(); ++i) gradient[i] = 0.01f * ((i + step) % 5);
    const ConstVariables grads = {{"w", absl::MakeConstSpan(gradient)}};
    absl::StatusOr<WorkerSession::PushPullResult> x =
        streams->PushPull({}, grads, {}, {{"w", absl::MakeSpan(a)}});
    absl::StatusOr<WorkerSession::PushPullResult> y =
        answers->PushPull({}, grads, {}, {{"w", absl::MakeSpan(b)}});
    ASSERT_TRUE(x.ok()) << x.status();
    ASSERT_TRUE(y.ok()) << y.status();
    for (const PushResponse& pushed : x->pushed) EXPECT_EQ(pushed.outcome(), PushResponse::APPLIED);
    ASSERT_EQ(a, b) << "step " << step;
  }
  // The first pull's two frames per shard, then one frame per shard per PushPull.
  EXPECT_EQ(FramesSentOnceAt(frames_before + 2 * 2 + 2 * 3) - frames_before, 2 * 2 + 2 * 3);
  EXPECT_EQ(PullAll(answers.get()), PullAll(streams.get()));

  // The ps closes the session's streams on shard 0 (the worker's next ones push them out): the
  // next PushPull, naming one before the session sees it end or on a new one, is APPLIED once.
  for (int i = 0; i < BulkStreams::kStreamsPerWorker; ++i) {
    ASSERT_TRUE(OpenStream(on_streams.get(), stream_spec, 0, 0).ok());
  }
  const ConstVariables grads = {{"w", absl::MakeConstSpan(gradient)}};
  absl::StatusOr<WorkerSession::PushPullResult> x =
      streams->PushPull({}, grads, {}, {{"w", absl::MakeSpan(a)}});
  absl::StatusOr<WorkerSession::PushPullResult> y =
      answers->PushPull({}, grads, {}, {{"w", absl::MakeSpan(b)}});
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_TRUE(y.ok()) << y.status();
  for (const PushResponse& pushed : x->pushed) EXPECT_EQ(pushed.outcome(), PushResponse::APPLIED);
  EXPECT_EQ(a, b);
}

TEST_F(BulkStreamTest, AStreamServesOnlyTheWorkerOfTheJobItWasOpenedFor) {
  std::unique_ptr<PsClient> client = Client(true);
  const ParameterSpec alice = MakeSpec("alice", ConsistencyConfig::ASYNC);
  const ParameterSpec bob = MakeSpec("bob", ConsistencyConfig::ASYNC);
  ASSERT_TRUE(client->CreateJob(alice).ok());
  ASSERT_TRUE(client->CreateJob(bob).ok());
  absl::StatusOr<uint64_t> stream = OpenStream(client.get(), alice, 0, 0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_TRUE(PullNaming(client.get(), "alice", 0, 0, *stream).ok());
  absl::Status other_worker = PullNaming(client.get(), "alice", 0, 1, *stream);
  EXPECT_EQ(other_worker.code(), absl::StatusCode::kPermissionDenied) << other_worker;
  EXPECT_THAT(other_worker.message(), HasSubstr("belongs to another worker or job"));
  absl::Status other_job = PullNaming(client.get(), "bob", 0, 0, *stream);
  EXPECT_EQ(other_job.code(), absl::StatusCode::kPermissionDenied) << other_job;
  // A stream of another ps, or none: the values come in the answer.
  absl::StatusOr<grpc::ByteBuffer> unknown = PullAnswer(client.get(), "alice", 1, 0, *stream);
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  PullResponseHeader header;
  std::vector<float> values;
  const absl::Status decoded = DecodeTensorMessage(
      *unknown, &header,
      [&](const google::protobuf::MessageLite&) -> absl::StatusOr<std::vector<absl::Span<float>>> {
        int64_t rows = 0;
        for (const SliceRef& slice : header.slices()) rows += slice.row_count();
        values.resize(rows * kColumns);
        return std::vector<absl::Span<float>>{absl::MakeSpan(values)};
      });
  ASSERT_TRUE(decoded.ok()) << decoded;
  EXPECT_FALSE(header.on_bulk_stream());
  EXPECT_FALSE(values.empty());
  // Opening one as a worker out of range, or for another run, is refused as for shared memory.
  OpenBulkStreamRequest request;
  request.set_job_id("alice");
  request.set_worker(2);
  request.set_run_id("run-1");
  EXPECT_EQ(
      CallShard(client.get(), 0, "OpenBulkStream", SerializeToByteBuffer(request)).status().code(),
      absl::StatusCode::kInvalidArgument);
  request.set_worker(0);
  request.set_run_id("run-0");
  EXPECT_EQ(
      CallShard(client.get(), 0, "OpenBulkStream", SerializeToByteBuffer(request)).status().code(),
      absl::StatusCode::kFailedPrecondition);
}

TEST_F(BulkStreamTest, ASessionWhoseStreamsThePsClosedOpensOthers) {
  std::unique_ptr<PsClient> client = Client(true);
  std::unique_ptr<PsClient> reference = Client(false);
  const ParameterSpec spec = MakeSpec("j", ConsistencyConfig::ASYNC);
  ASSERT_TRUE(client->CreateJob(spec).ok());
  std::unique_ptr<WorkerSession> session = Session(client.get(), spec, 0);
  std::unique_ptr<WorkerSession> observer = Session(reference.get(), spec, 1);
  const std::vector<float> expected = PullAll(observer.get());
  ASSERT_EQ(PullAll(session.get()), expected);
  const int64_t frames = FramesSent();
  ASSERT_EQ(frames, 4);  // Two streams per shard (one per connection), half the rows on each.
  // The same worker's next streams close the session's (kStreamsPerWorker per worker).
  for (int i = 0; i < BulkStreams::kStreamsPerWorker; ++i) {
    ASSERT_TRUE(OpenStream(client.get(), spec, 0, 0).ok());
  }
  absl::SleepFor(absl::Milliseconds(200));  // The session's readers see their streams end.
  EXPECT_EQ(PullAll(session.get()), expected);  // Shard 0's on two new streams.
  EXPECT_EQ(FramesSentOnceAt(frames + 4), frames + 4);
  EXPECT_EQ(PullAll(session.get()), expected);
  EXPECT_EQ(FramesSentOnceAt(frames + 8), frames + 8);
}

}  // namespace
}  // namespace ps
