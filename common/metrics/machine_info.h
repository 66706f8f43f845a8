// What machine this process runs on (proto/task.proto's MachineInfo): host, CPU, memory,
// kernel, and NVIDIA GPUs with their driver, read from /proc and uname. Every daemon reports it
// in TaskInfo; psctl puts each task's into a run's manifest.json (ctl/job/run_manifest.h).
#ifndef PS_COMMON_METRICS_MACHINE_INFO_H_
#define PS_COMMON_METRICS_MACHINE_INFO_H_

#include <functional>
#include <string>

#include "absl/strings/string_view.h"
#include "proto/task.pb.h"

namespace ps {

// This machine. Fields it cannot read (not Linux, no NVIDIA driver) stay empty or 0.
MachineInfo DescribeMachine();

// The memory this process may use: the machine's, or its cgroup's limit (a container's, a
// Slurm job's) when that is lower. 0 when neither can be read.
int64_t UsableMemoryBytes();

// The cgroup memory limit of the process whose /proc/self/cgroup is `proc_self_cgroup`, read
// through `read_file` (a path's text, empty when it cannot be read): cgroup v2's memory.max
// and v1's memory.limit_in_bytes, of the process's own group and of the mount's root (inside
// a container the group's path is often the root), the lowest that is set. 0 when none is
// ("max", or v1's page-rounded 2^63 for no limit).
int64_t CgroupMemoryLimit(absl::string_view proc_self_cgroup,
                          const std::function<std::string(const std::string&)>& read_file);

// The parsers DescribeMachine uses, on a file's text.
// The first "model name" of /proc/cpuinfo; empty when there is none (some ARM kernels).
std::string CpuModelFromCpuinfo(absl::string_view cpuinfo);
// MemTotal of /proc/meminfo in bytes; 0 when absent.
int64_t MemTotalFromMeminfo(absl::string_view meminfo);
// "Model:" of /proc/driver/nvidia/gpus/<bus id>/information.
std::string GpuModelFromInformation(absl::string_view information);
// The driver version in /proc/driver/nvidia/version's first line ("NVRM version: NVIDIA UNIX
// x86_64 Kernel Module  535.104.05  Sat Aug 19 ..." -> "535.104.05"); empty when not found.
std::string DriverVersionFromNvidiaVersion(absl::string_view version);

}  // namespace ps

#endif  // PS_COMMON_METRICS_MACHINE_INFO_H_
