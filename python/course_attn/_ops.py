"""course_attn.forward, course_attn.backward and course_attn.decode: one call of one lab's kernel, no autograd."""
from __future__ import annotations

import math

import torch

from . import gpu_labs
from ._extension import extension, includes_lab

KERNELS = ("lab4", "lab5", "lab6", "lab8")

# The names of each lab's choices and the ints the bindings take for them, read from
# include/course/gpu_labs.def (the list C++ reads too; grader.gpu_labs_list checks that both
# sides agree): the staircase steps of labs 5 and 8 (forward's version=) and lab 7's kernels
# (backward's kernel=). A name not given is -1: the lab's default (best, automatic).
_LABS = gpu_labs.load()
VERSIONS = {"lab5": _LABS.choices("lab5"), "lab8": _LABS.choices("lab8")}
BACKWARD_KERNELS = _LABS.choices("lab7")
DEFAULT_CHOICE = gpu_labs.DEFAULT_CHOICE

# Lab 6 is the decoding kernel: it takes at most this many query rows per head (its API).
MAX_DECODING_QUERIES = 16
# Lab 8 (wgmma, TMA) runs on compute capability 9.0 only (H100, H200): sm_90a code.
LAB8_CAPABILITY = (9, 0)
TENSOR_CORE_HEAD_DIMS = (64, 128)  # labs 5, 6 and 8 (and lab 7's backward)


def lab8_runs_on(device: torch.device) -> bool:
    """Whether lab 8 can run on `device`: a CUDA device of compute capability 9.0, and an
    extension built with lab 8 (COURSE_ATTN_CUDA_ARCH includes 90, as by default)."""
    return hopper_lab_runs_on(8, device)


def hopper_lab_runs_on(lab: int, device: torch.device) -> bool:
    """Whether lab 8 or 9 (sm_90a code) can run on `device`: compute capability 9.0, and an
    extension built with that lab."""
    return (device.type == "cuda" and torch.cuda.get_device_capability(device) == LAB8_CAPABILITY
            and includes_lab(lab))


def choose_kernel(q: torch.Tensor) -> str:
    """The kernel that forward(kernel="auto") runs for q [B, H, Nq, d].

    - at most 16 query rows (decoding), fp32 or bf16, d = 64 or 128: lab 6, which splits the
      keys over many CTAs instead of giving each head's few rows a single one;
    - bf16 or fp16, d = 64 or 128, on an sm_90 GPU (H100, H200) with lab 8 built: lab 8 (wgmma,
      TMA), the fastest there;
    - fp16: lab 5, the other kernel with fp16 storage;
    - bf16, d = 64 or 128: lab 5 (tensor cores);
    - anything else (fp32, or d = 32): lab 4.
    A dtype or head dimension that no kernel takes is reported by the kernel chosen.
    """
    if q.dim() != 4:
        return "lab4"  # which reports the shape
    dtype, nq, d = q.dtype, q.shape[2], q.shape[3]
    if nq <= MAX_DECODING_QUERIES and d in TENSOR_CORE_HEAD_DIMS and dtype in (torch.float32, torch.bfloat16):
        return "lab6"
    if dtype in (torch.bfloat16, torch.float16) and d in TENSOR_CORE_HEAD_DIMS and lab8_runs_on(q.device):
        return "lab8"
    if dtype == torch.float16:
        return "lab5"
    if dtype == torch.bfloat16 and d in TENSOR_CORE_HEAD_DIMS:
        return "lab5"
    return "lab4"


def version_int(kernel: str, version) -> int:
    """The int the bindings take for `version` of `kernel` (None: the lab's best)."""
    if version is None:
        return DEFAULT_CHOICE
    if kernel not in VERSIONS:
        raise ValueError(f"course_attn: version= names a step of lab 5's or lab 8's staircase; kernel {kernel!r} "
                         "has no versions (give kernel='lab5' or 'lab8')")
    if version not in VERSIONS[kernel]:
        raise ValueError(f"course_attn: {kernel} has no version {version!r}; it has {', '.join(VERSIONS[kernel])}")
    return VERSIONS[kernel][version]


def _check_hopper_lab_device(q: torch.Tensor, lab: int, instead: str) -> None:
    """Lab 8 or 9 (sm_90a code) asked for where it cannot run: a clear error before any kernel,
    naming what to use `instead`."""
    if not includes_lab(lab):
        raise RuntimeError(f"course_attn: lab {lab} was not compiled into this extension: it is built for sm_90a "
                           "when COURSE_ATTN_CUDA_ARCH includes 90 (the default), and COURSE_ATTN_CUDA_ARCH is "
                           "set without it")
    if q.device.type == "cuda" and torch.cuda.get_device_capability(q.device) != LAB8_CAPABILITY:
        major, minor = torch.cuda.get_device_capability(q.device)
        raise RuntimeError(f"course_attn: lab {lab} needs a GPU of compute capability 9.0 (H100, H200: wgmma and "
                           f"TMA are sm_90a instructions); {torch.cuda.get_device_name(q.device)} is "
                           f"sm_{major}{minor}. Use {instead}")


_FP32_TINY = 2.0 ** -126  # the smallest normal fp32 number
_FP32_MAX = (2.0 - 2.0 ** -23) * 2.0 ** 127


def kernel_scale(scale) -> float:
    """The labs' scale argument: 0.0 stands for the default 1/sqrt(d)."""
    if scale is None:
        return 0.0
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"course_attn: scale must be a number or None, not {type(scale).__name__}")
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"course_attn: scale must be a finite number > 0 (or None for 1/sqrt(d)), got {scale}")
    # The kernels take the scale in fp32, where 0 means the default: a scale that rounds to 0 (or
    # overflows) there would silently become 1/sqrt(d) (or inf).
    if not _FP32_TINY <= scale <= _FP32_MAX:
        raise ValueError(f"course_attn: scale {scale} is outside fp32's normal range "
                         f"[{_FP32_TINY:.6g}, {_FP32_MAX:.6g}], in which the kernels take it")
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
            kernel: str = "auto", version: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention O = softmax(scale * Q K^T) V with one of the course's forward kernels.

    q: [B, H, Nq, d]; k, v: [B, H, Nk, d]; contiguous CUDA tensors of one dtype.
    causal: bottom-right aligned, as FlashAttention >= 2.1 and the course: query i sees keys
        j <= i + Nk - Nq (for Nq = Nk the usual lower triangle; PyTorch's is_causal=True is
        top-left aligned, and differs when Nq != Nk). A query row that sees no key gets O = 0
        and LSE = -inf.
    scale: the softmax scale, default 1/sqrt(d).
    kernel: "lab4" (CUDA cores; fp32, bf16; d = 32, 64, 128), "lab5" (tensor cores; bf16, fp16;
        d = 64, 128), "lab6" (split-KV decoding; fp32, bf16; d = 64, 128; Nq <= 16), "lab8"
        (Hopper: wgmma and TMA; bf16, fp16; d = 64, 128; an sm_90 GPU), or "auto"
        (choose_kernel).
    version: for kernel="lab5" or "lab8", a step of the lab's staircase by name (VERSIONS, e.g.
        "swizzle" or "pingpong"); None for the shipped one (Version::best).

    Returns (o, lse): o like q; lse [B, H, Nq] float32, the natural-log log-sum-exp of each
    row's scaled scores (what the backward pass needs). The kernel runs on the current CUDA
    stream and the call returns without synchronising; o and lse come from PyTorch's caching
    allocator. No autograd: see course_attn.attention for that.

    Raises TypeError for a dtype the kernel does not take, ValueError for a bad device, layout,
    shape or head dimension (the lab's own message) or version, RuntimeError for lab 8 on a GPU
    other than sm_90 (or an extension built without it), NotImplementedError for a lab function
    not written yet (COURSE_ATTN_SOURCES=labs).
    """
    _check_tensors(q=q, k=k, v=v)
    causal = _check_causal(causal)
    scale_arg = kernel_scale(scale)
    if kernel == "auto" and version is not None:
        raise ValueError("course_attn: version= needs an explicit kernel ('lab5' or 'lab8'), not 'auto'")
    name = choose_kernel(q) if kernel == "auto" else kernel
    if name not in KERNELS:
        raise ValueError(f"course_attn: kernel must be 'auto' or one of {', '.join(KERNELS)}, not {kernel!r}")
    version_arg = version_int(name, version)
    if name == "lab8":
        _check_hopper_lab_device(q, 8, "kernel='lab5' or 'auto'")
    run = getattr(extension(), f"{name}_forward")
    if name == "lab6":  # one kernel, no versions
        return run(q, k, v, causal, scale_arg)
    return run(q, k, v, causal, scale_arg, version_arg)


# The labs whose backward course_attn.backward runs: lab 7 (CUDA cores or tensor cores) and lab 9
# (Hopper: wgmma and TMA; bf16 and fp16).
BACKWARD_LABS = (7, 9)


def backward_lab(q: torch.Tensor, kernel: str = "auto") -> int:
    """The lab whose backward backward(lab=None) runs for q: lab 9 for bf16 and fp16 with d = 64
    or 128 on an sm_90 GPU (H100, H200) with lab 9 built, when no lab 7 kernel is named; else lab 7."""
    if (kernel == "auto" and q.dim() == 4 and q.dtype in (torch.bfloat16, torch.float16)
            and q.shape[-1] in TENSOR_CORE_HEAD_DIMS and hopper_lab_runs_on(9, q.device)):
        return 9
    return 7


def backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, do: torch.Tensor,
             lse: torch.Tensor, causal: bool = False, scale: float | None = None,
             kernel: str = "auto", lab: int | None = None,
             deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The course's GPU backward pass (FA2 Algorithm 2): (dq, dk, dv) from the forward's o and lse.

    q, o, do: [B, H, Nq, d]; k, v: [B, H, Nk, d]; d = 64 or 128, contiguous CUDA tensors; lse:
    [B, H, Nq] float32 as forward returned it.
    lab: 7 (lab 7's GPU kernels), 9 (lab 9, Hopper: bf16 and fp16 on an sm_90 GPU) or None
        (backward_lab: lab 9 where it runs, lab 7 elsewhere).
    kernel: lab 7's kernel, "tensor_cores" (part 3; bf16, fp16), "cuda_cores" (part 2; fp32,
        bf16) or "auto" (tensor cores for bf16 and fp16, CUDA cores for fp32); lab 9 has one
        kernel, on tensor cores ("auto" or "tensor_cores").
    deterministic: lab 9 only (with lab=None, lab 9 must be the one that runs): the K/V tiles add
        their shares of dq in a fixed order instead of atomics in the order they come, so dq is
        the same bit for bit in every call (dk and dv always are); lab 7 raises ValueError.
    causal and scale must be those of the forward. Runs on the current CUDA stream; the
    workspace (D, the fp32 dQ accumulator and lab 9's turn counters) comes from PyTorch's caching
    allocator.
    """
    _check_tensors(q=q, k=k, v=v, o=o, do=do, lse=lse)
    causal = _check_causal(causal)
    if kernel not in BACKWARD_KERNELS:
        raise ValueError(f"course_attn.backward: kernel must be one of {sorted(BACKWARD_KERNELS)}, not {kernel!r}")
    if lab is None:
        lab = backward_lab(q, kernel)
    if lab not in BACKWARD_LABS:
        raise ValueError(f"course_attn.backward: lab must be 7, 9 or None, not {lab!r}")
    if lab == 9:
        _check_hopper_lab_device(q, 9, "lab=7 or lab=None")
    if not isinstance(deterministic, bool):
        raise TypeError(f"course_attn.backward: deterministic must be a bool, not {type(deterministic).__name__}")
    run = extension().lab9_backward if lab == 9 else extension().lab7_backward
    return run(q, k, v, o, do, lse, causal, kernel_scale(scale), BACKWARD_KERNELS[kernel], deterministic)


def _check_num_splits(num_splits) -> int:
    if isinstance(num_splits, bool) or not isinstance(num_splits, int):
        raise TypeError(f"course_attn.decode: num_splits must be an int, not {type(num_splits).__name__}")
    if num_splits < 0:
        raise ValueError(f"course_attn.decode: num_splits must be >= 1, or 0 to let the lab choose; got {num_splits}")
    return num_splits


def decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
           seqlens: torch.Tensor, *, causal: bool = False, scale: float | None = None,
           k_new: torch.Tensor | None = None, v_new: torch.Tensor | None = None, num_splits: int = 0,
           check: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Decoding from a paged KV cache with grouped-query attention: lab 6 part 2
    (course/lab6_paged.hpp), one call of paged_decode, after append_kv when k_new is given.

    q: [B, H_q, Nq, d], Nq = 1..16 new query rows per sequence; bf16 or fp16, d = 64 or 128.
    k_cache, v_cache: the pool, [num_pages, H_kv, page_size, d], q's dtype and device; H_q a
        multiple of H_kv (query head h reads KV head h // (H_q // H_kv)); page_size a power of
        two from 16 to 256.
    block_table: [B, max_pages] int32: sequence b's key j is row j % page_size of page
        block_table[b, j // page_size]. seqlens: [B] int32, each sequence's length including its
        Nq new rows. Both on q's device or on the CPU (then copied to the device).
    causal: new row i of sequence b sees key j iff j <= seqlens[b] - Nq + i (bottom-right, as
        everywhere in the course); without it, every row sees the whole length. A row that sees
        no key (a length 0, or a length shorter than Nq under causal) gets o = 0, lse = -inf.
    scale: the softmax scale, default 1/sqrt(d).
    k_new, v_new: [B, H_kv, Nq, d]: when given, append_kv first writes them, in place, to
        positions seqlens[b] - Nq .. seqlens[b] - 1 of each sequence (positions below 0 are
        skipped), so the decoding attends to them, as a server does each step. Give both or neither.
    num_splits: split-KV chunks per sequence; 0 lets the lab choose for this GPU
        (choose_paged_splits).
    check: the lab checks every length (within [0, max_pages * page_size]) and every page that
        a length uses (within the pool) on host copies of block_table and seqlens. CPU tensors are
        such copies (block_table is checked only together with CPU seqlens); CUDA ones are
        copied to the host. Either way the call waits once for the work queued on the stream (a
        CPU table's copy to the GPU is PyTorch's blocking copy). check=False with CUDA tables
        skips every copy: on the device the lengths are clamped, but the page indices are
        trusted, and a wrong one reads outside the pool. Use it with tables you trust where the
        wait matters (a serving loop).

    Returns (o, lse): o like q, lse [B, H_q, Nq] float32 (natural log). Runs on the current CUDA
    stream and (without the copies above) returns without synchronising; o, lse and the
    workspace come from PyTorch's caching allocator. No autograd: decoding is inference, and no
    backward exists for it (o carries no gradient; the cache is written in place).

    Raises TypeError for a dtype lab 6 part 2 does not take (or int32 index tensors of another
    dtype), ValueError for a device, layout or shape that does not fit, and for what the lab
    rejects (its course::BadInput message: Nq above 16, H_q not a multiple of H_kv, the page
    size, a length or a page index out of range); a call that is rejected leaves the cache as it
    was. NotImplementedError for a lab function not written yet (COURSE_ATTN_SOURCES=labs).
    """
    _check_tensors(q=q, k_cache=k_cache, v_cache=v_cache, block_table=block_table, seqlens=seqlens)
    if (k_new is None) != (v_new is None):
        raise ValueError("course_attn.decode: give k_new and v_new together, or neither")
    if k_new is not None:
        _check_tensors(k_new=k_new, v_new=v_new)
    causal = _check_causal(causal)
    if not isinstance(check, bool):
        raise TypeError(f"course_attn.decode: check must be True or False, not {check!r}")
    return extension().lab6_decode(q, k_cache, v_cache, block_table, seqlens, causal, kernel_scale(scale),
                                   k_new, v_new, _check_num_splits(num_splits), check)
