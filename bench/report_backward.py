#!/usr/bin/env python3
"""The backward benchmark's report: a markdown table and the FlashAttention paper's picture.

Usage: report_backward.py BASE GPU COMMIT CSV...   (run-bench --backward calls it)
Reads the rows of bench_backward (lab 5's forward, lab 7's backward on tensor cores and on CUDA
cores) and bench_torch_backward.py (PyTorch SDPA's flash and cuDNN backends, forward and
backward) and writes BASE.csv (the rows that measured ok), BASE.md and, with matplotlib, BASE.png:
backward TFLOP/s against N (top row) and forward + backward (bottom row), one column per (d, causal).

FLOPs: forward 4 B H N^2 d, backward 2.5x that (five products instead of two), both halved when
causal. Forward + backward: their FLOPs over the sum of their times (the course's pair is lab 5's
forward with lab 7's backward; PyTorch's pairs are one backend's forward and backward).
"""
import csv
import sys

FIELDS = ["impl", "pass", "dtype", "d", "N", "B", "H", "causal", "ms", "tflops", "status", "reps"]
# (label, forward impl, backward impl) of each forward + backward pair.
PAIRS = [("course: lab 5 + lab 7 (tensor cores)", "lab5", "lab7"),
         ("PyTorch flash (FA2)", "torch:flash", "torch:flash"),
         ("PyTorch cuDNN", "torch:cudnn", "torch:cudnn")]
# One colour per implementation in both rows of the picture (by the backward's impl).
COLOURS = {"lab7": "tab:blue", "lab7-cuda-cores": "tab:orange", "torch:flash": "tab:green", "torch:cudnn": "tab:red"}


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


def markdown(rows, gpu, commit):
    fmt = lambda x: "" if x is None else f"{x:.1f}"
    lines = [f"# Backward pass: TFLOP/s, {gpu} (commit {commit})", "",
             "bf16, B * N = 16k tokens, H * d = 2048. FLOPs: forward 4 B H N^2 d, backward 2.5x that, halved "
             "when causal. lab7 = the course's GPU backward on tensor cores (part 3, mma.sync); lab7 cc = on CUDA "
             "cores (part 2, fp32 arithmetic); torch:flash and torch:cudnn = PyTorch SDPA's backends, timed in the "
             "same run, their backward as torch.autograd.grad(o, (q, k, v), dO), which adds nothing into q.grad, "
             "k.grad or v.grad (bench/bench_torch_backward.py). Ratio = lab7 / torch:flash. fwd+bwd = both passes' FLOPs over both passes' times (the "
             "course: lab 5's forward and lab 7's backward).", "",
             "| d | N | causal | lab7 bwd | lab7 cc bwd | torch:flash bwd | torch:cudnn bwd | lab7 / flash "
             "| lab5 fwd | flash fwd | course fwd+bwd | flash fwd+bwd | cuDNN fwd+bwd |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["d"], r["N"], r["causal"]) for r in rows}, key=lambda k: (int(k[0]), int(k[1]), k[2]))
    for d, n, c in keys:
        l7, fl = tflops(rows, "lab7", "backward", d, n, c), tflops(rows, "torch:flash", "backward", d, n, c)
        ratio = f"{l7 / fl:.2f}x" if l7 and fl else ""
        pairs = [fmt(fwd_bwd_tflops(rows, f, b, d, n, c)) for _, f, b in PAIRS]
        lines.append(f"| {d} | {n} | {'yes' if c == '1' else 'no'} | {fmt(l7)} | "
                     f"{fmt(tflops(rows, 'lab7-cuda-cores', 'backward', d, n, c))} | {fmt(fl)} | "
                     f"{fmt(tflops(rows, 'torch:cudnn', 'backward', d, n, c))} | {ratio} | "
                     f"{fmt(tflops(rows, 'lab5', 'forward', d, n, c))} | "
                     f"{fmt(tflops(rows, 'torch:flash', 'forward', d, n, c))} | {' | '.join(pairs)} |")
    return "\n".join(lines) + "\n"


def plot(rows, gpu, commit, path):
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
        for impl, label in [("lab7", "lab 7, tensor cores"), ("lab7-cuda-cores", "lab 7, CUDA cores"),
                            ("torch:flash", "PyTorch flash (FA2)"), ("torch:cudnn", "PyTorch cuDNN")]:
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
    fig.savefig(path, dpi=110, bbox_inches="tight")  # "tight" keeps the legends beside the panels
    return True


def main(argv):
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    base, gpu, commit, files = argv[1], argv[2], argv[3], argv[4:]
    rows = load(files)
    if base + ".csv" not in files:  # regenerating from the results file itself leaves it as it is
        with open(base + ".csv", "w", newline="") as out:
            w = csv.DictWriter(out, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(rows)
    text = markdown(rows, gpu, commit)
    open(base + ".md", "w").write(text)
    print(text, end="")
    plot(rows, gpu, commit, base + ".png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
