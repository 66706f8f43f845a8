// End to end across processes: 2 ps_server and 2 ps_worker daemons train softmax regression
// on a Gaussian mixture to at least 95% test accuracy, in sync (also with a backup worker) and
// in async mode.
#include <signal.h>

#include <cstdlib>
#include <fstream>

#include <glog/logging.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/cluster/cluster_spec.h"
#include "common/net/grpc_deadline.h"
#include "common/process/subprocess.h"
#include "proto/worker_service.grpc.pb.h"

namespace ps {
namespace {

// A file of the running test's own (port files must not be left over from an earlier test).
std::string TempPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                      ::testing::UnitTest::GetInstance()->current_test_info()->name(), "_", name);
}

class TrainEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> addresses;
    absl::StatusOr<std::vector<int>> ports = PickUnusedPorts(4);
    ASSERT_TRUE(ports.ok()) << ports.status();
    for (int port : *ports) addresses.push_back(absl::StrCat("127.0.0.1:", port));
    std::string json = absl::StrCat(R"({"ps": [")", addresses[0], R"(", ")", addresses[1],
                                    R"("], "worker": [")", addresses[2], R"(", ")",
                                    addresses[3], R"("]})");
    absl::StatusOr<ClusterSpec> cluster = ClusterSpec::Parse(json, "generated");
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->ToProto();
    std::string spec_path = TempPath("cluster.json");
    std::ofstream(spec_path) << json;

    const std::pair<const char*, const char*> kTasks[] = {
        {"server/ps_server", "ps:0"}, {"server/ps_server", "ps:1"},
        {"worker/ps_worker", "worker:0"}, {"worker/ps_worker", "worker:1"}};
    for (const auto& [binary, task] : kTasks) {
      std::string name = std::string(task).replace(std::string(task).find(':'), 1, "_");
      std::string port_file = TempPath(name + ".port");
      std::vector<std::string> argv = {binary, "--cluster_spec=" + spec_path,
                                       std::string("--task=") + task,
                                       "--port_file=" + port_file};
      if (std::string(binary) == "worker/ps_worker") argv.push_back("--device=cpu");
      absl::StatusOr<Subprocess> process = Subprocess::Start(argv, TempPath(name + ".log"));
      ASSERT_TRUE(process.ok()) << process.status();
      daemons_.push_back(*std::move(process));
      absl::StatusOr<int> port = WaitForPortFile(port_file, absl::Seconds(30));
      ASSERT_TRUE(port.ok()) << port.status() << daemons_.back().Output();
    }
    for (int w = 0; w < 2; ++w) {
      workers_.push_back(Worker::NewStub(
          grpc::CreateChannel(addresses[2 + w], grpc::InsecureChannelCredentials())));
    }
  }

  void TearDown() override {
    if (HasFailure()) {
      for (const Subprocess& daemon : daemons_) LOG(ERROR) << "daemon log:\n" << daemon.Output();
    }
    for (Subprocess& daemon : daemons_) daemon.Signal(SIGTERM);
    for (Subprocess& daemon : daemons_) {
      std::optional<int> code = daemon.Wait(absl::Seconds(20));
      EXPECT_EQ(code, std::optional<int>(0)) << daemon.Output();
    }
  }

  JobSpec SoftmaxJob(const std::string& id, ConsistencyConfig::Mode mode) {
    JobSpec spec;
    spec.set_job_id(id);
    spec.mutable_model()->set_kind(ModelSpec::SOFTMAX_REGRESSION);
    SyntheticData* data = spec.mutable_data()->mutable_synthetic();
    data->set_kind(SyntheticData::GAUSSIAN_MIXTURE);
    data->set_num_examples(4000);
    data->set_feature_dim(16);
    data->set_num_classes(4);
    spec.mutable_data()->set_test_fraction(0.2f);
    spec.mutable_learning_rate()->set_base(0.2f);
    spec.mutable_consistency()->set_mode(mode);
    spec.set_batch_size(32);
    spec.set_steps(150);
    spec.set_eval_interval(50);
    spec.set_seed(11);
    spec.set_min_slice_bytes(64);  // Shard the small model across both ps tasks.
    return spec;
  }

  // Starts `spec` on both workers and follows them to the end; returns each one's last update.
  std::vector<JobProgress> RunJob(const JobSpec& spec) {
    for (auto& worker : workers_) {
      grpc::ClientContext context;
      context.set_deadline(GrpcDeadline(absl::Seconds(30)));
      StartJobRequest request;
      *request.mutable_spec() = spec;
      *request.mutable_cluster() = cluster_;
      StartJobResponse response;
      grpc::Status status = worker->StartJob(&context, request, &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(response.device(), "cpu");
    }
    std::vector<JobProgress> last(workers_.size());
    for (size_t w = 0; w < workers_.size(); ++w) {
      grpc::ClientContext context;
      context.set_deadline(GrpcDeadline(absl::Seconds(240)));
      WatchJobRequest request;
      request.set_job_id(spec.job_id());
      auto reader = workers_[w]->WatchJob(&context, request);
      JobProgress progress;
      while (reader->Read(&progress)) last[w] = progress;
      grpc::Status status = reader->Finish();
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
    return last;
  }

  ClusterDef cluster_;
  std::vector<Subprocess> daemons_;
  std::vector<std::unique_ptr<Worker::Stub>> workers_;
};

TEST_F(TrainEndToEndTest, SyncSoftmaxReaches95PercentTestAccuracy) {
  std::vector<JobProgress> last = RunJob(SoftmaxJob("e2e-sync", ConsistencyConfig::SYNC));
  for (const JobProgress& progress : last) {
    EXPECT_EQ(progress.state(), JobProgress::DONE) << progress.error();
    EXPECT_EQ(progress.step(), 150);
    EXPECT_EQ(progress.staleness(), 0.0);  // Every sync gradient is for the current step.
  }
  EXPECT_GE(last[0].eval().accuracy(), 0.95) << last[0].DebugString();
  EXPECT_EQ(last[0].global_step(), 149);  // The step of the last pull; 150 steps applied.
}

// A backup worker (R = 1 of 2) and a straggler: the job ends at the shards' step 150, with the
// straggler's own steps behind (waiting for its own count would wait at a barrier for ever).
TEST_F(TrainEndToEndTest, SyncWithABackupWorkerStopsAtTheShardsStep) {
  JobSpec spec = SoftmaxJob("e2e-backup", ConsistencyConfig::SYNC);
  spec.mutable_consistency()->set_replicas_to_aggregate(1);
  // A delay that dominates a step: a factor on this tiny model's compute time (microseconds)
  // left the straggler as fast as the other worker in some runs.
  spec.mutable_stragglers()->set_distribution(StragglerSpec::UNIFORM);
  spec.mutable_stragglers()->add_workers(1);
  spec.mutable_stragglers()->set_mean_delay_ms(10);
  std::vector<JobProgress> last = RunJob(spec);
  for (const JobProgress& progress : last) {
    EXPECT_EQ(progress.state(), JobProgress::DONE) << progress.error();
    // The step of its last pull: 149 when its own 150th step ended the job, 150 when the
    // shards had reached the limit by the time it pulled (which of the two is a race).
    EXPECT_GE(progress.global_step(), 149);
    EXPECT_LE(progress.global_step(), 150);
  }
  EXPECT_LE(last[0].step(), 150);
  EXPECT_LT(last[1].step(), last[0].step());
  EXPECT_EQ(last[0].eval().step(), 150);
  EXPECT_GE(last[0].eval().accuracy(), 0.95) << last[0].DebugString();
}

// Workers that stop on a time limit stop at different steps, each on its own clock: the one
// still running must not wait at the barrier for the one that has left the job (it used to,
// and failed when the wait timed out).
TEST_F(TrainEndToEndTest, SyncWorkersStoppingOnATimeLimitDoNotWaitForEachOther) {
  JobSpec spec = SoftmaxJob("e2e-sync-time-limit", ConsistencyConfig::SYNC);
  spec.set_steps(0);
  spec.set_time_limit_s(1.0f);
  spec.set_eval_interval(0);
  std::vector<JobProgress> last = RunJob(spec);
  for (const JobProgress& progress : last) {
    EXPECT_EQ(progress.state(), JobProgress::DONE) << progress.error();
    EXPECT_GT(progress.step(), 0);
    EXPECT_EQ(progress.note(), "stopped before its steps: the job's time_limit_s, 1 s, ran out");
  }
}

TEST_F(TrainEndToEndTest, AsyncSoftmaxReaches95PercentTestAccuracy) {
  std::vector<JobProgress> last = RunJob(SoftmaxJob("e2e-async", ConsistencyConfig::ASYNC));
  for (const JobProgress& progress : last) {
    EXPECT_EQ(progress.state(), JobProgress::DONE) << progress.error();
    EXPECT_EQ(progress.step(), 150);
  }
  EXPECT_GE(last[0].eval().accuracy(), 0.95) << last[0].DebugString();
}

TEST_F(TrainEndToEndTest, AJobWithADeadPsFailsWithTheReason) {
  daemons_[1].Signal(SIGKILL);  // ps:1 is gone.
  ASSERT_TRUE(daemons_[1].Wait(absl::Seconds(10)).has_value());
  JobSpec spec = SoftmaxJob("e2e-dead-ps", ConsistencyConfig::ASYNC);
  std::vector<JobProgress> last = RunJob(spec);
  for (const JobProgress& progress : last) {
    EXPECT_EQ(progress.state(), JobProgress::FAILED);
    EXPECT_EQ(progress.error_code(), static_cast<int>(grpc::StatusCode::UNAVAILABLE));
    EXPECT_NE(progress.error().find("ps:1"), std::string::npos) << progress.error();
  }
  daemons_.erase(daemons_.begin() + 1);  // Nothing to stop.
}

}  // namespace
}  // namespace ps
