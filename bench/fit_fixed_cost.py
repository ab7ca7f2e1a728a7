#!/usr/bin/env python3
"""A fixed cost per CTA, read from how a kernel's speed grows with N.

With B*N fixed (the benchmarks' 16k tokens), every N gives the same number of query rows, and each
row's CTA loops over N keys. If a CTA costs a fixed amount plus a constant per key, the time is
proportional to N + N0 and the speed is

    TFLOP/s(N) = P * N / (N + N0),   i.e.   1 / TFLOP/s = 1/P + (N0/P) * (1/N),

a straight line in 1/N: P is the speed at long sequences, N0 the fixed cost in keys' worth of
work. This fits the line by least squares over every N of a bench CSV, per implementation, head
dimension and masking, and prints P, N0 and the largest misfit (lecture 8, section 5).

Usage: bench/fit_fixed_cost.py RESULTS.csv [--impls a,b] [--dtype bf16]
       (default --impls: labs 8 and 5 at their best version, course/gpu_labs.def, torch:cudnn, torch:flash)
       bench/fit_fixed_cost.py --self-test     (recovers P and N0 from exact synthetic speeds)
"""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "course_attn"))
import gpu_labs  # noqa: E402  (include/course/gpu_labs.def, the GPU labs' one list)


def fit(points):
    """(P, N0, largest relative misfit) of [(N, tflops), ...] (two or more N)."""
    xs = [1.0 / n for n, _ in points]
    ys = [1.0 / t for _, t in points]
    k = len(points)
    mx, my = sum(xs) / k, sum(ys) / k
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    intercept = my - slope * mx
    p, n0 = 1.0 / intercept, slope / intercept
    misfit = max(abs(p * n / (n + n0) / t - 1.0) for n, t in points)
    return p, n0, misfit


def self_test():
    for p, n0 in ((694.0, 422.0), (500.0, 134.0)):
        pts = [(n, p * n / (n + n0)) for n in (512, 1024, 2048, 4096, 8192, 16384)]
        got_p, got_n0, misfit = fit(pts)
        if abs(got_p - p) > 1e-6 * p or abs(got_n0 - n0) > 1e-6 * n0 or misfit > 1e-9:
            print(f"FAILED: P {p}, N0 {n0} fitted as {got_p}, {got_n0} (misfit {misfit})")
            return 1
    # A kernel with no fixed cost has N0 = 0; one that slows down at long N gets a negative N0.
    if abs(fit([(512, 300.0), (4096, 300.0)])[1]) > 1e-9:
        print("FAILED: constant speed should give N0 = 0")
        return 1
    print("fit_fixed_cost: P and N0 recovered from exact speeds")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="?")
    labs = gpu_labs.load()  # the shipped versions of labs 8 and 5, and PyTorch's two fastest
    ap.add_argument("--impls", default=f"lab8:{labs.lab8_best},torch:cudnn,torch:flash,lab5:{labs.lab5_best}")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.csv:
        ap.error("a results CSV (bench/results/attention_*.csv) or --self-test")
    with open(args.csv, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "ok" and r["dtype"] == args.dtype]
    print(f"{'implementation':20s} {'d':>4s} {'causal':>6s} {'P (TFLOP/s)':>12s} {'N0 (keys)':>10s} "
          f"{'misfit':>7s}  N")
    for impl in args.impls.split(","):
        for d in ("64", "128"):
            for causal in ("0", "1"):
                pts = sorted((int(r["N"]), float(r["tflops"])) for r in rows
                             if r["impl"] == impl and r["d"] == d and r["causal"] == causal)
                if len(pts) < 2:
                    continue
                p, n0, misfit = fit(pts)
                ns = ",".join(str(n) for n, _ in pts)
                print(f"{impl:20s} {d:>4s} {causal:>6s} {p:12.1f} {n0:10.0f} {100 * misfit:6.1f}%  {ns}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
