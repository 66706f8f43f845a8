// PS_HOST_DEVICE marks a function that both backends run: __host__ __device__ under nvcc,
// nothing for the CPU's compiler.
#ifndef PS_WORKER_COMPUTE_HOST_DEVICE_H_
#define PS_WORKER_COMPUTE_HOST_DEVICE_H_

#ifdef __CUDACC__
#define PS_HOST_DEVICE __host__ __device__
#else
#define PS_HOST_DEVICE
#endif

#endif  // PS_WORKER_COMPUTE_HOST_DEVICE_H_
