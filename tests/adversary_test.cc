// The adversary test of issue 30: real daemons with real mutual TLS (one `psctl certs`
// directory, given with --certs), a job of user psctl running, and four kinds of stranger
// calling every RPC of every service against it:
//  - a client with no credentials, and one whose certificate another CA signed: refused at the
//    handshake (UNAVAILABLE) on every task;
//  - user bob, with his own certificate of the cluster's CA: every call about the job is
//    PERMISSION_DENIED (or, where the job's id is taken, ALREADY_EXISTS or FAILED_PRECONDITION),
//    and lists do not show it;
//  - task worker:0, with its own certificate, posing as worker:1 or managing the job, and task
//    ps:1 posing as either worker or managing it, and anyone but worker 0's host giving a job
//    its chief's starting values: PERMISSION_DENIED;
//  - path-like fields (job ids, checkpoint names, manifests, data files) that leave their
//    folder: INVALID_ARGUMENT, before anything is read or written.
// Nothing changes: the job ends DONE with the weights of the same job on an undisturbed local
// cluster, and no file appears outside the ps's checkpoint folders. Skips without openssl.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/support/channel_arguments.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "absl/time/clock.h"
#include "common/cluster/cluster_spec.h"
#include "common/security/auth_token.h"
#include "common/process/subprocess.h"
#include "common/security/transport_security.h"
#include "proto/ps_service.grpc.pb.h"
#include "proto/ring.grpc.pb.h"
#include "proto/task.grpc.pb.h"
#include "proto/worker_service.grpc.pb.h"
#include "tests/psctl_testing.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// The code of a unary call, with a deadline.
template <typename Stub, typename Request, typename Response>
grpc::StatusCode Call(Stub* stub,
                      grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                      const Request& request) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  Response response;
  return (stub->*method)(&context, request, &response).error_code();
}

// The code a Replicate stream that sends `input` first ends with (OK: the ps acknowledged it).
grpc::StatusCode Replicate(ParameterServer::Stub* stub, const ReplicaInput& input) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::unique_ptr<grpc::ClientReaderWriter<ReplicaInput, ReplicaAck>> stream =
      stub->Replicate(&context);
  ReplicaAck ack;
  if (stream->Write(input) && stream->Read(&ack)) {
    if (ack.code() != 0) return static_cast<grpc::StatusCode>(ack.code());
    context.TryCancel();
    stream->Finish();
    return grpc::StatusCode::OK;
  }
  return stream->Finish().error_code();
}

class AdversaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/bin/openssl", X_OK) != 0) {
      GTEST_SKIP() << "no /usr/bin/openssl (tools/setup.sh installs it)";
    }
    dir_ = TestDir();
    absl::StatusOr<std::vector<int>> ports = PickUnusedPorts(4);
    ASSERT_TRUE(ports.ok()) << ports.status();
    for (int port : *ports) addresses_.push_back(absl::StrCat("127.0.0.1:", port));
    spec_ = dir_ + "/cluster.json";
    std::ofstream(spec_) << absl::Substitute(
        R"({"cluster": {"ps": ["$0", "$1"], "worker": ["$2", "$3"]}})", addresses_[0],
        addresses_[1], addresses_[2], addresses_[3]);
    certs_ = dir_ + "/certs";
    Psctl certs({"certs", "--cluster_spec=" + spec_, "--out=" + certs_, "--users=bob"}, dir_);
    ASSERT_EQ(certs.Wait(), 0) << certs.Output();
    Psctl other({"certs", "--cluster_spec=" + spec_, "--out=" + dir_ + "/other"}, dir_);
    ASSERT_EQ(other.Wait(), 0) << other.Output();
  }

  void TearDown() override {
    for (Subprocess& daemon : daemons_) daemon.Signal(SIGTERM);
    for (Subprocess& daemon : daemons_) EXPECT_TRUE(daemon.Wait(absl::Seconds(20)).has_value());
    daemons_.clear();
    if (!dir_.empty()) {
      EXPECT_THAT(ProcessesMentioning(dir_), ::testing::IsEmpty());
    }
  }

  void StartCluster() {
    for (const char* task : {"ps:0", "ps:1", "worker:0", "worker:1"}) {
      const bool ps = task[0] == 'p';
      const std::string name = std::string(task).replace(std::string(task).find(':'), 1, "-");
      std::vector<std::string> argv = {ps ? kPsServer : kPsWorker, "--cluster_spec=" + spec_,
                                       std::string("--task=") + task, "--certs=" + certs_,
                                       "--port_file=" + dir_ + "/" + name + ".port"};
      argv.push_back(ps ? "--checkpoint_dir=" + dir_ + "/ckpt-" + name : "--device=cpu");
      absl::StatusOr<Subprocess> process = Subprocess::Start(argv, dir_ + "/" + name + ".log");
      ASSERT_TRUE(process.ok()) << process.status();
      daemons_.push_back(*std::move(process));
      ASSERT_TRUE(WaitForPortFile(dir_ + "/" + name + ".port", absl::Seconds(30)).ok())
          << daemons_.back().Output();
    }
  }

  std::string Job(const std::string& id) const {
    return WriteJob(dir_, id, absl::Substitute(R"({"job_id": "$0",
        "model": {"kind": "SOFTMAX_REGRESSION"},
        "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 4000, "feature_dim": 16,
                               "num_classes": 4}},
        "learning_rate": {"base": 0.2}, "consistency": {"mode": "SYNC"}, "batch_size": 32,
        "steps": 3000, "seed": 7, "min_slice_bytes": 64, "replicas": 2,
        "checkpoint": {"every_steps": 500},
        "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 3}})",
                                                   id));
  }

  // A channel to `address` as identity `name` of the certificates in `dir` ("" for none),
  // presenting the cluster's token as a task would, or the users' as a user would (every user
  // of the cluster has it; the certificate says which user).
  std::shared_ptr<grpc::Channel> Channel(const std::string& address, const std::string& dir,
                                         const std::string& name) {
    TransportSecurity security;
    if (!dir.empty()) {
      security = {dir + "/" + name + ".crt", dir + "/" + name + ".key", certs_ + "/ca.crt"};
    }
    const bool task = name.rfind("worker-", 0) == 0 || name.rfind("ps-", 0) == 0;
    absl::StatusOr<AuthTokens> tokens =
        ReadAuthTokens(certs_ + "/" + kClusterTokenFile, certs_ + "/" + kAdminTokenFile);
    EXPECT_TRUE(tokens.ok()) << tokens.status();
    const std::string token = !tokens.ok() ? "" : task ? tokens->task : tokens->admin;
    return grpc::experimental::CreateCustomChannelWithInterceptors(
        address, ChannelCredentialsFor(security), grpc::ChannelArguments(),
        BearerTokenInterceptors(token));
  }

  // A GrowJob of alice's job (run `run_id`) to the cluster's workers and one at `address`.
  GrowJobRequest GrownBy(const std::string& run_id, const std::string& address) const {
    GrowJobRequest grow;
    grow.set_job_id("alices");
    grow.set_run_id(run_id);
    ClusterJob* ps = grow.mutable_cluster()->add_jobs();
    ps->set_name("ps");
    ps->add_tasks(addresses_[0]);
    ps->add_tasks(addresses_[1]);
    ClusterJob* workers = grow.mutable_cluster()->add_jobs();
    workers->set_name("worker");
    workers->add_tasks(addresses_[2]);
    workers->add_tasks(addresses_[3]);
    workers->add_tasks(address);
    return grow;
  }

  std::string dir_, spec_, certs_;
  std::vector<std::string> addresses_;
  std::vector<Subprocess> daemons_;
};

TEST_F(AdversaryTest, StrangersUsersAndTasksCallingEveryRpcChangeNothing) {
  // The reference: the same job undisturbed on a local cluster of as many tasks.
  Psctl plain({"local", "--job=" + Job("plain"), "--results=" + dir_ + "/plain", "--ps=2",
               "--workers=2", "--device=cpu"},
              dir_);
  ASSERT_EQ(plain.Wait(), 0) << plain.Output();

  StartCluster();
  // A job of hers without replicas whose shard 0 moved to ps:1 (psctl move-shard): ps:1 holds
  // its copy, ps:0 its record of the move; bob is listed neither (below).
  nlohmann::json unreplicated = ReadJson(Job("alices-moved"));
  unreplicated["replicas"] = 0;
  unreplicated["steps"] = 200;
  unreplicated.erase("stragglers");
  Psctl moved_job({"submit", "--cluster_spec=" + spec_,
                   "--job=" + WriteJob(dir_, "alices-moved", unreplicated.dump()),
                   "--results=" + dir_ + "/alices-moved", "--certs=" + certs_},
                  dir_);
  ASSERT_EQ(moved_job.Wait(absl::Minutes(2)), 0) << moved_job.Output();
  Psctl moved({"move-shard", "--cluster_spec=" + spec_, "--job=alices-moved", "--task=ps:0",
               "--to=ps:1", "--certs=" + certs_},
              dir_);
  ASSERT_EQ(moved.Wait(absl::Minutes(1)), 0) << moved.Output();
  {  // Its owner sees both.
    grpc::ClientContext context;
    ListJobsResponse at_home, there;
    ASSERT_TRUE(ParameterServer::NewStub(Channel(addresses_[0], certs_, "psctl"))
                    ->ListJobs(&context, ListJobsRequest(), &at_home)
                    .ok());
    EXPECT_EQ(at_home.moved_size(), 1) << at_home.DebugString();
    grpc::ClientContext again;
    ASSERT_TRUE(ParameterServer::NewStub(Channel(addresses_[1], certs_, "psctl"))
                    ->ListJobs(&again, ListJobsRequest(), &there)
                    .ok());
    EXPECT_EQ(there.copies_size(), 1) << there.DebugString();
  }
  Psctl job({"submit", "--cluster_spec=" + spec_, "--job=" + Job("alices"),
             "--results=" + dir_ + "/alices", "--certs=" + certs_},
            dir_);
  // Running: its first progress rows written (job.json is written before them).
  ASSERT_TRUE(WaitForLines(dir_ + "/alices/metrics.csv", 2, absl::Seconds(30))) << job.Output();
  const nlohmann::json written = ReadJson(dir_ + "/alices/job.json");
  ASSERT_TRUE(written.is_object()) << ReadFile(dir_ + "/alices/job.json") << job.Output();
  const std::string run_id = written["spec"].value("run_id", "");
  ASSERT_FALSE(run_id.empty()) << written.dump();

  // Strangers: no certificate, or another CA's. Refused at the handshake, every task.
  for (const auto& [dir, name] : {std::pair<std::string, std::string>("", ""),
                                  std::pair<std::string, std::string>(dir_ + "/other", "psctl")}) {
    for (const std::string& address : addresses_) {
      std::unique_ptr<Task::Stub> task = Task::NewStub(Channel(address, dir, name));
      EXPECT_EQ(Call(task.get(), &Task::Stub::GetTaskInfo, TaskInfoRequest()),
                grpc::StatusCode::UNAVAILABLE)
          << (name.empty() ? "no certificate" : "another CA's") << " at " << address;
    }
  }

  // Bob, a user of the cluster, on every ps and worker RPC about alice's job.
  constexpr grpc::StatusCode kDenied = grpc::StatusCode::PERMISSION_DENIED;
  for (int ps = 0; ps < 2; ++ps) {
    std::unique_ptr<ParameterServer::Stub> bob =
        ParameterServer::NewStub(Channel(addresses_[ps], certs_, "bob"));
    PullRequest pull;
    pull.set_job_id("alices");
    pull.set_run_id(run_id);
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::Pull, pull), kDenied);
    PushRequest push;
    push.mutable_header()->set_job_id("alices");
    push.mutable_header()->set_run_id(run_id);
    push.mutable_header()->set_worker(1);
    push.mutable_header()->set_incarnation(7);
    push.mutable_header()->set_push_id(1);
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::Push, push), kDenied);
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::PushPull, push), kDenied);
    JobStatsRequest stats;
    stats.set_job_id("alices");
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::GetJobStats, stats), kDenied);
    ApplyLogRequest log;
    log.set_job_id("alices");
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::GetApplyLog, log), kDenied);
    TraceRequest trace;  // When her shards did what, and at what staleness.
    trace.set_job_id("alices");
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::GetTrace, trace), kDenied);
    trace.set_shard(1 - ps);  // The copy of the other shard held here.
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::GetTrace, trace), kDenied);
    LeaveJobRequest leave;
    leave.set_job_id("alices");
    leave.set_run_id(run_id);
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::LeaveJob, leave), kDenied);
    NextBatchesRequest batches;  // Alice's data, handed out to Bob.
    batches.set_job_id("alices");
    batches.set_run_id(run_id);
    batches.set_count(4);
    batches.set_request_id(1);
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::NextBatches, batches), kDenied);
    OpenSharedMemoryRequest open;  // A segment of her shard, which her worker would write.
    open.set_job_id("alices");
    open.set_run_id(run_id);
    open.set_worker(0);
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::OpenSharedMemory, open), kDenied);
    DeleteJobRequest remove;
    remove.set_job_id("alices");
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::DeleteJob, remove), kDenied);
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::GrowJob, GrownBy(run_id, "127.0.0.1:1")),
              kDenied);  // Her job, grown by a worker of his.
    MoveShardRequest move;  // Her shard, moved to the other ps.
    move.set_job_id("alices");
    move.set_shard(ps);
    move.set_to_ps(1 - ps);
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::MoveShard, move), kDenied);
    ArmCheckpointRequest arm;
    arm.set_job_id("alices");
    arm.set_run_id(run_id);
    arm.set_seq(99);
    arm.set_at_clock(-1);
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::ArmCheckpoint, arm), kDenied);
    CommitCheckpointRequest commit;
    commit.mutable_manifest()->set_job_id("alices");
    commit.mutable_manifest()->set_run_id(run_id);
    commit.mutable_manifest()->set_seq(99);
    commit.mutable_manifest()->set_name(absl::StrCat(run_id, "-000099"));
    commit.set_keep(1);
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::CommitCheckpoint, commit), kDenied);
    DeleteCheckpointsRequest prune;
    prune.set_job_id("alices");
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::DeleteCheckpoints, prune),
              grpc::StatusCode::FAILED_PRECONDITION);  // The job is on the ps: nothing goes.
    RestoreJobRequest restore;
    restore.mutable_spec()->set_job_id("alices");
    restore.set_checkpoint(absl::StrCat(run_id, "-000001"));
    restore.set_num_ps(2);
    restore.set_ps_index(ps);
    EXPECT_NE(Call(bob.get(), &ParameterServer::Stub::RestoreJob, restore), grpc::StatusCode::OK);
    CreateJobRequest create;
    create.mutable_spec()->set_job_id("alices");
    create.set_num_ps(2);
    create.set_ps_index(ps);
    EXPECT_NE(Call(bob.get(), &ParameterServer::Stub::CreateJob, create), grpc::StatusCode::OK);
    // Nor as the job grown by a worker on bob's host: a spec's membership is no way in.
    create.mutable_spec()->set_num_workers(1);
    create.mutable_spec()->add_worker_addresses("127.0.0.1:1");
    create.mutable_spec()->set_workers_before_growth(1);
    EXPECT_NE(Call(bob.get(), &ParameterServer::Stub::CreateJob, create), grpc::StatusCode::OK);
    grpc::ClientContext context;
    ListJobsResponse jobs;
    ASSERT_TRUE(bob->ListJobs(&context, ListJobsRequest(), &jobs).ok());
    EXPECT_EQ(jobs.job_ids_size(), 0) << "bob sees alice's job";
    EXPECT_EQ(jobs.copies_size(), 0) << "bob sees the copy of alice's shard held here";
    EXPECT_EQ(jobs.moved_size(), 0) << "bob sees where alice's shard moved";
    // The copy of the other ps's shard held here: bob's call neither reads it nor takes the
    // shard over (which a worker's call does once the shard's own ps is gone).
    const int backed_up = 1 - ps;
    pull.set_shard(backed_up);
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::Pull, pull), kDenied);
    // Nor as a moved shard's caller (unreplicated): her own shard here is denied him, and no
    // copy of the other is one moved here.
    pull.set_unreplicated(true);
    EXPECT_NE(Call(bob.get(), &ParameterServer::Stub::Pull, pull), grpc::StatusCode::OK);
    pull.set_shard(ps);
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::Pull, pull), kDenied);
    pull.clear_unreplicated();
    pull.clear_shard();
    push.mutable_header()->set_shard(backed_up);
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::PushPull, push), kDenied);
    push.mutable_header()->clear_shard();
    // Nor does bob replace that copy with a state of his own (nor send any replica input: a
    // Replicate stream is for the cluster's tasks).
    ReplicaInput install;
    install.mutable_install()->set_job_id("alices");
    install.mutable_install()->set_num_ps(2);
    install.mutable_install()->set_shard(backed_up);
    EXPECT_EQ(Replicate(bob.get(), install), kDenied);
    install.mutable_install()->set_moving_from(backed_up);  // Nor as a shard moving here.
    EXPECT_EQ(Replicate(bob.get(), install), kDenied);
    ListCheckpointsRequest list;
    list.set_job_id("alices");
    grpc::ClientContext list_context;
    ListCheckpointsResponse listed;
    ASSERT_TRUE(bob->ListCheckpoints(&list_context, list, &listed).ok());
    EXPECT_EQ(listed.manifests_size(), 0) << "bob sees alice's checkpoints";

    // Path-like fields that leave their folder, by the job's owner even: refused as such.
    std::unique_ptr<ParameterServer::Stub> owner =
        ParameterServer::NewStub(Channel(addresses_[ps], certs_, "psctl"));
    for (const char* name : {"~", "../../x", "../alices/x", "/tmp/x"}) {
      commit.mutable_manifest()->set_name(name);
      EXPECT_EQ(Call(owner.get(), &ParameterServer::Stub::CommitCheckpoint, commit),
                grpc::StatusCode::INVALID_ARGUMENT)
          << name;
      restore.set_checkpoint(name);
      EXPECT_NE(Call(owner.get(), &ParameterServer::Stub::RestoreJob, restore),
                grpc::StatusCode::OK)
          << name;
    }
    for (const char* id : {"..", "../x", "a/b", ".hidden"}) {
      list.set_job_id(id);
      EXPECT_EQ(Call(owner.get(), &ParameterServer::Stub::ListCheckpoints, list),
                grpc::StatusCode::INVALID_ARGUMENT)
          << id;
    }
  }
  for (int w = 0; w < 2; ++w) {
    std::unique_ptr<Worker::Stub> bob = Worker::NewStub(Channel(addresses_[2 + w], certs_, "bob"));
    StopJobRequest stop;
    stop.set_job_id("alices");
    EXPECT_EQ(Call(bob.get(), &Worker::Stub::StopJob, stop), kDenied);
    // Nor may he take one of her workers out of her job, or ask one back in.
    stop.set_leave(true);
    stop.set_others_running(1);
    EXPECT_EQ(Call(bob.get(), &Worker::Stub::StopJob, stop), kDenied);
    RejoinJobRequest rejoin;
    rejoin.set_job_id("alices");
    EXPECT_EQ(Call(bob.get(), &Worker::Stub::RejoinJob, rejoin), kDenied);
    TraceRequest trace;
    trace.set_job_id("alices");
    EXPECT_EQ(Call(bob.get(), &Worker::Stub::GetTrace, trace), kDenied);
    grpc::ClientContext context;
    WatchJobRequest watch;
    watch.set_job_id("alices");
    std::unique_ptr<grpc::ClientReader<JobProgress>> reader = bob->WatchJob(&context, watch);
    JobProgress progress;
    EXPECT_FALSE(reader->Read(&progress));
    EXPECT_EQ(reader->Finish().error_code(), kDenied);
    grpc::ClientContext status_context;
    WorkerStatus status;
    ASSERT_TRUE(bob->GetStatus(&status_context, WorkerStatusRequest(), &status).ok());
    EXPECT_EQ(status.jobs_size(), 0) << "bob sees alice's job";
    StartJobRequest start;
    start.mutable_spec()->set_job_id("mine");
    start.mutable_spec()->mutable_data()->set_libsvm("/etc/passwd");  // Outside any data root.
    EXPECT_NE(Call(bob.get(), &Worker::Stub::StartJob, start), grpc::StatusCode::OK);
    std::unique_ptr<Ring::Stub> ring = Ring::NewStub(Channel(addresses_[2 + w], certs_, "bob"));
    RingPiece piece;
    piece.mutable_header()->set_job_id("alices");
    piece.mutable_header()->set_run_id(run_id);
    EXPECT_EQ(Call(ring.get(), &Ring::Stub::Deliver, piece), kDenied);
  }

  // Task worker:0 with its own certificate: not as worker:1, and never managing the job.
  std::unique_ptr<ParameterServer::Stub> worker0 =
      ParameterServer::NewStub(Channel(addresses_[0], certs_, "worker-0"));
  PullRequest as_other;
  as_other.set_job_id("alices");
  as_other.set_run_id(run_id);
  as_other.set_worker(1);
  EXPECT_EQ(Call(worker0.get(), &ParameterServer::Stub::Pull, as_other), kDenied);
  LeaveJobRequest leave_other;
  leave_other.set_job_id("alices");
  leave_other.set_run_id(run_id);
  leave_other.set_worker(1);
  EXPECT_EQ(Call(worker0.get(), &ParameterServer::Stub::LeaveJob, leave_other), kDenied);
  NextBatchesRequest batches_of_other;  // Worker 1's batches, taken by worker:0.
  batches_of_other.set_job_id("alices");
  batches_of_other.set_run_id(run_id);
  batches_of_other.set_worker(1);
  batches_of_other.set_count(4);
  batches_of_other.set_request_id(1);
  EXPECT_EQ(Call(worker0.get(), &ParameterServer::Stub::NextBatches, batches_of_other), kDenied);
  OpenSharedMemoryRequest memory_of_other;  // Worker 1's segment, opened by worker:0.
  memory_of_other.set_job_id("alices");
  memory_of_other.set_run_id(run_id);
  memory_of_other.set_worker(1);
  EXPECT_EQ(Call(worker0.get(), &ParameterServer::Stub::OpenSharedMemory, memory_of_other),
            kDenied);
  DeleteJobRequest remove;
  remove.set_job_id("alices");
  EXPECT_EQ(Call(worker0.get(), &ParameterServer::Stub::DeleteJob, remove), kDenied);
  EXPECT_EQ(Call(worker0.get(), &ParameterServer::Stub::GrowJob, GrownBy(run_id, "127.0.0.1:1")),
            kDenied);  // A task never manages a job.
  MoveShardRequest move;
  move.set_job_id("alices");
  move.set_shard(0);
  move.set_to_ps(1);
  EXPECT_EQ(Call(worker0.get(), &ParameterServer::Stub::MoveShard, move), kDenied);
  std::unique_ptr<Worker::Stub> worker0_to_worker1 =
      Worker::NewStub(Channel(addresses_[3], certs_, "worker-0"));
  StopJobRequest stop;
  stop.set_job_id("alices");
  EXPECT_EQ(Call(worker0_to_worker1.get(), &Worker::Stub::StopJob, stop), kDenied);
  PushRequest push_as_other;
  push_as_other.mutable_header()->set_job_id("alices");
  push_as_other.mutable_header()->set_run_id(run_id);
  push_as_other.mutable_header()->set_worker(1);
  push_as_other.mutable_header()->set_incarnation(7);
  push_as_other.mutable_header()->set_push_id(1 << 30);
  EXPECT_EQ(Call(worker0.get(), &ParameterServer::Stub::Push, push_as_other), kDenied);
  EXPECT_EQ(Call(worker0.get(), &ParameterServer::Stub::PushPull, push_as_other), kDenied);

  // Task ps:1 with its own certificate, posing as a worker (either) or managing the job.
  std::unique_ptr<ParameterServer::Stub> ps1 =
      ParameterServer::NewStub(Channel(addresses_[0], certs_, "ps-1"));
  for (int worker = 0; worker < 2; ++worker) {
    push_as_other.mutable_header()->set_worker(worker);
    EXPECT_EQ(Call(ps1.get(), &ParameterServer::Stub::Push, push_as_other), kDenied) << worker;
    as_other.set_worker(worker);
    EXPECT_EQ(Call(ps1.get(), &ParameterServer::Stub::Pull, as_other), kDenied) << worker;
    memory_of_other.set_worker(worker);
    EXPECT_EQ(Call(ps1.get(), &ParameterServer::Stub::OpenSharedMemory, memory_of_other),
              kDenied)
        << worker;
  }
  EXPECT_EQ(Call(ps1.get(), &ParameterServer::Stub::DeleteJob, remove), kDenied);
  std::unique_ptr<Worker::Stub> ps1_to_worker0 =
      Worker::NewStub(Channel(addresses_[2], certs_, "ps-1"));
  EXPECT_EQ(Call(ps1_to_worker0.get(), &Worker::Stub::StopJob, stop), kDenied);
  // Task worker:0 as the primary of either shard, installing a copy of its own making on the
  // other ps (only that ps's certificate may).
  for (int ps = 0; ps < 2; ++ps) {
    ReplicaInput install;
    install.mutable_install()->set_job_id("alices");
    install.mutable_install()->set_num_ps(2);
    install.mutable_install()->set_shard(ps);
    EXPECT_EQ(Replicate(ParameterServer::NewStub(Channel(addresses_[1 - ps], certs_, "worker-0"))
                            .get(),
                        install),
              kDenied)
        << "shard " << ps;
  }
  // Worker 0's own call at the copy of a shard whose ps is alive takes nothing over.
  std::unique_ptr<ParameterServer::Stub> worker0_at_ps1 =
      ParameterServer::NewStub(Channel(addresses_[1], certs_, "worker-0"));
  PullRequest own_at_copy;
  own_at_copy.set_job_id("alices");
  own_at_copy.set_run_id(run_id);
  own_at_copy.set_worker(0);
  own_at_copy.set_shard(0);
  EXPECT_EQ(Call(worker0_at_ps1.get(), &ParameterServer::Stub::Pull, own_at_copy),
            grpc::StatusCode::UNAVAILABLE);

  // A job's starting values (ParameterSpec.chief_initializes) come from worker 0's host only:
  // task worker:1 may not give them. (A user may, for a job of their own: it is theirs, and a
  // chief whose job id they took finds a job of another owner, ALREADY_EXISTS.)
  CreateJobRequest chief_values;
  chief_values.mutable_spec()->set_job_id("poisoned");
  chief_values.mutable_spec()->set_chief_initializes(true);
  chief_values.set_from_chief(true);
  chief_values.set_num_ps(2);
  chief_values.set_ps_index(0);
  std::unique_ptr<ParameterServer::Stub> worker1 =
      ParameterServer::NewStub(Channel(addresses_[0], certs_, "worker-1"));
  EXPECT_EQ(Call(worker1.get(), &ParameterServer::Stub::CreateJob, chief_values), kDenied);

  // Bob may see what any member of the cluster sees of a task (no job is named there).
  for (const std::string& address : addresses_) {
    std::unique_ptr<Task::Stub> task = Task::NewStub(Channel(address, certs_, "bob"));
    EXPECT_EQ(Call(task.get(), &Task::Stub::GetTaskInfo, TaskInfoRequest()), grpc::StatusCode::OK)
        << address;
  }

  EXPECT_FALSE(job.Ended()) << "the job ended before the adversaries came: make it longer";
  ASSERT_EQ(job.Wait(absl::Seconds(120)), 0) << job.Output();
  EXPECT_EQ(ReadJson(dir_ + "/alices/summary.json")["state"], "DONE");
  // No shard moved: each ps served its own to the end (the callers above took none over).
  for (int ps = 0; ps < 2; ++ps) {
    EXPECT_THAT(ReadFile(absl::StrCat(dir_, "/ps-", ps, ".log")),
                ::testing::Not(HasSubstr("takes over shard")))
        << "ps:" << ps;
  }
  ExpectSameParameters(ResultParameters(dir_ + "/plain"), ResultParameters(dir_ + "/alices"),
                       1e-6);
  // A worker keeps alice's record of the finished run (a worker that left her job waits there
  // to be asked back): bob's start of a job of that id may not replace it.
  {
    StartJobRequest takeover;
    google::protobuf::util::JsonParseOptions lenient;
    lenient.ignore_unknown_fields = true;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(written["spec"].dump(),
                                                            takeover.mutable_spec(), lenient)
                    .ok())
        << written.dump();
    absl::StatusOr<ClusterSpec> cluster = ClusterSpec::Parse(ReadFile(spec_), spec_);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    *takeover.mutable_cluster() = cluster->ToProto();
    std::unique_ptr<Worker::Stub> bob = Worker::NewStub(Channel(addresses_[3], certs_, "bob"));
    EXPECT_EQ(Call(bob.get(), &Worker::Stub::StartJob, takeover),
              grpc::StatusCode::ALREADY_EXISTS);
    std::unique_ptr<Worker::Stub> owner = Worker::NewStub(Channel(addresses_[3], certs_, "psctl"));
    grpc::ClientContext context;
    WorkerStatus status;
    ASSERT_TRUE(owner->GetStatus(&context, WorkerStatusRequest(), &status).ok());
    ASSERT_EQ(status.jobs_size(), 2);  // alices-moved's too.
    for (const JobProgress& record : status.jobs()) {
      EXPECT_EQ(record.state(), JobProgress::DONE)
          << record.job_id() << ": alice's record was replaced";
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/x")) << "a manifest was written outside its job";

  // Once the job has left the shards, its checkpoints may be deleted by its owner only: bob's
  // DeleteCheckpoints is refused and every checkpoint folder stays.
  for (int ps = 0; ps < 2; ++ps) {
    std::unique_ptr<ParameterServer::Stub> owner =
        ParameterServer::NewStub(Channel(addresses_[ps], certs_, "psctl"));
    DeleteJobRequest leave_shards;
    leave_shards.set_job_id("alices");
    ASSERT_EQ(Call(owner.get(), &ParameterServer::Stub::DeleteJob, leave_shards),
              grpc::StatusCode::OK);
    const std::string job_dir = absl::StrCat(dir_, "/ckpt-ps-", ps, "/alices");
    ASSERT_TRUE(std::filesystem::exists(job_dir)) << job_dir;
    std::unique_ptr<ParameterServer::Stub> bob =
        ParameterServer::NewStub(Channel(addresses_[ps], certs_, "bob"));
    DeleteCheckpointsRequest prune;
    prune.set_job_id("alices");
    EXPECT_EQ(Call(bob.get(), &ParameterServer::Stub::DeleteCheckpoints, prune), kDenied);
    EXPECT_TRUE(std::filesystem::exists(job_dir)) << "bob deleted alice's checkpoints";
    EXPECT_EQ(Call(owner.get(), &ParameterServer::Stub::DeleteCheckpoints, prune),
              grpc::StatusCode::OK);
    EXPECT_FALSE(std::filesystem::exists(job_dir));
  }
}

}  // namespace
}  // namespace ps
