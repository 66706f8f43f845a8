// ps_server as a process: flags, TF_CONFIG, Slurm's environment, refusals, and a clean stop on
// SIGTERM while a pull waits at a barrier.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/client/ps_client.h"
#include "common/process/subprocess.h"
#include "common/client/worker_session.h"

namespace ps {
namespace {

constexpr char kServer[] = "server/ps_server";
// The ports in the spec are placeholders: the servers bind free ports (--port=0).
constexpr char kSpec[] =
    R"({"cluster": {"ps": ["127.0.0.1:1", "127.0.0.1:2"], "worker": ["127.0.0.1:3", "127.0.0.1:4"]}})";

std::string TempPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

std::string WriteSpec() {
  std::string path = TempPath("cluster.json");
  std::ofstream(path) << kSpec;
  return path;
}

Subprocess StartServer(const std::vector<std::string>& flags, const std::string& name,
                       const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {kServer};
  argv.insert(argv.end(), flags.begin(), flags.end());
  absl::StatusOr<Subprocess> process = Subprocess::Start(argv, TempPath(name + ".log"), env);
  EXPECT_TRUE(process.ok()) << process.status();
  return *std::move(process);
}

// --help starts with what the daemon is and its examples, then its own flags, not glog's.
TEST(PsServerProcessTest, HelpShowsItsOwnUsageAndFlags) {
  for (const char* binary : {kServer, "worker/ps_worker"}) {
    const std::string name = std::string(binary).substr(std::string(binary).find('/') + 1);
    absl::StatusOr<Subprocess> help =
        Subprocess::Start({binary, "--help"}, TempPath(name + "-help.log"));
    ASSERT_TRUE(help.ok()) << help.status();
    std::optional<int> code = help->Wait(absl::Seconds(20));
    ASSERT_TRUE(code.has_value());
    EXPECT_EQ(*code, 0);
    const std::string output = help->Output();
    EXPECT_EQ(output.rfind(name + ": ", 0), 0u) << output;
    EXPECT_NE(output.find("Examples:"), std::string::npos) << output;
    EXPECT_NE(output.find("  --cluster_spec="), std::string::npos) << output;
    EXPECT_NE(output.find("  --metrics_port=-1"), std::string::npos) << output;
    EXPECT_EQ(output.find("logtostderr"), std::string::npos) << output;
  }
}

TEST(PsServerProcessTest, RefusesATaskThatIsNotAPs) {
  Subprocess server =
      StartServer({"--cluster_spec=" + WriteSpec(), "--task=worker:0", "--port=0"}, "worker");
  std::optional<int> code = server.Wait(absl::Seconds(20));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2);
  EXPECT_NE(server.Output().find("not a ps task"), std::string::npos) << server.Output();
}

TEST(PsServerProcessTest, UnderSlurmTheRankChoosesTheTask) {
  // What srun gives the tasks of a step of 3 on one node, with --slurm_num_ps=2.
  auto slurm_env = [](int rank) {
    return std::vector<std::string>{"SLURM_STEP_NODELIST=localhost", "SLURM_STEP_TASKS_PER_NODE=3",
                                    absl::StrCat("SLURM_PROCID=", rank),
                                    absl::StrCat("SLURM_LOCALID=", rank)};
  };
  const std::vector<std::string> flags = {"--cluster_resolver=slurm", "--slurm_num_ps=2",
                                          "--slurm_base_port=7000"};
  Subprocess worker = StartServer(flags, "slurm_rank2", slurm_env(2));
  std::optional<int> code = worker.Wait(absl::Seconds(20));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2);
  EXPECT_NE(worker.Output().find("this task is worker:0 (Slurm rank 2 of 3 on localhost, local "
                                 "task 2; SLURM_STEP_NODELIST=localhost"),
            std::string::npos)
      << worker.Output();
  EXPECT_NE(worker.Output().find("start ps_worker for workers"), std::string::npos);

  std::vector<std::string> ps_flags = flags;
  ps_flags.insert(ps_flags.end(), {"--port=0", "--port_file=" + TempPath("slurm_rank1.port")});
  Subprocess ps = StartServer(ps_flags, "slurm_rank1", slurm_env(1));
  absl::StatusOr<int> port = WaitForPortFile(TempPath("slurm_rank1.port"), absl::Seconds(20));
  ASSERT_TRUE(port.ok()) << port.status() << ps.Output();
  EXPECT_NE(ps.Output().find("ps:1 (Slurm rank 1 of 3 on localhost, local task 1; "),
            std::string::npos)
      << ps.Output();
  EXPECT_NE(
      ps.Output().find(
          R"({"cluster":{"ps":["localhost:7000","localhost:7001"],"worker":["localhost:7002"]}})"),
      std::string::npos)
      << ps.Output();
}

TEST(PsServerProcessTest, BadClusterSpecNamesTheFile) {
  std::string path = TempPath("broken.json");
  std::ofstream(path) << R"({"cluster": {"ps": ["h1:1"], "worker": ["h1:1"]}})";
  Subprocess server = StartServer({"--cluster_spec=" + path, "--task=ps:0"}, "broken");
  std::optional<int> code = server.Wait(absl::Seconds(20));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2);
  EXPECT_NE(server.Output().find(path + ": duplicate address"), std::string::npos)
      << server.Output();

  Subprocess no_cluster = StartServer({"--task=ps:0"}, "no_cluster");
  code = no_cluster.Wait(absl::Seconds(20));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2);
  EXPECT_NE(no_cluster.Output().find("pass --cluster_spec=FILE"), std::string::npos);
}

TEST(PsServerProcessTest, APortInUseIsAClearError) {
  std::string spec = WriteSpec();
  std::string port_file = TempPath("first.port");
  Subprocess first = StartServer(
      {"--cluster_spec=" + spec, "--task=ps:0", "--port=0", "--port_file=" + port_file}, "first");
  absl::StatusOr<int> port = WaitForPortFile(port_file, absl::Seconds(20));
  ASSERT_TRUE(port.ok()) << port.status() << first.Output();

  Subprocess second = StartServer(
      {"--cluster_spec=" + spec, "--task=ps:1", absl::StrCat("--port=", *port)}, "second");
  std::optional<int> code = second.Wait(absl::Seconds(20));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
  // The ClusterSpec puts both on 127.0.0.1: they listen there only (ListenHost).
  EXPECT_NE(second.Output().find("cannot listen on 127.0.0.1:" + std::to_string(*port)),
            std::string::npos)
      << second.Output();
}

// Secure by default: plaintext only on loopback; anywhere else TLS, or --insecure said aloud.
TEST(PsServerProcessTest, PlaintextOffLoopbackIsRefusedWithoutInsecure) {
  std::string spec = WriteSpec();
  Subprocess refused = StartServer(
      {"--cluster_spec=" + spec, "--task=ps:0", "--port=0", "--bind_host=0.0.0.0"}, "refused");
  std::optional<int> code = refused.Wait(absl::Seconds(20));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
  EXPECT_NE(refused.Output().find("refusing to serve 0.0.0.0:0 without TLS"), std::string::npos)
      << refused.Output();
  EXPECT_NE(refused.Output().find("--insecure"), std::string::npos) << refused.Output();

  std::string port_file = TempPath("insecure.port");
  Subprocess insecure = StartServer({"--cluster_spec=" + spec, "--task=ps:0", "--port=0",
                                     "--bind_host=0.0.0.0", "--insecure",
                                     "--port_file=" + port_file},
                                    "insecure");
  absl::StatusOr<int> port = WaitForPortFile(port_file, absl::Seconds(20));
  ASSERT_TRUE(port.ok()) << port.status() << insecure.Output();
  EXPECT_NE(insecure.Output().find("WITHOUT TLS (--insecure)"), std::string::npos)
      << insecure.Output();
}

// Asks the server on `port` to list its services through gRPC server reflection; returns the
// call's status (UNIMPLEMENTED when the server does not serve reflection).
grpc::Status ListServicesByReflection(int port, std::string* answer) {
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue queue;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &queue);
  void* tag;
  bool ok;
  auto wait = [&] { return queue.Next(&tag, &ok) && ok; };
  call->StartCall(reinterpret_cast<void*>(1));
  wait();
  // ServerReflectionRequest{list_services: ""}: field 7, length-delimited, empty.
  const char request[] = {0x3a, 0x00};
  grpc::Slice slice(request, sizeof(request));
  call->Write(grpc::ByteBuffer(&slice, 1), reinterpret_cast<void*>(2));
  wait();
  call->WritesDone(reinterpret_cast<void*>(3));
  wait();
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(4));
  if (wait()) {
    std::vector<grpc::Slice> slices;
    (void)response.Dump(&slices);
    for (const grpc::Slice& part : slices) {
      answer->append(reinterpret_cast<const char*>(part.begin()), part.size());
    }
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  queue.Next(&tag, &ok);
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  return status;
}

// Reflection tells anyone who can reach the port every service and message: off unless asked.
TEST(PsServerProcessTest, ServesReflectionOnlyWhenAskedTo) {
  const std::string spec = WriteSpec();
  for (bool reflection : {false, true}) {
    const std::string port_file = TempPath(absl::StrCat("reflection-", reflection, ".port"));
    std::vector<std::string> flags = {"--cluster_spec=" + spec, "--task=ps:0", "--port=0",
                                      "--bind_host=127.0.0.1", "--port_file=" + port_file};
    if (reflection) flags.push_back("--reflection");
    Subprocess server = StartServer(flags, absl::StrCat("reflection-", reflection));
    absl::StatusOr<int> port = WaitForPortFile(port_file, absl::Seconds(20));
    ASSERT_TRUE(port.ok()) << port.status() << server.Output();
    std::string answer;
    grpc::Status status = ListServicesByReflection(*port, &answer);
    if (reflection) {
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_NE(answer.find("ps.ParameterServer"), std::string::npos) << answer;
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
    }
    server.Signal(SIGTERM);
    EXPECT_EQ(server.Wait(absl::Seconds(20)), std::optional<int>(0)) << server.Output();
  }
}

// --metrics_port=0 serves /metrics on a free port, written to --metrics_port_file.
TEST(PsServerProcessTest, ServesMetricsOnTheMetricsPort) {
  const std::string spec = WriteSpec();
  const std::string port_file = TempPath("metrics-grpc.port");
  const std::string metrics_port_file = TempPath("metrics.port");
  Subprocess server = StartServer(
      {"--cluster_spec=" + spec, "--task=ps:1", "--port=0", "--bind_host=127.0.0.1",
       "--port_file=" + port_file, "--metrics_port=0", "--metrics_port_file=" + metrics_port_file},
      "metrics");
  absl::StatusOr<int> metrics_port = WaitForPortFile(metrics_port_file, absl::Seconds(20));
  ASSERT_TRUE(metrics_port.ok()) << metrics_port.status() << server.Output();
  httplib::Client http("127.0.0.1", *metrics_port);
  httplib::Result page = http.Get("/metrics");
  ASSERT_TRUE(page) << httplib::to_string(page.error());
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("ps_jobs{shard=\"1\"} 0\n"), std::string::npos) << page->body;
  httplib::Result other = http.Get("/");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(absl::Seconds(20)), std::optional<int>(0)) << server.Output();
}

TEST(PsServerProcessTest, MetricsPortFileNeedsAMetricsPort) {
  Subprocess server = StartServer(
      {"--cluster_spec=" + WriteSpec(), "--task=ps:0", "--metrics_port_file=" + TempPath("m")},
      "metrics-port-file-alone");
  EXPECT_EQ(server.Wait(absl::Seconds(20)), std::optional<int>(2)) << server.Output();
  EXPECT_NE(server.Output().find("--metrics_port_file needs --metrics_port"), std::string::npos)
      << server.Output();
}

ParameterSpec SyncSpec() {
  ParameterSpec spec;
  spec.set_job_id("process-test");
  VariableDef* w = spec.add_variables();
  w->set_name("w");
  w->add_shape(64);
  w->add_shape(4);
  spec.mutable_learning_rate()->set_base(0.1f);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::SYNC);
  spec.set_num_workers(2);
  spec.set_min_slice_bytes(64);
  return spec;
}

TEST(PsServerProcessTest, ServesAndStopsCleanlyOnSigtermWhileAPullWaits) {
  std::string spec_path = WriteSpec();
  std::vector<Subprocess> servers;
  std::vector<std::string> addresses;
  for (int ps = 0; ps < 2; ++ps) {
    std::string port_file = TempPath(absl::StrCat("ps", ps, ".port"));
    std::vector<std::string> flags = {"--port=0", "--port_file=" + port_file};
    std::vector<std::string> env;
    if (ps == 0) {
      flags.push_back("--cluster_spec=" + spec_path);
      flags.push_back("--task=ps:0");
    } else {  // The TF_CONFIG form, task included.
      std::string tf_config = kSpec;
      tf_config.insert(tf_config.size() - 1, R"(, "task": {"type": "ps", "index": 1})");
      env.push_back("TF_CONFIG=" + tf_config);
    }
    servers.push_back(StartServer(flags, absl::StrCat("ps", ps), env));
    absl::StatusOr<int> port = WaitForPortFile(port_file, absl::Seconds(20));
    ASSERT_TRUE(port.ok()) << port.status() << servers.back().Output();
    addresses.push_back(absl::StrCat("127.0.0.1:", *port));
  }

  PsClientOptions options;
  options.ps_addresses = addresses;
  options.wait_timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ParameterSpec spec = SyncSpec();
  ASSERT_TRUE((*client)->CreateJob(spec).ok());
  absl::StatusOr<std::unique_ptr<WorkerSession>> session =
      WorkerSession::Create(client->get(), spec, 0);
  ASSERT_TRUE(session.ok()) << session.status();

  std::vector<float> weights(64 * 4), gradient(64 * 4, 1.0f);
  ASSERT_TRUE((*session)->Pull({}, {{"w", absl::MakeSpan(weights)}}).ok());
  ASSERT_TRUE((*session)->Push({}, {{"w", absl::MakeConstSpan(gradient)}}).ok());

  // Worker 1 never pushes, so the pull for step 1 waits at the barrier until the servers stop.
  absl::Notification pulled;
  absl::Status pull_status;
  std::thread puller([&] {
    WorkerSession::PullOptions pull;
    pull.step = 1;
    pull_status = (*session)->Pull(pull, {{"w", absl::MakeSpan(weights)}}).status();
    pulled.Notify();
  });
  EXPECT_FALSE(pulled.WaitForNotificationWithTimeout(absl::Milliseconds(500)));
  absl::Time stop = absl::Now();
  for (Subprocess& server : servers) server.Signal(SIGTERM);
  EXPECT_TRUE(pulled.WaitForNotificationWithTimeout(absl::Seconds(10)));
  puller.join();
  EXPECT_LT(absl::Now() - stop, absl::Seconds(10));
  EXPECT_EQ(pull_status.code(), absl::StatusCode::kUnavailable) << pull_status;
  for (Subprocess& server : servers) {
    std::optional<int> code = server.Wait(absl::Seconds(20));
    ASSERT_TRUE(code.has_value()) << "ps_server did not exit after SIGTERM";
    EXPECT_EQ(*code, 0) << server.Output();
    EXPECT_NE(server.Output().find("stopping"), std::string::npos);
  }
}

}  // namespace
}  // namespace ps

namespace ps {
namespace {

// --bulk_port: a pull of a large shard, from a client without shared memory (as from another
// host), takes its values on the bulk streams (one per connection: two frames), counted by
// ps_bulk_frames_total; with --bulk_port=-1 the ps opens none and the same pull takes the answer.
TEST(PsServerProcessTest, LargePullsComeOnTheBulkPortUnlessItIsOff) {
  const std::string spec_path = TempPath("one-ps.json");
  std::ofstream(spec_path) << R"({"cluster": {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}})";
  for (const std::string& bulk_port : {"0", "-1"}) {
    SCOPED_TRACE("--bulk_port=" + bulk_port);
    const std::string port_file = TempPath("bulk" + bulk_port + ".port");
    const std::string metrics_file = TempPath("bulk" + bulk_port + ".metrics");
    Subprocess server = StartServer(
        {"--cluster_spec=" + spec_path, "--task=ps:0", "--port=0", "--port_file=" + port_file,
         "--bulk_port=" + bulk_port, "--metrics_port=0", "--metrics_port_file=" + metrics_file},
        "bulk" + bulk_port);
    absl::StatusOr<int> port = WaitForPortFile(port_file, absl::Seconds(20));
    ASSERT_TRUE(port.ok()) << port.status() << server.Output();
    absl::StatusOr<int> metrics_port = WaitForPortFile(metrics_file, absl::Seconds(20));
    ASSERT_TRUE(metrics_port.ok()) << metrics_port.status() << server.Output();
    PsClientOptions options;
    options.ps_addresses = {absl::StrCat("127.0.0.1:", *port)};
    options.shared_memory = false;
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    ParameterSpec spec;
    spec.set_job_id("bulk");
    spec.set_num_workers(1);
    spec.mutable_learning_rate()->set_base(0.5f);
    spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
    VariableDef* w = spec.add_variables();
    w->set_name("w");
    w->add_shape(1024);
    w->add_shape(512);  // 2 MiB.
    ASSERT_TRUE((*client)->CreateJob(spec).ok());
    absl::StatusOr<std::unique_ptr<WorkerSession>> session =
        WorkerSession::Create(client->get(), spec, 0);
    ASSERT_TRUE(session.ok()) << session.status();
    std::vector<float> weights(1024 * 512, -1.0f), gradient(1024 * 512, 1.0f);
    ASSERT_TRUE((*session)->Push({}, {{"w", absl::MakeConstSpan(gradient)}}).ok());
    ASSERT_TRUE((*session)->Pull({}, {{"w", absl::MakeSpan(weights)}}).ok());
    EXPECT_EQ(std::count(weights.begin(), weights.end(), -0.5f), 1024 * 512);
    httplib::Client http("127.0.0.1", *metrics_port);
    httplib::Result page = http.Get("/metrics");
    ASSERT_TRUE(page) << httplib::to_string(page.error());
    if (bulk_port == "0") {
      EXPECT_NE(page->body.find("ps_bulk_frames_total{shard=\"0\"} 2\n"), std::string::npos)
          << page->body;
    } else {
      EXPECT_EQ(page->body.find("ps_bulk_"), std::string::npos) << page->body;
    }
    server.Signal(SIGTERM);
    EXPECT_EQ(server.Wait(absl::Seconds(20)), std::optional<int>(0)) << server.Output();
  }
}

}  // namespace
}  // namespace ps
