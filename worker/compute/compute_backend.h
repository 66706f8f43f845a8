// The operations training needs, behind one interface with a CPU backend (CBLAS) and a CUDA
// backend (cuBLAS and kernels). Every array is row-major float32 in the backend's memory
// (host memory for the CPU, device memory for CUDA): allocate it with Allocate, move data in
// and out with CopyToDevice / CopyToHost. Class labels travel as floats (exact below 2^24).
//
// Operations may run asynchronously on the backend's stream; the ones that return a value
// to the host, and CopyToHost, wait for everything before them.
#ifndef PS_WORKER_COMPUTE_COMPUTE_BACKEND_H_
#define PS_WORKER_COMPUTE_COMPUTE_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace ps {

enum class Activation { kRelu, kTanh, kSigmoid };

// Sums over a batch, returned to the host.
struct LossSums {
  double loss = 0;      // Sum of per-example losses.
  int64_t correct = 0;  // Classifiers: examples whose prediction equals the label.
};

// The geometry of a 2-D convolution or pooling over a batch of NHWC images: each example is
// height x width x channels floats, row-major with the channels fastest (a batch is then a
// [batch, height * width * channels] matrix, as dense features are). The window moves by
// `stride` over the input padded with `padding` zeros on every side (pooling: padding 0).
struct Window2D {
  int height = 0;
  int width = 0;
  int channels = 0;
  int kernel_h = 1;
  int kernel_w = 1;
  int stride = 1;
  int padding = 0;

  int out_height() const { return (height + 2 * padding - kernel_h) / stride + 1; }
  int out_width() const { return (width + 2 * padding - kernel_w) / stride + 1; }
  // Floats in one window of the input (a row of Im2Col's columns).
  int patch() const { return kernel_h * kernel_w * channels; }
};

// Not thread-safe: one backend per training thread.
class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  virtual std::string name() const = 0;

  // Memory. Allocate returns uninitialized memory for `count` floats (nullptr for 0).
  virtual float* Allocate(size_t count) = 0;
  virtual void Free(float* array) = 0;
  virtual void CopyToDevice(const float* host, size_t count, float* device) = 0;
  virtual void CopyToHost(const float* device, size_t count, float* host) = 0;
  virtual void Fill(size_t count, float value, float* array) = 0;

  // C = alpha * op(A) * op(B) + beta * C, where op(A) is m x k, op(B) is k x n and C is m x n.
  // A is stored m x k (k x m when transpose_a), B is k x n (n x k when transpose_b), densely.
  virtual void Gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                    const float* a, const float* b, float beta, float* c) = 0;
  // x[r][c] += bias[c] for an rows x cols matrix.
  virtual void AddBias(int rows, int cols, const float* bias, float* x) = 0;
  // out[c] = sum over r of x[r][c] (the bias gradient).
  virtual void ColumnSums(int rows, int cols, const float* x, float* out) = 0;
  // y = f(x), elementwise; x == y is allowed.
  virtual void ActivationForward(Activation f, size_t count, const float* x, float* y) = 0;
  // dx = dy * f'(x) written in terms of y = f(x); dy == dx is allowed.
  virtual void ActivationBackward(Activation f, size_t count, const float* y, const float* dy,
                                  float* dx) = 0;
  // Softmax cross-entropy over `classes` logits per row: returns the summed loss and the
  // number of rows whose argmax is the label; writes dlogits = (softmax - onehot) * scale.
  virtual LossSums SoftmaxCrossEntropy(int rows, int classes, const float* logits,
                                       const float* labels, float scale, float* dlogits) = 0;
  // Binary cross-entropy on one logit per row (labels 0 or 1), prediction = logit > 0;
  // dlogits = (sigmoid(logit) - label) * scale.
  virtual LossSums SigmoidCrossEntropy(int rows, const float* logits, const float* labels,
                                       float scale, float* dlogits) = 0;
  // Squared error: loss = 0.5 * (prediction - target)^2 summed; dpredictions = (p - t) * scale.
  virtual LossSums SquaredError(int rows, const float* predictions, const float* targets,
                                float scale, float* dpredictions) = 0;
  // y += alpha * x.
  virtual void Axpy(size_t count, float alpha, const float* x, float* y) = 0;
  // z = x * y, elementwise; z may be x or y.
  virtual void Multiply(size_t count, const float* x, const float* y, float* z) = 0;
  // A dropout mask: mask[i] = dropout_ops::MaskAt(seed, rate, i) (0, or 1 / (1 - rate) for an
  // element kept), the same on every backend. `rate` is in [0, 1).
  virtual void DropoutMask(size_t count, uint64_t seed, float rate, float* mask) = 0;

  // Convolution and pooling over NHWC images (Window2D); window_ops.h holds the arithmetic both
  // backends share. `batch` examples each. A convolution is Im2Col and a Gemm (per chunk of
  // WorkingSetFloats, conv_model.cc).
  // columns[(n * out_h + oh) * out_w + ow][(kh * kernel_w + kw) * channels + c] =
  // images[n][oh * stride - padding + kh][ow * stride - padding + kw][c], 0 in the padding.
  virtual void Im2Col(const Window2D& window, int batch, const float* images,
                      float* columns) = 0;
  // Im2Col's adjoint: each pixel the sum of the column entries copied from it (the input's
  // gradient from the columns').
  virtual void Col2Im(const Window2D& window, int batch, const float* columns,
                      float* images) = 0;
  // Pooling (padding 0): y[n][oh][ow][c] is the window's maximum, or its mean.
  virtual void MaxPoolForward(const Window2D& window, int batch, const float* x, float* y) = 0;
  virtual void AvgPoolForward(const Window2D& window, int batch, const float* x, float* y) = 0;
  // dx: each window's dy goes to the first position (kh, then kw) holding its maximum (x and y
  // as MaxPoolForward had them), or in equal parts to every position (mean); summed where
  // windows overlap.
  virtual void MaxPoolBackward(const Window2D& window, int batch, const float* x, const float* y,
                               const float* dy, float* dx) = 0;
  virtual void AvgPoolBackward(const Window2D& window, int batch, const float* dy,
                               float* dx) = 0;

  // The floats a layer's intermediate arrays (a convolution's columns) should stay within, so
  // that what one operation writes is still in cache for the next; 0: no bound (a GPU, where a
  // whole batch in one Gemm is faster). A model works a batch in chunks of about this size.
  virtual size_t WorkingSetFloats() const { return 0; }

  // Returns once every operation before it has finished (for timing phases apart).
  virtual void Synchronize() = 0;

  // Bytes of memory in use on the backend's device (a GPU's total less its free memory, which
  // counts every process on it); 0 for the host.
  virtual int64_t DeviceMemoryInUse() { return 0; }
};

// The CPU backend (OpenBLAS through CBLAS).
std::unique_ptr<ComputeBackend> CreateCpuBackend();

// An array in a backend's memory, freed with it. Move-only.
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(ComputeBackend* backend, size_t count)
      : backend_(backend), data_(backend->Allocate(count)), count_(count) {}
  DeviceArray(DeviceArray&& other) noexcept { *this = std::move(other); }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    if (this != &other) {
      Reset();
      backend_ = other.backend_;
      data_ = other.data_;
      count_ = other.count_;
      other.data_ = nullptr;
      other.count_ = 0;
    }
    return *this;
  }
  ~DeviceArray() { Reset(); }

  float* data() const { return data_; }
  size_t size() const { return count_; }

 private:
  void Reset() {
    if (data_ != nullptr) backend_->Free(data_);
    data_ = nullptr;
  }

  ComputeBackend* backend_ = nullptr;
  float* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_COMPUTE_BACKEND_H_
