"""The plots of psctl report (tools/report.py): matplotlib figures saved as PNG.

Each function draws from report.py's groups (the runs of one setting, across seeds) and saves
one file; curves are the mean over a group's runs with its 95% confidence interval shaded.
"""
import textwrap
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after choosing the backend)
import numpy as np  # noqa: E402
from matplotlib.ticker import (FormatStrFormatter, LogLocator, MaxNLocator,  # noqa: E402
                               NullFormatter)

DPI = 80
CURVE_POINTS = 200


# Student's t's 97.5% quantile by degrees of freedom (a two-sided 95% interval); between the
# rows, the next smaller row's (wider: the interval errs on the safe side).
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 60: 2.000, 120: 1.980}


def t_975(degrees):
    return T_975[max(d for d in T_975 if d <= degrees)]


def mean_and_ci(values, axis=None):
    """The mean of `values` (along `axis`) and the half-width of its 95% confidence interval,
    Student's t over the n values (0 where n < 2)."""
    values = np.asarray(values, dtype=float)
    n = values.shape[0] if axis == 0 else values.size
    mean = values.mean(axis=axis)
    if n < 2:
        return mean, np.zeros_like(mean)
    return mean, t_975(n - 1) * values.std(axis=axis, ddof=1) / np.sqrt(n)


def band(axis, runs_xy, label, color):
    """The mean of the runs' curves on a common grid, and its 95% confidence interval shaded."""
    curves = [(x, y) for x, y in runs_xy if len(x) > 1]
    if not curves:
        return np.array([])
    end = min(x[-1] for x, _ in curves)
    start = max(x[0] for x, _ in curves)
    grid = np.linspace(start, end, CURVE_POINTS)
    with np.errstate(invalid="ignore", over="ignore"):
        ys = np.array([np.interp(grid, x, y) for x, y in curves])
        mean, half = mean_and_ci(ys, axis=0)
        axis.plot(grid, mean, label=label, color=color, linewidth=1.2)
        if len(curves) > 1:
            axis.fill_between(grid, mean - half, mean + half, color=color, alpha=0.2)
    return mean


COLORS = 10  # matplotlib's default cycle: more curves in one panel would share colors.


def facets(groups, varying):
    """The panels, the settings their titles give (left out of the curves' labels), and the
    panels per row. By number of workers when it varies along with other settings, else one
    panel. Where a panel would then hold more curves than there are colors, the panels are
    split into rows by one more setting: the one with the fewest values that brings every
    panel to at most COLORS curves (of those, the one with the fewest curves in a panel)."""
    if "workers" not in varying or len(varying) == 1:
        return [("", groups)], (), 1
    workers = sorted({g.workers() for g in groups})
    rows = [("", groups)]
    leave_out = ("workers",)

    def split(setting):
        values = list(dict.fromkeys(g.values[setting] for g in groups))
        return [(v, [g for g in groups if g.values[setting] == v]) for v in values]

    def most_curves(row_groups, left_out):
        return len({g.label(left_out) for g in row_groups})

    if most_curves(groups, leave_out) > COLORS:
        choices = []
        for setting in (c for c in varying if c != "workers"):
            parts = split(setting)
            worst = max(most_curves(part, leave_out + (setting,)) for _, part in parts)
            choices.append((worst > COLORS, len(parts), worst, setting))
        *_, setting = min(choices)
        name = groups[0].names[setting]
        rows = [(f"{name}={value}", part) for value, part in split(setting)]
        leave_out += (setting,)
    panels = [(", ".join(t for t in (title, f"workers={w}") if t),
               [g for g in row_groups if g.workers() == w])
              for title, row_groups in rows for w in workers]
    return panels, leave_out, len(workers) if len(rows) > 1 else min(4, len(panels))


def save(figure, path):
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def curves_plot(path, groups, varying, series, xlabel, ylabel, log_y):
    panels, leave_out, columns = facets(groups, varying)
    labels = list(dict.fromkeys(g.label(leave_out) for g in groups))
    colors = {label: f"C{i % COLORS}" for i, label in enumerate(labels)}
    rows = (len(panels) + columns - 1) // columns
    width = max(7.0, 4.2 * columns)
    # The legend below the panels, as many labels a row as fit: the figure grows by its rows
    # (inches) rather than squeezing the panels.
    per_row = max(1, min(len(labels), int(width / (0.7 + max(map(len, labels)) / 14))))
    legend_rows = (len(labels) + per_row - 1) // per_row
    legend_height = 0.1 + 0.17 * legend_rows
    height = 3.2 * rows + legend_height
    figure, axes = plt.subplots(rows, columns, figsize=(width, height), sharey=True,
                                squeeze=False)
    first, lowest = [], []
    for (title, panel_groups), axis in zip(panels, axes.flat):
        for group in panel_groups:
            runs_xy = [series(run) for run in group.runs]
            label = group.label(leave_out)
            mean = band(axis, runs_xy, label, colors[label])
            first += [y[np.isfinite(y)][0] for _, y in runs_xy if np.isfinite(y).any()]
            lowest += [mean[np.isfinite(mean)].min()] if np.isfinite(mean).any() else []
        axis.set_title(title, fontsize=9)
        axis.set_xlabel(xlabel)
        axis.grid(alpha=0.3)
    for axis in axes.flat[len(panels):]:
        axis.set_visible(False)
    axes[0][0].set_ylabel(ylabel)
    if log_y:
        axes[0][0].set_yscale("log")
        if first and lowest:  # Diverging runs leave the plot instead of flattening the others.
            axes[0][0].set_ylim(bottom=0.5 * min(lowest), top=2 * max(first))
    handles = [plt.Line2D([], [], color=colors[label]) for label in labels]
    figure.legend(handles, labels, loc="lower center", ncol=per_row, fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, legend_height / height, 1, 1))
    save(figure, path)


def histogram_stats(counts):
    total = sum(counts.values())
    if total == 0:
        return None
    values = sorted(counts)
    mean = sum(s * c for s, c in counts.items()) / total

    def quantile(q):
        seen = 0
        for s in values:
            seen += counts[s]
            if seen >= q * total:
                return s
        return values[-1]

    return mean, quantile(0.5), quantile(0.99), values[-1]


def staleness_plot(path, groups):
    """Grouped bars, one panel per consistency mode; returns the table's rows."""
    modes = list(dict.fromkeys(run.mode for g in groups for run in g.runs))
    figure, axes = plt.subplots(1, len(modes), figsize=(4.2 * len(modes), 3.4), squeeze=False)
    rows = []
    for mode, axis in zip(modes, axes.flat):
        pooled = {}
        for group in groups:
            counts = defaultdict(int)
            for run in group.runs:
                if run.mode == mode:
                    for s, c in run.staleness.items():
                        counts[s] += c
            if sum(counts.values()):
                pooled[group.label(("consistency.mode",))] = counts
        clip = max([histogram_stats(c)[2] for c in pooled.values()] + [1])
        width = 0.8 / max(1, len(pooled))
        for i, (label, counts) in enumerate(pooled.items()):
            total = sum(counts.values())
            x = np.arange(0, clip + 1)
            axis.bar(x - 0.4 + width * (i + 0.5), [counts.get(int(s), 0) / total for s in x], width,
                     label=label, color=f"C{i % 10}")
            rows.append((mode, label) + histogram_stats(counts))
        axis.set_title(mode, fontsize=9)
        axis.set_xlabel("staleness (updates)")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.grid(alpha=0.3, axis="y")
        if pooled:
            axis.legend(fontsize=7)
    axes[0][0].set_ylabel("fraction of applied gradients")
    figure.tight_layout()
    save(figure, path)
    return rows


def staleness_timeline_plot(path, panels):
    """One panel per (label, run) in `panels`, whose run has a staleness timeline: each
    learner's (worker on a shard) mean staleness of the gradients applied between two snapshots,
    against the seconds since submission."""
    columns = min(3, len(panels))
    rows = (len(panels) + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(max(7.0, 4.2 * columns), 3.2 * rows),
                                squeeze=False, sharey=True)
    for (label, run), axis in zip(panels, axes.flat):
        for (worker, shard), series in sorted(run.staleness_over_time().items()):
            times, means = zip(*series)
            axis.plot(times, means, color=f"C{worker % COLORS}",
                      linestyle=("-", "--", ":", "-.")[shard % 4], linewidth=1, marker=".",
                      markersize=3, label=f"worker {worker}, shard {shard}")
        axis.set_title(textwrap.fill(label, 48), fontsize=8)
        axis.set_xlabel("seconds")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=6, ncol=2)
    for axis in axes.flat[len(panels):]:
        axis.set_visible(False)
    axes[0][0].set_ylabel("mean staleness (updates)")
    figure.tight_layout()
    save(figure, path)


def time_to_target_plot(path, groups):
    figure, axis = plt.subplots(figsize=(6, 0.3 * len(groups) + 1.2))
    for i, group in enumerate(groups):
        times = [t for t in group.column("time_to_target_s") if t is not None]
        if times:
            mean, half = mean_and_ci(times)
            axis.barh(i, mean, xerr=half, color="C0", alpha=0.7, capsize=3)
        else:
            axis.text(0, i, " not reached", va="center", fontsize=8)
    axis.set_yticks(range(len(groups)))
    axis.set_yticklabels([g.label() for g in groups], fontsize=8)
    axis.invert_yaxis()
    axis.set_xlabel("seconds to the target test loss")
    axis.grid(alpha=0.3, axis="x")
    figure.tight_layout()
    save(figure, path)


def scaling_plot(path, groups):
    lines = defaultdict(list)
    for group in groups:
        lines[group.label(("workers",))].append(group)
    # Diverged runs' losses (1e70 and more) are drawn at the cap, 100 times the median.
    losses = [v for g in groups for v in g.column("final_eval_loss")
              if v is not None and np.isfinite(v)]
    cap = 100 * float(np.median(losses)) if losses else 1.0
    figure, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for i, (label, line) in enumerate(lines.items()):
        line.sort(key=lambda group: group.workers())
        for axis, column in zip(axes, ("examples_per_second", "final_eval_loss")):
            points = []
            for group in line:
                values = [v for v in group.column(column) if v is not None and np.isfinite(v)]
                if column == "final_eval_loss":
                    values = [min(v, cap) for v in values]
                if values:
                    points.append((group.workers(), *mean_and_ci(values)))
            if points:
                x, mean, half = map(np.array, zip(*points))
                # Past the colors, dashed: no two lines look alike up to 2 * COLORS.
                axis.errorbar(x, mean, yerr=half, label=label,
                              color=f"C{i % COLORS}", linestyle="-" if i < COLORS else "--",
                              marker="o", capsize=3)
    axes[0].set_ylabel("examples/s (all workers)")
    axes[1].set_ylabel("final test loss")
    axes[1].set_yscale("log")
    if max(losses, default=0) > cap:
        axes[1].set_ylim(top=cap * 1.5)
    axes[1].yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    axes[1].yaxis.set_major_formatter(FormatStrFormatter("%g"))
    axes[1].yaxis.set_minor_formatter(NullFormatter())
    workers = sorted({g.workers() for g in groups})
    for axis in axes:
        axis.set_xlabel("workers")
        axis.set_xscale("log", base=2)
        axis.set_xticks(workers, [str(w) for w in workers])
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    figure.tight_layout()
    save(figure, path)
