#!/usr/bin/env python3
"""Plots the CPU attention benchmark (bench_lab3_cpu's CSV): time vs N and peak memory vs N.

Usage: bench/plot_cpu_bench.py RESULTS.csv [--out-prefix PREFIX]
Writes PREFIX_time.png and PREFIX_memory.png (PREFIX defaults to the CSV path without .csv).
Both plots are log-log; skipped rows (time 0) are left out and named in the legend.
"""
import argparse
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import provenance  # noqa: E402  (bench/, this script's folder)

STYLE = {
    "streaming": dict(color="tab:blue", marker="o", label="streaming (lab 3, tiles 64x64)"),
    "materialising": dict(color="tab:red", marker="s", label="materialising S (N x N, fp32)"),
}


def load(path):
    rows = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            rows.setdefault(r["impl"], []).append(r)
    return rows


def series(rows, key, scale=1.0):
    xs, ys, skipped = [], [], []
    for r in rows:
        n, v = int(r["N"]), float(r[key])
        if float(r["seconds"]) <= 0:
            skipped.append(n)
            continue
        xs.append(n)
        ys.append(v * scale)
    return xs, ys, skipped


def plot(rows, key, scale, ylabel, title, out, source):
    fig, ax = plt.subplots(figsize=(7, 4.8), dpi=130)
    d = None
    for impl, rs in rows.items():
        d = rs[0]["d"]
        xs, ys, skipped = series(rs, key, scale)
        style = dict(STYLE.get(impl, dict(label=impl)))
        if skipped:
            style["label"] += " (skipped at N = " + ", ".join(map(str, skipped)) + ")"
        ax.plot(xs, ys, linewidth=2, markersize=6, **style)
        below = impl == "streaming"  # labels of the lower curve go under its points
        for x, y in zip(xs, ys):
            ax.annotate(f"{y:.0f}" if y >= 100 else f"{y:.3g}", (x, y),
                        textcoords="offset points", xytext=(0, -13 if below else 7),
                        ha="center", fontsize=8, color=style.get("color", "black"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.margins(x=0.06, y=0.12)
    ns = sorted({int(r["N"]) for rs in rows.values() for r in rs})
    ax.set_xticks(ns)
    ax.set_xticklabels([f"{n // 1024}k" if n >= 1024 else str(n) for n in ns])
    ax.set_xlabel("sequence length N (Nq = Nk, one head)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title}\nfp32, d = {d}, no mask, one CPU core")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=9)
    fig.tight_layout()
    provenance.savefig(fig, out, source)
    plt.close(fig)
    print("wrote", out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv")
    p.add_argument("--out-prefix")
    a = p.parse_args()
    if not os.path.exists(a.csv):
        sys.exit(f"no such file: {a.csv}")
    prefix = a.out_prefix or os.path.splitext(a.csv)[0]
    rows = load(a.csv)
    plot(rows, "seconds", 1.0, "wall time per call (s)", "Attention forward: time vs N",
         prefix + "_time.png", a.csv)
    plot(rows, "peak_heap_bytes", 1.0 / 2**20, "peak heap during the call (MiB)",
         "Attention forward: peak memory vs N", prefix + "_memory.png", a.csv)


if __name__ == "__main__":
    main()
