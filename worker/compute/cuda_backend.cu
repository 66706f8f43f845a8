// The CUDA backend: one GPU, one stream, one cuBLAS handle bound to that stream. Every
// operation is queued on the stream in call order; CopyToHost and the losses wait for it.
// Copies go through a pinned staging buffer, and the losses reduce per-row results on the
// device in a fixed order (deterministic), into scratch arrays that are allocated once and
// grown as needed, so nothing is allocated per call on the hot path.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "worker/compute/compute_backend.h"
#include "worker/compute/cuda_backend_impl.h"
#include "worker/compute/dropout_ops.h"
#include "worker/compute/window_ops.h"

namespace ps {
namespace {

// After construction every CUDA and cuBLAS error is a programmer error or a device fault that
// the interface cannot report: print the call, where it was made and CUDA's message, and abort.
[[noreturn]] void DieOnError(const char* call, const char* file, int line,
                             const std::string& message) {
  std::fprintf(stderr, "%s:%d: CUDA backend: %s failed: %s\n", file, line, call, message.c_str());
  std::fflush(stderr);
  std::abort();
}

std::string DescribeCudaError(cudaError_t error) {
  return std::string(cudaGetErrorString(error)) + " (" + cudaGetErrorName(error) + ")";
}

void CheckCuda(cudaError_t error, const char* call, const char* file, int line) {
  if (error != cudaSuccess) DieOnError(call, file, line, DescribeCudaError(error));
}

void CheckCublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    DieOnError(call, file, line, cublasGetStatusString(status));
  }
}

#define PS_CUDA_CHECK(call) CheckCuda((call), #call, __FILE__, __LINE__)
#define PS_CUBLAS_CHECK(call) CheckCublas((call), #call, __FILE__, __LINE__)
// After a kernel launch: catches a bad launch configuration at once (faults inside the kernel
// surface at the next synchronizing call, which is checked too).
#define PS_LAUNCH_CHECK(kernel) \
  CheckCuda(cudaGetLastError(), "launching " kernel, __FILE__, __LINE__)

// Elementwise kernels: blocks of kThreads threads, at most kMaxBlocks blocks, each thread
// looping over the elements one grid apart.
constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 65535;

unsigned int BlocksFor(size_t count) {
  return static_cast<unsigned int>(std::min((count + kThreads - 1) / kThreads, kMaxBlocks));
}

__device__ size_t FirstIndex() {
  return blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
}
__device__ size_t GridStride() { return static_cast<size_t>(gridDim.x) * blockDim.x; }

__global__ void FillKernel(size_t count, float value, float* array) {
  for (size_t i = FirstIndex(); i < count; i += GridStride()) array[i] = value;
}

// `count` = rows * cols > 0.
__global__ void AddBiasKernel(size_t count, size_t cols, const float* bias, float* x) {
  for (size_t i = FirstIndex(); i < count; i += GridStride()) x[i] += bias[i % cols];
}

// Column sums: a block of kColumnTile x kRowLanes threads per kColumnTile columns; thread
// (column, lane) sums rows lane, lane + kRowLanes, ..., then lane 0 adds the kRowLanes partial
// sums in order.
constexpr int kColumnTile = 32;
constexpr int kRowLanes = 8;

__global__ void ColumnSumsKernel(int rows, int cols, const float* x, float* out) {
  __shared__ float partial[kRowLanes][kColumnTile];
  const int column = blockIdx.x * kColumnTile + threadIdx.x;
  float sum = 0.0f;
  if (column < cols) {
    for (int row = threadIdx.y; row < rows; row += kRowLanes) {
      sum += x[static_cast<size_t>(row) * cols + column];
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && column < cols) {
    float total = 0.0f;
    for (int lane = 0; lane < kRowLanes; ++lane) total += partial[lane][threadIdx.x];
    out[column] = total;
  }
}

using window_ops::ImageSize;
using window_ops::PooledSize;

// Convolution and pooling: a thread per output element, the arithmetic window_ops.h's.
enum class WindowOp { kIm2Col, kCol2Im, kMaxPool, kAvgPool, kMaxPoolGradient, kAvgPoolGradient };

template <WindowOp kOp>
__global__ void WindowKernel(size_t count, Window2D window, const float* a, const float* b,
                             const float* c, float* out) {
  for (size_t i = FirstIndex(); i < count; i += GridStride()) {
    switch (kOp) {
      case WindowOp::kIm2Col: out[i] = window_ops::Im2ColAt(window, a, i); break;
      case WindowOp::kCol2Im: out[i] = window_ops::Col2ImAt(window, a, i); break;
      case WindowOp::kMaxPool: out[i] = window_ops::MaxPoolAt(window, a, i); break;
      case WindowOp::kAvgPool: out[i] = window_ops::AvgPoolAt(window, a, i); break;
      case WindowOp::kMaxPoolGradient:
        out[i] = window_ops::PoolGradientAt(window, true, a, b, c, i);
        break;
      case WindowOp::kAvgPoolGradient:
        out[i] = window_ops::PoolGradientAt(window, false, nullptr, nullptr, c, i);
        break;
    }
  }
}

// Stable on both sides, as on the CPU: exp never overflows.
__device__ float StableSigmoid(float x) {
  const float e = expf(-fabsf(x));
  return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

// x and y may be the same array: each element is read before it is written, by one thread.
template <Activation kActivation>
__global__ void ActivationForwardKernel(size_t count, const float* x, float* y) {
  for (size_t i = FirstIndex(); i < count; i += GridStride()) {
    const float value = x[i];
    if constexpr (kActivation == Activation::kRelu) {
      y[i] = value > 0.0f ? value : 0.0f;
    } else if constexpr (kActivation == Activation::kTanh) {
      y[i] = tanhf(value);
    } else {
      y[i] = StableSigmoid(value);
    }
  }
}

// dy and dx may be the same array.
template <Activation kActivation>
__global__ void ActivationBackwardKernel(size_t count, const float* y, const float* dy, float* dx) {
  for (size_t i = FirstIndex(); i < count; i += GridStride()) {
    const float output = y[i];
    const float gradient = dy[i];
    if constexpr (kActivation == Activation::kRelu) {
      dx[i] = output > 0.0f ? gradient : 0.0f;
    } else if constexpr (kActivation == Activation::kTanh) {
      dx[i] = gradient * (1.0f - output * output);
    } else {
      dx[i] = gradient * output * (1.0f - output);
    }
  }
}

__global__ void AxpyKernel(size_t count, float alpha, const float* x, float* y) {
  for (size_t i = FirstIndex(); i < count; i += GridStride()) y[i] += alpha * x[i];
}

__global__ void MultiplyKernel(size_t count, const float* x, const float* y, float* z) {
  for (size_t i = FirstIndex(); i < count; i += GridStride()) z[i] = x[i] * y[i];
}

__global__ void DropoutMaskKernel(size_t count, uint64_t seed, float rate, float* mask) {
  for (size_t i = FirstIndex(); i < count; i += GridStride()) {
    mask[i] = dropout_ops::MaskAt(seed, rate, i);
  }
}

// The losses write one result per row (row_loss, and row_flags of kRowCorrect and
// kRowBadLabel), which SumRowsKernel then adds up.
constexpr int kRowCorrect = 1;
constexpr int kRowBadLabel = 2;

constexpr int kWarpSize = 32;
constexpr unsigned int kFullWarp = 0xffffffffu;

// Every lane of the warp gets the same total: partners add the same two values at each step.
__device__ float WarpSum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(kFullWarp, value, offset);
  }
  return value;
}

// One warp per row, kThreads / kWarpSize rows per block.
constexpr int kSoftmaxRowsPerBlock = kThreads / kWarpSize;

__global__ void SoftmaxCrossEntropyKernel(int rows, int classes, const float* logits,
                                          const float* labels, float scale, float* dlogits,
                                          double* row_loss, int* row_flags) {
  const int row = blockIdx.x * kSoftmaxRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // The whole warp: no lane of it is needed below.
  const int lane = threadIdx.x % kWarpSize;
  const size_t offset = static_cast<size_t>(row) * classes;
  const float* logit = logits + offset;
  float* dlogit = dlogits + offset;

  // The first maximum, as on the CPU: each lane keeps the first maximum of its columns, then
  // lanes combine preferring the lower column on ties. A lane without columns keeps
  // (-inf, INT_MAX), which loses to any column.
  float max = -INFINITY;
  int argmax = INT_MAX;
  for (int c = lane; c < classes; c += kWarpSize) {
    if (argmax == INT_MAX || logit[c] > max) {
      max = logit[c];
      argmax = c;
    }
  }
  for (int step = kWarpSize / 2; step > 0; step /= 2) {
    const float other_max = __shfl_xor_sync(kFullWarp, max, step);
    const int other_argmax = __shfl_xor_sync(kFullWarp, argmax, step);
    if (other_max > max || (other_max == max && other_argmax < argmax)) {
      max = other_max;
      argmax = other_argmax;
    }
  }
  // Lanes agree unless a logit is NaN; lane 0 decides then.
  max = __shfl_sync(kFullWarp, max, 0);
  argmax = __shfl_sync(kFullWarp, argmax, 0);

  // exp(logit - max) into dlogit, then scaled by scale / sum; each lane rereads what it wrote.
  float partial_sum = 0.0f;
  for (int c = lane; c < classes; c += kWarpSize) {
    const float e = expf(logit[c] - max);
    dlogit[c] = e;
    partial_sum += e;
  }
  const float sum = WarpSum(partial_sum);
  const float scale_over_sum = scale / sum;

  // A label is a class id held in a float, truncated toward zero as on the CPU; one that is not
  // (NaN included) is flagged for the host.
  const float label_value = labels[row];
  int label = -1;
  if (label_value > -1.0f && label_value < static_cast<float>(classes)) {
    label = static_cast<int>(label_value);
    if (label >= classes) label = -1;
  }
  for (int c = lane; c < classes; c += kWarpSize) {
    float gradient = dlogit[c] * scale_over_sum;
    if (c == label) gradient -= scale;
    dlogit[c] = gradient;
  }
  if (lane == 0) {
    if (label < 0) {
      row_loss[row] = 0.0;
      row_flags[row] = kRowBadLabel;
    } else {
      row_loss[row] = log(static_cast<double>(sum)) -
                      (static_cast<double>(logit[label]) - static_cast<double>(max));
      row_flags[row] = argmax == label ? kRowCorrect : 0;
    }
  }
}

// logits and dlogits may be the same array.
__global__ void SigmoidCrossEntropyKernel(int rows, const float* logits, const float* labels,
                                          float scale, float* dlogits, double* row_loss,
                                          int* row_flags) {
  for (size_t r = FirstIndex(); r < static_cast<size_t>(rows); r += GridStride()) {
    const float x = logits[r];
    const float y = labels[r];
    dlogits[r] = (StableSigmoid(x) - y) * scale;
    const double x_wide = x;
    row_loss[r] = static_cast<double>(fmaxf(x, 0.0f)) - x_wide * y + log1p(exp(-fabs(x_wide)));
    row_flags[r] = (x > 0.0f ? 1.0f : 0.0f) == y ? kRowCorrect : 0;
  }
}

__global__ void SquaredErrorKernel(int rows, const float* predictions, const float* targets,
                                   float scale, float* dpredictions, double* row_loss,
                                   int* row_flags) {
  for (size_t r = FirstIndex(); r < static_cast<size_t>(rows); r += GridStride()) {
    const float difference = predictions[r] - targets[r];
    dpredictions[r] = difference * scale;
    row_loss[r] = 0.5 * static_cast<double>(difference) * difference;
    row_flags[r] = 0;
  }
}

struct LossTotals {
  double loss;
  long long correct;
  long long bad_labels;
};

// One block of kReduceThreads threads: each sums rows t, t + kReduceThreads, ..., then a tree
// in shared memory adds the threads' sums. A fixed order, so the same inputs give the same
// loss bit for bit.
constexpr int kReduceThreads = 256;

__global__ void SumRowsKernel(int rows, const double* row_loss, const int* row_flags,
                              LossTotals* totals) {
  __shared__ double loss[kReduceThreads];
  __shared__ long long correct[kReduceThreads];
  __shared__ long long bad_labels[kReduceThreads];
  const int t = threadIdx.x;
  double my_loss = 0.0;
  long long my_correct = 0;
  long long my_bad_labels = 0;
  for (size_t r = t; r < static_cast<size_t>(rows); r += kReduceThreads) {
    my_loss += row_loss[r];
    if (row_flags[r] & kRowCorrect) ++my_correct;
    if (row_flags[r] & kRowBadLabel) ++my_bad_labels;
  }
  loss[t] = my_loss;
  correct[t] = my_correct;
  bad_labels[t] = my_bad_labels;
  __syncthreads();
  for (int stride = kReduceThreads / 2; stride > 0; stride /= 2) {
    if (t < stride) {
      loss[t] += loss[t + stride];
      correct[t] += correct[t + stride];
      bad_labels[t] += bad_labels[t + stride];
    }
    __syncthreads();
  }
  if (t == 0) {
    totals->loss = loss[0];
    totals->correct = correct[0];
    totals->bad_labels = bad_labels[0];
  }
}

// The smallest pinned staging buffer, so that small copies do not regrow it one by one.
constexpr size_t kMinStagingBytes = size_t{1} << 20;

// Copies from 8 MiB on between pageable memory and the staging buffer are split over threads:
// one thread's memcpy (about 10 GB/s) was a quarter of an MLP step on an H200 (bench/RESULTS.md,
// "On a GPU"), where the DMA that follows runs at PCIe speed.
constexpr size_t kParallelCopyBytes = size_t{8} << 20;
constexpr unsigned kMaxCopyThreads = 8;

void ParallelMemcpy(void* destination, const void* source, size_t bytes) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned threads = bytes < kParallelCopyBytes ? 1 : std::min(kMaxCopyThreads, cores / 2);
  if (threads <= 1) {
    std::memcpy(destination, source, bytes);
    return;
  }
  // Parts of whole cache lines, the last taking the rest.
  const size_t part = (bytes / threads) & ~size_t{63};
  std::vector<std::thread> helpers;
  for (unsigned t = 1; t < threads; ++t) {
    const size_t begin = t * part, size = t + 1 == threads ? bytes - begin : part;
    helpers.emplace_back([=] {
      std::memcpy(static_cast<char*>(destination) + begin,
                  static_cast<const char*>(source) + begin, size);
    });
  }
  std::memcpy(destination, source, part);
  for (std::thread& helper : helpers) helper.join();
}

class CudaBackend : public ComputeBackend {
 public:
  explicit CudaBackend(int device) : device_(device) {}

  // Acquires the stream, the cuBLAS handle and the buffers; false with `*error` saying which
  // step failed and why. What was acquired is released by the destructor.
  bool Initialize(std::string* error) {
    const auto failed = [error](const std::string& step, const std::string& why) {
      *error = step + " failed: " + why;
      cudaGetLastError();  // Clears the error so later calls (the CPU fallback's) start clean.
      return false;
    };
    cudaError_t status = cudaSetDevice(device_);
    if (status != cudaSuccess) return failed("cudaSetDevice", DescribeCudaError(status));
    status = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    if (status != cudaSuccess) {
      stream_ = nullptr;
      return failed("cudaStreamCreate", DescribeCudaError(status));
    }
    status = cudaEventCreateWithFlags(&staging_idle_, cudaEventDisableTiming);
    if (status != cudaSuccess) {
      staging_idle_ = nullptr;
      return failed("cudaEventCreate", DescribeCudaError(status));
    }
    const cublasStatus_t blas_status = cublasCreate(&cublas_);
    if (blas_status != CUBLAS_STATUS_SUCCESS) {
      cublas_ = nullptr;
      return failed("cublasCreate", cublasGetStatusString(blas_status));
    }
    if (cublasSetStream(cublas_, stream_) != CUBLAS_STATUS_SUCCESS) {
      return failed("cublasSetStream", "cannot bind the cuBLAS handle to the stream");
    }
    // Full float32 products (no TF32), so that results match the CPU's within float tolerance.
    if (cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS) {
      return failed("cublasSetMathMode", "cannot select float32 math");
    }
    void* totals = nullptr;
    status = cudaMalloc(&totals, sizeof(LossTotals));
    if (status != cudaSuccess) return failed("cudaMalloc", DescribeCudaError(status));
    device_totals_ = static_cast<LossTotals*>(totals);
    status = cudaMallocHost(&totals, sizeof(LossTotals));
    if (status != cudaSuccess) return failed("cudaMallocHost", DescribeCudaError(status));
    host_totals_ = static_cast<LossTotals*>(totals);
    return true;
  }

  // Waits for the stream, then releases everything. Failures are reported, not fatal: the
  // process may be ending after a device fault.
  ~CudaBackend() override {
    if (stream_ == nullptr) return;  // Nothing was acquired.
    Report(cudaSetDevice(device_), "cudaSetDevice");
    Report(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    if (cublas_ != nullptr && cublasDestroy(cublas_) != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "CUDA backend: cublasDestroy failed\n");
    }
    Report(cudaFree(row_loss_), "cudaFree");
    Report(cudaFree(row_flags_), "cudaFree");
    Report(cudaFree(device_totals_), "cudaFree");
    if (host_totals_ != nullptr) Report(cudaFreeHost(host_totals_), "cudaFreeHost");
    if (staging_ != nullptr) Report(cudaFreeHost(staging_), "cudaFreeHost");
    if (staging_idle_ != nullptr) Report(cudaEventDestroy(staging_idle_), "cudaEventDestroy");
    Report(cudaStreamDestroy(stream_), "cudaStreamDestroy");
  }

  std::string name() const override { return "cuda:" + std::to_string(device_); }

  float* Allocate(size_t count) override {
    if (count == 0) return nullptr;
    MakeDeviceCurrent();
    void* array = nullptr;
    PS_CUDA_CHECK(cudaMalloc(&array, count * sizeof(float)));
    return static_cast<float*>(array);
  }

  // Work still queued on the array finishes first.
  void Free(float* array) override {
    if (array == nullptr) return;
    MakeDeviceCurrent();
    PS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    PS_CUDA_CHECK(cudaFree(array));
  }

  // Returns once `host` is copied into the staging buffer; the device copy runs on the stream.
  void CopyToDevice(const float* host, size_t count, float* device) override {
    if (count == 0) return;
    MakeDeviceCurrent();
    const size_t bytes = count * sizeof(float);
    void* staging = Staging(bytes);
    ParallelMemcpy(staging, host, bytes);
    PS_CUDA_CHECK(cudaMemcpyAsync(device, staging, bytes, cudaMemcpyHostToDevice, stream_));
    PS_CUDA_CHECK(cudaEventRecord(staging_idle_, stream_));
  }

  void CopyToHost(const float* device, size_t count, float* host) override {
    MakeDeviceCurrent();
    if (count == 0) {
      PS_CUDA_CHECK(cudaStreamSynchronize(stream_));
      return;
    }
    const size_t bytes = count * sizeof(float);
    void* staging = Staging(bytes);
    PS_CUDA_CHECK(cudaMemcpyAsync(staging, device, bytes, cudaMemcpyDeviceToHost, stream_));
    PS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    ParallelMemcpy(host, staging, bytes);
  }

  void Fill(size_t count, float value, float* array) override {
    if (count == 0) return;
    MakeDeviceCurrent();
    FillKernel<<<BlocksFor(count), kThreads, 0, stream_>>>(count, value, array);
    PS_LAUNCH_CHECK("FillKernel");
  }

  // cuBLAS is column-major, and a row-major matrix read as column-major is its transpose. So
  // this computes C^T = op(B)^T op(A)^T (n x m, leading dimension n), which leaves the
  // row-major C in c: B comes first, m and n swap, and each operand keeps its own transpose
  // flag and the leading dimension of its stored row-major form (as on the CPU).
  void Gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a,
            const float* b, float beta, float* c) override {
    if (m == 0 || n == 0) return;
    MakeDeviceCurrent();
    const int lda = std::max(1, transpose_a ? m : k);
    const int ldb = std::max(1, transpose_b ? k : n);
    PS_CUBLAS_CHECK(cublasSgemm(cublas_, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a,
                                lda, &beta, c, n));
  }

  void AddBias(int rows, int cols, const float* bias, float* x) override {
    if (rows <= 0 || cols <= 0) return;
    MakeDeviceCurrent();
    const size_t count = static_cast<size_t>(rows) * cols;
    AddBiasKernel<<<BlocksFor(count), kThreads, 0, stream_>>>(count, static_cast<size_t>(cols),
                                                              bias, x);
    PS_LAUNCH_CHECK("AddBiasKernel");
  }

  void ColumnSums(int rows, int cols, const float* x, float* out) override {
    if (cols <= 0) return;
    MakeDeviceCurrent();
    const unsigned int blocks = static_cast<unsigned int>((cols - 1) / kColumnTile + 1);
    ColumnSumsKernel<<<blocks, dim3(kColumnTile, kRowLanes), 0, stream_>>>(std::max(rows, 0), cols,
                                                                           x, out);
    PS_LAUNCH_CHECK("ColumnSumsKernel");
  }

  void ActivationForward(Activation f, size_t count, const float* x, float* y) override {
    if (count == 0) return;
    MakeDeviceCurrent();
    const unsigned int blocks = BlocksFor(count);
    switch (f) {
      case Activation::kRelu:
        ActivationForwardKernel<Activation::kRelu><<<blocks, kThreads, 0, stream_>>>(count, x, y);
        break;
      case Activation::kTanh:
        ActivationForwardKernel<Activation::kTanh><<<blocks, kThreads, 0, stream_>>>(count, x, y);
        break;
      case Activation::kSigmoid:
        ActivationForwardKernel<Activation::kSigmoid>
            <<<blocks, kThreads, 0, stream_>>>(count, x, y);
        break;
    }
    PS_LAUNCH_CHECK("ActivationForwardKernel");
  }

  void ActivationBackward(Activation f, size_t count, const float* y, const float* dy,
                          float* dx) override {
    if (count == 0) return;
    MakeDeviceCurrent();
    const unsigned int blocks = BlocksFor(count);
    switch (f) {
      case Activation::kRelu:
        ActivationBackwardKernel<Activation::kRelu>
            <<<blocks, kThreads, 0, stream_>>>(count, y, dy, dx);
        break;
      case Activation::kTanh:
        ActivationBackwardKernel<Activation::kTanh>
            <<<blocks, kThreads, 0, stream_>>>(count, y, dy, dx);
        break;
      case Activation::kSigmoid:
        ActivationBackwardKernel<Activation::kSigmoid>
            <<<blocks, kThreads, 0, stream_>>>(count, y, dy, dx);
        break;
    }
    PS_LAUNCH_CHECK("ActivationBackwardKernel");
  }

  // REQUIRES: every label is a class id in [0, classes); one that is not aborts (it would index
  // outside the row on the CPU).
  LossSums SoftmaxCrossEntropy(int rows, int classes, const float* logits, const float* labels,
                               float scale, float* dlogits) override {
    if (rows <= 0 || classes <= 0) return LossSums();
    MakeDeviceCurrent();
    EnsureRowScratch(rows);
    const unsigned int blocks = static_cast<unsigned int>((rows - 1) / kSoftmaxRowsPerBlock + 1);
    SoftmaxCrossEntropyKernel<<<blocks, kThreads, 0, stream_>>>(
        rows, classes, logits, labels, scale, dlogits, row_loss_, row_flags_);
    PS_LAUNCH_CHECK("SoftmaxCrossEntropyKernel");
    const LossTotals totals = SumRows(rows);
    if (totals.bad_labels > 0) {
      std::fprintf(stderr,
                   "CUDA backend: SoftmaxCrossEntropy: %lld of %d labels are not class ids in "
                   "[0, %d)\n",
                   totals.bad_labels, rows, classes);
      std::fflush(stderr);
      std::abort();
    }
    return LossSums{totals.loss, totals.correct};
  }

  LossSums SigmoidCrossEntropy(int rows, const float* logits, const float* labels, float scale,
                               float* dlogits) override {
    if (rows <= 0) return LossSums();
    MakeDeviceCurrent();
    EnsureRowScratch(rows);
    SigmoidCrossEntropyKernel<<<BlocksFor(rows), kThreads, 0, stream_>>>(
        rows, logits, labels, scale, dlogits, row_loss_, row_flags_);
    PS_LAUNCH_CHECK("SigmoidCrossEntropyKernel");
    const LossTotals totals = SumRows(rows);
    return LossSums{totals.loss, totals.correct};
  }

  LossSums SquaredError(int rows, const float* predictions, const float* targets, float scale,
                        float* dpredictions) override {
    if (rows <= 0) return LossSums();
    MakeDeviceCurrent();
    EnsureRowScratch(rows);
    SquaredErrorKernel<<<BlocksFor(rows), kThreads, 0, stream_>>>(
        rows, predictions, targets, scale, dpredictions, row_loss_, row_flags_);
    PS_LAUNCH_CHECK("SquaredErrorKernel");
    const LossTotals totals = SumRows(rows);
    return LossSums{totals.loss, totals.correct};
  }

  void Im2Col(const Window2D& window, int batch, const float* images, float* columns) override {
    RunWindow<WindowOp::kIm2Col>(static_cast<size_t>(batch) * window.out_height() *
                                     window.out_width() * window.patch(),
                                 window, images, nullptr, nullptr, columns, "Im2Col");
  }
  void Col2Im(const Window2D& window, int batch, const float* columns, float* images) override {
    RunWindow<WindowOp::kCol2Im>(ImageSize(window, batch), window, columns, nullptr, nullptr,
                                 images, "Col2Im");
  }
  void MaxPoolForward(const Window2D& window, int batch, const float* x, float* y) override {
    RunWindow<WindowOp::kMaxPool>(PooledSize(window, batch), window, x, nullptr, nullptr, y,
                                  "MaxPoolForward");
  }
  void AvgPoolForward(const Window2D& window, int batch, const float* x, float* y) override {
    RunWindow<WindowOp::kAvgPool>(PooledSize(window, batch), window, x, nullptr, nullptr, y,
                                  "AvgPoolForward");
  }
  void MaxPoolBackward(const Window2D& window, int batch, const float* x, const float* y,
                       const float* dy, float* dx) override {
    RunWindow<WindowOp::kMaxPoolGradient>(ImageSize(window, batch), window, x, y, dy, dx,
                                          "MaxPoolBackward");
  }
  void AvgPoolBackward(const Window2D& window, int batch, const float* dy, float* dx) override {
    RunWindow<WindowOp::kAvgPoolGradient>(ImageSize(window, batch), window, nullptr, nullptr, dy,
                                          dx, "AvgPoolBackward");
  }

  void Axpy(size_t count, float alpha, const float* x, float* y) override {
    if (count == 0) return;
    MakeDeviceCurrent();
    AxpyKernel<<<BlocksFor(count), kThreads, 0, stream_>>>(count, alpha, x, y);
    PS_LAUNCH_CHECK("AxpyKernel");
  }

  void Multiply(size_t count, const float* x, const float* y, float* z) override {
    if (count == 0) return;
    MakeDeviceCurrent();
    MultiplyKernel<<<BlocksFor(count), kThreads, 0, stream_>>>(count, x, y, z);
    PS_LAUNCH_CHECK("MultiplyKernel");
  }

  void DropoutMask(size_t count, uint64_t seed, float rate, float* mask) override {
    if (count == 0) return;
    MakeDeviceCurrent();
    DropoutMaskKernel<<<BlocksFor(count), kThreads, 0, stream_>>>(count, seed, rate, mask);
    PS_LAUNCH_CHECK("DropoutMaskKernel");
  }

  void Synchronize() override {
    MakeDeviceCurrent();
    PS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  int64_t DeviceMemoryInUse() override {
    MakeDeviceCurrent();
    size_t free_bytes = 0, total_bytes = 0;
    PS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return static_cast<int64_t>(total_bytes - free_bytes);
  }

 private:
  template <WindowOp kOp>
  void RunWindow(size_t count, const Window2D& window, const float* a, const float* b,
                 const float* c, float* out, const char* name) {
    if (count == 0) return;
    MakeDeviceCurrent();
    WindowKernel<kOp><<<BlocksFor(count), kThreads, 0, stream_>>>(count, window, a, b, c, out);
    CheckCuda(cudaGetLastError(), name, __FILE__, __LINE__);
  }

  static void Report(cudaError_t error, const char* call) {
    if (error != cudaSuccess) {
      std::fprintf(stderr, "CUDA backend: %s failed: %s\n", call, DescribeCudaError(error).c_str());
    }
  }

  // The current device is per host thread, and the backend may be used on another thread
  // than the one that created it.
  void MakeDeviceCurrent() { PS_CUDA_CHECK(cudaSetDevice(device_)); }

  // The pinned staging buffer with room for `bytes`, once no queued copy still uses it.
  void* Staging(size_t bytes) {
    PS_CUDA_CHECK(cudaEventSynchronize(staging_idle_));
    if (bytes > staging_bytes_) {
      const size_t capacity = std::max({bytes, 2 * staging_bytes_, kMinStagingBytes});
      if (staging_ != nullptr) PS_CUDA_CHECK(cudaFreeHost(staging_));
      staging_ = nullptr;
      staging_bytes_ = 0;
      PS_CUDA_CHECK(cudaMallocHost(&staging_, capacity));
      staging_bytes_ = capacity;
    }
    return staging_;
  }

  // Room for per-row results of `rows` rows. Losses wait for the stream before returning, so
  // no queued kernel still uses the old arrays.
  void EnsureRowScratch(int rows) {
    const size_t needed = static_cast<size_t>(rows);
    if (needed <= row_capacity_) return;
    const size_t capacity = std::max(needed, 2 * row_capacity_);
    PS_CUDA_CHECK(cudaFree(row_loss_));
    PS_CUDA_CHECK(cudaFree(row_flags_));
    row_loss_ = nullptr;
    row_flags_ = nullptr;
    row_capacity_ = 0;
    void* memory = nullptr;
    PS_CUDA_CHECK(cudaMalloc(&memory, capacity * sizeof(double)));
    row_loss_ = static_cast<double*>(memory);
    PS_CUDA_CHECK(cudaMalloc(&memory, capacity * sizeof(int)));
    row_flags_ = static_cast<int*>(memory);
    row_capacity_ = capacity;
  }

  // Adds up the per-row results of the last loss kernel on the device and waits for them.
  LossTotals SumRows(int rows) {
    SumRowsKernel<<<1, kReduceThreads, 0, stream_>>>(rows, row_loss_, row_flags_, device_totals_);
    PS_LAUNCH_CHECK("SumRowsKernel");
    PS_CUDA_CHECK(cudaMemcpyAsync(host_totals_, device_totals_, sizeof(LossTotals),
                                  cudaMemcpyDeviceToHost, stream_));
    PS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return *host_totals_;
  }

  const int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;

  // Pinned staging for copies; staging_idle_ is recorded after each copy out of it.
  void* staging_ = nullptr;
  size_t staging_bytes_ = 0;
  cudaEvent_t staging_idle_ = nullptr;

  // Per-row loss results (device), and their sums (device, then pinned host).
  double* row_loss_ = nullptr;
  int* row_flags_ = nullptr;
  size_t row_capacity_ = 0;
  LossTotals* device_totals_ = nullptr;
  LossTotals* host_totals_ = nullptr;
};

}  // namespace

std::unique_ptr<ComputeBackend> NewCudaBackend(int device, std::string* error) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // Clears the error so later calls start clean.
    *error = "the CUDA runtime found no usable GPU: " + DescribeCudaError(status);
    return nullptr;
  }
  if (device >= count) {
    *error = "no such GPU: the CUDA runtime sees " + std::to_string(count) + " GPU(s)";
    return nullptr;
  }
  auto backend = std::make_unique<CudaBackend>(device);
  if (!backend->Initialize(error)) return nullptr;
  return backend;
}

}  // namespace ps
