#!/usr/bin/env bash
# Our ps against ps-lite and iperf3, side by side in one run (issue 35's yardsticks): for each
# round, in an order that turns every round, one iperf3 TCP stream on loopback, ps-lite's
# push and pull of one dense tensor (bench/pslite_bench.cc: 1 scheduler, 1 server, 1 worker),
# and ps_bench --bulk_compare (1 ps + 1 client in one process, shared memory off: gRPC's
# answers path, then the bulk streams). Every figure in GB/s (1e9 bytes per second).
#
# ps-lite is no Debian package: give a checkout of github.com/dmlc/ps-lite (the figures in
# bench/RESULTS.md are at commit 15b8adf). It is built there against Debian's protobuf and
# ZeroMQ (libzmq3-dev, installed here with iperf3).
#
# Usage: PSLITE_DIR=/path/to/ps-lite bench/pslite_compare.sh [SIZES_MB [SECONDS [ROUNDS]]]
#        (defaults 16,64 2 3)
set -euo pipefail
cd "$(dirname "$0")/.."

sizes="${1:-16,64}"
seconds="${2:-2}"
rounds="${3:-3}"
if [[ -z "${PSLITE_DIR:-}" || ! -f "${PSLITE_DIR}/include/ps/ps.h" ]]; then
  echo "pslite_compare: set PSLITE_DIR to a checkout of github.com/dmlc/ps-lite" >&2
  exit 2
fi
for package in libzmq3-dev iperf3; do
  dpkg -s "$package" >/dev/null 2>&1 || apt-get install -y -q "$package" >/dev/null
done

work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

echo "pslite_compare: building ps-lite in $PSLITE_DIR and bench/pslite_bench.cc"
make -s -C "$PSLITE_DIR" -j2 ps DEPS_PATH=/usr PROTOC=/usr/bin/protoc \
  PROTOBUF=/usr/include/google/protobuf/message.h ZMQ=/usr/include/zmq.h >/dev/null 2>&1
g++ -std=c++14 -O3 -msse2 -I"$PSLITE_DIR/include" bench/pslite_bench.cc \
  "$PSLITE_DIR/build/libps.a" -lprotobuf-lite -lzmq -pthread -o "$work/pslite_bench"
echo "pslite_compare: building bench/ps_bench (-c opt)"
bazel build --config=thread_safety -c opt //bench:ps_bench 2>&1 | tail -1
ps_bench="$(bazel info -c opt --config=thread_safety bazel-bin 2>/dev/null)/bench/ps_bench"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

run_iperf3() {
  local port
  port="$(free_port)"
  iperf3 -s -1 -B 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  local server=$!
  pids+=("$server")
  sleep 0.5
  iperf3 -c 127.0.0.1 -p "$port" -t "$seconds" -J >"$work/iperf3.json"
  wait "$server" || true
  python3 -c 'import json, sys; print("iperf3 one TCP stream: %.2f GB/s" %
    (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8e9))' \
    "$work/iperf3.json"
}

run_pslite() {
  local port
  port="$(free_port)"
  local -a env=(DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 DMLC_PS_ROOT_URI=127.0.0.1
                DMLC_PS_ROOT_PORT="$port" DMLC_NODE_HOST=127.0.0.1)
  local role
  local -a started=()
  for role in scheduler server; do
    env "${env[@]}" DMLC_ROLE="$role" "$work/pslite_bench" "$sizes" "$seconds" \
      >"$work/pslite_$role.log" 2>&1 &
    started+=($!)
    pids+=($!)
  done
  # Bounded: sizes x (warm-up + push + pull) plus start-up.
  timeout 300 env "${env[@]}" DMLC_ROLE=worker "$work/pslite_bench" "$sizes" "$seconds" \
    2>"$work/pslite_worker.log"
  for pid in "${started[@]}"; do
    timeout 30 tail --pid="$pid" -f /dev/null || kill "$pid" 2>/dev/null || true
  done
}

run_ours() {
  "$ps_bench" --bulk_compare --size_mb="$sizes" --seconds="$seconds" --rounds=1 \
    --latency_iterations=0 --tcp_baseline=false 2>&1 | grep -E "GB/s|MiB"
}

date -u +"pslite_compare: %Y-%m-%d %H:%M UTC, sizes $sizes MiB, $seconds s each, $rounds rounds"
sides=(run_iperf3 run_pslite run_ours)
for ((round = 0; round < rounds; ++round)); do
  echo "== round $((round + 1))"
  for ((i = 0; i < ${#sides[@]}; ++i)); do
    "${sides[(i + round) % ${#sides[@]}]}"
  done
done
