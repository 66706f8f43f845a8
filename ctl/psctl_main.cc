// psctl: the user's tool for a parameter-server cluster.
//
//   psctl check --cluster_spec=FILE [--task=ps:0]
//       Validates a ClusterSpec (or TF_CONFIG when no file is given) and prints its tasks.
//
// Exit status: 0 on success, 1 when the input is wrong (the message says what to fix),
// 2 for a usage error.
#include <cstdlib>
#include <iostream>
#include <string>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "common/cluster_spec.h"
#include "worker/compute/device.h"

DEFINE_string(cluster_spec, "", "ClusterSpec JSON file; TF_CONFIG is used when empty");
DEFINE_string(task, "", "optional task to check against the cluster, as TYPE:INDEX (ps:0)");

namespace ps {
namespace {

constexpr char kUsage[] =
    "usage: psctl check --cluster_spec=FILE [--task=ps:0]\n"
    "  check   validate a ClusterSpec (or TF_CONFIG) and print its tasks";

int Check() {
  const char* tf_config = std::getenv("TF_CONFIG");
  absl::StatusOr<ClusterSpec> cluster = LoadClusterSpec(FLAGS_cluster_spec, tf_config);
  if (!cluster.ok()) {
    std::cerr << "psctl: " << cluster.status().message() << "\n";
    return 1;
  }
  if (!FLAGS_task.empty()) {
    absl::StatusOr<ClusterConfig> config =
        ResolveClusterConfig(FLAGS_cluster_spec, FLAGS_task, tf_config);
    if (!config.ok()) {
      std::cerr << "psctl: " << config.status().message() << "\n";
      return 1;
    }
  }
  for (absl::string_view job : {kPsJob, kWorkerJob}) {
    const std::vector<std::string>& tasks = cluster->Tasks(job);
    for (size_t i = 0; i < tasks.size(); ++i) {
      std::cout << job << ":" << i << "\t" << tasks[i] << "\n";
    }
  }
  absl::StatusOr<Device> device = SelectDevice("auto", QueryUsableGpus());
  std::cout << "workers on this machine would compute on: " << device->description << "\n";
  return 0;
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  gflags::SetUsageMessage(ps::kUsage);
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc != 2 || std::string(argv[1]) != "check") {
    std::cerr << ps::kUsage << "\n";
    return 2;
  }
  return ps::Check();
}
