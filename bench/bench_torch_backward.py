#!/usr/bin/env python3
"""PyTorch's SDPA backward (flash and cuDNN backends) on the grid of bench_backward.cu.

    python3 bench/bench_torch_backward.py --out torch_backward.csv [--quick] [--budget-s 120]

bf16, B * N = 16k tokens, H * d = 2048, d in {64, 128}, N in {1k, 2k, 4k, 8k} (quick: 1k and
4k), causal and not, layout [B, H, N, d]. For each backend (forced with sdpa_kernel) it times the
forward alone and the backward alone: one forward with autograd, then
torch.autograd.grad(out, (q, k, v), dO) repeated with retain_graph (the median of
CUDA-event-timed calls): the gradients come back as new tensors, as lab 7 returns them.
out.backward(dO) would also add each call's gradients into q.grad, k.grad and v.grad from the
second call on, work that lab 7 never does (about 0.14-0.18 ms a call at N = 4096). FLOPs as in bench_backward.cu: forward
4 B H N^2 d, backward 2.5x that, halved with causal masking. Same CSV columns as bench_backward.
"""
import argparse
import csv
import time

from torch_timing import median_ms

COLUMNS = ["impl", "pass", "dtype", "d", "N", "B", "H", "causal", "ms", "tflops", "status", "reps"]


def measure(torch, call, max_reps):
    call()
    once = median_ms(torch, call, 1)
    reps = max(3, min(max_reps, int(300 / max(once, 1e-3))))
    return median_ms(torch, call, reps), reps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budget-s", type=float, default=1e9)
    ap.add_argument("--max-reps", type=int, default=20)
    args = ap.parse_args()
    start = time.monotonic()
    out = open(args.out, "w", newline="")
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except Exception as e:  # noqa: BLE001
        print(f"bench_torch_backward: PyTorch not usable: {e}")
        return 0
    backends = {"torch:flash": SDPBackend.FLASH_ATTENTION, "torch:cudnn": SDPBackend.CUDNN_ATTENTION}
    ns = [1024, 4096] if args.quick else [1024, 2048, 4096, 8192]
    for d in (64, 128):
        for n in ns:
            for causal in (False, True):
                b, h = 16384 // n, 2048 // d
                fwd_flops = 4.0 * b * h * n * n * d / (2 if causal else 1)
                for impl, backend in backends.items():
                    if time.monotonic() - start > args.budget_s:
                        print("bench_torch_backward: time budget spent, stopping")
                        out.close()
                        return 0
                    base = {"impl": impl, "dtype": "bf16", "d": d, "N": n, "B": b, "H": h, "causal": int(causal)}
                    try:
                        g = torch.Generator(device="cuda").manual_seed(1)
                        q, k, v, do = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, generator=g)
                                       for _ in range(4))
                        q.requires_grad_(True)
                        k.requires_grad_(True)
                        v.requires_grad_(True)
                        with sdpa_kernel([backend]):
                            def forward():
                                with torch.no_grad():
                                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            fwd_ms, fwd_reps = measure(torch, forward, args.max_reps)
                            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            bwd_ms, bwd_reps = measure(
                                torch, lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True), args.max_reps)
                        for pass_, ms, flops, reps in (("forward", fwd_ms, fwd_flops, fwd_reps),
                                                       ("backward", bwd_ms, 2.5 * fwd_flops, bwd_reps)):
                            row = dict(base, **{"pass": pass_, "ms": f"{ms:.4f}", "tflops": f"{flops / (ms * 1e-3) / 1e12:.1f}",
                                                "status": "ok", "reps": reps})
                            writer.writerow(row)
                            print(f"{impl:12s} {pass_:8s} d={d:<3d} N={n:<5d} {'causal' if causal else 'non-causal':10s} "
                                  f"{ms:8.3f} ms {float(row['tflops']):6.1f} TFLOP/s", flush=True)
                        del o
                    except Exception as e:  # noqa: BLE001
                        why = " ".join(str(e).split()).replace(",", ";")[:100]
                        writer.writerow(dict(base, **{"pass": "backward", "ms": 0, "tflops": 0,
                                                      "status": f"unavailable: {why}", "reps": 0}))
                        print(f"{impl} d={d} N={n}: {why}")
                    out.flush()
                    torch.cuda.empty_cache()
    out.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
