// Threads of the CPU backend's BLAS (OpenBLAS keeps one pool per process). Several workers
// on one machine (psctl local) should split the cores between them: each running a pool of
// every core oversubscribes the machine several times over (measured in bench/RESULTS.md).
#ifndef PS_WORKER_COMPUTE_CPU_THREADS_H_
#define PS_WORKER_COMPUTE_CPU_THREADS_H_

namespace ps {

// Sets the BLAS threads of this process; `threads` <= 0 leaves the library's default (one per
// core). Call before training starts.
void SetCpuComputeThreads(int threads);

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_CPU_THREADS_H_
