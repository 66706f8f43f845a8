// The CUDA backend's constructor as nvcc compiles it, in plain types because Abseil stays out
// of .cu files; CreateCudaBackend (cuda_backend.h) wraps it in a Status. Implemented by
// cuda_backend.cu, built only under --config=cuda.
#ifndef PS_WORKER_COMPUTE_CUDA_BACKEND_IMPL_H_
#define PS_WORKER_COMPUTE_CUDA_BACKEND_IMPL_H_

#include <memory>
#include <string>

#include "worker/compute/compute_backend.h"

namespace ps {

// A backend on GPU `device`, or nullptr with `*error` saying why (no driver or GPU, no GPU with
// that index, a stream or cuBLAS handle that cannot be created). REQUIRES: device >= 0.
std::unique_ptr<ComputeBackend> NewCudaBackend(int device, std::string* error);

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_CUDA_BACKEND_IMPL_H_
