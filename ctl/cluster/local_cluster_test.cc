// LocalCluster with the real daemons (from the test's runfiles): the cluster file it writes,
// daemons that answer, nothing left running after Stop() or the destructor, and a failed start
// that names the binary and stops what it had started.
#include "ctl/cluster/local_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cluster/cluster_spec.h"
#include "common/client/ps_client.h"
#include "ctl/cluster/cluster_client.h"
#include "ctl/cluster/cluster_probe.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A directory of the running test's own.
std::string TestDir() {
  return absl::StrCat(::testing::TempDir(), "/",
                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
}

LocalClusterOptions SmallCluster() {
  LocalClusterOptions options;
  options.num_ps = 1;
  options.num_workers = 2;
  options.dir = TestDir();
  options.ps_server_path = "server/ps_server";
  options.ps_worker_path = "worker/ps_worker";
  options.device = "cpu";
  options.compute_threads = 1;
  return options;
}

// The processes whose command line names `spec_path` (the daemons of one cluster).
std::vector<int> DaemonsOf(const std::string& spec_path) {
  const std::string flag = "--cluster_spec=" + spec_path;
  std::vector<int> pids;
  for (const std::filesystem::directory_entry& entry :
       std::filesystem::directory_iterator("/proc")) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    std::ifstream file(entry.path() / "cmdline");
    std::stringstream text;
    text << file.rdbuf();
    for (absl::string_view arg : absl::StrSplit(text.str(), '\0')) {
      if (arg == flag) pids.push_back(pid);
    }
  }
  return pids;
}

// Whether something accepts TCP connections at "127.0.0.1:port".
bool Listens(const std::string& address) {
  int port = 0;
  std::vector<std::string> parts = absl::StrSplit(address, ':');
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port)) return false;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(port));
  peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool connected = connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) == 0;
  close(fd);
  return connected;
}

std::vector<std::string> AllAddresses(const ClusterSpec& cluster) {
  std::vector<std::string> addresses = cluster.Tasks(kPsJob);
  for (const std::string& worker : cluster.Tasks(kWorkerJob)) addresses.push_back(worker);
  return addresses;
}

void ExpectNothingLeft(const std::string& spec_path, const std::vector<std::string>& addresses) {
  EXPECT_THAT(DaemonsOf(spec_path), IsEmpty());
  for (const std::string& address : addresses) EXPECT_FALSE(Listens(address)) << address;
}

TEST(LocalClusterTest, StartsAnsweringDaemonsAndStopsThem) {
  absl::StatusOr<std::unique_ptr<LocalCluster>> local = LocalCluster::Start(SmallCluster());
  ASSERT_TRUE(local.ok()) << local.status();
  const std::string spec_path = (*local)->spec_path();
  EXPECT_EQ(spec_path, TestDir() + "/cluster.json");

  absl::StatusOr<ClusterSpec> written = ClusterSpec::FromFile(spec_path);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->NumTasks(kPsJob), 1);
  EXPECT_EQ(written->NumTasks(kWorkerJob), 2);
  EXPECT_EQ(written->ToJson(), (*local)->cluster().ToJson());
  const std::vector<std::string> addresses = AllAddresses(*written);
  std::set<std::string> ports;
  for (const std::string& address : addresses) {
    EXPECT_THAT(address, ::testing::StartsWith("127.0.0.1:"));
    ports.insert(address.substr(address.find(':') + 1));
  }
  EXPECT_EQ(ports.size(), 3u);
  EXPECT_EQ((*local)->metrics_port(kPsJob, 0), 0);  // No /metrics unless asked for.

  // Every task is up, healthy and of its role; the ps answers for a job it does not have.
  EXPECT_THAT(ProbeCluster(*written), IsEmpty());
  PsClientOptions client_options;
  client_options.ps_addresses = written->Tasks(kPsJob);
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(client_options);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::vector<JobStats>> stats = (*client)->GetJobStats("no-such-job");
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kNotFound) << stats.status();
  EXPECT_EQ(DaemonsOf(spec_path).size(), 3u);

  (*local)->Stop();
  ExpectNothingLeft(spec_path, addresses);
  (*local)->Stop();  // Idempotent.
}

TEST(LocalClusterTest, WithMetricsEveryDaemonServesThemOnAPortOfItsOwn) {
  LocalClusterOptions options = SmallCluster();
  options.metrics = true;
  absl::StatusOr<std::unique_ptr<LocalCluster>> local = LocalCluster::Start(options);
  ASSERT_TRUE(local.ok()) << local.status();
  absl::StatusOr<std::unique_ptr<ClusterClient>> client =
      ClusterClient::Create((*local)->cluster());
  ASSERT_TRUE(client.ok()) << client.status();
  std::set<int> ports;
  for (const auto& [job, count] : {std::make_pair(kPsJob, 1), std::make_pair(kWorkerJob, 2)}) {
    for (int i = 0; i < count; ++i) {
      const int port = (*local)->metrics_port(job, i);
      ASSERT_GT(port, 0) << job << ":" << i;
      ports.insert(port);
      // The port the daemon tells psctl (prometheus-config asks for it), serving /metrics.
      absl::StatusOr<TaskInfo> info = (*client)->GetTaskInfo(job, i);
      ASSERT_TRUE(info.ok()) << info.status();
      EXPECT_EQ(info->metrics_port(), port);
      httplib::Client http("127.0.0.1", port);
      httplib::Result page = http.Get("/metrics");
      ASSERT_TRUE(page) << job << ":" << i << ": " << httplib::to_string(page.error());
      EXPECT_EQ(page->status, 200);
      EXPECT_THAT(page->body, HasSubstr("\nprocess_cpu_seconds_total "));
    }
  }
  EXPECT_EQ(ports.size(), 3u);
  for (const std::string& address : AllAddresses((*local)->cluster())) {
    EXPECT_EQ(ports.count(std::stoi(address.substr(address.find(':') + 1))), 0u) << address;
  }
}

TEST(LocalClusterTest, DestructorStopsTheDaemons) {
  absl::StatusOr<std::unique_ptr<LocalCluster>> local = LocalCluster::Start(SmallCluster());
  ASSERT_TRUE(local.ok()) << local.status();
  const std::string spec_path = (*local)->spec_path();
  const std::vector<std::string> addresses = AllAddresses((*local)->cluster());
  EXPECT_EQ(DaemonsOf(spec_path).size(), 3u);
  for (const std::string& address : addresses) EXPECT_TRUE(Listens(address)) << address;
  local->reset();
  ExpectNothingLeft(spec_path, addresses);
}

TEST(LocalClusterTest, MissingBinaryFailsNamingItAndStopsTheOthers) {
  LocalClusterOptions options = SmallCluster();
  options.ps_worker_path = TestDir() + "/no_such_ps_worker";
  absl::StatusOr<std::unique_ptr<LocalCluster>> local = LocalCluster::Start(options);
  ASSERT_FALSE(local.ok());
  EXPECT_THAT(std::string(local.status().message()), HasSubstr(options.ps_worker_path));
  EXPECT_THAT(std::string(local.status().message()), HasSubstr("worker:0"));
  // The ps had started (it wrote its port file) and is gone.
  EXPECT_TRUE(std::filesystem::exists(options.dir + "/ps-0.port"));
  const std::string spec_path = options.dir + "/cluster.json";
  absl::StatusOr<ClusterSpec> written = ClusterSpec::FromFile(spec_path);
  ASSERT_TRUE(written.ok()) << written.status();
  ExpectNothingLeft(spec_path, AllAddresses(*written));
}

// psctl finds the daemons in Bazel's layout and in a release's (one directory for all).
TEST(SiblingBinaryTest, FindsTheDaemonsInBazelsLayoutAndInAnInstalledOne) {
  const std::filesystem::path root = ::testing::TempDir() + "/sibling";
  for (const char* file : {"bazel-bin/ctl/psctl", "bazel-bin/server/ps_server", "usr/bin/psctl",
                           "usr/bin/ps_server"}) {
    std::filesystem::create_directories((root / file).parent_path());
    std::ofstream(root / file) << "#!/bin/true\n";
  }
  EXPECT_EQ(SiblingBinaryOf(root / "bazel-bin/ctl/psctl", "server/ps_server"),
            (root / "bazel-bin/server/ps_server").string());
  EXPECT_EQ(SiblingBinaryOf(root / "usr/bin/psctl", "server/ps_server"),
            (root / "usr/bin/ps_server").string());
  EXPECT_EQ(SiblingBinaryOf(root / "usr/bin/psctl", "worker/ps_worker"), "worker/ps_worker");
}

}  // namespace
}  // namespace ps
