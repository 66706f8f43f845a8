"""The Python binding's cost per step (issue 32, section 4): a worker's exchange of one step, a
pull of every variable then a push of a gradient of each, of the MLP of config/jobs/default.json
(32 features, 64 hidden units, 10 classes: 2,762 parameters), on 2 ps_server shards of this
machine, (a) through ps.Worker (python/ps: the binding and its Python layer) and (b) through the
same C++ WorkerSession with no Python (bench/session_step_bench), alternating (b, a, b, a, ...)
for --repeats repetitions. The binding's cost is the difference of the medians; it is put
against a step of ps_worker training that same MLP (psctl local of config/jobs/default.json, 2
workers: the seconds per step of its examples per second), the issue's goal being <= 5%.

    bench/binding_cost_bench.sh     (builds -c opt, then runs this)
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np

import ps
from pytorch_ddp_bench import start_ps

SHAPES = [(32, 64), (64,), (64, 10), (10,)]


def python_us_per_step(addresses, job_id, iterations, warmup):
    client = ps.connect(addresses)
    job = ps.Job({"job_id": job_id, "consistency": {"mode": "ASYNC"},
                  "learning_rate": {"base": 1e-6}},
                 {f"v{i}": shape for i, shape in enumerate(SHAPES)}, 1)
    worker = ps.Worker(client, job, 0)
    values = worker.zeros()
    gradients = {name: np.full(shape, 1e-3, np.float32) for name, shape in worker.variables.items()}
    for _ in range(warmup):
        worker.pull(values)
        worker.push(gradients)
    start = time.perf_counter()
    for _ in range(iterations):
        worker.pull(values)
        worker.push(gradients)
    return (time.perf_counter() - start) / iterations * 1e6


def cpp_us_per_step(binary, addresses, job_id, iterations, warmup):
    shapes = ",".join("x".join(str(d) for d in shape) for shape in SHAPES)
    out = subprocess.run([binary, f"--ps_addresses={','.join(addresses)}", f"--shapes={shapes}",
                          f"--job_id={job_id}", f"--iterations={iterations}", "--rounds=1",
                          f"--warmup={warmup}"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["us_per_step"]


def ps_worker_step_us(psctl, job_file, folder):
    results = os.path.join(folder, "default_results")
    subprocess.run([psctl, "local", f"--job={job_file}", f"--results={results}", "--device=cpu",
                    "--overwrite"], check=True, capture_output=True)
    with open(job_file) as f:
        batch = json.load(f)["batch_size"]
    # Each worker's own rate over its training loop (metrics.csv's last row of each), so that
    # the cluster's start and stop do not count.
    last = {}
    with open(os.path.join(results, "metrics.csv")) as f:
        for row in csv.DictReader(f):
            last[row["worker"]] = float(row["examples_per_second"])
    rate = sum(last.values()) / len(last)
    return batch / rate * 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ps_server", required=True)
    parser.add_argument("--session_step_bench", required=True)
    parser.add_argument("--psctl", required=True)
    parser.add_argument("--default_job", default="config/jobs/default.json")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="binding_cost_")
    processes, addresses = start_ps(args.ps_server, 2, folder)
    try:
        cpp, python = [], []
        for r in range(args.repeats):
            cpp.append(cpp_us_per_step(args.session_step_bench, addresses, f"cpp{r}",
                                       args.iterations, args.warmup))
            python.append(python_us_per_step(addresses, f"py{r}", args.iterations, args.warmup))
            print(f"repeat {r}: C++ WorkerSession {cpp[-1]:.1f} us/step, "
                  f"ps.Worker {python[-1]:.1f} us/step", flush=True)
    finally:
        for p in processes:
            p.terminate()
        for p in processes:
            p.wait()
    step = ps_worker_step_us(args.psctl, args.default_job, folder)
    cost = statistics.median(python) - statistics.median(cpp)
    print(json.dumps({"cpp_us_per_step": statistics.median(cpp),
                      "python_us_per_step": statistics.median(python),
                      "binding_us_per_step": cost,
                      "ps_worker_step_us": step,
                      "binding_fraction_of_step": cost / step}))


if __name__ == "__main__":
    main()
