// The CUDA compute backend: ComputeBackend on one GPU, with one CUDA stream and one cuBLAS
// handle bound to it (cuBLAS for Gemm, kernels for the rest). Plain C++: callers need no CUDA
// headers, and the target builds without --config=cuda (creation then fails, saying so).
#ifndef PS_WORKER_COMPUTE_CUDA_BACKEND_H_
#define PS_WORKER_COMPUTE_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/compute/compute_backend.h"

namespace ps {

// A backend on GPU `device_index` (the N of --device=cuda:N), named "cuda:N". Never crashes on
// a machine without a GPU: FAILED_PRECONDITION, saying why, when the binary was built without
// CUDA, the CUDA runtime finds no usable GPU with that index, or cuBLAS cannot start;
// INVALID_ARGUMENT for a negative index.
//
// Once created, a CUDA or cuBLAS error is a programmer error (a bad pointer or size, a label
// that is not a class id) or a device fault (an illegal address, a lost GPU): the interface has
// no error channel and a faulted device cannot be recovered, so the backend prints the failing
// call with CUDA's message to stderr and aborts. Running out of GPU memory in Allocate aborts
// the same way.
absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateCudaBackend(int device_index);

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_CUDA_BACKEND_H_
