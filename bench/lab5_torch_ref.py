"""PyTorch SDPA reference timings for lab 5, same shapes as bench/lab5_dev_check.cu.

B*N = 16384 tokens, H*d = 2048; FLOPs = 4*B*H*N^2*d, halved for causal. Median of CUDA-event
timed calls, inputs rotated over 3 sets. Run in the same device call as the C++ benchmark.
"""
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F


def median_ms(fn, sets, reps=30):
    for i in range(3):
        fn(*sets[i % len(sets)])
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for r in range(reps):
        starts[r].record()
        fn(*sets[r % len(sets)])
        ends[r].record()
    torch.cuda.synchronize()
    ms = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return ms[reps // 2]


def main():
    print("torch", torch.__version__, torch.cuda.get_device_name(0))
    for dtype in (torch.bfloat16, torch.float16):
        for d in (64, 128):
            for causal in (False, True):
                for n in (1024, 2048, 4096, 8192, 16384):
                    if dtype == torch.float16 and n not in (2048, 8192):
                        continue
                    b, h = 16384 // n, 2048 // d
                    sets = [tuple(torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(3))
                            for _ in range(3)]
                    flop = 4 * b * h * n * n * d / (2 if causal else 1)
                    for name, backend in (("torch_flash", SDPBackend.FLASH_ATTENTION),
                                          ("torch_cudnn", SDPBackend.CUDNN_ATTENTION)):
                        try:
                            with sdpa_kernel(backend):
                                ms = median_ms(lambda q, k, v: F.scaled_dot_product_attention(
                                    q, k, v, is_causal=causal), sets)
                            print(f"BENCH {name:22s} {str(dtype)[6:]:>4s} d={d:3d} N={n:5d} B={b:2d} H={h:2d} "
                                  f"causal={int(causal)}  {ms:8.3f} ms  {flop / ms / 1e9:6.1f} TFLOP/s")
                        except Exception as e:  # noqa: BLE001
                            print(f"BENCH {name} d={d} N={n} causal={int(causal)} failed: {e}")
                    del sets


if __name__ == "__main__":
    main()
