#include "common/metrics/machine_info.h"

#include <unistd.h>

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(MachineInfoTest, ReadsTheFirstCpuModel) {
  EXPECT_EQ(CpuModelFromCpuinfo("processor\t: 0\nvendor_id\t: GenuineIntel\n"
                                "model name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\nflags\t\t: fpu\n\n"
                                "processor\t: 1\nmodel name\t: Other\n"),
            "Intel(R) Xeon(R) CPU @ 2.20GHz");
  EXPECT_EQ(CpuModelFromCpuinfo("processor\t: 0\nBogoMIPS\t: 50.00\n"), "");
}

TEST(MachineInfoTest, ReadsMemTotalInBytes) {
  EXPECT_EQ(MemTotalFromMeminfo("MemTotal:       24578148 kB\nMemFree:  1 kB\n"),
            int64_t{24578148} * 1024);
  EXPECT_EQ(MemTotalFromMeminfo("MemFree:  1 kB\n"), 0);
  EXPECT_EQ(MemTotalFromMeminfo("MemTotal: lots\n"), 0);
}

// A container's limit (cgroup v2's memory.max, v1's memory.limit_in_bytes) bounds what a ps
// may hold: in a 200 MB container a ps sized from the host's memory was OOM-killed.
TEST(MachineInfoTest, ReadsTheLowestCgroupMemoryLimit) {
  std::map<std::string, std::string> files;
  auto read = [&files](const std::string& path) {
    auto it = files.find(path);
    return it == files.end() ? std::string() : it->second;
  };
  files["/sys/fs/cgroup/memory.max"] = "209715200\n";
  EXPECT_EQ(CgroupMemoryLimit("0::/\n", read), 209715200);
  files["/sys/fs/cgroup/job/memory.max"] = "104857600\n";
  EXPECT_EQ(CgroupMemoryLimit("0::/job\n", read), 104857600);
  files = {{"/sys/fs/cgroup/memory.max", "max\n"}};
  EXPECT_EQ(CgroupMemoryLimit("0::/\n", read), 0);
  files = {{"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "268435456"},
           {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712"}};
  EXPECT_EQ(CgroupMemoryLimit("5:cpu:/\n4:memory:/docker/abc\n", read), 268435456);
  EXPECT_EQ(CgroupMemoryLimit("4:memory:/\n", read), 0);
  EXPECT_EQ(CgroupMemoryLimit("", read), 0);
  EXPECT_EQ(CgroupMemoryLimit("0::/../../etc\n", read), 0);
  EXPECT_GT(UsableMemoryBytes(), 0);
}

TEST(MachineInfoTest, ReadsTheNvidiaDriversFiles) {
  EXPECT_EQ(GpuModelFromInformation("Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 123\n"),
            "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(DriverVersionFromNvidiaVersion(
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 "
                "UTC 2023\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"),
            "535.104.05");
  EXPECT_EQ(DriverVersionFromNvidiaVersion("no version here\n"), "");
}

TEST(MachineInfoTest, DescribesThisMachine) {
  MachineInfo machine = DescribeMachine();
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  EXPECT_EQ(machine.hostname(), host);
  EXPECT_EQ(machine.cores(), sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_GT(machine.memory_bytes(), 0);
  EXPECT_EQ(machine.kernel().rfind("Linux ", 0), 0u) << machine.kernel();
  EXPECT_EQ(machine.gpus().empty(), machine.gpu_driver().empty());
}

}  // namespace
}  // namespace ps
