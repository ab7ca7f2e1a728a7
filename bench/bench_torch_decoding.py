#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention in the decoding regime of bench_decoding.

    python3 bench/bench_torch_decoding.py --out torch_decoding.csv [--quick] [--parts 1,2]
                                          [--bh 1024,32] [--dtypes bf16,fp32] [--budget-s 90]
                                          [--max-reps 20] [--l2 cold|warm]
                                          [--kv-gaps separate,0,65536] [--nks 4096,65536]

Same configurations and CSV columns as bench_decoding.cu; layout [B, H, N, d], d = 128.
Part 1: Nq = 1, non-causal, H = 32, B * H in {1024, 32}, Nk in {1k, ..., 128k} (quick: 4k and
32k); impls torch:sdpa (PyTorch picks the backend, as a model would) and, in bf16, torch:flash
(forced). Inputs from torch.randn.
Part 2: bf16, Nk in {4k, ..., 128k} (quick: 4k and 32k); group 1 (B = 1, H_q = H_kv = 32,
Nq = 1) and group 8 (B = 4, H_q = 32, H_kv = 4, Nq in {1, 4, 8}); each backend forced in turn
(torch:flash, torch:efficient, torch:cudnn, torch:math) and torch:sdpa, on a contiguous cache of
the values bench_decoding draws for its paged cache (course::fill_normal's seeded stream, drawn
here again by seeded_normal). Grouped heads: enable_gqa=True where the backend takes it, else K
and V expanded to H_q heads with repeat_interleave before the timed calls (the `how` column says
which; GB/s still counts the H_kv heads' bytes once). Nq > 1 is bottom-right causal, as lab 6's
rule: SDPA's is_causal is top-left, so the mask is torch.nn.attention.bias.causal_lower_right
where the backend takes it, else an explicit boolean [Nq, Nk] mask (new row i sees key j iff
j <= Nk - Nq + i).
GB/s = K/V bytes / time; copy GB/s is a device-to-device copy of 4 GiB in this process, counted
as bytes read + written; fraction = GB/s / copy GB/s. Correctness: max |O - O_fp64| over the Nq
rows of head (0, 0). A configuration whose K and V do not fit in 60% of the free memory is
skipped. Timing as bench_decoding's (torch_timing.py): the median of up to --max-reps calls, each
between its own event pair, all queued behind a GPU sleep until the host has queued them (GPU time
only), with the L2 evicted before each (a read of twice its size, outside the events) unless
--l2 warm; column l2 says which.
"""
import argparse
import contextlib
import csv
import sys
import time
import warnings

from torch_timing import L2Evictor, median_ms, one_line

COLUMNS = ["impl", "dtype", "BH", "d", "Nq", "Nk", "splits", "ms", "kv_bytes", "gbps", "copy_gbps",
           "fraction", "status", "max_abs_err", "reps", "part", "B", "H_q", "H_kv", "causal", "page_size",
           "layout", "how", "l2"]
D, HEADS = 128, 32
SEED_Q, SEED_K, SEED_V = 20, 21, 22  # bench_decoding.cu's part 2 seeds
GQA_SHAPES = [(1, HEADS, HEADS, [1]), (4, HEADS, HEADS // 8, [1, 4, 8])]  # (B, H_q, H_kv, Nq values)


# ---------------------------------------------------------------------------------------------
# course::fill_normal's values (include/course/seeded_normal.hpp), in int64 tensor arithmetic:
# multiplication wraps as uint64 does, and >> is arithmetic, so a logical shift masks the sign.

def _signed(c):
    c &= (1 << 64) - 1
    return c - (1 << 64) if c >> 63 else c


def _srl(x, n):
    return (x >> n) & ((1 << (64 - n)) - 1)


def splitmix64(x):
    x = x + _signed(0x9E3779B97F4A7C15)
    x = (x ^ _srl(x, 30)) * _signed(0xBF58476D1CE4E5B9)
    x = (x ^ _srl(x, 27)) * _signed(0x94D049BB133111EB)
    return x ^ _srl(x, 31)


def seeded_normal(torch, seed, shape, dtype, device, chunk=1 << 26):
    """Element i (flat index) is course::seeded_normal(seed, i), rounded to dtype."""
    out = torch.empty(shape, dtype=dtype, device=device)
    flat = out.view(-1)
    for lo in range(0, flat.numel(), chunk):
        i = torch.arange(lo, min(lo + chunk, flat.numel()), dtype=torch.int64, device=device)
        h = splitmix64(i + _signed(seed * 0x100000001B3))
        u1 = ((_srl(h, 11) & ((1 << 24) - 1)).float() + 0.5) / float(1 << 24)
        u2 = _srl(h, 40).float() / float(1 << 24)
        flat[lo:lo + i.numel()] = torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(6.2831853 * u2)
    return out


# ---------------------------------------------------------------------------------------------

def new_row(**kw):
    row = {"impl": "", "dtype": "bf16", "BH": 0, "d": D, "Nq": 1, "Nk": 0, "splits": "", "ms": float("nan"),
           "kv_bytes": 0, "gbps": float("nan"), "copy_gbps": 0.0, "fraction": float("nan"), "status": "ok",
           "max_abs_err": float("nan"), "reps": 0, "part": 1, "B": 1, "H_q": 1, "H_kv": 1, "causal": 0,
           "page_size": 0, "layout": "contiguous", "how": "", "l2": ""}
    row.update(kw)
    return row


def reference_head0(torch, q, k, v, causal):
    """fp64 attention of head (0, 0): its Nq rows of q against KV head 0, bottom-right causal."""
    q64, k64, v64 = q[0, 0].double(), k[0, 0].double(), v[0, 0].double()
    s = q64 @ k64.T / D ** 0.5
    if causal:
        nq, nk = s.shape
        sees = torch.arange(nk, device=s.device)[None, :] <= (nk - nq + torch.arange(nq, device=s.device))[:, None]
        s = s.masked_fill(~sees, float("-inf"))
    return torch.softmax(s, dim=-1) @ v64


def forced(backend):
    """A context that forces one SDPA backend (None: PyTorch's own choice)."""
    if backend is None:
        return contextlib.nullcontext()
    from torch.nn.attention import sdpa_kernel
    return sdpa_kernel([backend])


def check_and_time(bench, row, call, ref):
    """One checked call (max |O - ref| on head (0, 0)), then the timed calls, into row; the L2
    evicted before each timed call unless --l2 warm."""
    torch, max_reps = bench.torch, bench.args.max_reps
    got = call()[0, 0].double()
    if not torch.isfinite(got).all():
        row["status"] = "nonfinite"
    else:
        row["max_abs_err"] = (got - ref).abs().max().item()
        if row["max_abs_err"] > (5e-2 if row["dtype"] == "bf16" else 5e-3):
            row["status"] = "wrong"
    first = median_ms(torch, call, 1, bench.before_each)
    reps = max(3, min(max_reps, int(300.0 / first) if first > 0 else max_reps))
    ms = median_ms(torch, call, reps, bench.before_each)
    gbps = row["kv_bytes"] / (ms * 1e-3) / 1e9
    row.update(ms=ms, gbps=gbps, fraction=gbps / row["copy_gbps"], reps=reps)


class Bench:
    """The CSV, the time budget and what every row shares."""

    def __init__(self, torch, args, writer, out, copy_gbps):
        self.torch, self.args, self.writer, self.out, self.copy_gbps = torch, args, writer, out, copy_gbps
        self.start = time.monotonic()
        self.before_each = L2Evictor(torch) if args.l2 == "cold" else None

    def skip_reason(self, kv_bytes, copies=1):
        free, _ = self.torch.cuda.mem_get_info()
        if time.monotonic() - self.start > self.args.budget_s:
            return "skipped:time budget spent"
        if kv_bytes * copies > free * 0.6:
            return "skipped:K and V do not fit"
        return ""

    def write(self, row):
        row["l2"] = self.args.l2  # how it was timed, or would have been (a skipped row)
        self.writer.writerow(row)
        self.out.flush()
        print(f"{row['impl']:<16} {row['dtype']} B={row['B']:<2} Hq={row['H_q']:<2} Hkv={row['H_kv']:<2} "
              f"Nq={row['Nq']} Nk={row['Nk']:6d}  {row['ms']:8.3f} ms  {row['gbps']:7.0f} GB/s  "
              f"{100 * row['fraction']:5.1f}% of copy  err {row['max_abs_err']:.2e}  {row['status']}  {row['how']}",
              flush=True)


def nk_list(args, first):
    """A part's Nk: --nks where given, else the quick pair, else every power of two from `first`
    to 128k (bench_decoding's nk_list)."""
    if args.nks:
        return [int(x) for x in args.nks.split(",")]
    return [4096, 32768] if args.quick else [n for n in (first << i for i in range(8)) if n <= 131072]


def kv_pair(torch, dtype, dev, gap, draw):
    """K and V, each the tensor draw() makes: as drawn, two allocations (gap < 0), or copied into
    one buffer with V `gap` bytes after K's end (--kv-gaps, as bench_decoding's)."""
    k = draw()
    if gap < 0:
        return k, draw()
    n, size = k.numel(), k.element_size()
    flat = torch.empty(2 * n + gap // size, dtype=dtype, device=dev)
    k_placed, v_placed = flat[:n].view(k.shape), flat[n + gap // size:].view(k.shape)
    k_placed.copy_(k)
    del k
    v_placed.copy_(draw())
    return k_placed, v_placed


def parse_gaps(text):
    """--kv-gaps: 'separate' (-1) or bytes >= 0, a multiple of 16 (argparse's type)."""
    gaps = []
    for item in text.split(","):
        if item == "separate":
            gaps.append(-1)
        elif item.isdigit() and int(item) % 16 == 0:
            gaps.append(int(item))
        else:
            raise argparse.ArgumentTypeError(f"'{item}' is not 'separate' or a multiple of 16 bytes")
    return gaps


def run_part1(bench, dev):
    torch, args = bench.torch, bench.args
    gaps = args.kv_gaps
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend
    nks = nk_list(args, 1024)
    for dname in [x for x in args.dtypes.split(",") if x in ("bf16", "fp32")]:
        dtype = torch.bfloat16 if dname == "bf16" else torch.float32
        impls = [("torch:sdpa", None)] + ([("torch:flash", SDPBackend.FLASH_ATTENTION)] if dname == "bf16" else [])
        for bh in [int(x) for x in args.bh.split(",")]:
            B = max(1, bh // HEADS)
            H = bh // B
            for nk in nks:
                kv_bytes = 2 * B * H * nk * D * (2 if dname == "bf16" else 4)
                for (name, backend), gap in [(i, g) for g in gaps for i in impls]:
                    row = new_row(impl=name, dtype=dname, BH=bh, Nk=nk, kv_bytes=kv_bytes, copy_gbps=bench.copy_gbps,
                                  B=B, H_q=H, H_kv=H, how="" if gap < 0 else f"placement: V {gap} bytes after K")

                    def measure():
                        gen = torch.Generator(device=dev)
                        gen.manual_seed(nk)
                        q = torch.randn(B, H, 1, D, device=dev, generator=gen).to(dtype)
                        k, v = kv_pair(torch, dtype, dev, gap,
                                       lambda: torch.randn(B, H, nk, D, device=dev, generator=gen, dtype=dtype))
                        with torch.inference_mode(), forced(backend):
                            def call():
                                return F.scaled_dot_product_attention(q, k, v)

                            check_and_time(bench, row, call, reference_head0(torch, q, k, v, False))

                    measure_row(bench, row, bench.skip_reason(kv_bytes), measure)


def measure_row(bench, row, skip, measure):
    """Writes one row of the table: `skip` (why it cannot run here) if there is one, else what
    measure() records in the row, or the OOM or error that stopped it. Every row is written, so
    the report shows what could not run and why."""
    torch = bench.torch
    row["status"] = skip or "ok"
    if not skip:
        try:
            measure()
        except torch.cuda.OutOfMemoryError:
            row["status"] = "OOM"
        except Exception as e:  # noqa: BLE001  (one failed row must not end the run)
            row["status"] = "error:" + one_line(e)
        torch.cuda.empty_cache()
    bench.write(row)


def part2_ways(torch, k, v, group, nq, nk):
    """The ways to give SDPA grouped heads and the bottom-right mask, best first:
    (how, (K, V) or a function that makes them, keyword arguments)."""
    from torch.nn.attention.bias import causal_lower_right
    gqa = [("", (k, v), {})]
    if group > 1:  # the expanded copy is made only if asked for, outside the timed calls
        gqa = [("enable_gqa", (k, v), {"enable_gqa": True}),
               ("repeat_interleave", lambda: (k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)),
                {})]
    masks = [("", {})]
    if nq > 1:
        sees = torch.arange(nk, device=k.device)[None, :] <= (nk - nq + torch.arange(nq, device=k.device))[:, None]
        masks = [("causal_lower_right", {"attn_mask": causal_lower_right(nq, nk)}),
                 ("boolean mask", {"attn_mask": sees})]
    for g_how, kv, g_kw in gqa:
        for m_how, m_kw in masks:
            yield "; ".join(x for x in (g_how, m_how) if x), kv, {**g_kw, **m_kw}


def run_part2_backend(bench, row, backend, q, k, v, group, nq, nk, ref):
    """Tries part2_ways in order; the first way the backend runs is checked and timed."""
    torch = bench.torch
    import torch.nn.functional as F
    refused = []
    for how, kv, kwargs in part2_ways(torch, k, v, group, nq, nk):
        kk, vv = kv() if callable(kv) else kv

        def call():
            return F.scaled_dot_product_attention(q, kk, vv, **kwargs)

        # The backend is forced around the timed calls, not inside them: entering sdpa_kernel costs
        # CPU time that a call of a few tens of microseconds would otherwise count.
        with forced(backend):
            try:
                call()
            except Exception as e:  # noqa: BLE001  (this backend does not take this way)
                refused.append(one_line(e, 60))
                continue
            row["how"] = how
            check_and_time(bench, row, call, ref)
            return
    row["status"] = "error:" + (refused[0] if refused else "no way")


def run_part2(bench, dev):
    torch, args = bench.torch, bench.args
    from torch.nn.attention import SDPBackend
    backends = [("torch:flash", SDPBackend.FLASH_ATTENTION), ("torch:efficient", SDPBackend.EFFICIENT_ATTENTION),
                ("torch:cudnn", SDPBackend.CUDNN_ATTENTION), ("torch:math", SDPBackend.MATH), ("torch:sdpa", None)]
    nks = nk_list(args, 4096)
    for B, H_q, H_kv, nqs in GQA_SHAPES:
        group = H_q // H_kv
        for nk in nks:
            kv_bytes = 2 * B * H_kv * nk * D * 2
            # K and V, and room for an expanded copy (group times) and the math backend's scores.
            skip = bench.skip_reason(kv_bytes, 2 + group)
            k = v = None
            if not skip:
                k = seeded_normal(torch, SEED_K, (B, H_kv, nk, D), torch.bfloat16, dev)
                v = seeded_normal(torch, SEED_V, (B, H_kv, nk, D), torch.bfloat16, dev)
            for nq in nqs:
                q = seeded_normal(torch, SEED_Q, (B, H_q, nq, D), torch.bfloat16, dev)
                ref = reference_head0(torch, q, k, v, nq > 1) if k is not None else None
                for name, backend in backends:
                    row = new_row(impl=name, BH=B * H_q, Nq=nq, Nk=nk, kv_bytes=kv_bytes, copy_gbps=bench.copy_gbps,
                                  part=2, B=B, H_q=H_q, H_kv=H_kv, causal=int(nq > 1))

                    def measure():
                        with torch.inference_mode():
                            run_part2_backend(bench, row, backend, q, k, v, group, nq, nk, ref)

                    measure_row(bench, row, skip or bench.skip_reason(0), measure)
            del k, v
            torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--parts", default="1,2")
    ap.add_argument("--bh", default="1024,32")
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--budget-s", type=float, default=1e9)
    ap.add_argument("--max-reps", type=int, default=20)
    ap.add_argument("--nks", default="", help="both parts' Nk instead of their lists (as bench_decoding's)")
    ap.add_argument("--kv-gaps", type=parse_gaps, default="separate",
                    help="part 1's placements of K and V, as bench_decoding's: separate, or V n bytes after K")
    ap.add_argument("--l2", choices=["cold", "warm"], default="cold",
                    help="cold (default): evict the L2 before each timed call, as bench_decoding does")
    args = ap.parse_args()
    out = open(args.out, "w", newline="")
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    out.flush()
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print(f"bench_torch_decoding: PyTorch not usable: {e}")
        return 0
    if not torch.cuda.is_available():
        print("bench_torch_decoding: torch.cuda is not available")
        return 0
    warnings.filterwarnings("ignore")
    dev = torch.device("cuda")

    a = torch.ones(1 << 31, dtype=torch.uint8, device=dev).repeat(2)  # 4 GiB
    b = torch.empty_like(a)
    b.copy_(a)
    copy_gbps = 2 * a.numel() / (median_ms(torch, lambda: b.copy_(a), 10) * 1e-3) / 1e9
    del a, b
    torch.cuda.empty_cache()
    print(f"device-to-device copy: {copy_gbps:.0f} GB/s (bytes read + written)", flush=True)

    bench = Bench(torch, args, writer, out, copy_gbps)
    parts = args.parts.split(",")
    if "2" in parts:  # first, as bench_decoding: the time budget cuts the last rows
        run_part2(bench, dev)
    if "1" in parts:
        run_part1(bench, dev)
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
