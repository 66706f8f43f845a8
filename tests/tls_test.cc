// Mutual TLS on every connection (common/security/transport_security.h), who may do what
// (common/security/peer_identity.h) and bearer tokens (common/security/auth_token.h):
//  - A cluster whose daemons and psctl carry certificates from `psctl certs` trains a job to
//    the weights of the same job on a plaintext cluster.
//  - While the job runs, strangers are refused at the handshake: plaintext, no certificate,
//    another CA's, an expired one. A task's identity and another user may not stop the job,
//    and the job's weights stay those of an undisturbed run.
//  - Certificates renewed during a job are served without a restart.
//  - Tokens are required on every call, and only the admin token stops jobs.
//  - A task pushes and pulls only as the workers the cluster runs on its own host (worker:1
//    runs on "localhost", the rest on 127.0.0.1, each with its own host's certificate).
// Needs OpenSSL's command line tool (tools/setup.sh); skips without it.
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "absl/time/clock.h"
#include "common/client/ps_client.h"
#include "common/process/subprocess.h"
#include "common/job/variables.h"
#include "common/client/worker_session.h"
#include "tests/psctl_testing.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// What a shell command prints on stdout.
std::string Capture(const std::string& command) {
  std::string output;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (pipe == nullptr) return output;
  std::array<char, 4096> buffer;
  while (size_t read = fread(buffer.data(), 1, buffer.size(), pipe.get())) {
    output.append(buffer.data(), read);
  }
  return output;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/bin/openssl", X_OK) != 0) {
      GTEST_SKIP() << "no /usr/bin/openssl (tools/setup.sh installs it)";
    }
    dir_ = TestDir();
    absl::StatusOr<std::vector<int>> ports = PickUnusedPorts(4);
    ASSERT_TRUE(ports.ok()) << ports.status();
    ports_ = *ports;
    spec_ = dir_ + "/cluster.json";
    std::ofstream(spec_) << absl::Substitute(
        R"({"cluster": {"ps": ["127.0.0.1:$0", "127.0.0.1:$1"],
                        "worker": ["127.0.0.1:$2", "localhost:$3"]}})",
        ports_[0], ports_[1], ports_[2], ports_[3]);
    certs_ = dir_ + "/certs";
    Psctl certs({"certs", "--cluster_spec=" + spec_, "--out=" + certs_, "--users=bob"}, dir_);
    ASSERT_EQ(certs.Wait(), 0) << certs.Output();
    EXPECT_THAT(certs.Stdout(), HasSubstr("127.0.0.1: --tls_cert=" + certs_ + "/127.0.0.1.crt"));
    EXPECT_THAT(certs.Stdout(), HasSubstr("localhost: --tls_cert=" + certs_ + "/localhost.crt"));
  }

  void TearDown() override {
    for (Subprocess& daemon : daemons_) daemon.Signal(SIGTERM);
    for (Subprocess& daemon : daemons_) {
      EXPECT_TRUE(daemon.Wait(absl::Seconds(20)).has_value());
      if (HasFailure()) std::cerr << "daemon log:\n" << daemon.Output();
    }
    daemons_.clear();
    if (!dir_.empty()) {
      EXPECT_THAT(ProcessesMentioning(dir_), ::testing::IsEmpty());
    }
  }

  // The three flags for the files `name`.crt and `name`.key in `dir`, with its ca.crt.
  static std::vector<std::string> Tls(const std::string& dir, const std::string& name) {
    return {"--tls_cert=" + dir + "/" + name + ".crt", "--tls_key=" + dir + "/" + name + ".key",
            "--tls_ca=" + dir + "/ca.crt"};
  }

  // Starts 2 ps and 2 workers, each with its host's certificate in `certs` (none: plaintext),
  // and `extra` flags.
  void StartCluster(const std::string& certs, const std::vector<std::string>& extra = {}) {
    for (const char* task : {"ps:0", "ps:1", "worker:0", "worker:1"}) {
      const bool ps = task[0] == 'p';
      std::vector<std::string> argv = {ps ? kPsServer : kPsWorker, "--cluster_spec=" + spec_,
                                       std::string("--task=") + task};
      if (!ps) argv.push_back("--device=cpu");
      if (!certs.empty()) {
        const char* host = std::string(task) == "worker:1" ? "localhost" : "127.0.0.1";
        for (const std::string& flag : Tls(certs, host)) argv.push_back(flag);
      }
      argv.insert(argv.end(), extra.begin(), extra.end());
      const std::string name =
          absl::StrCat(dir_, "/", std::string(task).replace(std::string(task).find(':'), 1, "-"));
      argv.push_back("--port_file=" + name + ".port");
      absl::StatusOr<Subprocess> process = Subprocess::Start(argv, name + ".log");
      ASSERT_TRUE(process.ok()) << process.status();
      daemons_.push_back(*std::move(process));
      ASSERT_TRUE(WaitForPortFile(name + ".port", absl::Seconds(30)).ok())
          << daemons_.back().Output();
    }
  }

  std::string Job(const std::string& id, int steps, const std::string& mode = "SYNC") const {
    const std::string path = absl::StrCat(dir_, "/", id, ".json");
    std::ofstream(path) << absl::Substitute(
        R"({"job_id": "$0", "model": {"kind": "SOFTMAX_REGRESSION"},
            "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 4000,
                                   "feature_dim": 16, "num_classes": 4}},
            "learning_rate": {"base": 0.2}, "consistency": {"mode": "$2"}, "batch_size": 32,
            "steps": $1, "seed": 7, "min_slice_bytes": 64,
            "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 2}})",
        id, steps, mode);
    return path;
  }

  // `psctl status` with `flags`: the lines of the tasks that refused it or it could not reach.
  std::vector<std::string> DownTasks(const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"status", "--cluster_spec=" + spec_};
    args.insert(args.end(), flags.begin(), flags.end());
    Psctl status(args, dir_);
    const int exit_code = status.Wait();
    std::vector<std::string> down;
    for (const std::string& line : Lines(status.Stdout())) {
      if (absl::StrContains(line, ": DOWN (") || absl::StrContains(line, ": REFUSED (")) {
        down.push_back(line);
      }
    }
    // docs/REFERENCE.md, "Exit codes": 0 when every task answered; 2 when one refused the
    // credentials (REFUSED), else 138 when one was out of reach (DOWN: a failed TLS handshake too).
    const bool refused = absl::StrContains(status.Stdout(), ": REFUSED (");
    EXPECT_EQ(exit_code, down.empty() ? 0 : refused ? 2 : 138) << status.Output();
    return down;
  }

  // A user certificate the cluster's CA signed that expired in 2020 (openssl ca can backdate;
  // psctl certs cannot): `dir`/expired.crt and .key.
  void MakeExpiredUserCertificate(const std::string& dir) {
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/index.txt");
    std::ofstream(dir + "/serial") << "1000\n";
    std::ofstream(dir + "/ca.cnf") << absl::Substitute(
        "[ca]\ndefault_ca = local\n[local]\ndatabase = $0/index.txt\nserial = $0/serial\n"
        "new_certs_dir = $0\ndefault_md = sha256\npolicy = anything\n"
        "[anything]\norganizationName = optional\ncommonName = supplied\n",
        dir);
    const std::string openssl = "/usr/bin/openssl", quiet = " >/dev/null 2>&1";
    ASSERT_EQ(std::system((openssl + " req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 " +
                           "-nodes -keyout " + dir + "/expired.key -out " + dir +
                           "/expired.csr -subj /O=admin/CN=expired" + quiet)
                              .c_str()),
              0);
    ASSERT_EQ(std::system((openssl + " ca -batch -notext -config " + dir + "/ca.cnf -cert " +
                           certs_ + "/ca.crt -keyfile " + certs_ + "/ca.key -in " + dir +
                           "/expired.csr -out " + dir + "/expired.crt -startdate 20200101000000Z " +
                           "-enddate 20200102000000Z" + quiet)
                              .c_str()),
              0);
    std::filesystem::copy_file(certs_ + "/ca.crt", dir + "/ca.crt");
  }

  // The serial number of the certificate the ps on `port` serves now.
  std::string ServedSerial(int port) {
    return Capture(
        absl::StrCat("echo | timeout 10 /usr/bin/openssl s_client -connect 127.0.0.1:", port,
                     " -cert ", certs_, "/psctl.crt -key ", certs_, "/psctl.key -CAfile ", certs_,
                     "/ca.crt 2>/dev/null | /usr/bin/openssl x509 -noout -serial"));
  }

  // Job `id` as psctl submit creates it on the ps: ASYNC, 2 workers, one variable of 64.
  static ParameterSpec AsyncSpec(const std::string& id) {
    ParameterSpec spec;
    spec.set_job_id(id);
    spec.set_run_id("run-1");
    spec.set_num_workers(2);
    VariableDef* variable = spec.add_variables();
    variable->set_name("w");
    variable->add_shape(64);
    spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
    spec.mutable_learning_rate()->set_base(0.1f);
    spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
    spec.set_min_slice_bytes(64);
    return spec;
  }

  // A client of the two ps with the certificate `name`.crt in certs_.
  std::unique_ptr<PsClient> ClientAs(const std::string& name) {
    PsClientOptions options;
    options.ps_addresses = {absl::StrCat("127.0.0.1:", ports_[0]),
                            absl::StrCat("127.0.0.1:", ports_[1])};
    options.security = {certs_ + "/" + name + ".crt", certs_ + "/" + name + ".key",
                        certs_ + "/ca.crt"};
    options.max_attempts = 1;
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  std::string dir_, spec_, certs_;
  std::vector<int> ports_;
  std::vector<Subprocess> daemons_;
};

TEST_F(TlsTest, AMutualTlsClusterTrainsToThePlaintextWeightsAndRefusesStrangers) {
  // The reference: the same job on a plaintext local cluster of as many tasks.
  Psctl plain({"local", "--job=" + Job("plain", 3000), "--results=" + dir_ + "/plain", "--ps=2",
               "--workers=2", "--device=cpu"},
              dir_);
  ASSERT_EQ(plain.Wait(), 0) << plain.Output();

  StartCluster(certs_);
  // No value leaves the TLS channels: the ps daemons open no plaintext bulk streams.
  for (int ps = 0; ps < 2; ++ps) {
    EXPECT_THAT(daemons_[ps].Output(), HasSubstr("no bulk streams: this ps serves TLS"));
    EXPECT_THAT(daemons_[ps].Output(), Not(HasSubstr("bulk streams on port")));
  }
  std::vector<std::string> submit = {"submit", "--cluster_spec=" + spec_,
                                     "--job=" + Job("tls", 3000), "--results=" + dir_ + "/tls"};
  for (const std::string& flag : Tls(certs_, "psctl")) submit.push_back(flag);
  Psctl job(submit, dir_);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!std::filesystem::exists(dir_ + "/tls/metrics.csv") && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }

  // While it runs, strangers are refused at the handshake on every task: a plaintext client,
  // one that trusts the CA but has no certificate, and one whose certificate another CA signed.
  const std::vector<std::string> plaintext = DownTasks({});
  ASSERT_EQ(plaintext.size(), 4u);
  EXPECT_THAT(plaintext[0], HasSubstr("it may require TLS: give psctl --tls_cert"));
  EXPECT_EQ(DownTasks({"--tls_ca=" + certs_ + "/ca.crt"}).size(), 4u);
  Psctl other({"certs", "--cluster_spec=" + spec_, "--out=" + dir_ + "/other"}, dir_);
  ASSERT_EQ(other.Wait(), 0) << other.Output();
  std::vector<std::string> stranger = Tls(dir_ + "/other", "psctl");
  stranger.back() = "--tls_ca=" + certs_ + "/ca.crt";  // Trusts the cluster; signed by another.
  EXPECT_EQ(DownTasks(stranger).size(), 4u);
  MakeExpiredUserCertificate(dir_ + "/expired");
  EXPECT_EQ(DownTasks(Tls(dir_ + "/expired", "expired")).size(), 4u)
      << "a certificate of the cluster's CA that has expired is refused too";
  EXPECT_TRUE(DownTasks(Tls(certs_, "psctl")).empty()) << "psctl's own identity is let in";

  // Members of the cluster may not stop a job that is not theirs: a task's identity may not
  // stop jobs at all, and user bob may not stop user psctl's.
  for (const auto& [identity, refusal] :
       {std::pair<std::string, std::string>("127.0.0.1", "is for users"),
        std::pair<std::string, std::string>("bob", "belongs to user psctl; user bob may not")}) {
    std::vector<std::string> stop = {"stop", "--cluster_spec=" + spec_, "--job=tls"};
    for (const std::string& flag : Tls(certs_, identity)) stop.push_back(flag);
    Psctl refused(stop, dir_);
    EXPECT_NE(refused.Wait(), 0) << refused.Output();
    EXPECT_THAT(refused.Stderr(), HasSubstr(refusal)) << identity;
  }
  EXPECT_FALSE(job.Ended()) << "the job ended before the strangers came: make it longer";

  ASSERT_EQ(job.Wait(), 0) << job.Output();
  nlohmann::json summary = nlohmann::json::parse(ReadFile(dir_ + "/tls/summary.json"));
  EXPECT_EQ(summary["state"], "DONE");
  ExpectSameParameters(ResultParameters(dir_ + "/plain"), ResultParameters(dir_ + "/tls"), 1e-6);
}

// The workers' ring (worker to worker, worker/allreduce/grpc_ring_link.h) runs over the same
// mutual TLS as every other call, and trains to the plaintext ring's weights.
TEST_F(TlsTest, AnAllReduceRingOverMutualTlsTrainsToThePlaintextWeights) {
  Psctl plain({"local", "--job=" + Job("plain-ring", 300, "ALLREDUCE"),
               "--results=" + dir_ + "/plain", "--ps=2", "--workers=2", "--device=cpu"},
              dir_);
  ASSERT_EQ(plain.Wait(), 0) << plain.Output();

  StartCluster(certs_);
  std::vector<std::string> submit = {"submit", "--cluster_spec=" + spec_,
                                     "--job=" + Job("tls-ring", 300, "ALLREDUCE"),
                                     "--results=" + dir_ + "/tls"};
  for (const std::string& flag : Tls(certs_, "psctl")) submit.push_back(flag);
  Psctl job(submit, dir_);
  ASSERT_EQ(job.Wait(), 0) << job.Output();
  nlohmann::json summary = nlohmann::json::parse(ReadFile(dir_ + "/tls/summary.json"));
  EXPECT_EQ(summary["state"], "DONE");
  // The ring moved the gradients: 2 (N - 1) / N of them per step each way, well above nothing.
  EXPECT_GT(summary["bytes_sent_per_step"].get<double>(), 16 * 4 * 4);
  ExpectSameParameters(ResultParameters(dir_ + "/plain"), ResultParameters(dir_ + "/tls"), 1e-6);
}

TEST_F(TlsTest, CertificatesRenewedDuringAJobAreServedWithoutARestart) {
  // The daemons read copies, as a host would; `psctl certs` renews the originals with the same
  // CA, and they are moved over the copies.
  const std::string live = dir_ + "/live";
  std::filesystem::copy(certs_, live);
  StartCluster(live);
  const std::string before = ServedSerial(ports_[0]);
  ASSERT_THAT(before, HasSubstr("serial=")) << "openssl s_client reached no ps";

  std::vector<std::string> submit = {"submit", "--cluster_spec=" + spec_,
                                     "--job=" + Job("renewed", 6000), "--results=" + dir_ + "/r"};
  for (const std::string& flag : Tls(certs_, "psctl")) submit.push_back(flag);
  Psctl job(submit, dir_);
  Psctl renew({"certs", "--cluster_spec=" + spec_, "--out=" + certs_}, dir_);
  ASSERT_EQ(renew.Wait(), 0) << renew.Output();
  EXPECT_THAT(renew.Stdout(), HasSubstr("renewing the certificates with the CA already in"));
  for (const char* file : {"127.0.0.1.key", "127.0.0.1.crt"}) {
    std::filesystem::copy_file(absl::StrCat(certs_, "/", file),
                               absl::StrCat(live, "/", file, ".tmp"));
    std::filesystem::rename(absl::StrCat(live, "/", file, ".tmp"), absl::StrCat(live, "/", file));
  }
  const std::string renewed =
      Capture(absl::StrCat("/usr/bin/openssl x509 -noout -serial -in ", certs_, "/127.0.0.1.crt"));
  ASSERT_NE(renewed, before);
  std::string served;
  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  do {
    absl::SleepFor(absl::Milliseconds(500));
    served = ServedSerial(ports_[0]);
  } while (served != renewed && absl::Now() < deadline);
  EXPECT_EQ(served, renewed) << "the ps still serves the certificate it started with";
  EXPECT_FALSE(job.Ended()) << "the job ended before the renewal was served: make it longer";
  // Long enough to outlast the renewal on a fast machine, so on a loaded one (CI's 2 cores
  // beside other tests: 88 steps a second) past psctl's usual minute.
  ASSERT_EQ(job.Wait(absl::Minutes(3)), 0) << job.Output();
  EXPECT_EQ(nlohmann::json::parse(ReadFile(dir_ + "/r/summary.json"))["state"], "DONE");
}

// Bearer tokens on a plaintext cluster: every call needs the cluster's token or the admin
// token; the task token may not stop a job; a token never reaches a log.
TEST_F(TlsTest, TokensAreRequiredOnEveryCallAndOnlyTheAdminTokenStopsAJob) {
  const std::string task_token = "task-token-0123456789abcdef",
                    admin_token = "admin-token-0123456789abcdef";
  std::ofstream(dir_ + "/task.token") << task_token << "\n";
  // Not "admin.token" beside the ClusterSpec: psctl would take that one without being told.
  std::ofstream(dir_ + "/users.token") << admin_token << "\n";
  std::ofstream(dir_ + "/wrong.token") << "wrong-token-0123456789abcdef\n";
  StartCluster("", {"--auth_token_file=" + dir_ + "/task.token",
                    "--admin_token_file=" + dir_ + "/users.token"});
  Psctl job({"submit", "--cluster_spec=" + spec_, "--job=" + Job("tokens", 3000),
             "--results=" + dir_ + "/tokens", "--admin_token_file=" + dir_ + "/users.token"},
            dir_);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!std::filesystem::exists(dir_ + "/tokens/metrics.csv") && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  const std::vector<std::string> missing = DownTasks({});
  ASSERT_EQ(missing.size(), 4u);
  EXPECT_THAT(missing[0], HasSubstr("REFUSED (ListJobs: this cluster requires a token"));
  EXPECT_THAT(missing[0], HasSubstr("--admin_token_file"));
  EXPECT_EQ(DownTasks({"--admin_token_file=" + dir_ + "/wrong.token"}).size(), 4u);
  EXPECT_TRUE(DownTasks({"--auth_token_file=" + dir_ + "/task.token"}).empty());

  Psctl stop({"stop", "--cluster_spec=" + spec_, "--job=tokens",
              "--auth_token_file=" + dir_ + "/task.token"},
             dir_);
  EXPECT_NE(stop.Wait(), 0) << stop.Output();
  EXPECT_THAT(stop.Stderr(), HasSubstr("the cluster's task token may not call it"));
  EXPECT_FALSE(job.Ended()) << "the job ended before the refusals: make it longer";
  ASSERT_EQ(job.Wait(), 0) << job.Output();
  EXPECT_EQ(nlohmann::json::parse(ReadFile(dir_ + "/tokens/summary.json"))["state"], "DONE");
  for (Subprocess& daemon : daemons_) {
    EXPECT_THAT(daemon.Output(), ::testing::Not(HasSubstr("token-0123456789")));
  }
  EXPECT_THAT(job.Output(), ::testing::Not(HasSubstr("token-0123456789")));
}

// A second user of the cluster (bob, with his own certificate) can neither read nor change
// another user's job on any call, and a refused call moves nothing: bob's push as worker 0 with
// incarnation 7 and a huge gradient is refused, and the real worker 0 (incarnation 0) still
// pushes; the job's weights are exactly those of its own pushes (issue 30 item 2).
TEST_F(TlsTest, AnotherUserCanNeitherReadNorChangeAJobNorFenceItsWorkers) {
  StartCluster(certs_);
  const ParameterSpec spec = AsyncSpec("alices");
  std::unique_ptr<PsClient> owner = ClientAs("psctl"), bob = ClientAs("bob");
  std::unique_ptr<PsClient> host0 = ClientAs("127.0.0.1");
  ASSERT_TRUE(owner != nullptr && bob != nullptr && host0 != nullptr);
  ASSERT_TRUE(owner->CreateJob(spec).ok());

  std::vector<float> values(64), huge(64, 1e4f), gradient(64, 1.0f);
  const MutableVariables out = {{"w", absl::MakeSpan(values)}};
  absl::StatusOr<std::unique_ptr<WorkerSession>> observer =
      WorkerSession::Create(owner.get(), spec, 0);
  ASSERT_TRUE(observer.ok());
  ASSERT_TRUE((*observer)->Pull({}, out).ok());
  const std::vector<float> initial = values;

  auto denied = [](const absl::Status& status, const std::string& what) {
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << what << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr("belongs to user psctl")) << what;
  };
  absl::StatusOr<std::unique_ptr<WorkerSession>> posing =
      WorkerSession::Create(bob.get(), spec, 0, /*incarnation=*/7);
  ASSERT_TRUE(posing.ok());
  denied((*posing)->Pull({}, out).status(), "Pull");
  WorkerSession::PushOptions first;
  first.read_versions = {0, 0};
  denied((*posing)->Push(first, {{"w", absl::MakeConstSpan(huge)}}).status(), "Push");
  denied((*posing)->PushPull(first, {{"w", absl::MakeConstSpan(huge)}}, {}, out).status(),
         "PushPull");
  denied(bob->GetJobStats("alices").status(), "GetJobStats");
  denied(bob->GetApplyLogs("alices").status(), "GetApplyLog");
  denied(bob->LeaveJob("alices", "run-1", 0), "LeaveJob");
  denied(bob->DeleteJob("alices"), "DeleteJob");
  // psctl status lists the jobs every ps holds: bob's does not show another user's.
  for (const auto& [identity, shown] :
       {std::pair<std::string, bool>("bob", false), std::pair<std::string, bool>("psctl", true)}) {
    std::vector<std::string> args = {"status", "--cluster_spec=" + spec_};
    for (const std::string& flag : Tls(certs_, identity)) args.push_back(flag);
    Psctl status(args, dir_);
    EXPECT_EQ(status.Wait(), 0) << status.Output();
    EXPECT_EQ(absl::StrContains(status.Stdout(), "alices"), shown) << identity << ":\n"
                                                                   << status.Stdout();
  }

  // The real worker 0 is not fenced off: its first push (incarnation 0, push id 1) applies, and
  // the weights moved by it alone.
  absl::StatusOr<std::unique_ptr<WorkerSession>> worker =
      WorkerSession::Create(host0.get(), spec, 0);
  ASSERT_TRUE(worker.ok());
  ASSERT_TRUE((*worker)->Pull({}, out).ok());
  absl::StatusOr<std::vector<PushResponse>> pushed =
      (*worker)->Push({}, {{"w", absl::MakeConstSpan(gradient)}});
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  for (const PushResponse& response : *pushed) EXPECT_EQ(response.outcome(), PushResponse::APPLIED);
  ASSERT_TRUE((*observer)->Pull({}, out).ok());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_FLOAT_EQ(values[i], initial[i] - 0.1f) << i;
  }
  absl::StatusOr<std::vector<JobStats>> stats = owner->GetJobStats("alices");
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const JobStats& shard : *stats) EXPECT_EQ(shard.version(), 1);
}

// One flag turns everything on: `psctl certs` writes certificates and tokens, and --certs=DIR
// gives each daemon its host's certificate, the CA and the tokens, and psctl its own.
TEST_F(TlsTest, OneCertsFlagTurnsOnTlsAndTokensForDaemonsAndPsctl) {
  for (const char* token : {"/cluster.token", "/admin.token"}) {
    EXPECT_TRUE(std::filesystem::exists(certs_ + token)) << token;
  }
  StartCluster("", {"--certs=" + certs_});
  Psctl job({"submit", "--cluster_spec=" + spec_, "--job=" + Job("certs", 300),
             "--results=" + dir_ + "/certs-run", "--certs=" + certs_},
            dir_);
  ASSERT_EQ(job.Wait(), 0) << job.Output();
  EXPECT_EQ(nlohmann::json::parse(ReadFile(dir_ + "/certs-run/summary.json"))["state"], "DONE");
  EXPECT_EQ(DownTasks({}).size(), 4u) << "a plaintext client is let in";
  EXPECT_EQ(DownTasks({"--tls_ca=" + certs_ + "/ca.crt"}).size(), 4u)
      << "a client without a certificate is let in";
  EXPECT_TRUE(DownTasks({"--certs=" + certs_}).empty());

  // --certs stands for the five flags: given with one of them, it is refused.
  Psctl both({"status", "--cluster_spec=" + spec_, "--certs=" + certs_,
              "--tls_ca=" + certs_ + "/ca.crt"},
             dir_);
  EXPECT_EQ(both.Wait(), 2) << both.Output();
  EXPECT_THAT(both.Stderr(), HasSubstr("stands for --tls_ca: give one or the other"));
}

TEST_F(TlsTest, ATaskPushesAndPullsOnlyAsTheWorkersOnItsOwnHost) {
  StartCluster(certs_);
  // A job of 2 workers on both ps, created as psctl submit creates it (as user psctl).
  const ParameterSpec spec = AsyncSpec("posing");
  std::unique_ptr<PsClient> psctl = ClientAs("psctl");
  ASSERT_NE(psctl, nullptr);
  ASSERT_TRUE(psctl->CreateJob(spec).ok());

  std::vector<float> values(64), gradient(64, 1.0f);
  const MutableVariables out = {{"w", absl::MakeSpan(values)}};
  const ConstVariables gradients = {{"w", absl::MakeConstSpan(gradient)}};
  // Each worker's host pulls and pushes as that worker.
  std::unique_ptr<PsClient> host0 = ClientAs("127.0.0.1"), host1 = ClientAs("localhost");
  ASSERT_NE(host0, nullptr);
  ASSERT_NE(host1, nullptr);
  for (const auto& [client, worker] :
       {std::pair<PsClient*, int>(host0.get(), 0), std::pair<PsClient*, int>(host1.get(), 1)}) {
    absl::StatusOr<std::unique_ptr<WorkerSession>> session =
        WorkerSession::Create(client, spec, worker);
    ASSERT_TRUE(session.ok()) << session.status();
    ASSERT_TRUE((*session)->Pull({}, out).ok()) << "worker " << worker;
    absl::StatusOr<std::vector<PushResponse>> pushed = (*session)->Push({}, gradients);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
  }
  absl::StatusOr<std::unique_ptr<WorkerSession>> observer =
      WorkerSession::Create(psctl.get(), spec, 0);
  ASSERT_TRUE(observer.ok());
  ASSERT_TRUE((*observer)->Pull({}, out).ok());
  const std::vector<float> before = values;

  // 127.0.0.1's certificate posing as worker 1 (on localhost) is refused, pull and push alike,
  // and the weights do not move.
  absl::StatusOr<std::unique_ptr<WorkerSession>> posing =
      WorkerSession::Create(host0.get(), spec, 1);
  ASSERT_TRUE(posing.ok());
  absl::StatusOr<WorkerSession::PullResult> pulled = (*posing)->Pull({}, out);
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(pulled.status().message(),
              HasSubstr("task 127.0.0.1 may not Pull as worker 1: the cluster spec runs "
                        "worker:1 on localhost"));
  WorkerSession::PushOptions stale;
  stale.read_versions = {0, 0};
  absl::StatusOr<std::vector<PushResponse>> pushed = (*posing)->Push(stale, gradients);
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(pushed.status().message(), HasSubstr("may not Push as worker 1"));
  ASSERT_TRUE((*observer)->Pull({}, out).ok());
  EXPECT_EQ(values, before);

  // A task's own certificate (psctl certs's worker-0.crt, CN=worker:0) acts only as itself, also
  // where one host ran both workers; a ps's acts as no worker.
  std::unique_ptr<PsClient> worker0 = ClientAs("worker-0"), ps0 = ClientAs("ps-0");
  ASSERT_TRUE(worker0 != nullptr && ps0 != nullptr);
  absl::StatusOr<std::unique_ptr<WorkerSession>> itself =
      WorkerSession::Create(worker0.get(), spec, 0, /*incarnation=*/0);
  ASSERT_TRUE(itself.ok());
  EXPECT_TRUE((*itself)->Pull({}, out).ok());
  for (const auto& [client, name] : {std::pair<PsClient*, std::string>(worker0.get(), "worker:0"),
                                     std::pair<PsClient*, std::string>(ps0.get(), "ps:0")}) {
    absl::StatusOr<std::unique_ptr<WorkerSession>> other = WorkerSession::Create(client, spec, 1);
    ASSERT_TRUE(other.ok());
    absl::Status status = (*other)->Pull({}, out).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << name;
    EXPECT_THAT(status.message(), HasSubstr("task " + name + " may not Pull as worker 1: a "
                                            "task's own certificate lets it act only as itself"));
  }
}

}  // namespace
}  // namespace ps
