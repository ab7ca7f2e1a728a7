#!/usr/bin/env python3
"""Two or more of bench_attention's implementations timed in turn, round after round, and compared.

A change to a kernel that moves it by a few percent moves it by less than what separates two
machines of the same GPU, or two minutes of one (on the H200s used for lab 8: 3-4% between
machines for the same kernel at N = 1024, up to 5% between two timings of one kernel at N = 16384).
A comparison is only as good as its two sides measured together. So this runs each implementation
in its own bench_attention process, one after the other, and repeats the whole sequence: rounds
A B, A B, ... (A B A B for two rounds), every round on the same shapes. Then, per shape, it prints
each implementation's range of TFLOP/s over the rounds and the range of the ratio of each later
implementation to the first over every pair of rounds: a ratio whose whole range lies above 1 is
a gain that the run-to-run spread does not explain. Lab 8's step 9 was measured against step 7
this way (its results file, listed in bench/results/INDEX.md, says which run).

Usage:
  bench/compare_versions.py --impls A,B[,C...] [--rounds 2] [--bench PATH] [--out DIR]
                            [--ns 1024,4096] [--ds 64,128] [--causal 0,1] [--dtypes bf16]
                            [--max-reps 20]
      runs the rounds (needs a GPU), keeps each process's CSV in DIR (default out/compare/) and
      prints the table; --bench defaults to $BENCH_BIN, else build-bench/, build-gpu/ or build/'s
      bench/bench_attention
  bench/compare_versions.py --impls A,B CSV...
      prints the table from CSVs written before (one round of one implementation each, or any
      rows of bench_attention's format: rows of the same implementation and shape are rounds)
  bench/compare_versions.py --self-test
"""
import argparse
import collections
import csv
import itertools
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_rows(paths):
    """Every row of the CSVs whose status is ok: (impl, dtype, d, causal, N) -> [TFLOP/s, ...]."""
    speeds = collections.defaultdict(list)
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row.get("status", "ok") != "ok":
                    continue
                shape = (row["dtype"], int(row["d"]), int(row["causal"]), int(row["N"]))
                speeds[(row["impl"],) + shape].append(float(row["tflops"]))
    return speeds


def span(values, digits):
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}" if f"{lo:.{digits}f}" == f"{hi:.{digits}f}" else f"{lo:.{digits}f}-{hi:.{digits}f}"


def table(speeds, impls):
    """The comparison as markdown lines, and the number of shapes some implementation is missing."""
    shapes = sorted({key[1:] for key in speeds if key[0] in impls})
    first = impls[0]
    head = ["dtype", "d", "causal", "N"] + [f"{i} TFLOP/s" for i in impls] + [f"{i} / {first}" for i in impls[1:]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    missing = 0
    for shape in shapes:
        runs = [speeds.get((impl,) + shape, []) for impl in impls]
        if not all(runs):
            missing += 1
        cells = [span(r, 1) if r else "not measured" for r in runs]
        for r in runs[1:]:
            if r and runs[0]:
                ratios = [b / a for a, b in itertools.product(runs[0], r)]
                cells.append(span(ratios, 3) + "x")
            else:
                cells.append("-")
        dtype, d, causal, n = shape
        lines.append(f"| {dtype} | {d} | {'yes' if causal else 'no'} | {n} | " + " | ".join(cells) + " |")
    return lines, missing


def default_bench():
    if os.environ.get("BENCH_BIN"):
        return os.environ["BENCH_BIN"]
    for build in ("build-bench", "build-gpu", "build"):
        path = os.path.join(ROOT, build, "bench", "bench_attention")
        if os.path.exists(path):
            return path
    return ""


def run_rounds(args, impls):
    """Runs the rounds; returns the CSVs written."""
    bench = args.bench or default_bench()
    if not bench or not os.path.exists(bench):
        sys.exit("compare_versions: bench_attention not found (build it: ./course bench, or give --bench PATH)")
    os.makedirs(args.out, exist_ok=True)
    passed = []
    for name in ("ns", "ds", "causal", "dtypes", "max_reps"):
        value = getattr(args, name)
        if value:
            passed += ["--" + name.replace("_", "-"), value]
    csvs = []
    for r in range(args.rounds):
        for impl in impls:
            path = os.path.join(args.out, f"round{r + 1}_{impl.replace(':', '-')}.csv")
            print(f"[compare] round {r + 1}: {impl}", file=sys.stderr, flush=True)
            done = subprocess.run([bench, "--impls", impl, "--out", path] + passed,
                                  stdout=subprocess.DEVNULL)
            if done.returncode != 0:
                print(f"[compare] bench_attention --impls {impl} exited with {done.returncode}", file=sys.stderr)
            if os.path.exists(path):
                csvs.append(path)
    return csvs


def self_test():
    """The table of synthetic rounds: ranges, ratios over every pair, and a missing shape."""
    header = "impl,dtype,d,causal,N,B,H,ms,tflops,peak_mem_bytes,status,max_abs_err,measured_mem_bytes,reps\n"
    rounds = {"a": [(100.0, 200.0), (110.0, 200.0)], "b": [(120.0, 190.0), (99.0, 210.0)]}
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for impl, values in rounds.items():
            for r, (t1024, t4096) in enumerate(values):
                path = os.path.join(tmp, f"{impl}{r}.csv")
                with open(path, "w") as f:
                    f.write(header)
                    f.write(f"{impl},bf16,64,0,1024,16,32,1,{t1024},0,ok,0,0,20\n")
                    if not (impl == "b" and r == 1):  # b's second round lost N = 4096 ...
                        f.write(f"{impl},bf16,64,0,4096,4,32,1,{t4096},0,ok,0,0,20\n")
                    f.write(f"{impl},bf16,64,1,4096,4,32,1,1,0,failed,0,0,20\n")  # ... and a failed row counts not
                paths.append(path)
        lines, missing = table(read_rows(paths), ["a", "b"])
    expect = [
        "| bf16 | 64 | no | 1024 | 100.0-110.0 | 99.0-120.0 | 0.900-1.200x |",
        "| bf16 | 64 | no | 4096 | 200.0 | 190.0 | 0.950x |",
    ]
    problems = [e for e in expect if e not in lines]
    if len(lines) != 4 or missing != 0:
        problems.append(f"{len(lines)} lines, {missing} missing: {lines}")
    lines, missing = table({("a", "bf16", 64, 0, 1024): [1.0]}, ["a", "b"])
    if missing != 1 or "not measured" not in lines[-1]:
        problems.append(f"a shape that b lacks: {lines}")
    for p in problems:
        print("self-test:", p)
    print("compare_versions self-test:", "FAILED" if problems else "ok")
    return 1 if problems else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csvs", nargs="*")
    ap.add_argument("--impls", default="")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--bench", default="")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "compare"))
    ap.add_argument("--ns", default="")
    ap.add_argument("--ds", default="")
    ap.add_argument("--causal", default="")
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("--max-reps", dest="max_reps", default="")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args(argv)
    if args.self_test:
        return self_test()
    impls = [i for i in args.impls.split(",") if i]
    if len(impls) < 2:
        ap.error("--impls needs two or more implementations, e.g. lab8:pingpong,lab8:persistent")
    if args.rounds < 1:
        ap.error("--rounds must be 1 or more")
    csvs = args.csvs or run_rounds(args, impls)
    lines, missing = table(read_rows(csvs), impls)
    print("\n".join(lines))
    if missing:
        print(f"\n{missing} shape(s) not measured for every implementation (a failed or missing row)")
    return 1 if missing or len(lines) <= 2 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
