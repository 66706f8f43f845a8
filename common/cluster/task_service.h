// The Task service (proto/task.proto) every daemon serves beside its own: what the process is
// (its task, version, pid, machine), how much it uses (CPU, memory, threads) and where its
// /metrics page is. Callers must be cluster members (common/security/peer_identity.h's
// RequireMember).
#ifndef PS_COMMON_CLUSTER_TASK_SERVICE_H_
#define PS_COMMON_CLUSTER_TASK_SERVICE_H_

#include <atomic>
#include <string>

#include "proto/task.grpc.pb.h"

namespace ps {

class TaskService final : public Task::CallbackService {
 public:
  // `job` is "ps" or "worker"; `device` empty for a ps.
  TaskService(std::string job, int index, std::string device = "");

  // The /metrics port once it listens; 0 (the default) when the daemon serves none.
  // Thread-safe.
  void set_metrics_port(int port) { metrics_port_.store(port, std::memory_order_relaxed); }
  // Whether the daemon serves plaintext off loopback (--insecure). Call before serving.
  void set_insecure(bool insecure) { insecure_ = insecure; }

  grpc::ServerUnaryReactor* GetTaskInfo(grpc::CallbackServerContext* context,
                                        const TaskInfoRequest* request,
                                        TaskInfo* response) override;

 private:
  const std::string job_;
  const int index_;
  const std::string device_;
  const MachineInfo machine_;  // Read once, at the start.
  std::atomic<int> metrics_port_{0};
  bool insecure_ = false;
};

}  // namespace ps

#endif  // PS_COMMON_CLUSTER_TASK_SERVICE_H_
