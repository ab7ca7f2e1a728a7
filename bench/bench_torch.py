#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention backends on the grid of bench_attention.

    python3 bench/bench_torch.py --out torch.csv [--quick] [--ns 1024,4096] [--budget-s 90] [--max-reps 20]

Same configurations and CSV columns as bench_attention (see bench/README.md): d in {64, 128},
causal in {False, True}, N in {512, ..., 16384}, B * N = 16384 tokens, H * d = 2048, layout
[B, H, N, d]. One backend at a time, forced with torch.nn.attention.sdpa_kernel:
    torch:math, torch:flash, torch:cudnn, torch:efficient   in bf16,
    torch:math, torch:efficient                              in fp32.
torch's is_causal mask is top-left aligned; with Nq = Nk it is the same mask as the course's
bottom-right one.

Timing: call 1 (memory + correctness), a timed warm-up that sizes the repetitions
(reps = clamp(300 ms / t, 3, max-reps)), then reps calls each between its own pair of
torch.cuda.Event, alternating two input sets; the median is reported.
Memory: peak_mem_bytes = measured_mem_bytes = bytes of one input set (Q, K, V)
+ (torch.cuda.max_memory_allocated() during call 1 - torch.cuda.memory_allocated() before it),
i.e. the inputs plus everything the call allocates (its output and any workspace or scores).
Correctness: max |O - O_fp64| over the last min(N, 1024) query rows of head (0, 0), with the
fp64 reference computed by torch on the upcast inputs.
Status: ok | OOM | unavailable:<why> (backend has no kernel for this case) | wrong (error over
5e-2 in bf16, 5e-3 in fp32: torch may use TF32 there) | nonfinite | error:<why> |
skipped:time budget spent.
"""
import argparse
import csv
import math
import sys
import time
import warnings

from torch_timing import median, one_line

COLUMNS = ["impl", "dtype", "d", "causal", "N", "B", "H", "ms", "tflops", "peak_mem_bytes",
           "status", "max_abs_err", "measured_mem_bytes", "reps"]
TOKENS, HIDDEN, REF_ROWS = 16384, 2048, 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budget-s", type=float, default=1e9)
    ap.add_argument("--max-reps", type=int, default=20)
    ap.add_argument("--backends", default="math,flash,cudnn,efficient")
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--ns", default="", help="sequence lengths, e.g. 1024,4096 (default: the grid)")
    args = ap.parse_args()
    start = time.monotonic()

    out = open(args.out, "w", newline="")
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    out.flush()

    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001
        print(f"bench_torch: PyTorch (with torch.nn.attention) not usable: {e}")
        return 0
    if not torch.cuda.is_available():
        print("bench_torch: torch.cuda is not available")
        return 0
    warnings.filterwarnings("ignore")
    dev = torch.device("cuda")
    print(f"bench_torch: torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name(0)}", flush=True)

    backends = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION,
                "cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}
    wanted = [b for b in args.backends.split(",") if b in backends]
    fp32_ok = {"math", "efficient"}  # flash and cuDNN attention take fp16/bf16 only
    ns = [512, 2048] if args.quick else [512, 1024, 2048, 4096, 8192, 16384]
    if args.ns:
        ns = [int(x) for x in args.ns.split(",") if x]
        if any(n < 1 or TOKENS % n for n in ns):
            print(f"bench_torch: --ns {args.ns}: each N must divide {TOKENS}")
            return 2
    max_reps = max(3, min(64, args.max_reps))

    def emit(row):
        full = {c: row.get(c, "") for c in COLUMNS}
        writer.writerow(full)
        out.flush()
        ms = row.get("ms", float("nan"))
        tf = row.get("tflops", float("nan"))
        print(f"{row['impl']:<16} {row['dtype']} d={row['d']:3d} causal={row['causal']} "
              f"N={row['N']:5d} B={row['B']:2d} H={row['H']:2d}  {ms:9.3f} ms {tf:7.1f} TFLOP/s  "
              f"mem {row.get('peak_mem_bytes', 0) / 2**30:7.3f} GiB  "
              f"err {row.get('max_abs_err', float('nan')):.2e}  reps {row.get('reps', 0):2d}  "
              f"{row['status']}", flush=True)

    for dname in [x for x in args.dtypes.split(",") if x in ("bf16", "fp32")]:
        dtype = torch.bfloat16 if dname == "bf16" else torch.float32
        gen = torch.Generator(device=dev)
        gen.manual_seed(1234 if dname == "bf16" else 4321)
        try:
            # Two input sets of [TOKENS * HIDDEN] values each for Q, K, V, viewed per shape.
            flat = [[torch.randn(TOKENS * HIDDEN, device=dev, generator=gen, dtype=torch.float32)
                     .to(dtype) for _ in range(3)] for _ in range(2)]
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            print(f"bench_torch: could not make {dname} inputs: {one_line(e)}")
            continue
        set_bytes = 3 * TOKENS * HIDDEN * flat[0][0].element_size()
        for d in (64, 128):
            for causal in (False, True):
                for n in ns:
                    B, H = TOKENS // n, HIDDEN // d
                    sets = [[t.view(B, H, n, d) for t in s] for s in flat]
                    ref = None
                    rows = min(n, REF_ROWS)
                    for name in wanted:
                        if dname == "fp32" and name not in fp32_ok:
                            continue
                        row = {"impl": f"torch:{name}", "dtype": dname, "d": d, "causal": int(causal),
                               "N": n, "B": B, "H": H, "ms": float("nan"), "tflops": float("nan"),
                               "peak_mem_bytes": 0, "measured_mem_bytes": 0, "status": "ok",
                               "max_abs_err": float("nan"), "reps": 0}
                        if time.monotonic() - start > args.budget_s:
                            row["status"] = "skipped:time budget spent"
                            emit(row)
                            continue
                        o = None
                        try:
                            with torch.inference_mode(), sdpa_kernel([backends[name]]):
                                def call(s):
                                    q, k, v = sets[s]
                                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                                torch.cuda.synchronize()
                                torch.cuda.reset_peak_memory_stats()
                                base = torch.cuda.memory_allocated()
                                o = call(0)
                                torch.cuda.synchronize()
                                extra = torch.cuda.max_memory_allocated() - base
                                row["peak_mem_bytes"] = row["measured_mem_bytes"] = set_bytes + extra
                                if ref is None:
                                    q, k, v = sets[0]
                                    q64 = q[0, 0, n - rows:].double()
                                    k64, v64 = k[0, 0].double(), v[0, 0].double()
                                    s64 = (q64 @ k64.T) / math.sqrt(d)
                                    if causal:
                                        i = torch.arange(n - rows, n, device=dev)[:, None]
                                        j = torch.arange(n, device=dev)[None, :]
                                        s64 = s64.masked_fill(j > i, float("-inf"))
                                    ref = torch.softmax(s64, dim=-1) @ v64
                                    del q64, k64, v64, s64
                                got = o[0, 0, n - rows:].double()
                                if not torch.isfinite(got).all():
                                    row["status"] = "nonfinite"
                                else:
                                    err = (got - ref).abs().max().item()
                                    row["max_abs_err"] = err
                                    if err > (5e-2 if dname == "bf16" else 5e-3):
                                        row["status"] = "wrong"
                                del got
                                # Timed warm-up, then the timed repetitions.
                                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                                e0.record()
                                o = call(1)
                                e1.record()
                                e1.synchronize()
                                warm = e0.elapsed_time(e1)
                                reps = max(3, min(max_reps, int(300.0 / warm) if warm > 0 else max_reps))
                                ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                                      for _ in range(reps)]
                                for r in range(reps):
                                    ev[r][0].record()
                                    o = call(r % 2)
                                    ev[r][1].record()
                                torch.cuda.synchronize()
                                ms = median([a.elapsed_time(b) for a, b in ev])
                                flop = 4.0 * B * H * n * n * d * (0.5 if causal else 1.0)
                                row.update(ms=ms, tflops=flop / (ms * 1e-3) / 1e12, reps=reps)
                        except torch.cuda.OutOfMemoryError:
                            row["status"] = "OOM"
                        except RuntimeError as e:
                            msg = one_line(e)
                            if "no available kernel" in msg.lower() or "not available" in msg.lower():
                                row["status"] = "unavailable:" + msg
                            elif "out of memory" in msg.lower():
                                row["status"] = "OOM"
                            else:
                                row["status"] = "error:" + msg
                        except Exception as e:  # noqa: BLE001
                            row["status"] = "error:" + one_line(e)
                        o = None
                        if row["status"] not in ("ok", "wrong", "nonfinite"):
                            row["ms"] = row["tflops"] = float("nan")
                        if row["status"] == "OOM" or n >= 8192:
                            torch.cuda.empty_cache()
                        emit(row)
                    ref = None
        del flat
        torch.cuda.empty_cache()
    out.close()
    print(f"bench_torch: done in {time.monotonic() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
