// A ComputeBackend that forwards every call to another, for wrappers that change or observe a
// few of them (the benches' timers, tests' variations) and pass the rest through.
#ifndef PS_WORKER_COMPUTE_FORWARDING_BACKEND_H_
#define PS_WORKER_COMPUTE_FORWARDING_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "worker/compute/compute_backend.h"

namespace ps {

class ForwardingBackend : public ComputeBackend {
 public:
  explicit ForwardingBackend(std::unique_ptr<ComputeBackend> inner) : inner_(std::move(inner)) {}

  std::string name() const override { return inner_->name(); }
  float* Allocate(size_t count) override { return inner_->Allocate(count); }
  void Free(float* array) override { inner_->Free(array); }
  void CopyToDevice(const float* host, size_t count, float* device) override {
    inner_->CopyToDevice(host, count, device);
  }
  void CopyToHost(const float* device, size_t count, float* host) override {
    inner_->CopyToHost(device, count, host);
  }
  void Fill(size_t count, float value, float* array) override {
    inner_->Fill(count, value, array);
  }
  void Gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a,
            const float* b, float beta, float* c) override {
    inner_->Gemm(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c);
  }
  void AddBias(int rows, int cols, const float* bias, float* x) override {
    inner_->AddBias(rows, cols, bias, x);
  }
  void ColumnSums(int rows, int cols, const float* x, float* out) override {
    inner_->ColumnSums(rows, cols, x, out);
  }
  void ActivationForward(Activation f, size_t count, const float* x, float* y) override {
    inner_->ActivationForward(f, count, x, y);
  }
  void ActivationBackward(Activation f, size_t count, const float* y, const float* dy,
                          float* dx) override {
    inner_->ActivationBackward(f, count, y, dy, dx);
  }
  LossSums SoftmaxCrossEntropy(int rows, int classes, const float* logits, const float* labels,
                               float scale, float* dlogits) override {
    return inner_->SoftmaxCrossEntropy(rows, classes, logits, labels, scale, dlogits);
  }
  LossSums SigmoidCrossEntropy(int rows, const float* logits, const float* labels, float scale,
                               float* dlogits) override {
    return inner_->SigmoidCrossEntropy(rows, logits, labels, scale, dlogits);
  }
  LossSums SquaredError(int rows, const float* predictions, const float* targets, float scale,
                        float* dpredictions) override {
    return inner_->SquaredError(rows, predictions, targets, scale, dpredictions);
  }
  void Axpy(size_t count, float alpha, const float* x, float* y) override {
    inner_->Axpy(count, alpha, x, y);
  }
  void Multiply(size_t count, const float* x, const float* y, float* z) override {
    inner_->Multiply(count, x, y, z);
  }
  void DropoutMask(size_t count, uint64_t seed, float rate, float* mask) override {
    inner_->DropoutMask(count, seed, rate, mask);
  }
  void Im2Col(const Window2D& window, int batch, const float* images, float* columns) override {
    inner_->Im2Col(window, batch, images, columns);
  }
  void Col2Im(const Window2D& window, int batch, const float* columns, float* images) override {
    inner_->Col2Im(window, batch, columns, images);
  }
  void MaxPoolForward(const Window2D& window, int batch, const float* x, float* y) override {
    inner_->MaxPoolForward(window, batch, x, y);
  }
  void AvgPoolForward(const Window2D& window, int batch, const float* x, float* y) override {
    inner_->AvgPoolForward(window, batch, x, y);
  }
  void MaxPoolBackward(const Window2D& window, int batch, const float* x, const float* y,
                       const float* dy, float* dx) override {
    inner_->MaxPoolBackward(window, batch, x, y, dy, dx);
  }
  void AvgPoolBackward(const Window2D& window, int batch, const float* dy, float* dx) override {
    inner_->AvgPoolBackward(window, batch, dy, dx);
  }
  size_t WorkingSetFloats() const override { return inner_->WorkingSetFloats(); }
  void Synchronize() override { inner_->Synchronize(); }
  int64_t DeviceMemoryInUse() override { return inner_->DeviceMemoryInUse(); }

 protected:
  ComputeBackend& inner() { return *inner_; }

 private:
  const std::unique_ptr<ComputeBackend> inner_;
};

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_FORWARDING_BACKEND_H_
