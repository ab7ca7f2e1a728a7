"""course_attn.forward and course_attn.backward: one call of one lab's kernel, no autograd."""
from __future__ import annotations

import math

import torch

from ._extension import extension

KERNELS = ("lab4", "lab5", "lab6")

# Lab 6 is the decoding kernel: it takes at most this many query rows per head (its API).
MAX_DECODING_QUERIES = 16


def choose_kernel(q: torch.Tensor) -> str:
    """The kernel that forward(kernel="auto") runs for q [B, H, Nq, d].

    - fp16: lab 5, the only kernel with fp16 storage;
    - at most 16 query rows (decoding), fp32 or bf16, d = 64 or 128: lab 6, which splits the
      keys over many CTAs instead of giving each head's few rows a single one;
    - bf16, d = 64 or 128: lab 5 (tensor cores);
    - anything else (fp32, or d = 32): lab 4.
    A dtype or head dimension that no kernel takes is reported by the kernel chosen.
    """
    if q.dim() != 4:
        return "lab4"  # which reports the shape
    dtype, nq, d = q.dtype, q.shape[2], q.shape[3]
    if dtype == torch.float16:
        return "lab5"
    if nq <= MAX_DECODING_QUERIES and d in (64, 128) and dtype in (torch.float32, torch.bfloat16):
        return "lab6"
    if dtype == torch.bfloat16 and d in (64, 128):
        return "lab5"
    return "lab4"


def kernel_scale(scale) -> float:
    """The labs' scale argument: 0.0 stands for the default 1/sqrt(d)."""
    if scale is None:
        return 0.0
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"course_attn: scale must be a number or None, not {type(scale).__name__}")
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"course_attn: scale must be a finite number > 0 (or None for 1/sqrt(d)), got {scale}")
    return float(scale)


def _check_tensors(**tensors) -> None:
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"course_attn: {name} must be a torch.Tensor, not {type(t).__name__}")


def _check_causal(causal) -> bool:
    if not isinstance(causal, bool):
        raise TypeError(f"course_attn: causal must be True or False, not {causal!r}")
    return causal


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: float | None = None,
            kernel: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """Attention O = softmax(scale * Q K^T) V with one of the course's forward kernels.

    q: [B, H, Nq, d]; k, v: [B, H, Nk, d]; contiguous CUDA tensors of one dtype.
    causal: bottom-right aligned, as FlashAttention >= 2.1 and the course: query i sees keys
        j <= i + Nk - Nq (for Nq = Nk the usual lower triangle; PyTorch's is_causal=True is
        top-left aligned, and differs when Nq != Nk). A query row that sees no key gets O = 0
        and LSE = -inf.
    scale: the softmax scale, default 1/sqrt(d).
    kernel: "lab4" (CUDA cores; fp32, bf16; d = 32, 64, 128), "lab5" (tensor cores; bf16, fp16;
        d = 64, 128), "lab6" (split-KV decoding; fp32, bf16; d = 64, 128; Nq <= 16), or "auto"
        (choose_kernel).

    Returns (o, lse): o like q; lse [B, H, Nq] float32, the natural-log log-sum-exp of each
    row's scaled scores (what the backward pass needs). The kernel runs on the current CUDA
    stream and the call returns without synchronising; o and lse come from PyTorch's caching
    allocator. No autograd: see course_attn.attention for that.

    Raises TypeError for a dtype the kernel does not take, ValueError for a bad device, layout,
    shape or head dimension (the lab's own message), NotImplementedError for a lab function
    not written yet (COURSE_ATTN_SOURCES=labs).
    """
    _check_tensors(q=q, k=k, v=v)
    causal = _check_causal(causal)
    scale_arg = kernel_scale(scale)
    name = choose_kernel(q) if kernel == "auto" else kernel
    if name not in KERNELS:
        raise ValueError(f"course_attn: kernel must be 'auto' or one of {', '.join(KERNELS)}, not {kernel!r}")
    run = getattr(extension(), f"{name}_forward")
    return run(q, k, v, causal, scale_arg)


def backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, do: torch.Tensor,
             lse: torch.Tensor, causal: bool = False, scale: float | None = None,
             kernel: str = "auto") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Lab 7's GPU backward pass (FA2 Algorithm 2): (dq, dk, dv) from the forward's o and lse.

    q, o, do: [B, H, Nq, d]; k, v: [B, H, Nk, d]; d = 64 or 128, contiguous CUDA tensors; lse:
    [B, H, Nq] float32 as forward returned it. kernel: "tensor_cores" (part 3; bf16, fp16),
    "cuda_cores" (part 2; fp32, bf16) or "auto" (tensor cores for bf16 and fp16, CUDA cores for
    fp32).
    causal and scale must be those of the forward. Runs on the current CUDA stream; the
    workspace (D and the fp32 dQ accumulator) comes from PyTorch's caching allocator.
    """
    _check_tensors(q=q, k=k, v=v, o=o, do=do, lse=lse)
    causal = _check_causal(causal)
    kernels = {"auto": 0, "cuda_cores": 1, "tensor_cores": 2}
    if kernel not in kernels:
        raise ValueError(f"course_attn.backward: kernel must be one of {sorted(kernels)}, not {kernel!r}")
    return extension().lab7_backward(q, k, v, o, do, lse, causal, kernel_scale(scale), kernels[kernel])
