// The ps-wide byte budget (server/byte_budget.h; the service's side in server/ps_service_budget.cc,
// the client's windows in common/client/ps_connections.cc) in a real ps_server process: 16 clients push 64
// MiB each at once into a ps with --max_inflight_mb=256. Every push completes, and the ps's
// resident memory grows by at most the budget plus kOverhead; without a budget, the same burst
// grows it by far more (so the bound is the budget's doing).
#include <signal.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "common/process/subprocess.h"

namespace ps {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int kClients = 16;
constexpr int64_t kFloats = 16 * kMiB;  // 64 MiB of gradient per push.
constexpr int64_t kBudget = 256 * kMiB;
// What the ps may hold beyond the budget in a burst: each client's first call before it has a
// window is in the budget already (they pulled first), so this is gRPC's own buffers and the
// allocator's slack (freed buffers held in the arenas of the threads that decoded them).
constexpr int64_t kOverhead = 128 * kMiB;

std::string TempPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

// A field of /proc/<pid>/status in bytes ("VmRSS", "VmHWM").
int64_t StatusBytes(pid_t pid, const std::string& field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::istringstream words(line.substr(field.size() + 1));
    int64_t kib = 0;
    words >> kib;
    return kib * 1024;
  }
  ADD_FAILURE() << "no " << field << " in /proc/" << pid << "/status";
  return 0;
}

// A sample of the ps's metrics ("name{labels}" exactly), or -1.
double Metric(int port, const std::string& sample) {
  httplib::Client http("127.0.0.1", port);
  httplib::Result result = http.Get("/metrics");
  if (!result || result->status != 200) return -1;
  std::istringstream lines(result->body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(sample + " ", 0) != 0) continue;
    double value = -1;
    if (absl::SimpleAtod(line.substr(sample.size() + 1), &value)) return value;
  }
  return -1;
}

struct Burst {
  int64_t growth = 0;     // The ps's peak resident bytes in the burst over those before it.
  double waits = 0;       // Pushes parked by the budget (ps_byte_budget_waits_total).
  double peak_held = 0;   // ps_byte_budget_peak_bytes.
};

// Starts a ps with `budget_mb`, creates a job of kClients workers and one 64 MiB variable in
// `mode`, lets every client pull, pushes once before (ASYNC: worker 0; SYNC: all, step 0) so that
// what an apply writes besides the push buffers (the values' second copy; SYNC's sum and mean)
// is resident, then has all push at once (SYNC: step 1).
Burst RunBurst(int64_t budget_mb, ConsistencyConfig::Mode mode = ConsistencyConfig::ASYNC) {
  const std::string name =
      absl::StrCat("budget", budget_mb, "_", ConsistencyConfig::Mode_Name(mode));
  const std::string spec_path = TempPath(name + ".json");
  std::ofstream(spec_path) << R"({"cluster": {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}})";
  const std::string port_file = TempPath(name + ".port");
  const std::string metrics_file = TempPath(name + ".metrics");
  absl::StatusOr<Subprocess> server = Subprocess::Start(
      {"server/ps_server", "--cluster_spec=" + spec_path, "--task=ps:0", "--port=0",
       "--port_file=" + port_file, "--metrics_port=0", "--metrics_port_file=" + metrics_file,
       absl::StrCat("--max_inflight_mb=", budget_mb),
       // The clients share the ps's host: tensors in the requests, which the budget bounds (shared
       // memory segments have their own bound, --shared_memory_mb).
       "--shared_memory_mb=0"},
      TempPath(name + ".log"));
  Burst burst;
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return burst;
  absl::StatusOr<int> port = WaitForPortFile(port_file, absl::Seconds(20));
  absl::StatusOr<int> metrics_port = WaitForPortFile(metrics_file, absl::Seconds(20));
  EXPECT_TRUE(port.ok() && metrics_port.ok()) << server->Output();
  if (!port.ok() || !metrics_port.ok()) return burst;

  ParameterSpec spec;
  spec.set_job_id("burst");
  VariableDef* w = spec.add_variables();
  w->set_name("w");
  w->add_shape(kFloats);
  spec.mutable_learning_rate()->set_base(0.001f);
  spec.mutable_consistency()->set_mode(mode);
  spec.set_num_workers(kClients);

  PsClientOptions options;
  options.ps_addresses = {absl::StrCat("127.0.0.1:", *port)};
  std::vector<std::unique_ptr<PsClient>> clients;
  std::vector<std::unique_ptr<WorkerSession>> sessions;
  for (int i = 0; i < kClients; ++i) {
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return burst;
    clients.push_back(*std::move(client));
  }
  EXPECT_TRUE(clients[0]->CreateJob(spec).ok());
  std::vector<float> weights(kFloats);
  const std::vector<float> gradient(kFloats, 0.5f);  // Read by every push at once.
  for (int i = 0; i < kClients; ++i) {
    absl::StatusOr<std::unique_ptr<WorkerSession>> session =
        WorkerSession::Create(clients[i].get(), spec, i);
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return burst;
    sessions.push_back(*std::move(session));
    EXPECT_TRUE(sessions.back()->Pull({}, {{"w", absl::MakeSpan(weights)}}).ok());
  }
  // Each client's window is the share it was given at its last call: pulled again now that all
  // are active, every window is the request part's sixteenth (4 MiB, a chunk), as in a job past
  // its first steps. (Clients that joined first would otherwise keep larger shares until their
  // first answer in the burst.)
  for (int i = 0; i < kClients; ++i) {
    EXPECT_TRUE(sessions[i]->Pull({}, {{"w", absl::MakeSpan(weights)}}).ok());
  }
  const bool sync = mode == ConsistencyConfig::SYNC;
  for (int i = 0; i < (sync ? kClients : 1); ++i) {
    EXPECT_TRUE(sessions[i]->Push({}, {{"w", absl::MakeConstSpan(gradient)}}).ok());
  }
  WorkerSession::PullOptions next;
  next.step = sync ? 1 : 0;
  EXPECT_TRUE(sessions[0]->Pull(next, {{"w", absl::MakeSpan(weights)}}).ok());
  WorkerSession::PushOptions burst_push;
  burst_push.step = next.step;

  const int64_t before = StatusBytes(server->pid(), "VmRSS");
  // The peak so far goes: VmHWM restarts from the resident bytes now.
  std::ofstream(absl::StrCat("/proc/", server->pid(), "/clear_refs")) << "5";
  absl::Barrier* start = new absl::Barrier(kClients);
  std::vector<absl::Status> pushed(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      if (start->Block()) delete start;
      pushed[i] = sessions[i]->Push(burst_push, {{"w", absl::MakeConstSpan(gradient)}}).status();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < kClients; ++i) EXPECT_TRUE(pushed[i].ok()) << i << ": " << pushed[i];
  burst.growth = StatusBytes(server->pid(), "VmHWM") - before;
  burst.waits = Metric(*metrics_port, R"(ps_byte_budget_waits_total{shard="0"})");
  burst.peak_held = Metric(*metrics_port, R"(ps_byte_budget_peak_bytes{shard="0"})");
  // Every push was applied once: in ASYNC worker 0's first and the burst's; in SYNC as steps 0
  // and 1.
  absl::StatusOr<std::vector<JobStats>> all = clients[0]->GetJobStats("burst");
  EXPECT_TRUE(all.ok()) << all.status();
  if (all.ok() && sync) {
    EXPECT_EQ((*all)[0].step(), 2);
  }
  if (all.ok() && !sync) {
    EXPECT_EQ((*all)[0].applied_updates(), kClients + 1);
  }
  std::cout << ConsistencyConfig::Mode_Name(mode) << ", --max_inflight_mb=" << budget_mb << ": the ps's peak resident memory grew "
            << burst.growth / kMiB << " MiB in a burst of " << kClients << " pushes of "
            << kFloats * 4 / kMiB << " MiB; " << burst.waits << " pushes waited for room; the budget's count peaked at "
            << burst.peak_held / kMiB << " MiB\n";
  server->Signal(SIGTERM);
  EXPECT_EQ(server->Wait(absl::Seconds(30)), std::optional<int>(0)) << server->Output();
  return burst;
}

TEST(ByteBudgetProcessTest, SixteenPushesOf64MiBStayWithinA256MiBBudget) {
  const Burst bounded = RunBurst(kBudget / kMiB);
  EXPECT_LE(bounded.growth, kBudget + kOverhead);
  EXPECT_GT(bounded.waits, 0);  // The budget had to hold pushes back to keep to it.
  // The budget's own count: the budget, and each client's one call that goes past its window of
  // 4 MiB by its header (a call goes when none is in flight), with 1 MiB a client to spare.
  // Windows stay 4 MiB through the burst: a client with a call parked is not idle.
  EXPECT_LE(bounded.peak_held, static_cast<double>(kBudget + kClients * kMiB));
  // Without a budget the same burst takes far more: the bound above is the budget's. (Pushes
  // on bulk streams hold no request copy, so the burst without one grows by 700 MiB, where in
  // the requests it grew by 1 GiB.)
  const Burst unbounded = RunBurst(0);
  EXPECT_GT(unbounded.growth, kBudget + kOverhead + 128 * kMiB);
}

// SYNC aggregates the 16 pushes into one step.
TEST(ByteBudgetProcessTest, ASyncStepOfSixteenPushesOf64MiBStaysWithinA256MiBBudget) {
  const Burst bounded = RunBurst(kBudget / kMiB, ConsistencyConfig::SYNC);
  EXPECT_LE(bounded.growth, kBudget + kOverhead);
  EXPECT_GT(bounded.waits, 0);
}

}  // namespace
}  // namespace ps
