#!/usr/bin/env python3
"""A sweep's report: `psctl report DIR` runs this as `python3 tools/report.py DIR`.

Reads what `psctl experiment` wrote in DIR (sweep.json, sweep.csv, and each point's
metrics.csv, eval.csv, staleness.csv, job.json) and writes DIR/report.md with tables, and the
plots it embeds in DIR/plots/ (PNG, drawn by report_plots.py beside it). Runs that differ only
in their seed (repeats, or a "seed" setting) form one group: tables give their mean with the
half-width of its 95% confidence interval (Student's t), plots their mean and that interval
shaded. Exits 3 when matplotlib is
missing.
"""
import csv
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # report_plots.py is beside it.
sys.dont_write_bytecode = True  # Leave no __pycache__ in the repository or the runfiles.

try:
    import numpy as np

    from report_plots import (curves_plot, histogram_stats, mean_and_ci, scaling_plot,
                              staleness_plot, staleness_timeline_plot, time_to_target_plot)
except ImportError as error:
    print(f"psctl report: {sys.executable} cannot import matplotlib ({error}): run "
          "tools/setup.sh (it installs python3 and python3-matplotlib)")
    sys.exit(3)


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def read_evaluations(path):
    """eval.csv or validation.csv: arrays of the steps, losses and accuracies."""
    rows = read_csv(path)
    return tuple(np.array([number(row[column]) for row in rows], dtype=float)
                 for column in ("step", "loss", "accuracy"))


def fmt(value):
    if value is None or not np.isfinite(value):
        return "–"
    if abs(value) >= 1e7:
        return f"{value:.3g}"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def mean_with_ci(values):
    """'mean' for one value (or several equal ones), 'mean ± h' for several: h the half-width of
    the mean's 95% confidence interval (Student's t), '–' for none."""
    values = [v for v in values if v is not None and np.isfinite(v)]
    if not values:
        return "–"
    if min(values) == max(values):
        return fmt(values[0])
    mean, half = mean_and_ci(values)
    return f"{fmt(mean)} ± {fmt(half)}"


class Run:
    """One point's results directory."""

    def __init__(self, directory, row):
        self.row = row
        self.state = row["state"]
        job = {}
        if os.path.exists(os.path.join(directory, "job.json")):
            with open(os.path.join(directory, "job.json")) as file:
                job = json.load(file).get("spec", {})
        self.mode = job.get("consistency", {}).get("mode", "?")
        # Passes over the training split per step of the job: every worker reads a batch of
        # its shard each step (summary.json's data.train_examples: the split after the test
        # and validation examples are held out). None where the run did not say.
        summary = {}
        if os.path.exists(os.path.join(directory, "summary.json")):
            with open(os.path.join(directory, "summary.json")) as file:
                summary = json.load(file)
        train_examples = int(summary.get("data", {}).get("train_examples", 0))
        batch = int(job.get("batch_size", 0))
        self.epochs_per_step = (batch * int(row["workers"]) / train_examples
                                if train_examples > 0 and batch > 0 else None)
        self.classifier = job.get("model", {}).get("kind") != "LINEAR_REGRESSION"
        by_step = defaultdict(list)
        by_worker = defaultdict(list)
        for metric in read_csv(os.path.join(directory, "metrics.csv")):
            by_step[int(metric["step"])].append((number(metric["time_s"]), number(metric["loss"])))
            by_worker[metric["worker"]].append((int(metric["step"]), number(metric["time_s"])))
        # Each worker's seconds per step in its training loop: from its first step's report to
        # its last (so without the start-up before the first step).
        self.worker_step_times = []
        for rows in by_worker.values():
            (first_step, first_time), (last_step, last_time) = min(rows), max(rows)
            if last_step > first_step:
                self.worker_step_times.append((last_time - first_time) / (last_step - first_step))
        steps = sorted(by_step)
        self.steps = np.array(steps, dtype=float)
        self.times = np.array([np.mean([t for t, _ in by_step[s]]) for s in steps])
        self.losses = np.array([np.mean([l for _, l in by_step[s]]) for s in steps])
        # The test split's evaluations, and the validation split's (none without one).
        self.eval_steps, self.eval_losses, self.eval_accuracy = read_evaluations(
            os.path.join(directory, "eval.csv"))
        self.validation_steps, self.validation_losses, self.validation_accuracy = \
            read_evaluations(os.path.join(directory, "validation.csv"))
        self.staleness = defaultdict(int)
        # (worker, shard) -> staleness -> count: each learner's own distribution.
        self.learner_staleness = defaultdict(lambda: defaultdict(int))
        for entry in read_csv(os.path.join(directory, "staleness.csv")):
            self.staleness[int(entry["staleness"])] += int(entry["count"])
            learner = (int(entry["worker"]), int(entry["shard"]))
            self.learner_staleness[learner][int(entry["staleness"])] += int(entry["count"])
        # staleness_timeline.csv: the cumulative counts whenever they grew, by snapshot time.
        self.timeline = defaultdict(list)
        for entry in read_csv(os.path.join(directory, "staleness_timeline.csv")):
            self.timeline[number(entry["time_s"])].append(
                ((int(entry["worker"]), int(entry["shard"])), int(entry["staleness"]),
                 int(entry["count"])))

    def staleness_over_time(self):
        """(worker, shard) -> [(time_s, mean staleness of the gradients applied since the
        previous snapshot)], for the snapshots where that learner had gradients applied."""
        counts = defaultdict(lambda: defaultdict(int))  # Cumulative, as of the last snapshot.
        series = defaultdict(list)
        for time_s in sorted(self.timeline):
            grown = defaultdict(lambda: [0, 0])  # learner -> [gradients, staleness sum]
            for learner, staleness, count in self.timeline[time_s]:
                new = count - counts[learner][staleness]
                counts[learner][staleness] = count
                grown[learner][0] += new
                grown[learner][1] += new * staleness
            for learner, (gradients, total) in grown.items():
                if gradients > 0:
                    series[learner].append((time_s, total / gradients))
        return series

    def smoothed_losses(self):
        window = max(1, len(self.losses) // 40)
        if window == 1:
            return self.losses
        kernel = np.ones(window) / window
        return np.convolve(self.losses, kernel, mode="valid")


class Group:
    """The runs of one setting, across seeds."""

    def __init__(self, values, names):
        self.values = values  # The varying settings' values, by setting path.
        self.names = names  # Short names of the varying settings.
        self.runs = []

    def label(self, leave_out=()):
        parts = [f"{self.names[c]}={v}" for c, v in self.values.items() if v and c not in leave_out]
        return ", ".join(parts) or "all runs"

    def workers(self):
        return int(self.runs[0].row["workers"])

    def column(self, name):
        return [number(run.row.get(name)) for run in self.runs]

    def worker_step_ms(self, pick):
        """pick (min or max) over each run's workers of their ms per step, one value a run."""
        return [1000 * pick(run.worker_step_times) for run in self.runs if run.worker_step_times]


def short_names(columns):
    """Each setting path's last part, or the whole path where two share the last part."""
    last = [c.split(".")[-1] for c in columns]
    return {c: (l if last.count(l) == 1 else c) for c, l in zip(columns, last)}


def load(directory):
    if not os.path.exists(os.path.join(directory, "sweep.json")):
        sys.exit(f"{directory} holds no sweep.json: give the results directory of psctl experiment")
    with open(os.path.join(directory, "sweep.json")) as file:
        sweep = json.load(file)
    rows = read_csv(os.path.join(directory, "sweep.csv"))
    ran = [row for row in rows if row["state"] != "PENDING"]
    if not ran:
        sys.exit(f"{directory}: no point of the sweep has run yet")
    keys = [c for c in sweep["settings"] if c != "seed"]
    varying = [c for c in keys if len({row[c] for row in ran}) > 1]
    names = short_names(varying)
    groups = {}
    for row in ran:
        key = tuple(row[c] for c in keys)
        if key not in groups:
            groups[key] = Group({c: row[c] for c in varying}, names)
        groups[key].runs.append(Run(os.path.join(directory, row["dir"]), row))
    return sweep, rows, list(groups.values()), varying


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def has_validation(groups):
    return any(v is not None for g in groups for v in g.column("final_validation_loss"))


def results_table(groups, varying, classifier):
    validation = has_validation(groups)
    header = [short_names(varying)[c] for c in varying] or ["runs of"]
    header += ["runs", "state", "final test loss"]
    header += ["final test accuracy"] if classifier else []
    header += ["final validation accuracy" if classifier else "final validation loss"] \
        if validation else []
    header += ["staleness mean", "staleness max", "examples/s", "wall time (s)",
               "time/step (ms)", "bytes sent/step/worker", "bytes received/step/worker"]
    body = []
    for group in groups:
        states = defaultdict(int)
        for run in group.runs:
            states[run.state] += 1
        row = [group.values[c] for c in varying] or [group.label()]
        row += [len(group.runs), ", ".join(f"{n} {s}" for s, n in sorted(states.items())),
                mean_with_ci(group.column("final_eval_loss"))]
        row += [mean_with_ci(group.column("final_eval_accuracy"))] if classifier else []
        if validation:
            row += [mean_with_ci(group.column(
                "final_validation_accuracy" if classifier else "final_validation_loss"))]
        row += [mean_with_ci(group.column(c)) for c in
                ("staleness_mean", "staleness_max", "examples_per_second", "wall_time_s")]
        row += [mean_with_ci([None if t is None else 1000 * t
                                for t in group.column("time_per_step_s")])]
        row += [mean_with_ci(group.column(c))
                for c in ("bytes_sent_per_step", "bytes_received_per_step")]
        body.append(row)
    return table(header, body)


def selection_table(groups, varying, selected, classifier):
    """For each value of the settings other than `selected`, the group whose `selected` value
    has the most runs DONE and, of those, the best mean final validation accuracy (the lowest
    loss for a regression) over its DONE runs, with its validation and test figures: the test
    set judged once, on what validation chose. A value whose runs diverged or failed is not
    chosen over one whose runs all finished, however well its other runs did; where no run of
    any value finished, none is selected."""
    others = [c for c in varying if c != selected]
    names = short_names(varying)
    criterion = "final_validation_accuracy" if classifier else "final_validation_loss"
    choices = defaultdict(list)
    for group in groups:
        choices[tuple(group.values[c] for c in others)].append(group)
    body = []
    for key, candidates in choices.items():
        def done(group, name):
            return [number(run.row.get(name)) for run in group.runs if run.state == "DONE"]

        def score(group):
            values = [v for v in done(group, criterion) if v is not None and np.isfinite(v)]
            if not values:
                return (0, -np.inf)
            return (len(values), np.mean(values) if classifier else -np.mean(values))
        best = max(candidates, key=score)
        # Numbers in their order, then any other values (a mode's name, an unset setting).
        tried = ", ".join(sorted((g.values.get(selected, "") for g in candidates),
                                 key=lambda v: (number(v) is None, number(v) or 0.0, v)))
        finished = len(done(best, criterion))
        if score(best)[0] == 0:
            row = list(key) + ["none: no run finished", tried, "–"]
            row += ["–"] if classifier else []
            row += ["–", f"0 of {len(best.runs)}"]
        else:
            row = list(key) + [best.values.get(selected, ""), tried,
                               mean_with_ci(done(best, criterion))]
            row += [mean_with_ci(done(best, "final_eval_accuracy"))] if classifier else []
            row += [mean_with_ci(done(best, "final_eval_loss")),
                    f"{finished} of {len(best.runs)}"]
        body.append(row)
    header = [names[c] for c in others] + [f"selected {names.get(selected, selected)}",
                                          "values tried",
                                          "validation accuracy" if classifier else
                                          "validation loss"]
    header += ["test accuracy"] if classifier else []
    header += ["test loss", "runs DONE"]
    return table(header, body)


def pace_table(groups, varying):
    header = [short_names(varying)[c] for c in varying] or ["runs of"]
    header += ["fastest worker (ms/step)", "slowest worker (ms/step)"]
    body = []
    for group in groups:
        row = [group.values[c] for c in varying] or [group.label()]
        row += [mean_with_ci(group.worker_step_ms(min)), mean_with_ci(group.worker_step_ms(max))]
        body.append(row)
    return table(header, body)


def learner_staleness_rows(groups):
    """One row per group, worker and shard where gradients were applied: the staleness of that
    worker's gradients on that shard, over the group's runs."""
    rows = []
    for group in groups:
        counts = defaultdict(lambda: defaultdict(int))
        for run in group.runs:
            for learner, histogram in run.learner_staleness.items():
                for staleness, count in histogram.items():
                    counts[learner][staleness] += count
        for (worker, shard), histogram in sorted(counts.items()):
            stats = histogram_stats(histogram)
            if stats is None:
                continue
            mean, median, p99, largest = stats
            rows.append([group.label(), worker, shard, sum(histogram.values()), fmt(mean),
                         median, p99, largest])
    return rows


def main(directory):
    sweep, rows, groups, varying = load(directory)
    os.makedirs(os.path.join(directory, "plots"), exist_ok=True)
    plots = []

    def section(name, title, caption, draw, *args):
        """A section with the plot that draw(path, *args) saves as plots/NAME."""
        draw(os.path.join(directory, "plots", name), *args)
        plots.append(name)
        return f"## {title}\n\n![{title}](plots/{name})\n\n{caption}\n"

    classifier = any(run.classifier for g in groups for run in g.runs)
    runs = sum(len(g.runs) for g in groups)
    out = [f"# Sweep `{sweep['name']}`\n"]
    if sweep.get("description"):
        out.append(sweep["description"] + "\n")
    out.append(f"{runs} runs of {len(rows)} points, from `sweep.csv` (the sweep file was "
               f"`{sweep['source']}`), in {len(groups)} groups of runs that differ only in "
               "their seed; each run's results directory is its `dir` in `sweep.csv`. Values are "
               "the mean over a group's runs ± the half-width of its 95% confidence interval "
               "(Student's t over the runs) where they differ; plots show the mean and shade "
               "that interval.\n")
    if runs < len(rows):
        out.append(f"{len(rows) - runs} points have not run yet and are left out.\n")
    out.append("## Results\n\n" + results_table(groups, varying, classifier) +
               "\nTime/step is the wall time from submission (data, job creation and start-up "
               "included) over the job's steps; bytes are a worker's messages for the job per "
               "step of its own (`summary.json`).\n")
    out.append("## Pace of each worker\n\n"
               "Each worker's milliseconds per step in its training loop (`metrics.csv`: from "
               "its first step to its last, so without the start-up), for the fastest and the "
               "slowest worker of each run.\n\n" + pace_table(groups, varying))

    smoothed = ("the mean over the workers of each step's training-batch loss, smoothed over "
                "1/40 of the run")
    out.append(section("loss_vs_step.png", "Training loss against step",
                       f"Training loss: {smoothed}; a step is one step of each worker.",
                       curves_plot, groups, varying,
                       lambda r: (r.steps[-len(r.smoothed_losses()):], r.smoothed_losses()),
                       "step", "training loss", True))
    out.append(section("loss_vs_time.png", "Training loss against wall time",
                       f"Training loss: {smoothed}, against the seconds since submission.",
                       curves_plot, groups, varying,
                       lambda r: (r.times[-len(r.smoothed_losses()):], r.smoothed_losses()),
                       "seconds", "training loss", True))
    validation = has_validation(groups)
    selected = sweep.get("select") or ""
    if selected:
        if not validation or selected not in varying:
            out.append(f"## Selected on the validation split\n\nThe sweep selects "
                       f"`{selected}`, but " + ("its jobs have no validation split "
                       "(`data.validation_fraction`)" if not validation else
                       "only one value of it has run") + ": nothing to select.\n")
        else:
            out.append("## Selected on the validation split\n\nFor each value of the other "
                       f"settings, the `{selected}` whose runs have the best mean final "
                       "validation " + ("accuracy" if classifier else "loss") + ", and the "
                       "test figures of those runs: the test split is evaluated once per run, "
                       "at its end, and no choice looks at it.\n\n" +
                       selection_table(groups, varying, selected, classifier))
    # The chief's evaluations: the validation split's where the jobs have one (the test split
    # is then evaluated once, at the end, and its figures are in the tables), else the test's.
    split = "validation" if validation else "test"
    figure = "accuracy" if classifier else "loss"
    if validation:
        evaluations = ((lambda r: (r.validation_steps, r.validation_accuracy)) if classifier
                       else (lambda r: (r.validation_steps, r.validation_losses)))
        caption = ("The chief's evaluations on the validation split (the test split is "
                   "evaluated once, at the end of each run: its figures are in the tables).")
    else:
        evaluations = ((lambda r: (r.eval_steps, r.eval_accuracy)) if classifier
                       else (lambda r: (r.eval_steps, r.eval_losses)))
        caption = "The chief's evaluations on the test split."
    out.append(section(f"{split}_{figure}.png", f"{split.capitalize()} {figure}", caption,
                       curves_plot, groups, varying, evaluations, "step", f"{split} {figure}",
                       not classifier))
    # The same against passes over the training data, where modes and numbers of workers that
    # read different amounts of data a step compare example for example.
    if all(run.epochs_per_step for g in groups for run in g.runs):
        def in_epochs(pick):
            def picked(run):
                x, y = pick(run)
                return np.asarray(x, dtype=float) * run.epochs_per_step, y
            return picked
        epochs = ("an epoch is one pass over the training split: every worker reads a batch "
                  "of its shard each step, so an epoch is train_examples / (batch_size x "
                  "workers) steps")
        out.append(section("loss_vs_epoch.png", "Training loss against epochs",
                           f"Training loss: {smoothed}, against epochs ({epochs}): modes and "
                           "numbers of workers that read different amounts of data a step "
                           "compare example for example.", curves_plot, groups, varying,
                           in_epochs(lambda r: (r.steps[-len(r.smoothed_losses()):],
                                                r.smoothed_losses())),
                           "epoch", "training loss", True))
        out.append(section(f"{split}_{figure}_vs_epoch.png",
                           f"{split.capitalize()} {figure} against epochs",
                           f"The chief's evaluations on the {split} split against epochs.",
                           curves_plot, groups, varying, in_epochs(evaluations), "epoch",
                           f"{split} {figure}", not classifier))

    staleness = []
    out.append(section("staleness.png", "Staleness",
                       "Histograms of the staleness of every applied gradient, over all shards, "
                       "workers and runs of a group, one panel per consistency mode (cut at the "
                       "largest 99th percentile).",
                       lambda path: staleness.extend(staleness_plot(path, groups))) +
               "\n" +
               table(["mode", "group", "mean", "median", "99th percentile", "max"],
                     [(m, l, fmt(a), b, c, d) for m, l, a, b, c, d in staleness]))

    learners = learner_staleness_rows(groups)
    if learners:
        out.append("## Staleness by worker and shard\n\nEach worker's own distribution on each "
                   "shard (Gupta et al.'s per-learner view), over a group's runs: a straggler's "
                   "gradients, or a shard that applies later, stand out where the pooled "
                   "histograms above average them away.\n\n" +
                   table(["group", "worker", "shard", "gradients", "mean", "median",
                          "99th percentile", "max"], learners) + "\n")

    # Staleness over time: the first run of each group whose gradients were ever stale.
    timelines = [(group.label(), group.runs[0]) for group in groups
                 if any(s > 0 for s in group.runs[0].staleness)
                 and group.runs[0].staleness_over_time()]
    if timelines:
        out.append(section("staleness_over_time.png", "Staleness over time by worker and shard",
                           "Each learner's (a worker on a shard) mean staleness of the gradients "
                           "applied between two readings of the shards' histograms (every 2 s, "
                           "`staleness_timeline.csv`), in the first run of each group whose "
                           "gradients were ever stale: how staleness develops as the run goes, "
                           "worker by worker.", staleness_timeline_plot, timelines))

    target = sweep.get("target_loss") or 0
    if target > 0:
        body = []
        for group in groups:
            times = [t for t in group.column("time_to_target_s") if t is not None]
            body.append([group.label(), f"{len(times)}/{len(group.runs)}", mean_with_ci(times)])
        judged = "validation" if validation else "test"
        out.append(section("time_to_target.png", f"Time to a {judged} loss of {target:g}",
                           "Seconds from submission to the first evaluation at or below the "
                           "target; runs that never reached it are left out of the mean.",
                           time_to_target_plot, groups) + "\n" +
                   table(["group", "reached", "seconds"], body))
    if "workers" in varying:
        out.append(section("scaling.png", "Scaling with the number of workers",
                           "The throughput of all workers together, and the final test loss, "
                           "against the number of workers (error bars: the 95% confidence interval over runs; "
                           "losses over 100 times the median, diverged runs', drawn at that cap).",
                           scaling_plot, groups))

    with open(os.path.join(directory, "report.md"), "w") as file:
        file.write("\n".join(out))
    print(f"wrote {os.path.join(directory, 'report.md')} and {len(plots)} plots in "
          f"{os.path.join(directory, 'plots')}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: report.py RESULTS_DIR (the directory psctl experiment wrote)")
    main(sys.argv[1])
