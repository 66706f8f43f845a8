// session_step_bench: the C++ side of bench/binding_cost_bench.py. Times a worker's exchange
// of one step, a Pull of every variable then a Push of a gradient of each, through the
// WorkerSession that ps_worker and the Python binding both use, against running ps_server
// processes; prints one JSON line {"us_per_step": median over --rounds of the mean of
// --iterations steps}.
//
//   session_step_bench --ps_addresses=127.0.0.1:7000,127.0.0.1:7001 --shapes=32x64,64,64x10,10
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "common/process/daemon.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

DEFINE_string(ps_addresses, "", "the ps tasks, comma-separated, in task order");
DEFINE_string(shapes, "32x64,64,64x10,10", "the variables' shapes, comma-separated (AxB)");
DEFINE_string(job_id, "session_step_bench", "the ASYNC job this creates (or finds) and uses");
DEFINE_int32(iterations, 2000, "steps a round");
DEFINE_int32(rounds, 3, "rounds; the figure is their median");
DEFINE_int32(warmup, 200, "untimed steps first");

namespace ps {
namespace {

int Run() {
  PsClientOptions options;
  options.ps_addresses = absl::StrSplit(FLAGS_ps_addresses, ',', absl::SkipEmpty());
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
  CHECK(client.ok()) << client.status();
  ParameterSpec spec;
  spec.set_job_id(FLAGS_job_id);
  spec.set_num_workers(1);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  spec.mutable_learning_rate()->set_base(1e-6f);
  std::map<std::string, std::vector<float>> values, gradients;
  int index = 0;
  for (absl::string_view shape : absl::StrSplit(FLAGS_shapes, ',', absl::SkipEmpty())) {
    VariableDef* variable = spec.add_variables();
    variable->set_name("v" + std::to_string(index++));
    int64_t size = 1;
    for (absl::string_view dim : absl::StrSplit(shape, 'x')) {
      int64_t n = 0;
      CHECK(absl::SimpleAtoi(dim, &n) && n > 0) << "--shapes: bad dimension " << dim;
      variable->add_shape(n);
      size *= n;
    }
    values[variable->name()].assign(size, 0.0f);
    gradients[variable->name()].assign(size, 1e-3f);
  }
  CHECK((*client)->CreateJob(spec).ok());
  absl::StatusOr<std::unique_ptr<WorkerSession>> session =
      WorkerSession::Create(client->get(), spec, 0);
  CHECK(session.ok()) << session.status();
  MutableVariables out;
  ConstVariables in;
  for (auto& [name, buffer] : values) out[name] = absl::MakeSpan(buffer);
  for (auto& [name, buffer] : gradients) in[name] = absl::MakeConstSpan(buffer);
  auto step = [&] {
    CHECK((*session)->Pull({}, out).ok());
    CHECK((*session)->Push({}, in).ok());
  };
  for (int i = 0; i < FLAGS_warmup; ++i) step();
  std::vector<double> rounds;
  for (int round = 0; round < FLAGS_rounds; ++round) {
    const absl::Time start = absl::Now();
    for (int i = 0; i < FLAGS_iterations; ++i) step();
    rounds.push_back(absl::ToDoubleMicroseconds(absl::Now() - start) / FLAGS_iterations);
  }
  std::sort(rounds.begin(), rounds.end());
  std::printf("{\"us_per_step\": %.2f}\n", rounds[rounds.size() / 2]);
  return 0;
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  ps::TuneForTensorTraffic();  // As ps_worker does.
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return ps::Run();
}
