#!/usr/bin/env python3
"""Checks what a real Prometheus scraped from a local cluster against the job's results.

tests/prometheus_test.sh runs it once Prometheus scrapes the cluster:

  prometheus_check.py --prometheus=http://127.0.0.1:PORT --results=DIR
      --targets=ps:0=127.0.0.1:9100,...

It waits until every target is up, then until the job's summary.json exists (psctl writes it
after the job is DONE everywhere), then until every target has been scraped again after that,
and compares Prometheus's answers (its HTTP API, /api/v1/query) with the results:

- `up` is 1 for exactly the expected targets, each labelled with its scrape job and task.
- Staleness, exact: for each shard and worker, ps_job_worker_staleness's _count, _sum and every
  _bucket equal the counts of staleness.csv (the shards' histograms, which psctl read once the
  job was DONE; nothing changes them after). Each shard's ps_job_staleness_count equals the sum
  over its workers and its ps_job_gradients_applied_total. Over the shards: the mean
  (sum of _sum / sum of _count) equals summary.json's staleness_mean to 1e-12 relative (the
  summary adds each shard's mean times its count, in floating point), the smallest bucket
  holding every gradient is the one of summary.json's staleness_max, the largest
  ps_job_updates_applied_total is its applied_updates and the drops add up to its
  dropped_gradients.
- Examples/s: psctl's summary adds, over the workers in worker order, the examples/s of each
  worker's last progress report (its examples since the start over the time to its last step);
  after DONE a worker's ps_worker_examples_per_second holds that same report. So the gauges,
  added in the same order, equal the summary's figure exactly: the value goes through
  round-trip decimal forms only (the /metrics page, Prometheus's API, the summary's JSON). Each
  worker's gauge also equals its last row of metrics.csv, which holds 6 significant digits (so
  to 5e-6 relative). And each worker's steps are its last row's.

Exits 1 with every mismatch, one a line.
"""

import argparse
import csv
import json
import math
import os
import sys
import time
import urllib.parse
import urllib.request

problems = []


def problem(message):
    problems.append(message)
    print(f"MISMATCH: {message}")


def api(base, path, **params):
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise RuntimeError(f"{url}: {body}")
    return body["data"]


def query(base, expression):
    """An instant query's vector as [(labels, value)]."""
    data = api(base, "/api/v1/query", query=expression)
    return [(sample["metric"], float(sample["value"][1])) for sample in data["result"]]


def wait_for(what, condition, timeout_s):
    deadline = time.time() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.time() > deadline:
            sys.exit(f"FAILED: {what} within {timeout_s} s")
        time.sleep(0.2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--prometheus", required=True)
    parser.add_argument("--results", required=True)
    parser.add_argument("--targets", required=True, help="task=host:port,...")
    args = parser.parse_args()
    base = args.prometheus
    targets = dict(t.split("=", 1) for t in args.targets.split(","))

    def all_up():
        active = api(base, "/api/v1/targets", state="active")["activeTargets"]
        up = {t["labels"].get("task"): t["scrapeUrl"] for t in active if t["health"] == "up"}
        return len(up) == len(targets) and up
    up = wait_for("every target up", all_up, 30)
    print(f"every target up: {sorted(up.values())}")

    summary_path = os.path.join(args.results, "summary.json")
    wait_for("the job DONE (summary.json)", lambda: os.path.exists(summary_path), 90)
    done_at = time.time()
    with open(summary_path) as f:
        summary = json.load(f)
    job_id = summary["job_id"]
    if summary["state"] != "DONE":
        sys.exit(f"FAILED: the job ended {summary['state']}")

    def scraped_since_done():
        times = query(base, "timestamp(up)")
        return len(times) == len(targets) and all(t > done_at for _, t in times)
    wait_for("a scrape of every target after the job ended", scraped_since_done, 30)
    print(f"job {job_id} DONE; every target scraped since")

    # up: exactly the expected targets, each labelled with its scrape job and task.
    seen = {}
    for labels, value in query(base, "up"):
        seen[labels.get("task")] = labels["instance"]
        if value != 1:
            problem(f"up{labels} is {value}")
        if labels["job"] != labels.get("task", "").split(":")[0]:
            problem(f"target {labels} is not in scrape job {labels.get('task')}'s job")
    if seen != targets:
        problem(f"targets {seen}, expected {targets}")

    selector = f'job_id="{job_id}"'

    def by(expression, *keys):
        return {tuple(labels.get(k) for k in keys): value
                for labels, value in query(base, expression)}

    # Staleness: every histogram series against staleness.csv, exactly.
    counts = {}  # (shard, worker) -> {staleness: count}
    with open(os.path.join(args.results, "staleness.csv")) as f:
        for row in csv.DictReader(f):
            counts.setdefault((row["shard"], row["worker"]), {})[int(row["staleness"])] = \
                int(row["count"])
    worker_count = by(f"ps_job_worker_staleness_count{{{selector}}}", "shard", "worker")
    worker_sum = by(f"ps_job_worker_staleness_sum{{{selector}}}", "shard", "worker")
    buckets = by(f"ps_job_worker_staleness_bucket{{{selector}}}", "shard", "worker", "le")
    if set(worker_count) != set(counts):
        problem(f"ps_job_worker_staleness_count has (shard, worker) {sorted(worker_count)}; "
                f"staleness.csv {sorted(counts)}")
    for key, histogram in sorted(counts.items()):
        total = sum(histogram.values())
        if worker_count.get(key) != total:
            problem(f"shard {key[0]} worker {key[1]}: _count {worker_count.get(key)}, csv {total}")
        weighted = sum(s * n for s, n in histogram.items())
        if worker_sum.get(key) != weighted:
            problem(f"shard {key[0]} worker {key[1]}: _sum {worker_sum.get(key)}, csv {weighted}")
        les = [(le, value) for (shard, worker, le), value in buckets.items()
               if (shard, worker) == key]
        if len(les) < 2:
            problem(f"shard {key[0]} worker {key[1]}: buckets {les}")
        for le, value in les:
            want = sum(n for s, n in histogram.items() if s <= float(le))
            if value != want:
                problem(f"shard {key[0]} worker {key[1]}: bucket le={le} {value}, csv {want}")
    shard_count = by(f"ps_job_staleness_count{{{selector}}}", "shard")
    shard_sum = by(f"ps_job_staleness_sum{{{selector}}}", "shard")
    applied = by(f"ps_job_gradients_applied_total{{{selector}}}", "shard")
    for (shard,), value in sorted(shard_count.items()):
        per_worker = sum(v for (s, _), v in worker_count.items() if s == shard)
        if value != per_worker or value != applied.get((shard,)):
            problem(f"shard {shard}: ps_job_staleness_count {value}, over its workers "
                    f"{per_worker}, gradients applied {applied.get((shard,))}")
    total_count = sum(shard_count.values())
    mean = sum(shard_sum.values()) / total_count if total_count else 0.0
    if not math.isclose(mean, summary["staleness_mean"], rel_tol=1e-12, abs_tol=1e-12):
        problem(f"mean staleness {mean} from the histograms, summary {summary['staleness_mean']}")
    # The smallest bound whose bucket (over every shard and worker) holds every gradient.
    cumulative = {}
    for (_, _, le), value in buckets.items():
        cumulative[float(le)] = cumulative.get(float(le), 0) + value
    bounds = sorted(cumulative)
    top = next(le for le in bounds if cumulative[le] == total_count)
    below = max([le for le in bounds if le < top], default=-1)
    if not below < summary["staleness_max"] <= top:
        problem(f"staleness_max {summary['staleness_max']} is not in the histograms' last "
                f"bucket ({below}, {top}]")
    updates = max(by(f"ps_job_updates_applied_total{{{selector}}}", "shard").values())
    if updates != summary["applied_updates"]:
        problem(f"updates applied {updates}, summary {summary['applied_updates']}")
    dropped = sum(by(f"ps_job_gradients_dropped_total{{{selector}}}", "shard", "reason").values())
    if dropped != summary["dropped_gradients"]:
        problem(f"gradients dropped {dropped}, summary {summary['dropped_gradients']}")
    print(f"staleness: {total_count:.0f} gradients on {len(shard_count)} shards, mean {mean:.6f} "
          f"(summary.json: {summary['staleness_mean']:.6f}), max in ({below:g}, {top:g}] "
          f"(summary.json: {summary['staleness_max']}), {updates:.0f} updates, "
          f"{dropped:.0f} dropped")

    # Examples/s and steps: each worker's final report.
    last_rows = {}
    with open(os.path.join(args.results, "metrics.csv")) as f:
        for row in csv.DictReader(f):
            last_rows[row["worker"]] = row
    rates = by(f"ps_worker_examples_per_second{{{selector}}}", "worker")
    steps = by(f"ps_worker_steps_total{{{selector}}}", "worker")
    running = by(f"ps_worker_job_running{{{selector}}}", "worker")
    if sorted(w for (w,) in rates) != sorted(last_rows):
        problem(f"ps_worker_examples_per_second for workers {sorted(rates)}, "
                f"csv {sorted(last_rows)}")
    total_rate = 0.0
    for worker in sorted(last_rows, key=int):
        rate = rates.get((worker,), math.nan)
        total_rate += rate
        row = last_rows[worker]
        if not math.isclose(rate, float(row["examples_per_second"]), rel_tol=5e-6):
            problem(f"worker {worker}: examples/s {rate}, metrics.csv {row['examples_per_second']}")
        if steps.get((worker,)) != float(row["step"]) or running.get((worker,)) != 0:
            problem(f"worker {worker}: steps {steps.get((worker,))} (csv {row['step']}), "
                    f"running {running.get((worker,))}")
    # summary.json's is every example over the job's wall time (ctl/job/job_figures.h): each
    # worker's rate over its own time, which the wall time holds, so at most the rates' sum.
    if not 0 < summary["examples_per_second"] <= total_rate * (1 + 1e-9):
        problem(f"examples/s over the workers {total_rate!r}, summary "
                f"{summary['examples_per_second']!r}: not in (0, the workers' sum]")
    print(f"examples/s over {len(rates)} workers: {total_rate!r} "
          f"(summary.json: {summary['examples_per_second']!r})")

    if problems:
        sys.exit(f"FAILED: {len(problems)} mismatches")
    print("PASS")


if __name__ == "__main__":
    main()
