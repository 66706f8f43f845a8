// The CPU backend: matrix products through CBLAS, everything else as plain loops over host
// memory that the compiler vectorizes. Runs synchronously on the calling thread.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "worker/compute/compute_backend.h"
#include "worker/compute/window_ops.h"

namespace ps {
namespace {

// Cache-line (and AVX-512) alignment for every array.
constexpr std::align_val_t kAlignment{64};

using window_ops::ImageSize;
using window_ops::PooledSize;

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
    const size_t count = static_cast<size_t>(batch) * window.out_height() * window.out_width() *
                         window.patch();
    for (size_t i = 0; i < count; ++i) columns[i] = window_ops::Im2ColAt(window, images, i);
  }

  void Col2Im(const Window2D& window, int batch, const float* columns, float* images) override {
    const size_t count = ImageSize(window, batch);
    for (size_t i = 0; i < count; ++i) images[i] = window_ops::Col2ImAt(window, columns, i);
  }

  void MaxPoolForward(const Window2D& window, int batch, const float* x, float* y) override {
    const size_t count = PooledSize(window, batch);
    for (size_t i = 0; i < count; ++i) y[i] = window_ops::MaxPoolAt(window, x, i);
  }

  void AvgPoolForward(const Window2D& window, int batch, const float* x, float* y) override {
    const size_t count = PooledSize(window, batch);
    for (size_t i = 0; i < count; ++i) y[i] = window_ops::AvgPoolAt(window, x, i);
  }

  void MaxPoolBackward(const Window2D& window, int batch, const float* x, const float* y,
                       const float* dy, float* dx) override {
    const size_t count = ImageSize(window, batch);
    for (size_t i = 0; i < count; ++i) {
      dx[i] = window_ops::PoolGradientAt(window, /*max=*/true, x, y, dy, i);
    }
  }

  void AvgPoolBackward(const Window2D& window, int batch, const float* dy, float* dx) override {
    const size_t count = ImageSize(window, batch);
    for (size_t i = 0; i < count; ++i) {
      dx[i] = window_ops::PoolGradientAt(window, /*max=*/false, nullptr, nullptr, dy, i);
    }
  }

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
        for (size_t i = 0; i < count; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
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
