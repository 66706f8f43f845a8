// PS_HOST_DEVICE marks a function that both backends run: __host__ __device__ under nvcc,
// nothing for the CPU's compiler.
#ifndef PS_WORKER_COMPUTE_HOST_DEVICE_H_
#define PS_WORKER_COMPUTE_HOST_DEVICE_H_

#ifdef __CUDACC__
#define PS_HOST_DEVICE __host__ __device__
#else
#define PS_HOST_DEVICE
#endif

namespace ps {

// a * b rounded to a float on its own, on both backends: nvcc would fuse the product into a
// sum that follows it (one FMA, one rounding); the CPU backend (built with -ffp-contract=off)
// rounds the product, then the sum.
PS_HOST_DEVICE inline float RoundedProduct(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_HOST_DEVICE_H_
