"""course_attn.attention: the course's forward and backward kernels as one autograd function."""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from ._ops import (TENSOR_CORE_HEAD_DIMS, _check_causal, _check_tensors, backward, forward, kernel_scale,
                   lab8_runs_on)

# The forward kernel of each dtype: the one that saves the LSE the backward needs, in that dtype. For
# bf16 and fp16, lab 8 replaces lab 5 where it runs (forward_kernel).
FORWARD_KERNEL = {torch.float32: "lab4", torch.bfloat16: "lab5", torch.float16: "lab5"}


def forward_kernel(q: torch.Tensor) -> str:
    """The forward kernel attention() runs for q: lab 4 for fp32; for bf16 and fp16, lab 8 on an
    sm_90 GPU (H100, H200) where the extension has it and d = 64 or 128, else lab 5."""
    kernel = FORWARD_KERNEL[q.dtype]
    if kernel == "lab5" and q.dim() == 4 and q.shape[-1] in TENSOR_CORE_HEAD_DIMS and lab8_runs_on(q.device):
        return "lab8"
    return kernel
# Lab 7's GPU backward takes these (include/course/lab7_backward_gpu.hpp); lab 9, where it runs,
# takes the bf16 and fp16 ones.
GRADIENT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
GRADIENT_HEAD_DIMS = (64, 128)


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale):
        o, lse = forward(q, k, v, causal=causal, scale=scale, kernel=forward_kernel(q))
        # FlashAttention keeps O and the LSE, never P: the backward recomputes P = exp(S - LSE) tile by tile.
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = causal
        ctx.scale = scale
        return o

    @staticmethod
    @once_differentiable  # the kernels' gradients are not themselves differentiable
    def backward(ctx, grad_o):
        q, k, v, o, lse = ctx.saved_tensors
        # The incoming gradient may be any view (o.sum().backward() sends an expanded one); the
        # kernel reads dense rows. The lab: backward_lab (lab 9 on an sm_90 GPU for bf16 and fp16).
        dq, dk, dv = backward(q, k, v, o, grad_o.contiguous(), lse, causal=ctx.causal, scale=ctx.scale)
        return dq, dk, dv, None, None


def _needs_gradient(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              scale: float | None = None) -> torch.Tensor:
    """Attention with gradients: the course's forward kernels and its GPU backward (lab 7 or 9).

    Shapes, causal (bottom-right aligned) and scale as course_attn.forward; returns o only, like
    F.scaled_dot_product_attention.

    Forward (forward_kernel): fp32 -> lab 4; bf16 and fp16 -> lab 8 on an sm_90 GPU (H100, H200,
    d = 64 or 128, lab 8 built), lab 5 elsewhere. Each saves the LSE (natural log), so the
    backward needs no N x N matrix. Backward (backward_lab): for bf16 and fp16 at d = 64 or 128,
    lab 9 on an sm_90 GPU (wgmma and TMA, lab 9 built); lab 7's GPU kernels elsewhere (FA2
    Algorithm 2, both).

    Which inputs can have gradients: fp32, bf16 and fp16, with d = 64 or 128, because those are
    what lab 7's GPU backward takes: fp32 on CUDA cores (part 2), bf16 and fp16 on tensor cores
    (part 3, which rounds P and dS to the 16-bit type as FlashAttention-2 does). An input that
    requires a gradient and that the backward cannot take is an error at this call, not a
    failure later in backward().

    No kernel here computes in fp64, so torch.autograd.gradcheck (which needs fp64) does not
    apply; python/tests/test_attention_grad.py checks the gradients against fp64 autograd and
    with fp32 finite differences of the kernels' own forward instead.
    """
    _check_tensors(q=q, k=k, v=v)
    causal = _check_causal(causal)
    kernel_scale(scale)  # a bad scale is reported here, before any kernel runs
    if q.dtype not in FORWARD_KERNEL:
        raise TypeError(f"course_attn.attention takes torch.float32, torch.bfloat16 or torch.float16, "
                        f"not {q.dtype}")
    if _needs_gradient(q, k, v):
        if q.dtype not in GRADIENT_DTYPES:
            raise TypeError(f"course_attn.attention: no gradients for {q.dtype}: lab 7's GPU backward takes "
                            "torch.float32, torch.bfloat16 and torch.float16 (convert explicitly, or call it "
                            "under torch.no_grad() for the forward alone)")
        if q.dim() == 4 and q.shape[-1] not in GRADIENT_HEAD_DIMS:
            raise ValueError(f"course_attn.attention: no gradients for head dimension d = {q.shape[-1]}: "
                             "lab 7's GPU backward takes d = 64 or 128")
    return _Attention.apply(q, k, v, causal, scale)
