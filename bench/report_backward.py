#!/usr/bin/env python3
"""The backward benchmark's report: a markdown table and the FlashAttention paper's picture.

Usage: report_backward.py BASE GPU COMMIT CSV...   (run-bench --backward calls it)
Reads the rows of bench_backward (lab 5's forward, lab 7's backward on tensor cores and on CUDA
cores, and on an H100 or H200 lab 8's forward and lab 9's backward, atomic and deterministic dQ)
and bench_torch_backward.py (PyTorch SDPA's flash and cuDNN backends, forward and backward) and
writes BASE.csv (the rows that measured ok; left as it is when it is one of the CSVs read),
BASE.md and, with matplotlib, BASE.png: backward TFLOP/s against N (top row) and forward +
backward (bottom row), one column per (d, causal). The picture names BASE.csv and its digest
(bench/provenance.py).

FLOPs: forward 4 B H N^2 d, backward 2.5x that (five products instead of two), both halved when
causal. Forward + backward: their FLOPs over the sum of their times (the course's pairs are lab 5's
forward with lab 7's backward and, on Hopper, lab 8's with lab 9's; PyTorch's pairs are one
backend's forward and backward). Lab 8's and lab 9's columns appear only where the run has them.
"""
import csv
import sys

import provenance

FIELDS = ["impl", "pass", "dtype", "d", "N", "B", "H", "causal", "ms", "tflops", "status", "reps"]
# (label, forward impl, backward impl) of each forward + backward pair.
PAIRS = [("course: lab 5 + lab 7 (tensor cores)", "lab5", "lab7"),
         ("course on Hopper: lab 8 + lab 9", "lab8", "lab9"),
         ("PyTorch flash (FA2)", "torch:flash", "torch:flash"),
         ("PyTorch cuDNN", "torch:cudnn", "torch:cudnn")]
# One colour per implementation in both rows of the picture (by the backward's impl).
COLOURS = {"lab7": "tab:blue", "lab7-cuda-cores": "tab:orange", "lab9": "tab:purple", "lab9-deterministic": "tab:pink",
           "lab9-wgmma": "tab:brown", "torch:flash": "tab:green", "torch:cudnn": "tab:red"}
# The backward implementations, in the table's and the picture's order.
BACKWARDS = [("lab7", "lab7 bwd", "lab 7, tensor cores"), ("lab7-cuda-cores", "lab7 cc bwd", "lab 7, CUDA cores"),
             ("lab9-wgmma", "lab9 step 1 bwd", "lab 9 step 1 (one kind of warpgroup)"),
             ("lab9", "lab9 bwd", "lab 9 step 2 (warp-specialised)"),
             ("lab9-deterministic", "lab9 det bwd", "lab 9 step 2, deterministic dQ"),
             ("torch:flash", "torch:flash bwd", "PyTorch flash (FA2)"),
             ("torch:cudnn", "torch:cudnn bwd", "PyTorch cuDNN")]
# (numerator, denominator) of the backward ratios in the table.
RATIOS = [("lab7", "torch:flash"), ("lab9", "lab9-wgmma"), ("lab9", "torch:flash"), ("lab9", "torch:cudnn"),
          ("lab9-deterministic", "lab9")]
FORWARDS = [("lab5", "lab5 fwd"), ("lab8", "lab8 fwd"), ("torch:flash", "flash fwd")]


def load(files):
    return [r for f in files for r in csv.DictReader(open(f)) if r["status"] == "ok"]


def find(rows, impl, pass_, d, n, causal):
    return next((r for r in rows if r["impl"] == impl and r["pass"] == pass_ and r["d"] == d and r["N"] == n
                 and r["causal"] == causal), None)


def tflops(rows, impl, pass_, d, n, causal):
    r = find(rows, impl, pass_, d, n, causal)
    return float(r["tflops"]) if r else None


def fwd_bwd_tflops(rows, fwd_impl, bwd_impl, d, n, causal):
    """(forward FLOPs + backward FLOPs) / (forward time + backward time), from the rows' own figures."""
    f, b = find(rows, fwd_impl, "forward", d, n, causal), find(rows, bwd_impl, "backward", d, n, causal)
    if not f or not b:
        return None
    f_ms, b_ms = float(f["ms"]), float(b["ms"])
    flops = float(f["tflops"]) * f_ms + float(b["tflops"]) * b_ms  # TFLOP/s x ms = 1e9 FLOPs
    return flops / (f_ms + b_ms)


def present(rows, impl, pass_):
    return any(r["impl"] == impl and r["pass"] == pass_ for r in rows)


def markdown(rows, gpu, commit):
    fmt = lambda x: "" if x is None else f"{x:.1f}"
    backwards = [b for b in BACKWARDS if present(rows, b[0], "backward")]
    ratios = [(a, b) for a, b in RATIOS if present(rows, a, "backward") and present(rows, b, "backward")]
    forwards = [f for f in FORWARDS if present(rows, f[0], "forward")]
    pairs = [p for p in PAIRS if present(rows, p[1], "forward") and present(rows, p[2], "backward")]
    short = {"torch:flash": "flash", "torch:cudnn": "cuDNN", "lab9-deterministic": "lab9 det", "lab9-wgmma": "lab9 step 1"}
    pair_short = {"lab5": "lab 5 + 7", "lab8": "lab 8 + 9", "torch:flash": "flash", "torch:cudnn": "cuDNN"}
    header = (["d", "N", "causal"] + [b[1] for b in backwards]
              + [f"{short.get(a, a)} / {short.get(b, b)}" for a, b in ratios]
              + [f[1] for f in forwards] + [f"{pair_short[f]} fwd+bwd" for _, f, _ in pairs])
    # What each column is, for the implementations this run has.
    meaning = {"lab7": "lab7 = the course's GPU backward on tensor cores (part 3, mma.sync)",
               "lab7-cuda-cores": "lab7 cc = on CUDA cores (part 2, fp32 arithmetic)",
               "lab9-wgmma": "lab9 step 1 = the Hopper backward's first step (wgmma, TMA, one kind of warpgroup, dQ by "
                             "atomics; H100 and H200 only)",
               "lab9": "lab9 = its best step, step 2 (a producer warp, setmaxnreg, dQ added by bulk reductions from "
                       "shared memory)",
               "lab9-deterministic": "lab9 det = the same with options.deterministic (the K/V tiles add into dQ in "
                                     "turn, the same bits in every run)",
               "torch:flash": "torch:flash and torch:cudnn = PyTorch SDPA's backends, timed in the same run, their "
                              "backward as torch.autograd.grad(o, (q, k, v), dO), which adds nothing into q.grad, "
                              "k.grad or v.grad (bench/bench_torch_backward.py)"}
    described = "; ".join(text for impl, text in meaning.items()
                          if present(rows, impl, "backward") or (impl == "torch:flash" and present(rows, "torch:cudnn", "backward")))
    lines = [f"# Backward pass: TFLOP/s, {gpu} (commit {commit})", "",
             "bf16, B * N = 16k tokens, H * d = 2048. FLOPs: forward 4 B H N^2 d, backward 2.5x that, halved "
             f"when causal. {described}. Ratios are of backward TFLOP/s. fwd+bwd = both "
             "passes' FLOPs over both passes' times (the course: lab 5's forward with lab 7's backward, and lab "
             "8's with lab 9's).", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    keys = sorted({(r["d"], r["N"], r["causal"]) for r in rows}, key=lambda k: (int(k[0]), int(k[1]), k[2]))
    for d, n, c in keys:
        cells = [d, n, "yes" if c == "1" else "no"]
        cells += [fmt(tflops(rows, impl, "backward", d, n, c)) for impl, _, _ in backwards]
        for a, b in ratios:
            x, y = tflops(rows, a, "backward", d, n, c), tflops(rows, b, "backward", d, n, c)
            cells.append(f"{x / y:.2f}x" if x and y else "")
        cells += [fmt(tflops(rows, impl, "forward", d, n, c)) for impl, _ in forwards]
        cells += [fmt(fwd_bwd_tflops(rows, f, b, d, n, c)) for _, f, b in pairs]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows, gpu, commit, path, csv_path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels = sorted({(r["d"], r["causal"]) for r in rows}, key=lambda k: (int(k[0]), k[1]))
    fig, axes = plt.subplots(2, len(panels), figsize=(4.2 * len(panels), 7.2), squeeze=False)
    for col, (d, c) in enumerate(panels):
        title = f"d = {d}, {'causal' if c == '1' else 'not causal'}"
        ns = sorted({int(r["N"]) for r in rows if r["d"] == d and r["causal"] == c})
        top, bottom = axes[0][col], axes[1][col]
        for impl, _, label in BACKWARDS:
            pts = [(n, tflops(rows, impl, "backward", d, str(n), c)) for n in ns]
            pts = [p for p in pts if p[1] is not None]
            if pts:
                top.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label, color=COLOURS[impl])
        for label, f, b in PAIRS:
            pts = [(n, fwd_bwd_tflops(rows, f, b, d, str(n), c)) for n in ns]
            pts = [p for p in pts if p[1] is not None]
            if pts:
                bottom.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label, color=COLOURS[b])
        for ax, what in [(top, "backward"), (bottom, "forward + backward")]:
            ax.set_xscale("log", base=2)
            ax.set_xlabel("sequence length N (tokens)")
            ax.set_ylabel(f"{what} TFLOP/s")
            ax.set_title(f"{what}, {title}", fontsize=10)
            ax.grid(True, alpha=0.3)
    # One legend per row, beside its last panel: inside a panel it hid the top curve's points.
    for row in axes:
        row[-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.03, 1.0), borderaxespad=0.0)
    fig.suptitle(f"Attention backward and forward + backward, bf16, B*N = 16k tokens, H*d = 2048 "
                 f"({gpu}, commit {commit})", fontsize=10)
    fig.tight_layout()
    provenance.savefig(fig, path, csv_path, dpi=110, bbox_inches="tight")  # "tight" keeps the legends beside the panels
    return True


def main(argv):
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    base, gpu, commit, files = argv[1], argv[2], argv[3], argv[4:]
    rows = load(files)
    if not provenance.among(base + ".csv", files):  # a recorded run drawn again: its CSV stays
        with open(base + ".csv", "w", newline="") as out:
            w = csv.DictWriter(out, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(rows)
    text = markdown(rows, gpu, commit)
    open(base + ".md", "w").write(text)
    print(text, end="")
    plot(rows, gpu, commit, base + ".png", base + ".csv")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
