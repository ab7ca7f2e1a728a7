#!/usr/bin/env python3
"""Merge benchmark CSVs (bench_attention, bench_torch.py) into a markdown report and plots.

    python3 bench/plot_bench.py CSV [CSV ...] --out-dir bench/results
        [--gpu "NVIDIA H200, 580.159.03, 143771 MiB" | --gpu-file FILE] [--date YYYY-MM-DD]
        [--commit abc1234] [--cuda-version 13.0] [--torch-version 2.11.0] [--merged-csv FILE]

Writes <out-dir>/attention_<date>_<gpu-slug>.md and, beside it, PNGs in the style of the
FlashAttention paper's Figure 3 (speed and memory vs sequence length) and the lab 5 staircase.
Prints the summary (the ratios and the staircase) on stdout. Uses only csv and matplotlib.
"""
import argparse
import csv
import datetime
import math
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "course_attn"))
import gpu_labs  # noqa: E402  (include/course/gpu_labs.def, the GPU labs' one list)
import provenance  # noqa: E402  (bench/, this script's folder)

NS = [512, 1024, 2048, 4096, 8192, 16384]
# course::lab5::Version and course::lab8::Version in enum order, and each one's best, as
# bench_attention names them (lab5:<name>, lab8:<name>).
_LABS = gpu_labs.load()
LAB5_VERSIONS = list(_LABS.lab5_versions)
LAB5_BEST = f"lab5:{_LABS.lab5_best}"
LAB8_VERSIONS = list(_LABS.lab8_versions)
LAB8_BEST = f"lab8:{_LABS.lab8_best}"
# The staircases: (lab, title, the bars from left to right). Each starts from what the lab
# builds on: lab 5's from lab 4 (CUDA cores), lab 8's from lab 5's shipped kernel.
STAIRCASES = [
    ("lab5", "Lab 5 staircase (mma.sync)", ["lab4"] + [f"lab5:{v}" for v in LAB5_VERSIONS]),
    ("lab8", "Lab 8 staircase (Hopper: wgmma, TMA)", [LAB5_BEST] + [f"lab8:{v}" for v in LAB8_VERSIONS]),
]
TORCH = ["torch:math", "torch:efficient", "torch:flash", "torch:cudnn"]
# Not attention: bench_attention's one bf16 cuBLAS GEMM (bench/gemm_peak.hpp), the dense peak of
# this run; its row has d = 0 and N = the GEMM's size M = N = K.
GEMM_PEAK = "cublas:gemm_peak"
# The kernels whose share of that peak the report gives, where they ran.
PEAK_SHARE = [LAB5_BEST, LAB8_BEST, "torch:flash", "torch:cudnn"]
GOOD = ("ok", "wrong", "nonfinite")  # rows that have a time


def fnum(x):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return float("nan")
    return v


def load(paths):
    rows, seen = [], {}
    for path in paths:
        try:
            with open(path, newline="") as f:
                for r in csv.DictReader(f):
                    if not r.get("impl"):
                        continue
                    try:
                        row = {
                            "impl": r["impl"].strip(), "dtype": r["dtype"].strip(),
                            "d": int(r["d"]), "causal": int(r["causal"]), "N": int(r["N"]),
                            "B": int(r["B"]), "H": int(r["H"]), "ms": fnum(r.get("ms")),
                            "tflops": fnum(r.get("tflops")),
                            "peak_mem_bytes": fnum(r.get("peak_mem_bytes")),
                            "measured_mem_bytes": fnum(r.get("measured_mem_bytes")),
                            "status": (r.get("status") or "").strip() or "?",
                            "max_abs_err": fnum(r.get("max_abs_err")),
                            "reps": int(fnum(r.get("reps")) if not math.isnan(fnum(r.get("reps"))) else 0),
                        }
                    except (KeyError, ValueError) as e:
                        print(f"plot_bench: {path}: skipped a bad row ({e})", file=sys.stderr)
                        continue
                    key = (row["impl"], row["dtype"], row["d"], row["causal"], row["N"])
                    if key in seen:  # a later file wins
                        rows[seen[key]] = row
                    else:
                        seen[key] = len(rows)
                        rows.append(row)
        except OSError as e:
            print(f"plot_bench: cannot read {path}: {e}", file=sys.stderr)
    return rows


def impl_order(name):
    if name == "lab4":
        return (0, 0, name)
    if name.startswith("lab5:"):
        v = name[5:]
        return (1, LAB5_VERSIONS.index(v) if v in LAB5_VERSIONS else 99, name)
    if name.startswith("lab8:"):
        v = name[5:]
        return (1.5, LAB8_VERSIONS.index(v) if v in LAB8_VERSIONS else 99, name)
    if name == "standard":
        return (2, 0, name)
    if name in TORCH:
        return (3, TORCH.index(name), name)
    return (4, 0, name)


def slug(text):
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s or "unknown-gpu"


class Table:
    def __init__(self, rows):
        self.rows = rows
        self.by = {(r["impl"], r["dtype"], r["d"], r["causal"], r["N"]): r for r in rows}

    def get(self, impl, dtype, d, causal, n):
        return self.by.get((impl, dtype, d, causal, n))

    def tflops(self, impl, dtype, d, causal, n):
        r = self.get(impl, dtype, d, causal, n)
        if r is None or r["status"] not in GOOD or not (r["tflops"] > 0):
            return None
        return r["tflops"]

    def impls(self, dtype=None):
        names = {r["impl"] for r in self.rows if dtype is None or r["dtype"] == dtype}
        return sorted(names, key=impl_order)

    def dtypes(self):
        return [t for t in ("bf16", "fp32", "fp16") if any(r["dtype"] == t for r in self.rows)]

    def ns(self):
        return sorted({r["N"] for r in self.rows})


def cell(t, impl, dtype, d, causal, n):
    r = t.get(impl, dtype, d, causal, n)
    if r is None:
        return ""
    if r["status"] == "OOM":
        return "OOM"
    if r["status"] not in GOOD:
        return r["status"].split(":")[0]  # error / skipped / unavailable
    v = r["tflops"]
    s = f"{v:.1f}" if v == v else "?"
    if r["status"] != "ok":
        s += f" ({r['status']})"
    return s


def ratio_rows(t, num, den, dtype, ds, causals, ns):
    out = []
    for d in ds:
        for c in causals:
            vals = []
            for n in ns:
                a, b = t.tflops(num, dtype, d, c, n), t.tflops(den, dtype, d, c, n)
                vals.append(a / b if a and b else None)
            out.append((d, c, vals))
    return out


def geomean(vals):
    v = [x for x in vals if x]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None


def fmt_ratio(x):
    return f"{x:.2f}x" if x else "n/a"


def staircase_n(t):
    """The N of the staircases and of the peak table: 4096, or the largest N measured."""
    return 4096 if 4096 in t.ns() else (max(t.ns()) if t.ns() else None)


def gemm_peak_tflops(peak):
    """The GEMM peak's TFLOP/s, or None where its row is missing or not ok."""
    if peak is None or peak["status"] != "ok" or not (peak["tflops"] > 0):
        return None
    return peak["tflops"]


def peak_lines(t, peak):
    """The bf16 dense peak of this run and each attention kernel's share of it, as markdown."""
    if peak is None:
        return [f"**bf16 dense peak**: not measured in this run (no `{GEMM_PEAK}` row).", ""]
    g = gemm_peak_tflops(peak)
    size = peak["N"]
    if g is None:
        return [f"**bf16 dense peak** (cuBLAS GEMM {size}³): {peak['status']}.", ""]
    lines = [f"**bf16 dense peak**: a cuBLAS GEMM, {size}×{size}×{size}, bf16 in, fp32 accumulate, "
             f"in this run: **{g:.1f} TFLOP/s** (2·M·N·K / median time, {peak['reps']} reps). "
             "Share of it that each attention kernel reaches (its TFLOP/s / the GEMM's):", ""]
    n = staircase_n(t)
    cols = [(d, c) for d in (64, 128) for c in (0, 1)]
    present = [i for i in PEAK_SHARE if any(t.tflops(i, "bf16", d, c, n) for d, c in cols)] if n else []
    if not present:
        return lines + ["(no attention kernel measured in bf16)", ""]
    lines.append(f"| bf16, N = {n} | " + " | ".join(f"d={d}{' causal' if c else ''}" for d, c in cols) + " |")
    lines.append("|---|" + "---|" * len(cols))
    for i in present:
        cells = []
        for d, c in cols:
            v = t.tflops(i, "bf16", d, c, n)
            cells.append(f"{100 * v / g:.0f}%" if v else "")
        lines.append(f"| {i} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def summary_lines(t, peak=None):
    """The ratios the course's targets need, the staircases and the share of the GEMM peak, as
    markdown lines."""
    lines = []
    big = [n for n in t.ns() if n >= 4096]
    mid = [n for n in t.ns() if n >= 2048]
    specs = []
    for dtype in ("bf16", "fp32"):
        specs.append((f"lab4 / standard, {dtype}, d = 64, N >= 4096", "lab4", "standard", dtype, [64], big))
    for dtype in ("bf16", "fp32"):
        specs.append((f"lab4 / torch:math, {dtype}, d = 64, N >= 4096", "lab4", "torch:math", dtype, [64], big))
    best = LAB5_BEST
    specs.append((f"{best} / torch:flash, bf16, N >= 2048", best, "torch:flash", "bf16", [64, 128], mid))
    specs.append((f"{best} / torch:cudnn, bf16, N >= 2048", best, "torch:cudnn", "bf16", [64, 128], mid))
    specs.append((f"{best} / standard, bf16, N >= 2048", best, "standard", "bf16", [64, 128], mid))
    if t.impls("bf16").count(LAB8_BEST):
        for den in (LAB5_BEST, "torch:flash", "torch:cudnn"):
            specs.append((f"{LAB8_BEST} / {den}, bf16, N >= 2048", LAB8_BEST, den, "bf16", [64, 128], mid))
    for title, num, den, dtype, ds, ns in specs:
        if not ns:
            continue
        rr = ratio_rows(t, num, den, dtype, ds, (0, 1), ns)
        if all(v is None for _, _, vals in rr for v in vals):
            lines.append(f"**{title}**: not measured (missing {num} or {den}).")
            lines.append("")
            continue
        lines.append(f"**{title}** (TFLOP/s ratio = time ratio; > 1 means {num} is faster)")
        lines.append("")
        lines.append("| d | causal | " + " | ".join(f"N={n}" for n in ns) + " | geomean |")
        lines.append("|---|---|" + "---|" * len(ns) + "---|")
        for d, c, vals in rr:
            lines.append(f"| {d} | {'yes' if c else 'no'} | " + " | ".join(fmt_ratio(v) for v in vals)
                         + f" | {fmt_ratio(geomean(vals))} |")
        lines.append("")
    # The staircases at N = 4096.
    n = staircase_n(t)
    for lab, title, bars in STAIRCASES:
        own = [b for b in bars if b.startswith(lab + ":")]
        if n is None or not any(t.get(b, "bf16", d, 0, n) for b in own for d in (64, 128)):
            continue
        steps = bars + ["torch:flash", "torch:cudnn"]
        lines.append(f"**{title}**, bf16, N = {n}: TFLOP/s (gain over the previous step)")
        lines.append("")
        cols = [(d, c) for d in (64, 128) for c in (0, 1)]
        lines.append("| version | " + " | ".join(f"d={d}{' causal' if c else ''}" for d, c in cols) + " |")
        lines.append("|---|" + "---|" * len(cols))
        prev = {col: None for col in cols}
        for step in steps:
            cells = []
            for col in cols:
                v = t.tflops(step, "bf16", col[0], col[1], n)
                if v is None:
                    cells.append(cell(t, step, "bf16", col[0], col[1], n) or "")
                    continue
                p = prev[col]
                cells.append(f"{v:.1f}" + (f" ({v / p:.2f}x)" if p and step in own else ""))
                if step in bars:
                    prev[col] = v
            lines.append(f"| {step} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.extend(peak_lines(t, peak))
    return lines


# ------------------------------------------------------------------------------------- plots

STYLE = {
    "lab4": dict(color="#1f77b4", marker="o", lw=2.2),
    "standard": dict(color="#7f7f7f", marker="s", lw=2.2),
    "torch:math": dict(color="#8c564b", marker="v", lw=1.4, ls="--"),
    "torch:efficient": dict(color="#9467bd", marker="^", lw=1.4, ls="--"),
    "torch:flash": dict(color="#2ca02c", marker="D", lw=1.4, ls="--"),
    "torch:cudnn": dict(color="#17becf", marker="P", lw=1.4, ls="--"),
}
LAB5_COLORS = ["#fee6ce", "#fdd0a2", "#fdae6b", "#fd8d3c", "#f16913", "#d94801", "#8c2d04"]
LAB8_COLORS = ["#dadaeb", "#bcbddc", "#9e9ac8", "#807dba", "#6a51a3", "#54278f", "#2a0052",
               "#0b3d5c", "#c51b7d"]  # light to dark purple: wgmma .. pingpong (best); exp2_poly in
                                      # blue and persistent in magenta, the two steps built on pingpong


def style(impl):
    if impl.startswith("lab5:"):
        v = impl[5:]
        last = len(LAB5_VERSIONS) - 1
        i = min(LAB5_VERSIONS.index(v) if v in LAB5_VERSIONS else last, len(LAB5_COLORS) - 1)
        shipped = impl == LAB5_BEST  # the thick line is Version::best
        return dict(color=LAB5_COLORS[i], marker="o", lw=2.2 if shipped else 1.3, ms=5 if shipped else 3.5)
    if impl.startswith("lab8:"):
        v = impl[5:]
        last = len(LAB8_VERSIONS) - 1
        i = min(LAB8_VERSIONS.index(v) if v in LAB8_VERSIONS else last, len(LAB8_COLORS) - 1)
        shipped = impl == LAB8_BEST  # the thick line is Version::best, not the newest step
        return dict(color=LAB8_COLORS[i], marker="s", lw=2.2 if shipped else 1.3, ms=5 if shipped else 3.5)
    # Anything else: grey, with a marker that is not the out-of-memory cross.
    return dict(STYLE.get(impl, dict(color="0.4", marker=".", lw=1)))


def plot_speed(plt, t, dtype, gpu, path, source):
    impls = t.impls(dtype)
    fig, axes = plt.subplots(2, 2, figsize=(13, 9), sharex=True)
    ns = t.ns()
    ymax = 0
    for ai, (d, c) in enumerate([(64, 0), (64, 1), (128, 0), (128, 1)]):
        ax = axes[ai // 2][ai % 2]
        for impl in impls:
            xs, ys = [], []
            for n in ns:
                v = t.tflops(impl, dtype, d, c, n)
                if v is not None:
                    xs.append(n)
                    ys.append(v)
            if xs:
                st = style(impl)
                ax.plot(xs, ys, label=impl, markersize=st.pop("ms", 5), **st)
                ymax = max(ymax, max(ys))
            for n in ns:
                r = t.get(impl, dtype, d, c, n)
                if r is not None and r["status"] == "OOM":
                    ax.plot([n], [0], marker="x", color=style(impl)["color"], markersize=10, mew=2,
                            clip_on=False)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns)
        ax.set_xticklabels([str(n) for n in ns])
        ax.set_title(f"head dim d = {d}, {'causal' if c else 'not causal'}")
        ax.grid(True, alpha=0.3)
        ax.set_ylabel("speed (TFLOP/s)")
        if ai // 2 == 1:
            ax.set_xlabel("sequence length N (batch B = 16384 / N, heads H = 2048 / d)")
    for ax in axes.flat:
        ax.set_ylim(0, ymax * 1.08 if ymax > 0 else 1)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes.flat:
        h, l = ax.get_legend_handles_labels()
        for hh, ll in zip(h, l):
            if ll not in labels:
                handles.append(hh)
                labels.append(ll)
    fig.legend(handles, labels, loc="lower center", ncol=min(6, max(1, len(labels))), fontsize=10,
               frameon=False)
    fig.suptitle(f"Attention forward speed, {dtype}, on {gpu}\n"
                 "FLOPs = 4 B H N\u00b2 d (halved when causal); x = out of memory", fontsize=13)
    fig.tight_layout(rect=(0, 0.07 if len(labels) <= 6 else 0.1, 1, 0.95))
    provenance.savefig(fig, path, source, dpi=110)
    plt.close(fig)


def plot_memory(plt, t, gpu, gpu_mem_gib, path, source):
    """Measured bytes at d = 64, not causal: total (fixed tokens) and per sequence (/ B)."""
    fig, axes = plt.subplots(1, 2, figsize=(14, 6.8))
    ns = t.ns()
    series = []
    for dtype in t.dtypes():
        for impl in t.impls(dtype):
            series.append((impl, dtype))
    # Flash kernels of one dtype allocate the same bytes: draw one line for them.
    flash = {}
    for impl, dtype in series:
        if impl == "lab4" or impl.startswith("lab5:"):
            flash.setdefault(dtype, []).append(impl)
    drawn = []
    for impl, dtype in series:
        if (impl.startswith("lab5:") and dtype in flash and impl != flash[dtype][0]):
            continue
        label = f"{impl} ({dtype})"
        if (impl == "lab4" or impl.startswith("lab5:")) and len(flash.get(dtype, [])) > 1:
            label = f"course flash kernels ({dtype})"
        drawn.append((impl, dtype, label))
    top = 0
    ooms = {0: defaultdict(list), 1: defaultdict(list)}  # panel -> N -> [(label, color)]
    for impl, dtype, label in drawn:
        st = style(impl)
        st.pop("ms", None)
        if dtype == "fp32":
            st["ls"] = ":"
        for pi, (ax, per_seq) in enumerate(((axes[0], False), (axes[1], True))):
            xs, ys = [], []
            for n in ns:
                r = t.get(impl, dtype, 64, 0, n)
                if r is None:
                    continue
                if r["status"] == "OOM":
                    ooms[pi][n].append((label, st["color"]))
                    continue
                b = r["peak_mem_bytes"]
                if b > 0:
                    xs.append(n)
                    ys.append(b / (r["B"] if per_seq else 1) / 2**30)
            if xs:
                ax.plot(xs, ys, label=label if pi == 0 else None, **st)
                top = max(top, max(ys))
    for pi, ax in enumerate(axes):
        by_label = defaultdict(list)
        for n, items in sorted(ooms[pi].items()):
            ax.axvline(n, color="black", alpha=0.2, ls="--", lw=1)
            for label, color in items:
                by_label[(label, color)].append(n)
                ax.plot([n], [1.0], marker="x", color=color, markersize=9, mew=2, clip_on=False,
                        transform=ax.get_xaxis_transform())
        if by_label:
            text = "out of memory (x):\n" + "\n".join(
                f"  {label} at N = {', '.join(str(n) for n in ns_)}" for (label, _), ns_ in by_label.items())
            ax.text(0.02, 0.97, text, transform=ax.transAxes, va="top", ha="left", fontsize=8.5,
                    bbox=dict(boxstyle="round", facecolor="white", alpha=0.85, edgecolor="0.7"))
    for ax, per_seq in ((axes[0], False), (axes[1], True)):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ns)
        ax.set_xticklabels([str(n) for n in ns])
        ax.set_xlabel("sequence length N")
        ax.grid(True, which="both", alpha=0.25)
        if per_seq:
            ax.set_ylabel("device memory per sequence (GiB) = measured / B")
            ax.set_title("per sequence: standard grows as N\u00b2, flash as N")
        else:
            ax.set_ylabel("device memory of the call (GiB)")
            ax.set_title("whole batch, B\u00b7N = 16384 tokens: standard grows as N, flash stays flat")
            if gpu_mem_gib:
                ax.axhline(gpu_mem_gib, color="red", lw=1, ls="-.")
                ax.annotate(f"GPU memory {gpu_mem_gib:.0f} GiB", (ns[-1] if ns else 16384, gpu_mem_gib),
                            color="red", ha="right", va="bottom", fontsize=9)
                ax.set_ylim(top=gpu_mem_gib * 2.5)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(5, max(1, len(labels))), fontsize=9,
               frameon=False)
    rows_of_legend = (len(labels) + 4) // 5
    fig.suptitle(f"Attention forward memory (inputs + outputs + workspace; d = 64, H = 32) on {gpu}",
                 fontsize=13)
    fig.tight_layout(rect=(0, 0.035 * rows_of_legend + 0.01, 1, 0.94))
    provenance.savefig(fig, path, source, dpi=110)
    plt.close(fig)


def plot_staircase(plt, t, gpu, path, source, title, steps, peak=None):
    n = staircase_n(t)
    cols = [(64, 0), (64, 1), (128, 0), (128, 1)]
    refs = ["torch:flash", "torch:cudnn"]
    fig, ax = plt.subplots(figsize=(13, 5.8))
    width = 0.8 / len(steps)
    for si, s in enumerate(steps):
        xs, ys = [], []
        for ci, (d, c) in enumerate(cols):
            v = t.tflops(s, "bf16", d, c, n)
            if v is not None:
                xs.append(ci - 0.4 + width * (si + 0.5))
                ys.append(v)
        if xs:
            bars = ax.bar(xs, ys, width * 0.95, label=s, color=style(s)["color"], edgecolor="black",
                          linewidth=0.5)
            for b, v in zip(bars, ys):
                ax.annotate(f"{v:.0f}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom",
                            fontsize=8)
    for ref in refs:
        for ci, (d, c) in enumerate(cols):
            v = t.tflops(ref, "bf16", d, c, n)
            if v is not None:
                ax.hlines(v, ci - 0.42, ci + 0.42, colors=style(ref)["color"], linestyles="--",
                          label=ref if ci == 0 or not ax.get_legend_handles_labels()[1].count(ref) else None)
    g = gemm_peak_tflops(peak)
    if g:
        ax.axhline(g, color="black", ls=":", lw=1.2, label=f"cuBLAS bf16 GEMM {peak['N']}³ (dense peak)")
    h, l = ax.get_legend_handles_labels()
    uniq = {}
    for hh, ll in zip(h, l):
        uniq.setdefault(ll, hh)
    ax.legend(uniq.values(), uniq.keys(), fontsize=9, loc="upper center", ncol=4)
    ymax = max([b.get_height() for b in ax.patches] + [ln for ln in [0]])
    for ref in refs:
        for d, c in cols:
            v = t.tflops(ref, "bf16", d, c, n)
            if v:
                ymax = max(ymax, v)
    ymax = max(ymax, g or 0)
    ax.set_ylim(0, ymax * 1.3 if ymax > 0 else 1)
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels([f"d = {d}, {'causal' if c else 'not causal'}" for d, c in cols])
    ax.set_ylabel("speed (TFLOP/s)")
    ax.set_xlabel(f"configuration (bf16, N = {n}, B = {16384 // n})")
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(f"{title}: each version adds one technique (bf16, N = {n}) on {gpu};\n"
                 "dashed: PyTorch's flash and cuDNN backends" + ("; dotted: a cuBLAS GEMM, the dense peak" if g else ""),
                 fontsize=11)
    fig.tight_layout()
    provenance.savefig(fig, path, source, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description="merge benchmark CSVs into a report and plots")
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--out-dir", default="bench/results")
    ap.add_argument("--gpu", default="")
    ap.add_argument("--gpu-file", default="")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--cuda-version", default="unknown")
    ap.add_argument("--torch-version", default="not measured")
    ap.add_argument("--merged-csv", default="", help="write the merged rows here ('auto': beside the report)")
    ap.add_argument("--print-paths", default="", help="write the paths of the files made to this file")
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args()

    gpu_line = args.gpu
    if not gpu_line and args.gpu_file:
        try:
            with open(args.gpu_file) as f:
                gpu_line = f.readline().strip()
        except OSError:
            pass
    parts = [p.strip() for p in gpu_line.split(",")] if gpu_line else []
    gpu = parts[0] if parts and parts[0] else "unknown GPU"
    driver = parts[1] if len(parts) > 1 else "unknown"
    gpu_mem_gib = None
    if len(parts) > 2:
        m = re.match(r"([\d.]+)\s*MiB", parts[2])
        if m:
            gpu_mem_gib = float(m.group(1)) / 1024

    all_rows = load(args.csv)
    peaks = [r for r in all_rows if r["impl"] == GEMM_PEAK]
    peak = peaks[-1] if peaks else None
    rows = [r for r in all_rows if r["impl"] != GEMM_PEAK]  # the attention rows
    if not rows:
        print("plot_bench: no attention rows in " + " ".join(args.csv), file=sys.stderr)
        return 1
    t = Table(rows)
    os.makedirs(args.out_dir, exist_ok=True)
    stem = f"attention_{args.date}_{slug(gpu)}"
    md_path = os.path.join(args.out_dir, stem + ".md")

    if args.merged_csv == "auto":
        args.merged_csv = os.path.join(args.out_dir, stem + ".csv")
    if args.merged_csv and not provenance.among(args.merged_csv, args.csv):  # a recorded run drawn again: its CSV stays
        cols = ["impl", "dtype", "d", "causal", "N", "B", "H", "ms", "tflops", "peak_mem_bytes",
                "status", "max_abs_err", "measured_mem_bytes", "reps"]
        with open(args.merged_csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cols)
            for r in sorted(all_rows, key=lambda r: (r["dtype"], r["d"], r["causal"], r["N"], impl_order(r["impl"]))):
                w.writerow([r[c] if not isinstance(r[c], float) else (f"{r[c]:.6g}" if c not in ("peak_mem_bytes", "measured_mem_bytes") or math.isnan(r[c]) else str(int(r[c]))) for c in cols])

    # The table the pictures name (bench/provenance.py): the merged CSV, or the one CSV read.
    source = args.merged_csv or (args.csv[0] if len(args.csv) == 1 else None)
    pngs = {}
    plot_error = None
    if not args.no_plots:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            for dtype in t.dtypes():
                p = os.path.join(args.out_dir, f"{stem}_speed_{dtype}.png")
                plot_speed(plt, t, dtype, gpu, p, source)
                pngs[f"speed_{dtype}"] = p
            p = os.path.join(args.out_dir, f"{stem}_memory.png")
            plot_memory(plt, t, gpu, gpu_mem_gib, p, source)
            pngs["memory"] = p
            for lab, title, steps in STAIRCASES:
                # A staircase needs at least two of the lab's own steps (a run of the best alone has none).
                if len({r["impl"] for r in rows if r["impl"].startswith(lab + ":")}) >= 2:
                    # lab 5's keeps its old name, so that earlier reports' links still hold.
                    key = "staircase" if lab == "lab5" else f"staircase_{lab}"
                    p = os.path.join(args.out_dir, f"{stem}_{key}.png")
                    plot_staircase(plt, t, gpu, p, source, title, steps, peak)
                    pngs[key] = p
        except Exception as e:  # noqa: BLE001
            plot_error = f"{type(e).__name__}: {e}"
            print(f"plot_bench: plots failed: {plot_error}", file=sys.stderr)

    L = []
    L.append(f"# Attention forward benchmark: {gpu}, {args.date}")
    L.append("")
    L.append(f"- GPU: {gpu} (driver {driver}" + (f", {gpu_mem_gib:.0f} GiB" if gpu_mem_gib else "") + ")")
    L.append(f"- date: {args.date}; commit: `{args.commit}`; CUDA: {args.cuda_version}; "
             f"PyTorch: {args.torch_version}")
    L.append("- shapes: B\u00b7N = 16384 tokens, H\u00b7d = 2048 (H = 32 at d = 64, 16 at d = 128), "
             "B = 16384 / N; layout [B, H, N, d]; causal is bottom-right aligned (= top-left, Nq = Nk)")
    L.append("- time: median over reps of cudaEvent / torch.cuda.Event pairs after a warm-up; "
             "reps = clamp(300 ms / t, 3, 20); inputs random normal, two input sets alternated")
    L.append("- TFLOP/s = 4 B H N\u00b2 d / time, halved when causal; memory = inputs + outputs + "
             "workspace (standard: the score matrix; torch: measured by the caching allocator)")
    L.append("- max_abs_err: max |O - O_fp64| over the last min(N, 1024) query rows of head (0, 0)")
    L.append("- how to reproduce and read this: bench/README.md")
    L.append("")
    L.append("## Summary")
    L.append("")
    summary = summary_lines(t, peak)
    L.extend(summary)
    if pngs:
        L.append("## Plots")
        L.append("")
        for key, p in pngs.items():
            L.append(f"![{key}]({os.path.basename(p)})")
            L.append("")
    if plot_error:
        L.append(f"(plots failed: {plot_error})")
        L.append("")
    L.append("## Speed (TFLOP/s)")
    L.append("")
    ns = t.ns()
    for dtype in t.dtypes():
        for d in sorted({r["d"] for r in rows}):
            for c in (0, 1):
                impls = [i for i in t.impls(dtype) if any(t.get(i, dtype, d, c, n) for n in ns)]
                if not impls:
                    continue
                L.append(f"### {dtype}, d = {d}, {'causal' if c else 'not causal'}")
                L.append("")
                L.append("| impl | " + " | ".join(f"N={n}" for n in ns) + " |")
                L.append("|---|" + "---|" * len(ns))
                for i in impls:
                    L.append(f"| {i} | " + " | ".join(cell(t, i, dtype, d, c, n) for n in ns) + " |")
                L.append("")
    L.append("## Memory (GiB; d = 64, not causal; planned / measured)")
    L.append("")
    L.append("Planned = inputs + outputs + the workspace the implementation allocates; measured = "
             "inputs + outputs + the drop in cudaMemGetInfo's free memory across the first call "
             "(torch: both are the caching allocator's peak).")
    L.append("")
    L.append("| impl | dtype | " + " | ".join(f"N={n}" for n in ns) + " |")
    L.append("|---|---|" + "---|" * len(ns))
    for dtype in t.dtypes():
        for i in t.impls(dtype):
            cells = []
            for n in ns:
                r = t.get(i, dtype, 64, 0, n)
                if r is None:
                    cells.append("")
                elif r["status"] == "OOM":
                    cells.append("OOM")
                elif r["peak_mem_bytes"] > 0:
                    a, b = r["peak_mem_bytes"] / 2**30, r["measured_mem_bytes"] / 2**30
                    cells.append(f"{a:.2f}" if abs(a - b) < 0.005 else f"{a:.2f} / {b:.2f}")
                else:
                    cells.append(r["status"].split(":")[0])
            L.append(f"| {i} | {dtype} | " + " | ".join(cells) + " |")
    L.append("")
    L.append("## Correctness (max |O - O_fp64| over all configurations) and status counts")
    L.append("")
    L.append("| impl | dtype | worst max_abs_err | statuses |")
    L.append("|---|---|---|---|")
    problems = []
    for dtype in t.dtypes():
        for i in t.impls(dtype):
            rs = [r for r in rows if r["impl"] == i and r["dtype"] == dtype]
            errs = [r["max_abs_err"] for r in rs if r["max_abs_err"] == r["max_abs_err"]]
            counts = defaultdict(int)
            for r in rs:
                counts[r["status"].split(":")[0]] += 1
                if r["status"] not in ("ok", "OOM"):
                    problems.append(r)
            L.append(f"| {i} | {dtype} | {max(errs):.2e} | " if errs else f"| {i} | {dtype} | - | ")
            L[-1] += ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + " |"
    L.append("")
    if problems:
        L.append("### Rows that are not ok")
        L.append("")
        seen_msgs = set()
        for r in problems[:40]:
            msg = f"- {r['impl']} {r['dtype']} d={r['d']} causal={r['causal']} N={r['N']}: {r['status']}"
            if r["status"] not in seen_msgs or len(seen_msgs) < 40:
                L.append(msg)
                seen_msgs.add(r["status"])
        if len(problems) > 40:
            L.append(f"- ... and {len(problems) - 40} more (see the CSV)")
        L.append("")
    with open(md_path, "w") as f:
        f.write("\n".join(L) + "\n")

    print(f"# Attention benchmark summary: {gpu}, {args.date}, commit {args.commit}")
    print()
    print("\n".join(summary))
    print(f"report: {md_path}")
    for p in pngs.values():
        print(f"plot:   {p}")
    if args.merged_csv:
        print(f"csv:    {args.merged_csv}")
    if args.print_paths:
        with open(args.print_paths, "w") as f:
            for p in [md_path] + ([args.merged_csv] if args.merged_csv else []) + list(pngs.values()):
                f.write(p + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
