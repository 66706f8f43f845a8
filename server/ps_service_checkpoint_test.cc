// The ps's checkpoint calls over gRPC, on two in-process ps whose disks a test can fail:
// arm, write in the background, commit, list, restore; a disk that fails abandons the
// checkpoint, says why in the job's statistics, and training goes on.
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/metrics/metrics.h"
#include "common/client/ps_client.h"
#include "common/testing/fault_injecting_file_system.h"
#include "common/client/worker_session.h"
#include "proto/ps_service.grpc.pb.h"
#include "server/testing/in_process_ps_cluster.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kNumPs = 2;

ParameterSpec Spec(const std::string& run_id) {
  ParameterSpec spec;
  spec.set_job_id("ckpt");
  spec.set_run_id(run_id);
  VariableDef* variable = spec.add_variables();
  variable->set_name("w");
  variable->add_shape(64);
  variable->add_shape(16);
  variable->mutable_initializer()->set_kind(InitializerConfig::NORMAL);
  variable->mutable_initializer()->set_scale(0.1f);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  spec.mutable_learning_rate()->set_base(0.01f);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::SYNC);
  spec.set_num_workers(1);
  spec.set_min_slice_bytes(1024);
  return spec;
}

class PsServiceCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    InProcessPsClusterOptions options;
    options.num_ps = kNumPs;
    options.server.service.checkpoint_dir = root_;
    options.server.service.file_system = &fs_;
    options.server.metrics_port = 0;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    PsClientOptions client;
    client.ps_addresses = cluster_->addresses();
    absl::StatusOr<std::unique_ptr<PsClient>> created = PsClient::Create(client);
    ASSERT_TRUE(created.ok());
    client_ = *std::move(created);
    for (const std::string& address : cluster_->addresses()) {
      stubs_.push_back(ParameterServer::NewStub(
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials())));
    }
  }

  // Starts run `run_id` with one worker.
  void Start(const std::string& run_id) {
    ASSERT_TRUE(client_->CreateJob(Spec(run_id)).ok());
    absl::StatusOr<std::unique_ptr<WorkerSession>> session =
        WorkerSession::Create(client_.get(), Spec(run_id), 0);
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = *std::move(session);
  }

  // SYNC steps `from` .. `to` - 1, each pulling then pushing a gradient of `step`.
  void Steps(int64_t from, int64_t to) {
    std::vector<float> weights(64 * 16), gradient(64 * 16);
    for (int64_t step = from; step < to; ++step) {
      WorkerSession::PullOptions pull;
      pull.step = step;
      ASSERT_TRUE(session_->Pull(pull, {{"w", absl::MakeSpan(weights)}}).ok());
      for (size_t i = 0; i < gradient.size(); ++i) gradient[i] = weights[i] * 0.5f + step;
      WorkerSession::PushOptions push;
      push.step = step;
      ASSERT_TRUE(session_->Push(push, {{"w", absl::MakeConstSpan(gradient)}}).ok());
    }
  }

  std::vector<float> Weights() {
    std::vector<float> weights(64 * 16);
    EXPECT_TRUE(session_->Pull({}, {{"w", absl::MakeSpan(weights)}}).ok());
    return weights;
  }

  grpc::Status Arm(const std::string& run_id, int64_t seq, int64_t at_clock) {
    for (auto& stub : stubs_) {
      grpc::ClientContext context;
      ArmCheckpointRequest request;
      request.set_job_id("ckpt");
      request.set_run_id(run_id);
      request.set_seq(seq);
      request.set_at_clock(at_clock);
      ArmCheckpointResponse response;
      grpc::Status status = stub->ArmCheckpoint(&context, request, &response);
      if (!status.ok()) return status;
    }
    return grpc::Status::OK;
  }

  // Each shard's report of checkpoint `seq`, once every shard has one (waits up to 10 s).
  std::vector<ShardCheckpoint> Reports(int64_t seq) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      absl::StatusOr<std::vector<JobStats>> stats = client_->GetJobStats("ckpt");
      EXPECT_TRUE(stats.ok());
      std::vector<ShardCheckpoint> reports;
      for (const JobStats& shard : *stats) {
        for (const ShardCheckpoint& entry : shard.checkpoints()) {
          if (entry.seq() == seq) reports.push_back(entry);
        }
      }
      if (reports.size() == kNumPs) return reports;
      absl::SleepFor(absl::Milliseconds(20));
    }
    ADD_FAILURE() << "checkpoint " << seq << " was not reported by every shard";
    return {};
  }

  CheckpointManifest Manifest(const std::vector<ShardCheckpoint>& reports, const std::string& run) {
    CheckpointManifest manifest;
    manifest.set_job_id("ckpt");
    manifest.set_run_id(run);
    manifest.set_seq(reports[0].seq());
    manifest.set_name(reports[0].file().substr(0, reports[0].file().find('/')));
    manifest.set_num_ps(kNumPs);
    manifest.set_resume_step(reports[0].clock());
    manifest.set_written_at_ms(absl::ToUnixMillis(absl::Now()));
    for (const ShardCheckpoint& report : reports) *manifest.add_shards() = report;
    *manifest.mutable_parameters() = Spec(run);
    return manifest;
  }

  // Commits `manifest` on ps `ps`.
  grpc::Status Commit(int ps, const CheckpointManifest& manifest) {
    grpc::ClientContext context;
    CommitCheckpointRequest request;
    *request.mutable_manifest() = manifest;
    CommitCheckpointResponse response;
    return stubs_[ps]->CommitCheckpoint(&context, request, &response);
  }

  void ExpectAbandonedAndTrainingGoesOn(const std::string& reason);

  // Task ps:`ps`'s /metrics page.
  std::string Metrics(int ps) {
    httplib::Client http("127.0.0.1", cluster_->server(ps).metrics_port());
    httplib::Result page = http.Get("/metrics");
    EXPECT_TRUE(page && page->status == 200);
    return page ? page->body : "";
  }

  FaultInjectingFileSystem fs_;
  std::string root_;
  std::unique_ptr<InProcessPsCluster> cluster_;
  std::unique_ptr<PsClient> client_;
  std::unique_ptr<WorkerSession> session_;
  std::vector<std::unique_ptr<ParameterServer::Stub>> stubs_;
};

TEST_F(PsServiceCheckpointTest, ACommittedCheckpointRestoresTheShardsInANewRun) {
  Start("run-1");
  ASSERT_TRUE(Arm("run-1", 1, 3).ok());  // Taken when step 3 is applied, before step 4.
  Steps(0, 6);
  const std::vector<ShardCheckpoint> reports = Reports(1);
  ASSERT_EQ(reports.size(), 2u);
  for (const ShardCheckpoint& report : reports) {
    EXPECT_EQ(report.clock(), 3);
    EXPECT_EQ(report.error(), "");
    EXPECT_GT(report.bytes(), 64 * 16 * 4 / 2);
  }
  const CheckpointManifest manifest = Manifest(reports, "run-1");
  for (auto& stub : stubs_) {
    grpc::ClientContext context;
    CommitCheckpointRequest request;
    *request.mutable_manifest() = manifest;
    CommitCheckpointResponse response;
    ASSERT_TRUE(stub->CommitCheckpoint(&context, request, &response).ok());
    grpc::ClientContext list_context;
    ListCheckpointsRequest list;
    list.set_job_id("ckpt");
    ListCheckpointsResponse listed;
    ASSERT_TRUE(stub->ListCheckpoints(&list_context, list, &listed).ok());
    ASSERT_EQ(listed.manifests_size(), 1);
    EXPECT_EQ(listed.manifests(0).name(), manifest.name());
  }

  // Run 1 went on to step 6; run 2 restarts from step 3 and takes the same steps.
  const std::vector<float> after_six = Weights();
  ASSERT_TRUE(client_->DeleteJob("ckpt").ok());
  for (int ps = 0; ps < kNumPs; ++ps) {
    grpc::ClientContext context;
    RestoreJobRequest request;
    *request.mutable_spec() = Spec("run-2");
    request.set_checkpoint(manifest.name());
    request.set_num_ps(kNumPs);
    request.set_ps_index(ps);
    RestoreJobResponse response;
    grpc::Status status = stubs_[ps]->RestoreJob(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  Start("run-2");  // CreateJob finds the restored job: the same spec.
  Steps(3, 6);
  EXPECT_EQ(Weights(), after_six);
}

// A full disk (the write fails) and a lost sync (fsync fails: EIO) alike.
void PsServiceCheckpointTest::ExpectAbandonedAndTrainingGoesOn(const std::string& reason) {
  Start("run-1");
  ASSERT_TRUE(Arm("run-1", 1, 2).ok());
  Steps(0, 4);
  std::vector<ShardCheckpoint> reports = Reports(1);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].error(), "");
  EXPECT_THAT(reports[1].error(), HasSubstr("could not write checkpoint"));
  EXPECT_THAT(reports[1].error(), HasSubstr(reason));
  EXPECT_THAT(reports[1].error(), HasSubstr("training goes on"));
  absl::StatusOr<std::vector<JobStats>> stats = client_->GetJobStats("ckpt");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[1].failed_checkpoints(), 1);
  EXPECT_EQ((*stats)[1].step(), 4);  // Training went on.
  EXPECT_TRUE(std::filesystem::exists(root_ + "/ckpt/run-1-000001/shard-0-of-2.ckpt"));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/ckpt/run-1-000001/shard-1-of-2.ckpt"));
  for (const auto& entry :
       std::filesystem::directory_iterator(root_ + "/ckpt/run-1-000001")) {  // No temporary.
    EXPECT_NE(entry.path().filename().string().rfind("shard-1-of-2.ckpt.tmp", 0), 0u)
        << entry.path();
  }
  // Shard 0 wrote checkpoint 1, shard 1 has none.
  EXPECT_THAT(Metrics(0),
              HasSubstr(absl::StrCat("ps_job_last_checkpoint_seq{job_id=\"ckpt\",shard=\"0\"} 1\n",
                                     "# HELP ps_job_last_checkpoint_timestamp_seconds ")));
  EXPECT_THAT(Metrics(0),
              HasSubstr(absl::StrCat("ps_job_last_checkpoint_bytes{job_id=\"ckpt\",shard=\"0\"} ",
                                     reports[0].bytes(), "\n")));
  EXPECT_THAT(Metrics(1),
              HasSubstr("ps_job_failed_checkpoints_total{job_id=\"ckpt\",shard=\"1\"} 1\n"));
  EXPECT_THAT(Metrics(1), Not(HasSubstr("ps_job_last_checkpoint_seq{")));

  // The next one, once the disk is back, is written.
  fs_.ClearFaults();
  ASSERT_TRUE(Arm("run-1", 2, -1).ok());
  reports = Reports(2);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[1].error(), "");
  EXPECT_EQ(reports[1].clock(), 4);
  const std::string page = Metrics(1);
  EXPECT_THAT(page, HasSubstr("ps_job_last_checkpoint_seq{job_id=\"ckpt\",shard=\"1\"} 2\n"));
  EXPECT_THAT(page, HasSubstr(absl::StrCat(
                        "ps_job_last_checkpoint_timestamp_seconds{job_id=\"ckpt\",shard=\"1\"} ",
                        FormatMetricValue(reports[1].written_at_ms() / 1000.0), "\n")));
  EXPECT_THAT(page,
              HasSubstr(absl::StrCat("ps_job_last_checkpoint_bytes{job_id=\"ckpt\",shard=\"1\"} ",
                                     reports[1].bytes(), "\n")));
}

TEST_F(PsServiceCheckpointTest, AFullDiskAbandonsTheCheckpointSaysWhyAndTrainingGoesOn) {
  fs_.FailWrites("shard-1-of-2.ckpt");  // ENOSPC.
  ExpectAbandonedAndTrainingGoesOn("cannot write");
}

TEST_F(PsServiceCheckpointTest, AFailedSyncAbandonsTheCheckpointSaysWhyAndTrainingGoesOn) {
  fs_.FailSyncs("shard-1-of-2.ckpt");  // EIO from fsync.
  ExpectAbandonedAndTrainingGoesOn("cannot sync");
}

TEST_F(PsServiceCheckpointTest, AManifestThatCannotBeWrittenLeavesTheCheckpointIncomplete) {
  Start("run-1");
  ASSERT_TRUE(Arm("run-1", 1, -1).ok());
  const CheckpointManifest manifest = Manifest(Reports(1), "run-1");
  fs_.FailWrites("MANIFEST");
  grpc::ClientContext context;
  CommitCheckpointRequest request;
  *request.mutable_manifest() = manifest;
  CommitCheckpointResponse response;
  grpc::Status status = stubs_[0]->CommitCheckpoint(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  grpc::ClientContext list_context;
  ListCheckpointsRequest list;
  list.set_job_id("ckpt");
  ListCheckpointsResponse listed;
  ASSERT_TRUE(stubs_[0]->ListCheckpoints(&list_context, list, &listed).ok());
  EXPECT_EQ(listed.manifests_size(), 0);
}

TEST_F(PsServiceCheckpointTest, ARestoreOfADamagedOrForeignCheckpointChangesNothing) {
  Start("run-1");
  ASSERT_TRUE(Arm("run-1", 1, -1).ok());
  CheckpointManifest manifest = Manifest(Reports(1), "run-1");
  ASSERT_TRUE(Commit(1, manifest).ok());
  ASSERT_TRUE(client_->DeleteJob("ckpt").ok());
  // Shard 1's file changed on disk after its manifest was written.
  std::filesystem::resize_file(root_ + "/ckpt/" + manifest.shards(1).file(), 10);
  RestoreJobRequest request;
  *request.mutable_spec() = Spec("run-2");
  request.set_checkpoint(manifest.name());
  request.set_num_ps(kNumPs);
  request.set_ps_index(1);
  auto restore = [this, &request](int ps) {
    grpc::ClientContext context;
    RestoreJobResponse response;
    return stubs_[ps]->RestoreJob(&context, request, &response);
  };
  grpc::Status status = restore(1);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_THAT(status.error_message(), HasSubstr("not the file its manifest names"));
  EXPECT_EQ(client_->GetJobStats("ckpt").status().code(), absl::StatusCode::kNotFound);

  request.set_ps_index(0);  // Another ps's request.
  EXPECT_EQ(restore(1).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  // A checkpoint is named, never given: no manifest by that name, or a name that is a path.
  request.set_ps_index(1);
  request.set_checkpoint("run-1-000002");
  EXPECT_EQ(restore(1).error_code(), grpc::StatusCode::NOT_FOUND);
  for (const char* name : {"../ckpt/run-1-000001", "/etc", "..", ""}) {
    request.set_checkpoint(name);
    EXPECT_EQ(restore(1).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name;
  }
  EXPECT_EQ(client_->GetJobStats("ckpt").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PsServiceCheckpointTest, DeletingTheCheckpointsOfAJobWaitsUntilTheJobIsGone) {
  Start("run-1");
  ASSERT_TRUE(Arm("run-1", 1, -1).ok());
  const CheckpointManifest manifest = Manifest(Reports(1), "run-1");
  ASSERT_TRUE(Commit(0, manifest).ok());
  auto delete_checkpoints = [this](DeleteCheckpointsResponse* response) {
    grpc::ClientContext context;
    DeleteCheckpointsRequest request;
    request.set_job_id("ckpt");
    return stubs_[0]->DeleteCheckpoints(&context, request, response);
  };
  DeleteCheckpointsResponse response;
  EXPECT_EQ(delete_checkpoints(&response).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(std::filesystem::exists(root_ + "/ckpt/run-1-000001/MANIFEST"));
  ASSERT_TRUE(client_->DeleteJob("ckpt").ok());
  ASSERT_TRUE(delete_checkpoints(&response).ok());
  EXPECT_EQ(std::vector<std::string>(response.deleted().begin(), response.deleted().end()),
            std::vector<std::string>{"run-1-000001"});
  EXPECT_FALSE(std::filesystem::exists(root_ + "/ckpt"));
  response.Clear();
  ASSERT_TRUE(delete_checkpoints(&response).ok());  // None left: nothing to say.
  EXPECT_EQ(response.deleted_size(), 0);
}

// The attack of issue 30: a manifest whose name is not its run's checkpoint name ("~", a path)
// or that names another job or run made a ps write a MANIFEST outside the job's folder and prune
// every other entry of it; one of another shape than the cluster's (its number of ps, its shard
// files) would steer what a restore reads and allocates. Each is refused before anything is
// written or deleted.
TEST_F(PsServiceCheckpointTest, ACommitNamingAnotherPlaceJobOrRunChangesNoFile) {
  Start("run-1");
  ASSERT_TRUE(Arm("run-1", 1, -1).ok());
  const CheckpointManifest good = Manifest(Reports(1), "run-1");
  ASSERT_TRUE(Commit(0, good).ok());
  std::filesystem::create_directories(root_ + "/other/keep-me");
  struct Case {
    std::function<void(CheckpointManifest*)> edit;
    grpc::StatusCode code;
  };
  const Case cases[] = {
      {[](CheckpointManifest* m) { m->set_name("~"); }, grpc::StatusCode::INVALID_ARGUMENT},
      {[](CheckpointManifest* m) { m->set_name("../../x"); }, grpc::StatusCode::INVALID_ARGUMENT},
      {[](CheckpointManifest* m) { m->set_job_id("../other"); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {[](CheckpointManifest* m) { m->set_job_id("other"); }, grpc::StatusCode::NOT_FOUND},
      {[](CheckpointManifest* m) {
         m->set_run_id("run-0");
         m->set_name("run-0-000002");
       },
       grpc::StatusCode::FAILED_PRECONDITION},
      // A manifest of another shape than the cluster's: it would decide what a restore reads
      // and allocates.
      {[](CheckpointManifest* m) { m->set_num_ps(2000000000); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {[](CheckpointManifest* m) { *m->add_shards() = m->shards(0); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {[](CheckpointManifest* m) { m->mutable_shards()->SwapElements(0, 1); },
       grpc::StatusCode::INVALID_ARGUMENT},
  };
  for (const Case& c : cases) {
    CheckpointManifest manifest = good;
    manifest.set_seq(2);
    manifest.set_name("run-1-000002");
    c.edit(&manifest);
    CommitCheckpointRequest request;
    *request.mutable_manifest() = manifest;
    request.set_keep(1);
    grpc::ClientContext context;
    CommitCheckpointResponse response;
    EXPECT_EQ(stubs_[0]->CommitCheckpoint(&context, request, &response).error_code(), c.code)
        << manifest.ShortDebugString();
  }
  EXPECT_TRUE(std::filesystem::exists(root_ + "/ckpt/run-1-000001/MANIFEST"));
  EXPECT_TRUE(std::filesystem::exists(root_ + "/other/keep-me"));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/x"));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/ckpt/~"));
  std::vector<std::string> entries;
  for (const auto& entry : std::filesystem::directory_iterator(root_ + "/ckpt")) {
    entries.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(entries, std::vector<std::string>{"run-1-000001"});
}

}  // namespace
}  // namespace ps
