#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention in the decoding regime of bench_decoding.

    python3 bench/bench_torch_decoding.py --out torch_decoding.csv [--quick] [--bh 1024,32]
                                          [--dtypes bf16,fp32] [--budget-s 90] [--max-reps 20]

Same configurations and CSV columns as bench_decoding.cu: d = 128, Nq = 1, non-causal, H = 32,
B * H in {1024, 32}, Nk in {1k, ..., 128k} (quick: 4k and 32k); layout [B, H, N, d]. The impl is
torch:sdpa (PyTorch picks the backend, as a model would) and, in bf16, torch:flash (forced).
GB/s = K/V bytes / time; copy GB/s is a device-to-device copy of 4 GiB in this process, counted
as bytes read + written; fraction = GB/s / copy GB/s. Correctness: max |O - O_fp64| on head
(0, 0). A configuration whose K and V do not fit in 60% of the free memory is skipped.
"""
import argparse
import csv
import sys
import time
import warnings

from torch_timing import median_ms, one_line

COLUMNS = ["impl", "dtype", "BH", "d", "Nq", "Nk", "splits", "ms", "kv_bytes", "gbps", "copy_gbps",
           "fraction", "status", "max_abs_err", "reps"]
D, HEADS = 128, 32


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--bh", default="1024,32")
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--budget-s", type=float, default=1e9)
    ap.add_argument("--max-reps", type=int, default=20)
    args = ap.parse_args()
    start = time.monotonic()
    out = open(args.out, "w", newline="")
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    out.flush()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
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

    nks = [4096, 32768] if args.quick else [1024 << i for i in range(8)]
    for dname in [x for x in args.dtypes.split(",") if x in ("bf16", "fp32")]:
        dtype = torch.bfloat16 if dname == "bf16" else torch.float32
        impls = [("torch:sdpa", None)] + ([("torch:flash", SDPBackend.FLASH_ATTENTION)] if dname == "bf16" else [])
        for bh in [int(x) for x in args.bh.split(",")]:
            B = max(1, bh // HEADS)
            H = bh // B
            for nk in nks:
                kv_bytes = 2 * B * H * nk * D * (2 if dname == "bf16" else 4)
                for name, backend in impls:
                    row = {"impl": name, "dtype": dname, "BH": bh, "d": D, "Nq": 1, "Nk": nk, "splits": "",
                           "ms": float("nan"), "kv_bytes": kv_bytes, "gbps": float("nan"),
                           "copy_gbps": copy_gbps, "fraction": float("nan"), "status": "ok",
                           "max_abs_err": float("nan"), "reps": 0}
                    free, _ = torch.cuda.mem_get_info()
                    if time.monotonic() - start > args.budget_s:
                        row["status"] = "skipped:time budget spent"
                    elif kv_bytes > free * 0.6:
                        row["status"] = "skipped:K and V do not fit"
                    else:
                        try:
                            gen = torch.Generator(device=dev)
                            gen.manual_seed(nk)
                            q = torch.randn(B, H, 1, D, device=dev, generator=gen).to(dtype)
                            k = torch.randn(B, H, nk, D, device=dev, generator=gen, dtype=dtype)
                            v = torch.randn(B, H, nk, D, device=dev, generator=gen, dtype=dtype)
                            with torch.inference_mode():
                                def call():
                                    if backend is None:
                                        return F.scaled_dot_product_attention(q, k, v)
                                    with sdpa_kernel([backend]):
                                        return F.scaled_dot_product_attention(q, k, v)

                                o = call()
                                q64, k64, v64 = q[0, 0].double(), k[0, 0].double(), v[0, 0].double()
                                ref = torch.softmax(q64 @ k64.T / D ** 0.5, dim=-1) @ v64
                                got = o[0, 0].double()
                                if not torch.isfinite(got).all():
                                    row["status"] = "nonfinite"
                                else:
                                    row["max_abs_err"] = (got - ref).abs().max().item()
                                    if row["max_abs_err"] > (5e-2 if dname == "bf16" else 5e-3):
                                        row["status"] = "wrong"
                                warm = median_ms(torch, call, 1)
                                reps = max(3, min(args.max_reps, int(300.0 / warm) if warm > 0 else args.max_reps))
                                ms = median_ms(torch, call, reps)
                                gbps = kv_bytes / (ms * 1e-3) / 1e9
                                row.update(ms=ms, gbps=gbps, fraction=gbps / copy_gbps, reps=reps)
                            del q, k, v
                        except torch.cuda.OutOfMemoryError:
                            row["status"] = "OOM"
                        except Exception as e:  # noqa: BLE001
                            row["status"] = "error:" + one_line(e)
                        torch.cuda.empty_cache()
                    writer.writerow(row)
                    out.flush()
                    print(f"{name:<12} {dname} B*H={bh:4d} Nk={nk:6d}  {row['ms']:8.3f} ms  {row['gbps']:7.0f} GB/s  "
                          f"{100 * row['fraction']:5.1f}% of copy  err {row['max_abs_err']:.2e}  {row['status']}",
                          flush=True)
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
