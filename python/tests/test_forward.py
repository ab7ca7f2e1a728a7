"""course_attn.forward against PyTorch: every kernel, every dtype it takes, against an fp64
reference, by FlashAttention's rule with F.scaled_dot_product_attention in the same dtype as the
yardstick; the LSE against torch.logsumexp of the fp64 scores."""
import zlib

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import course_attn  # noqa: E402
from attn_reference import (assert_within, band, has_key, math_attention, output_rounding_allowance,  # noqa: E402
                            plain_lse, qkv, sdpa, within_band)

pytestmark = pytest.mark.gpu

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16

# What each kernel takes (include/course/lab4_cuda.hpp, lab5_tensor_core.hpp, lab6_decoding.hpp,
# lab8_hopper.hpp).
KERNEL_CASES = (
    [("lab4", dtype, d) for dtype in (F32, BF16) for d in (32, 64, 128)]
    + [("lab5", dtype, d) for dtype in (BF16, F16) for d in (64, 128)]
    + [("lab6", dtype, d) for dtype in (F32, BF16) for d in (64, 128)]
    + [("lab8", dtype, d) for dtype in (BF16, F16) for d in (64, 128)]
)


def lab8_marked(cases):
    """The cases, those of lab 8 marked to run only where it can (an sm_90 GPU)."""
    return [pytest.param(c, marks=pytest.mark.lab8) if c[0] == "lab8" else c for c in cases]


# (B, H, Nq, Nk) for the prefill kernels (labs 4, 5 and 8): whole tiles, lengths that are a
# multiple of no tile size, Nq < Nk and Nq > Nk (bottom-right causal: the first Nq - Nk rows see no
# key), a single key, and few queries against keys spread over several tiles.
PREFILL_SHAPES = [(2, 3, 128, 128), (1, 2, 113, 113), (2, 2, 77, 200), (1, 2, 200, 77), (1, 1, 1, 1), (1, 3, 3, 515)]
# Decoding shapes for lab 6 (Nq <= 16): long caches cut into splits, and Nq > Nk.
DECODING_SHAPES = [(2, 3, 1, 2049), (1, 2, 4, 300), (2, 2, 16, 1000), (1, 1, 5, 3)]


# Each kernel on its own kind of shapes.
FORWARD_CASES = lab8_marked([(kernel, dtype, d, shape) for kernel, dtype, d in KERNEL_CASES
                             for shape in (DECODING_SHAPES if kernel == "lab6" else PREFILL_SHAPES)])


def case_id(case):
    kernel, dtype, d, *shape = case
    return f"{kernel}-{str(dtype).removeprefix('torch.')}-d{d}" + "".join(f"-{'x'.join(map(str, s))}" for s in shape)


def seed_of(*parts) -> int:
    """A seed fixed by the test's parameters (Python's hash() differs from run to run)."""
    return zlib.crc32(repr(parts).encode()) % 10_000


def check_forward(o, lse, q, k, v, causal, scale=None, context=""):
    """o and lse of a kernel against the fp64 reference, in the bands of attn_reference.BANDS."""
    ref_o, ref_lse = math_attention(q.double(), k.double(), v.double(), causal, scale)
    factor, floor, _ = band("output", q.dtype)
    extra = output_rounding_allowance(q, k, v, scale) if q.dtype == F32 else 0.0
    assert o.dtype == q.dtype and o.shape == q.shape and lse.dtype == F32 and lse.shape == q.shape[:-1]
    assert_within(within_band("o", o, ref_o, sdpa(q, k, v, causal, scale), factor, floor, extra, "same-dtype SDPA"),
                  context)
    lse_factor, lse_floor, _ = band("lse", q.dtype)
    assert_within(within_band("lse", lse, ref_lse, plain_lse(q, k, causal, scale), lse_factor, lse_floor, 0.0,
                              "plain fp32 logsumexp"), context)
    # A row that sees no key: exactly 0 (within_band has checked that its LSE is -inf).
    empty = ~has_key(q.shape[-2], k.shape[-2], causal, q.device)
    assert bool((o[..., empty, :] == 0).all()), f"{context}: rows that see no key must be exactly 0"


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", FORWARD_CASES, ids=case_id)
def test_forward_matches_reference(case, causal):
    kernel, dtype, d, (b, h, nq, nk) = case
    seed = seed_of(case_id(case), causal)
    q, k, v = qkv(b, h, nq, nk, d, dtype, seed)
    o, lse = course_attn.forward(q, k, v, causal=causal, kernel=kernel)
    check_forward(o, lse, q, k, v, causal, context=f"{kernel} {dtype} {list(q.shape)} k {list(k.shape)} "
                                                  f"causal={causal} seed={seed}")


@pytest.mark.parametrize("case", lab8_marked([("lab4", F32, 64), ("lab4", BF16, 128), ("lab5", BF16, 64),
                                              ("lab5", F16, 128), ("lab6", F32, 128), ("lab6", BF16, 64),
                                              ("lab8", BF16, 64), ("lab8", F16, 128)]), ids=case_id)
@pytest.mark.parametrize("scale", [0.05, 0.5])
def test_forward_with_a_scale(case, scale):
    kernel, dtype, d = case
    nq = 7 if kernel == "lab6" else 150
    q, k, v = qkv(2, 2, nq, 300, d, dtype, seed=11)
    o, lse = course_attn.forward(q, k, v, causal=True, scale=scale, kernel=kernel)
    check_forward(o, lse, q, k, v, True, scale, f"{kernel} {dtype} scale={scale}")


@pytest.mark.parametrize("case", lab8_marked([("lab4", F32, 64), ("lab5", BF16, 128), ("lab6", BF16, 64),
                                              ("lab8", BF16, 128)]), ids=case_id)
def test_large_scores(case):
    # Scores in the hundreds: the online softmax must subtract its running max (exp(x) overflows
    # fp32 above 88), and the fp32 band includes the rounding of scores that large.
    kernel, dtype, d = case
    nq = 9 if kernel == "lab6" else 100
    q, k, v = qkv(1, 2, nq, 333, d, dtype, seed=12, scale=8.0)
    o, lse = course_attn.forward(q, k, v, causal=True, kernel=kernel)
    assert lse[torch.isfinite(lse)].max() > 100
    check_forward(o, lse, q, k, v, True, context=f"{kernel} {dtype} large scores")


@pytest.mark.parametrize("shape", [(1, 2, 8, 600, 64), (2, 1, 300, 300, 128), (1, 1, 16, 40, 64)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=lambda t: str(t).removeprefix("torch."))
def test_auto_runs_the_kernel_it_names(shape, dtype):
    b, h, nq, nk, d = shape
    q, k, v = qkv(b, h, nq, nk, d, dtype, seed=13)
    kernel = course_attn.choose_kernel(q)
    o, lse = course_attn.forward(q, k, v, causal=True)
    o2, lse2 = course_attn.forward(q, k, v, causal=True, kernel=kernel)
    assert torch.equal(o, o2) and torch.equal(lse, lse2), f"auto did not run {kernel}"
    check_forward(o, lse, q, k, v, True, context=f"auto ({kernel}) {dtype}")


def prefill_kernels_here():
    """The prefill kernels that run on this GPU: labs 4 and 5, and lab 8 on an sm_90 GPU."""
    return ("lab4", "lab5", "lab8") if course_attn._ops.lab8_runs_on(torch.device("cuda")) else ("lab4", "lab5")


def test_inputs_are_not_modified():
    q, k, v = qkv(1, 2, 70, 90, 64, BF16, seed=14)
    copies = [t.clone() for t in (q, k, v)]
    for kernel in prefill_kernels_here():
        course_attn.forward(q, k, v, causal=True, kernel=kernel)
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip((q, k, v), copies))


def test_many_heads():
    # B * H = 600 heads: the grids' second dimension, and the kernels' per-head offsets.
    q, k, v = qkv(20, 30, 65, 65, 64, BF16, seed=15)
    for kernel in prefill_kernels_here():
        o, lse = course_attn.forward(q, k, v, kernel=kernel)
        check_forward(o, lse, q, k, v, False, context=f"{kernel} B*H = 600")


# Every step of the staircases of labs 5 and 8, by the name forward(version=...) takes: the name
# goes to the bindings as its int (course_attn.gpu_labs, include/course/gpu_labs.def), and each
# version must compute attention. A version that got another's number would still pass here, but
# grader.gpu_labs_list checks the numbers; this checks that every version runs from Python.
VERSION_CASES = lab8_marked([("lab5", version) for version in course_attn.VERSIONS["lab5"]]
                            + [("lab8", version) for version in course_attn.VERSIONS["lab8"]])


@pytest.mark.parametrize("case", VERSION_CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_every_version_matches_reference(case):
    kernel, version = case
    q, k, v = qkv(1, 2, 200, 333, 64, BF16, seed=16)
    o, lse = course_attn.forward(q, k, v, causal=True, kernel=kernel, version=version)
    check_forward(o, lse, q, k, v, True, context=f"{kernel} version {version}")


@pytest.mark.lab8
def test_auto_picks_lab8_on_hopper():
    q, k, v = qkv(1, 2, 300, 300, 128, F16, seed=17)
    assert course_attn.choose_kernel(q) == "lab8"
    assert course_attn.choose_kernel(q[:, :, :16].contiguous().bfloat16()) == "lab6"  # decoding stays lab 6
