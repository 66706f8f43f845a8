#!/usr/bin/env python3
"""One run's pictures: `psctl report RUN_DIR` runs this as `python3 tools/run_report.py RUN_DIR`
after printing the run's table (tools/compare_runs.py).

Draws, from the run's results directory (docs/REFERENCE.md, "psctl", lists its files), one PNG
with four panels: each worker's training loss over time (metrics.csv), the test and validation
accuracy by step (eval.csv, validation.csv), each worker's examples per second over time
(metrics.csv), and each worker's staleness distribution (staleness.csv: the gradients the
shards applied, by staleness). Writes RUN_DIR/report.png and RUN_DIR/report.html (the run's
figures from summary.json and the picture), and prints their paths. Exits 3 when matplotlib
cannot be imported (psctl then names the package), 2 naming a directory without metrics.csv.
"""
import csv
import html
import json
import os
import sys
from collections import defaultdict

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
except ImportError:
    print("psctl report needs matplotlib for a run's plots: run tools/setup.sh (it installs "
          "python3-matplotlib), or apt-get install python3-matplotlib")
    sys.exit(3)

DPI = 80


def rows(directory, name):
    """The CSV file's rows as dicts; [] when the run has no such file."""
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return []
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def by_worker(metrics, column):
    """{worker: ([time_s...], [value...])} from metrics.csv's rows."""
    series = defaultdict(lambda: ([], []))
    for row in metrics:
        times, values = series[int(row["worker"])]
        times.append(float(row["time_s"]))
        values.append(float(row[column]))
    return dict(sorted(series.items()))


def draw(directory, summary):
    metrics = rows(directory, "metrics.csv")
    figure, axes = plt.subplots(2, 2, figsize=(12, 8), dpi=DPI)
    loss, accuracy, rate, staleness = axes.flat
    for worker, (times, values) in by_worker(metrics, "loss").items():
        loss.plot(times, values, linewidth=1, label=f"worker {worker}")
    loss.set(title="training loss (last batch)", xlabel="time (s)", ylabel="loss")
    for name, label in (("eval.csv", "test"), ("validation.csv", "validation")):
        points = rows(directory, name)
        if points:
            accuracy.plot([int(p["step"]) for p in points], [float(p["accuracy"]) for p in points],
                          marker="o", markersize=3, label=label)
    accuracy.set(title="accuracy of the chief's evaluations", xlabel="step", ylabel="accuracy")
    for worker, (times, values) in by_worker(metrics, "examples_per_second").items():
        rate.plot(times, values, linewidth=1, label=f"worker {worker}")
    rate.set(title="examples per second (each worker's, since its start)", xlabel="time (s)",
             ylabel="examples/s")
    counts = defaultdict(lambda: defaultdict(int))
    for row in rows(directory, "staleness.csv"):
        counts[int(row["worker"])][int(row["staleness"])] += int(row["count"])
    width = 0.8 / max(1, len(counts))
    for i, (worker, histogram) in enumerate(sorted(counts.items())):
        total = sum(histogram.values()) or 1
        keys = sorted(histogram)
        staleness.bar([k + i * width for k in keys], [histogram[k] / total for k in keys],
                      width=width, label=f"worker {worker}")
    staleness.set(title="staleness of the applied gradients", xlabel="staleness (updates)",
                  ylabel="share of the worker's gradients")
    staleness.xaxis.set_major_locator(MaxNLocator(integer=True))
    for axis in axes.flat:
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize="small")
        else:
            axis.text(0.5, 0.5, "no data", ha="center", va="center", transform=axis.transAxes)
    figure.suptitle(f"job {summary.get('job_id', '?')}: {summary.get('state', '?')}, "
                    f"{summary.get('steps', '?')} steps")
    figure.tight_layout()
    path = os.path.join(directory, "report.png")
    figure.savefig(path)
    plt.close(figure)
    return path


def write_html(directory, summary, picture):
    figures = "".join(
        f"<tr><th>{html.escape(key)}</th><td>{html.escape(str(value))}</td></tr>"
        for key, value in summary.items() if not isinstance(value, (dict, list)))
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>job {html.escape(str(summary.get("job_id", "")))}</title>
<style>body {{ font-family: sans-serif; margin: 1em; }} img {{ max-width: 100%; }}
th {{ text-align: left; padding-right: 1em; }}</style></head>
<body><h1>job {html.escape(str(summary.get("job_id", "")))}</h1>
<img src="{os.path.basename(picture)}" alt="loss, accuracy, throughput and staleness">
<h2>summary.json</h2><table>{figures}</table></body></html>
"""
    path = os.path.join(directory, "report.html")
    with open(path, "w") as file:
        file.write(page)
    return path


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: run_report.py RUN_DIR")
    directory = sys.argv[1]
    if not os.path.exists(os.path.join(directory, "metrics.csv")):
        print(f"psctl report: {directory} holds no metrics.csv: give a run's results directory")
        sys.exit(2)
    summary = {}
    if os.path.exists(os.path.join(directory, "summary.json")):
        with open(os.path.join(directory, "summary.json")) as file:
            summary = json.load(file)
    picture = draw(directory, summary)
    page = write_html(directory, summary, picture)
    print(f"plots: {picture}, {page}")


if __name__ == "__main__":
    main()
