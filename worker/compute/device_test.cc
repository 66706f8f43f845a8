#include "worker/compute/device.h"

#include <glog/logging.h>
#include <gtest/gtest.h>

namespace ps {
namespace {

GpuQueryResult OneGpu() {
  GpuQueryResult result;
  GpuInfo gpu;
  gpu.index = 0;
  gpu.name = "Test GPU";
  gpu.total_memory_bytes = int64_t{80} << 30;
  gpu.compute_capability_major = 9;
  result.gpus.push_back(gpu);
  return result;
}

GpuQueryResult NoGpu() {
  GpuQueryResult result;
  result.problem = "no driver";
  return result;
}

TEST(SelectDeviceTest, AutoPrefersTheGpuAndSaysWhyWhenItFallsBack) {
  absl::StatusOr<Device> device = SelectDevice("auto", OneGpu());
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->kind, Device::Kind::kCuda);
  EXPECT_EQ(device->cuda_index, 0);
  EXPECT_NE(device->description.find("Test GPU, 80 GiB"), std::string::npos);

  device = SelectDevice("auto", NoGpu());
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->kind, Device::Kind::kCpu);
  EXPECT_EQ(device->description, "cpu (auto: no driver)");
}

TEST(SelectDeviceTest, ExplicitChoices) {
  absl::StatusOr<Device> device = SelectDevice("cpu", OneGpu());
  ASSERT_TRUE(device.ok());
  EXPECT_EQ(device->kind, Device::Kind::kCpu);

  device = SelectDevice("cuda:0", OneGpu());
  ASSERT_TRUE(device.ok());
  EXPECT_EQ(device->kind, Device::Kind::kCuda);

  device = SelectDevice("cuda:1", OneGpu());
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);

  device = SelectDevice("cuda:0", NoGpu());
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(device.status().message().find("no driver; use --device=cpu"), std::string::npos);

  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", ""}) {
    device = SelectDevice(bad, OneGpu());
    ASSERT_FALSE(device.ok()) << bad;
    EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// On the real machine: a CUDA build without a GPU must report why, not crash or hang.
TEST(QueryUsableGpusTest, ReportsGpusOrTheReasonThereAreNone) {
  GpuQueryResult gpus = QueryUsableGpus();
  if (gpus.gpus.empty()) {
    EXPECT_FALSE(gpus.problem.empty());
    LOG(INFO) << "no GPU: " << gpus.problem;
  } else {
    EXPECT_TRUE(BuiltWithCuda());
    for (const GpuInfo& gpu : gpus.gpus) LOG(INFO) << "GPU " << gpu.index << ": " << gpu.name;
  }
  absl::StatusOr<Device> device = SelectDevice("auto", gpus);
  ASSERT_TRUE(device.ok());
  LOG(INFO) << "--device=auto picks " << device->description;
}

}  // namespace
}  // namespace ps
