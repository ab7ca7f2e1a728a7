"""The course's GPU attention kernels (labs 4-9) as PyTorch functions.

    import course_attn
    o, lse = course_attn.forward(q, k, v, causal=True)          # one forward kernel, no autograd
    o = course_attn.attention(q, k, v, causal=True)             # autograd: labs 4/5/8 + lab 7/9
    o.sum().backward()
    o, lse = course_attn.decode(q, k_cache, v_cache, block_table, seqlens,   # lab 6 part 2: a paged
                                k_new=k, v_new=v)                             # cache, GQA; no autograd

Tensors are [B, H, N, d] (decode's cache: [num_pages, H_kv, page_size, d]), contiguous, on a
CUDA device; work goes on PyTorch's current stream.
The kernels are compiled from solutions/ on first use (COURSE_ATTN_SOURCES=labs: your labs/),
cached under build/torch-ext/ (see _extension.py). Run the tests with ./course bridge.
"""
from . import gpu_labs
from ._autograd import attention, forward_kernel
from ._extension import build, build_directory, sources
from ._ops import (BACKWARD_KERNELS, BACKWARD_LABS, KERNELS, VERSIONS, backward, backward_lab, choose_kernel, decode,
                   forward)

__all__ = ["attention", "backward", "backward_lab", "build", "build_directory", "choose_kernel", "decode", "forward",
           "forward_kernel", "gpu_labs", "sources", "BACKWARD_KERNELS", "BACKWARD_LABS", "KERNELS", "VERSIONS"]
