// The CPU backend's convolution and pooling over NHWC images: the arithmetic of window_ops.h
// walked in the order that suits a CPU (a window's run of pixels copied at once, scatters in
// place of per-element gathers), giving bit-for-bit the results of window_ops.h's per-element
// functions, which the CUDA backend runs: every output element is computed from the same
// operands in the same order (cpu_window_ops_test checks this for strides, paddings, channel
// counts and ties).
#ifndef PS_WORKER_COMPUTE_CPU_WINDOW_OPS_H_
#define PS_WORKER_COMPUTE_CPU_WINDOW_OPS_H_

#include "worker/compute/compute_backend.h"

namespace ps {
namespace cpu_window_ops {

// As ComputeBackend's methods of the same names.
void Im2Col(const Window2D& window, int batch, const float* images, float* columns);
void Col2Im(const Window2D& window, int batch, const float* columns, float* images);
void MaxPoolForward(const Window2D& window, int batch, const float* x, float* y);
void AvgPoolForward(const Window2D& window, int batch, const float* x, float* y);
void MaxPoolBackward(const Window2D& window, int batch, const float* x, const float* y,
                     const float* dy, float* dx);
void AvgPoolBackward(const Window2D& window, int batch, const float* dy, float* dx);

}  // namespace cpu_window_ops
}  // namespace ps

#endif  // PS_WORKER_COMPUTE_CPU_WINDOW_OPS_H_
