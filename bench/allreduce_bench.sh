#!/usr/bin/env bash
# The ring all-reduce over gRPC against OpenMPI's MPI_Allreduce, in one run (bench/RESULTS.md,
# "Ring all-reduce against MPI"): builds allreduce_bench optimized and the MPI side with
# mpicxx (Debian's openmpi-bin and libopenmpi-dev, installed by tools/setup.sh), then runs
# allreduce_bench with the flags given (its defaults: 2 and 4 processes; 1, 16 and 64 MiB;
# 7 rounds; MPI on its default transport and on TCP).
#
#   bench/allreduce_bench.sh [allreduce_bench flags...]     e.g. --rounds=11
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in mpicxx mpirun; do
  command -v "$tool" >/dev/null || { echo "no $tool: run tools/setup.sh (openmpi-bin, libopenmpi-dev)" >&2; exit 2; }
done
bazel build -c opt //bench:allreduce_bench
mpi_bench=$(mktemp -d)/mpi_allreduce_bench
trap 'rm -rf "$(dirname "$mpi_bench")"' EXIT
mpicxx -O2 -o "$mpi_bench" bench/mpi_allreduce_bench.cc
bazel-out/k8-opt/bin/bench/allreduce_bench --mpi_binary="$mpi_bench" --mpirun="$(command -v mpirun)" \
  --work_dir="$(dirname "$mpi_bench")" "$@"
