#!/usr/bin/env python3
"""Runs side by side: `psctl report RUN_DIR RUN_DIR...` runs this as
`python3 tools/compare_runs.py RUN_DIR...`.

Reads each run's manifest.json (ctl/job/run_manifest.h) and job.json, and prints a markdown report:
a table with a column per run (what ran, where, on what, and its final figures), the JobSpec
settings that differ between the runs, and which runs ran the same JobSpec (equal job_hash).
Needs only Python's standard library. Exits 2 naming a directory that holds no manifest.json.
"""
import json
import os
import sys


def load(directory):
    path = os.path.join(directory, "manifest.json")
    if not os.path.exists(path):
        sys.exit(f"psctl report: {directory} holds no manifest.json: give results directories "
                 "of runs (psctl local, submit or experiment's points); runs written before "
                 "manifests existed have none")
    with open(path) as file:
        manifest = json.load(file)
    spec = {}
    job_path = os.path.join(directory, "job.json")
    if os.path.exists(job_path):
        with open(job_path) as file:
            spec = json.load(file).get("spec", {})
    return manifest, spec


def flatten(value, prefix=""):
    """{"a": {"b": 1}, "c": [1, 2]} -> {"a.b": "1", "c": "[1, 2]"}."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: json.dumps(value) if isinstance(value, list) else str(value)}


def gib(n):
    return f"{n / 2**30:.0f} GiB" if n else "?"


def machine_text(machine):
    text = (f"{machine.get('hostname', '?')}: {machine.get('cpu_model', '?')}, "
            f"{machine.get('cores', '?')} cores, {gib(int(machine.get('memory_bytes', 0)))}")
    if machine.get("gpus"):
        text += f", {', '.join(machine['gpus'])} (driver {machine.get('gpu_driver', '?')})"
    return text


def figure(value):
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


FINAL_ROWS = [
    ("state", "state"), ("steps", "steps"), ("wall time (s)", "wall_time_s"),
    ("examples/s", "examples_per_second"), ("final train loss", "final_train_loss"),
    ("final eval loss", "final_eval_loss"), ("final eval accuracy", "final_eval_accuracy"),
    ("staleness mean", "staleness_mean"), ("staleness max", "staleness_max"),
    ("bytes sent per step", "bytes_sent_per_step"), ("error", "error"),
]


def row(name, cells):
    return "| " + " | ".join([name] + [c.replace("|", "\\|") for c in cells]) + " |"


def main(directories):
    runs = [load(d) for d in directories]
    manifests = [m for m, _ in runs]
    header = "| | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |"
    out = ["# Runs side by side", "", header, "|---" * (len(runs) + 1) + "|"]
    out.append(row("directory", directories))
    out.append(row("job", [m.get("job_id", "") for m in manifests]))
    out.append(row("job hash", [m.get("job_hash", "")[:19] for m in manifests]))
    out.append(row("run", [m.get("run_id", "") for m in manifests]))
    out.append(row("software", [
        f"{m['software'].get('commit') or 'unstamped'}"
        f"{'' if m['software'].get('optimized') else ', unoptimized'}" for m in manifests]))
    out.append(row("tasks", [
        ", ".join(f"{len(m['cluster'].get('cluster', {}).get(job, []))} {job}"
                  for job in ("ps", "worker")) for m in manifests]))
    out.append(row("devices", [
        ", ".join(sorted({t.get("device", "") for t in m["tasks"] if t.get("device")}))
        for m in manifests]))
    out.append(row("machines", [
        "; ".join(machine_text(machine) for machine in m.get("machines", [])) for m in manifests]))
    out.append(row("unreachable tasks", [
        ", ".join(t["task"] for t in m["tasks"] if "error" in t) for m in manifests]))
    out.append(row("started", [m.get("started_at", "") for m in manifests]))
    for name, key in FINAL_ROWS:
        cells = [figure(m.get("final", {}).get(key)) for m in manifests]
        if any(cells):
            out.append(row(name, cells))

    settings = [flatten(spec) for _, spec in runs]
    keys = sorted(set().union(*settings) - {"run_id", "owner"})
    differing = [k for k in keys if len({s.get(k, "(unset)") for s in settings}) > 1]
    out += ["", "## Settings that differ", ""]
    if differing:
        out += [row("setting", [f"run {i + 1}" for i in range(len(runs))]),
                "|---" * (len(runs) + 1) + "|"]
        out += [row(k, [s.get(k, "(unset)") for s in settings]) for k in differing]
    else:
        out.append("None: every run has the same JobSpec.")
    groups = {}
    for i, m in enumerate(manifests):
        groups.setdefault(m.get("job_hash"), []).append(i + 1)
    same = [g for g in groups.values() if len(g) > 1]
    if same:
        out += ["", "Same JobSpec (equal job hash): " +
                "; ".join("runs " + ", ".join(map(str, g)) for g in same) + "."]
    print("\n".join(out))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: compare_runs.py RUN_DIR [RUN_DIR...] (results directories of runs)")
    main(sys.argv[1:])
