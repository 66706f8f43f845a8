#!/usr/bin/env python3
"""Plots the delay stability sweep (docs/EXPERIMENTS.md section 7).

usage: plot_delay_stability.py EDGE_CSV OUT_PNG

EDGE_CSV is what `tests:delay_stability_sweep` prints (delay,measured,formula,ratio); the plot
puts the measured edge of each delay against the formula 2 sin(pi / (2 (2 tau + 1))).
"""
import csv
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(csv_path, png_path):
    with open(csv_path, newline="") as file:
        rows = list(csv.DictReader(file))
    delays = [int(r["delay"]) for r in rows]
    measured = [float(r["measured"]) for r in rows]
    fine = [i / 20 for i in range(0, 20 * max(delays) + 1)]
    formula = [2 * math.sin(math.pi / (2 * (2 * t + 1))) for t in fine]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(fine, formula, color="0.4", label=r"$2\sin(\pi / (2(2\tau+1)))$")
    ax.plot(delays, measured, "o", color="C3", label="measured on a DELAYED shard")
    ax.set_xlabel(r"delay $\tau$ (updates)")
    ax.set_ylabel(r"largest stable $\eta h$")
    ax.set_yscale("log")
    ax.set_title(r"Gradient descent on $(h/2)x^2$ with a constant delay")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    print(f"wrote {png_path}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
