// The CPU backend: matrix products through CBLAS, convolution and pooling in
// cpu_window_ops.h, everything else as plain loops over host memory that the compiler
// vectorizes. Runs synchronously on the calling thread.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "worker/compute/compute_backend.h"
#include "worker/compute/cpu_window_ops.h"
#include "worker/compute/dropout_ops.h"

namespace ps {
namespace {

// Cache-line (and AVX-512) alignment for every array.
constexpr std::align_val_t kAlignment{64};

// Class labels travel as floats; a class id is exact below 2^24.
int ClassOf(float label) { return static_cast<int>(label); }

class CpuBackend : public ComputeBackend {
 public:
  std::string name() const override { return "cpu"; }

  float* Allocate(size_t count) override {
    if (count == 0) return nullptr;
    return static_cast<float*>(::operator new(count * sizeof(float), kAlignment));
  }

  void Free(float* array) override {
    if (array != nullptr) ::operator delete(array, kAlignment);
  }

  void CopyToDevice(const float* host, size_t count, float* device) override {
    if (count > 0) std::memcpy(device, host, count * sizeof(float));
  }

  void CopyToHost(const float* device, size_t count, float* host) override {
    if (count > 0) std::memcpy(host, device, count * sizeof(float));
  }

  void Fill(size_t count, float value, float* array) override {
    std::fill(array, array + count, value);
  }

  void Gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
            const float* a, const float* b, float beta, float* c) override {
    if (m == 0 || n == 0) return;
    // Leading dimensions of the stored (untransposed) matrices; BLAS wants them >= 1.
    const int lda = std::max(1, transpose_a ? m : k);
    const int ldb = std::max(1, transpose_b ? k : n);
    cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
                transpose_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
                n);
  }

  void Im2Col(const Window2D& window, int batch, const float* images, float* columns) override {
    cpu_window_ops::Im2Col(window, batch, images, columns);
  }

  void Col2Im(const Window2D& window, int batch, const float* columns, float* images) override {
    cpu_window_ops::Col2Im(window, batch, columns, images);
  }

  void MaxPoolForward(const Window2D& window, int batch, const float* x, float* y) override {
    cpu_window_ops::MaxPoolForward(window, batch, x, y);
  }

  void AvgPoolForward(const Window2D& window, int batch, const float* x, float* y) override {
    cpu_window_ops::AvgPoolForward(window, batch, x, y);
  }

  void MaxPoolBackward(const Window2D& window, int batch, const float* x, const float* y,
                       const float* dy, float* dx) override {
    cpu_window_ops::MaxPoolBackward(window, batch, x, y, dy, dx);
  }

  void AvgPoolBackward(const Window2D& window, int batch, const float* dy, float* dx) override {
    cpu_window_ops::AvgPoolBackward(window, batch, dy, dx);
  }

  // Half of a core's L2 cache (1 MiB on the machines measured in bench/RESULTS.md): a chunk
  // of a convolution's columns is written and read there (about 1.5x the step rate of a
  // whole-batch Gemm for the Fashion-MNIST CNN, bench/RESULTS.md).
  size_t WorkingSetFloats() const override { return size_t{1} << 17; }

  void AddBias(int rows, int cols, const float* bias, float* x) override {
    for (int r = 0; r < rows; ++r) {
      float* row = x + static_cast<size_t>(r) * cols;
      for (int c = 0; c < cols; ++c) row[c] += bias[c];
    }
  }

  void ColumnSums(int rows, int cols, const float* x, float* out) override {
    std::fill(out, out + cols, 0.0f);
    for (int r = 0; r < rows; ++r) {
      const float* row = x + static_cast<size_t>(r) * cols;
      for (int c = 0; c < cols; ++c) out[c] += row[c];
    }
  }

  void ActivationForward(Activation f, size_t count, const float* x, float* y) override {
    switch (f) {
      case Activation::kRelu:
        for (size_t i = 0; i < count; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        return;
      case Activation::kTanh:
        for (size_t i = 0; i < count; ++i) y[i] = std::tanh(x[i]);
        return;
      case Activation::kSigmoid:
        for (size_t i = 0; i < count; ++i) y[i] = Sigmoid(x[i]);
        return;
    }
  }

  void ActivationBackward(Activation f, size_t count, const float* y, const float* dy,
                          float* dx) override {
    switch (f) {
      case Activation::kRelu:
        // dy is read unconditionally so that the loop becomes a vector select (a branch per
        // element mispredicts on half of them).
        for (size_t i = 0; i < count; ++i) {
          const float d = dy[i];
          dx[i] = y[i] > 0.0f ? d : 0.0f;
        }
        return;
      case Activation::kTanh:
        for (size_t i = 0; i < count; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
        return;
      case Activation::kSigmoid:
        for (size_t i = 0; i < count; ++i) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
        return;
    }
  }

  // REQUIRES: every label is a class id in [0, classes).
  LossSums SoftmaxCrossEntropy(int rows, int classes, const float* logits, const float* labels,
                               float scale, float* dlogits) override {
    LossSums sums;
    for (int r = 0; r < rows; ++r) {
      const size_t offset = static_cast<size_t>(r) * classes;
      const float* logit = logits + offset;
      float* dlogit = dlogits + offset;
      const int label = ClassOf(labels[r]);

      int argmax = 0;
      for (int c = 1; c < classes; ++c) {
        if (logit[c] > logit[argmax]) argmax = c;
      }
      const float max = logit[argmax];
      // exp(logit - max) into dlogit, its sum kept in double.
      double sum = 0;
      for (int c = 0; c < classes; ++c) {
        dlogit[c] = std::exp(logit[c] - max);
        sum += dlogit[c];
      }
      const float scale_over_sum = static_cast<float>(scale / sum);
      for (int c = 0; c < classes; ++c) dlogit[c] *= scale_over_sum;
      dlogit[label] -= scale;

      sums.loss += std::log(sum) - (static_cast<double>(logit[label]) - max);
      if (argmax == label) ++sums.correct;
    }
    return sums;
  }

  LossSums SigmoidCrossEntropy(int rows, const float* logits, const float* labels, float scale,
                               float* dlogits) override {
    LossSums sums;
    for (int r = 0; r < rows; ++r) {
      const float x = logits[r];
      const float y = labels[r];
      dlogits[r] = (Sigmoid(x) - y) * scale;
      sums.loss += static_cast<double>(std::max(x, 0.0f)) - static_cast<double>(x) * y +
                   std::log1p(std::exp(-std::abs(static_cast<double>(x))));
      if ((x > 0.0f ? 1.0f : 0.0f) == y) ++sums.correct;
    }
    return sums;
  }

  LossSums SquaredError(int rows, const float* predictions, const float* targets, float scale,
                        float* dpredictions) override {
    LossSums sums;
    for (int r = 0; r < rows; ++r) {
      const float difference = predictions[r] - targets[r];
      dpredictions[r] = difference * scale;
      sums.loss += 0.5 * static_cast<double>(difference) * difference;
    }
    return sums;
  }

  void Axpy(size_t count, float alpha, const float* x, float* y) override {
    for (size_t i = 0; i < count; ++i) y[i] += alpha * x[i];
  }
  void Multiply(size_t count, const float* x, const float* y, float* z) override {
    for (size_t i = 0; i < count; ++i) z[i] = x[i] * y[i];
  }

  void DropoutMask(size_t count, uint64_t seed, float rate, float* mask) override {
    for (size_t i = 0; i < count; ++i) mask[i] = dropout_ops::MaskAt(seed, rate, i);
  }


  void Synchronize() override {}  // Every operation has finished when it returns.

 private:
  // Stable on both sides: exp never overflows.
  static float Sigmoid(float x) {
    const float e = std::exp(-std::abs(x));
    return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
  }
};

}  // namespace

std::unique_ptr<ComputeBackend> CreateCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace ps
