// A convolutional network (ModelSpec.kind CNN): the spec's layers (convolutions, max and
// average poolings, dense layers, dropout) over NHWC images, then a dense layer over the
// classes and softmax cross-entropy. Every layer runs on the ComputeBackend: a convolution is
// Im2Col and a Gemm (cuBLAS on a GPU, OpenBLAS on the CPU), its gradient Gemms and Col2Im, so
// both backends compute the same math. A convolution works a chunk of images at a time, of
// about the backend's WorkingSetFloats (the whole batch on a GPU; on the CPU what stays in
// cache between Im2Col and its Gemm), and the backward pass makes a chunk's columns again.
//
// Variables, in layer order: "layerI/kernel" [kernel * kernel * in_channels, filters] (a row
// per position of the window, channels fastest, as Im2Col lays out a window) and
// "layerI/bias" [filters] for a convolution; "layerI/weights" [in, units] and "layerI/bias"
// [units] for a dense layer; the output layer last. Weights take the spec's initializer
// (GLOROT_UNIFORM when unset), biases start at zero.
#ifndef PS_WORKER_MODEL_CONV_MODEL_H_
#define PS_WORKER_MODEL_CONV_MODEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "worker/compute/compute_backend.h"
#include "worker/model/model.h"

namespace ps {

// INVALID_ARGUMENT naming the field: an image whose size is not feature_dim, a window larger
// than the (padded) input it slides over, num_classes < 2. RESOURCE_EXHAUSTED, before anything
// is allocated, beyond kMaxModelFloats. `backend` must outlive the model.
absl::StatusOr<std::unique_ptr<Model>> CreateConvModel(const ModelSpec& spec, int feature_dim,
                                                       int num_classes, int max_batch_size,
                                                       ComputeBackend* backend);

}  // namespace ps

#endif  // PS_WORKER_MODEL_CONV_MODEL_H_
