// The MPI side of bench/allreduce_bench: the elementwise mean of float32 data over the ranks
// of MPI_COMM_WORLD with OpenMPI's MPI_Allreduce (in place, a sum, then the division by the
// number of ranks that RingAllReduceMean also does). Built with mpicxx by
// bench/allreduce_bench.sh, outside Bazel, so that nothing else needs MPI installed.
//
//   mpirun -np 4 mpi_allreduce_bench SIZE_BYTES ROUNDS ITERATIONS
//
// After one warm-up call, each round times ITERATIONS calls; rank 0 prints the slowest rank's
// seconds per call as "round R seconds S", the form bench/allreduce_bench reads.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 4) {
    if (rank == 0) std::fprintf(stderr, "usage: %s SIZE_BYTES ROUNDS ITERATIONS\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  const long floats = std::atol(argv[1]) / 4;
  const int rounds = std::atoi(argv[2]);
  const int iterations = std::atoi(argv[3]);
  std::vector<float> data(floats, static_cast<float>(rank));
  auto mean = [&] {
    MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(floats), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    for (float& value : data) value /= static_cast<float>(size);
  };
  mean();  // Warm-up: connections, buffers, first touch.
  for (int round = 0; round < rounds; ++round) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int i = 0; i < iterations; ++i) mean();
    double seconds = (MPI_Wtime() - start) / iterations;
    MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) std::printf("round %d seconds %.9f\n", round, seconds);
  }
  MPI_Finalize();
  return 0;
}
