// CreateCudaBackend on this machine: a backend where a GPU is usable, a clear
// FAILED_PRECONDITION (never a crash) where none is. The operations themselves are checked by
// compute_backend_test, which runs the CUDA backend where a GPU is usable; the tests here that
// need a GPU cover what only the CUDA backend has (staging, label checks).
#include "worker/compute/cuda_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/compute/compute_backend.h"
#include "worker/compute/device.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

TEST(CreateCudaBackendTest, SucceedsWhereAGpuIsUsableAndFailsCleanlyElsewhere) {
  const GpuQueryResult gpus = QueryUsableGpus();
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = CreateCudaBackend(0);
  if (gpus.gpus.empty()) {
    ASSERT_FALSE(backend.ok());
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition) << backend.status();
    EXPECT_THAT(std::string(backend.status().message()), HasSubstr("cuda:0"));
    EXPECT_THAT(std::string(backend.status().message()), HasSubstr("--device=cpu"));
    // Failing leaves nothing behind: asking again gives the same answer.
    EXPECT_EQ(CreateCudaBackend(0).status(), backend.status());
  } else {
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_EQ((*backend)->name(), "cuda:0");
  }
}

TEST(CreateCudaBackendTest, NoSuchGpuIsFailedPrecondition) {
  const int index = static_cast<int>(QueryUsableGpus().gpus.size()) + 1000;
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = CreateCudaBackend(index);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition) << backend.status();
  EXPECT_THAT(std::string(backend.status().message()), HasSubstr("cuda:" + std::to_string(index)));
}

TEST(CreateCudaBackendTest, NegativeIndexIsInvalidArgument) {
  EXPECT_EQ(CreateCudaBackend(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

// The tests below need a GPU.
class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const GpuQueryResult gpus = QueryUsableGpus();
    if (gpus.gpus.empty()) GTEST_SKIP() << "no GPU: " << gpus.problem;
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = CreateCudaBackend(0);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
  }

  std::unique_ptr<ComputeBackend> backend_;
};

TEST_F(CudaBackendTest, CopiesLargerThanTheStagingBufferAndReusedSources) {
  // 3M floats (12 MB) outgrow the first staging buffer; each source is overwritten as soon as
  // CopyToDevice returns.
  const size_t count = 3'000'000;
  std::vector<float> source(count);
  for (size_t i = 0; i < count; ++i) source[i] = static_cast<float>(i % 1000) - 500.0f;
  const std::vector<float> expected = source;
  DeviceArray first(backend_.get(), count);
  DeviceArray second(backend_.get(), count);
  backend_->CopyToDevice(source.data(), count, first.data());
  std::fill(source.begin(), source.end(), 7.0f);
  backend_->CopyToDevice(source.data(), count, second.data());
  std::fill(source.begin(), source.end(), -1.0f);

  std::vector<float> host(count);
  backend_->CopyToHost(first.data(), count, host.data());
  EXPECT_EQ(host, expected);
  backend_->CopyToHost(second.data(), count, host.data());
  EXPECT_EQ(host, std::vector<float>(count, 7.0f));
}

// Large copies are split over threads (cuda_backend.cu's ParallelMemcpy): every value lands
// where it belongs, for a size that is no multiple of the parts, both ways.
TEST_F(CudaBackendTest, ALargeCopyKeepsEveryValueInPlace) {
  const size_t count = (size_t{16} << 20) / sizeof(float) + 13;  // Below 2^24: exact floats.
  std::vector<float> source(count);
  for (size_t i = 0; i < count; ++i) source[i] = static_cast<float>(i);
  DeviceArray device(backend_.get(), count);
  backend_->CopyToDevice(source.data(), count, device.data());
  std::vector<float> host(count, -1.0f);
  backend_->CopyToHost(device.data(), count, host.data());
  EXPECT_EQ(host, source);
}

TEST_F(CudaBackendTest, ManyRowsReduceOnTheDevice) {
  // More rows than the reduction's threads, and exact per-row losses: 0.5 each.
  const int rows = 100'003;
  DeviceArray predictions(backend_.get(), rows);
  DeviceArray targets(backend_.get(), rows);
  DeviceArray gradient(backend_.get(), rows);
  backend_->Fill(rows, 1.0f, predictions.data());
  backend_->Fill(rows, 0.0f, targets.data());
  const LossSums sums =
      backend_->SquaredError(rows, predictions.data(), targets.data(), 1.0f, gradient.data());
  EXPECT_EQ(sums.loss, 0.5 * rows);
  EXPECT_EQ(sums.correct, 0);
}

using CudaBackendDeathTest = CudaBackendTest;

TEST_F(CudaBackendDeathTest, LabelThatIsNotAClassAborts) {
  // A forked child cannot use the parent's CUDA context: run the statement in a fresh process.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto softmax_with_label_3_of_3_classes = [this] {
    const std::vector<float> logits = {0, 1, 2};
    const std::vector<float> labels = {3};
    DeviceArray logits_device(backend_.get(), logits.size());
    DeviceArray labels_device(backend_.get(), labels.size());
    DeviceArray dlogits_device(backend_.get(), logits.size());
    backend_->CopyToDevice(logits.data(), logits.size(), logits_device.data());
    backend_->CopyToDevice(labels.data(), labels.size(), labels_device.data());
    backend_->SoftmaxCrossEntropy(1, 3, logits_device.data(), labels_device.data(), 1.0f,
                                  dlogits_device.data());
  };
  EXPECT_DEATH(softmax_with_label_3_of_3_classes(),
               "1 of 1 labels are not class ids in \\[0, 3\\)");
}

}  // namespace
}  // namespace ps
