"""course_attn.attention and course_attn.backward: the gradients of lab 7's GPU backward, and of
lab 9's (Hopper) where it runs.

Why not torch.autograd.gradcheck: it compares with finite differences in fp64, and no kernel of
the course computes in fp64 (lab 7's GPU parts take fp32, bf16 and fp16), so there is nothing for it
to check; run in fp32 its default tolerances are meaningless (fp32 rounding divided by its step
swamps them) and any tolerance loose enough to pass would be picked, not derived. Instead:
  1. the gradients against fp64 autograd through the plain math path, by FlashAttention's rule
     with the plain same-dtype backward as the yardstick (the course's lab 7 bands);
  2. in fp32, a finite difference of the kernels' own forward (lab 4) along a random direction
     against lab 7's gradient, where the finite difference's error is measured, not guessed
     (attn_reference.FiniteDifference): the gradient is the derivative of this forward.
"""
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import course_attn  # noqa: E402
from attn_reference import (assert_within, band, finite_difference, gradient_rounding_allowance,  # noqa: E402
                            make_inputs, math_attention, output_rounding_allowance, qkv, sdpa, within_band)

pytestmark = pytest.mark.gpu

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16

# (B, H, Nq, Nk): whole tiles, odd lengths with Nq < Nk, Nq > Nk (rows with no key under causal
# masking: dQ = 0 there, and keys no query sees: dK = dV = 0), and one query and one key.
GRAD_SHAPES = [(2, 2, 128, 128), (1, 2, 113, 200), (1, 2, 200, 77), (1, 1, 1, 1)]


def leaves(*tensors, dtype=None):
    return [t.detach().to(dtype or t.dtype).requires_grad_(True) for t in tensors]


def plain_gradients(q, k, v, do, causal, dtype, scale=None):
    """(dq, dk, dv) of the plain math path in `dtype`, by PyTorch's autograd."""
    inputs = leaves(q, k, v, dtype=dtype)
    o, _ = math_attention(*inputs, causal, scale)
    o.backward(do.to(dtype))
    return [t.grad for t in inputs]


def check_gradients(q, k, v, do, causal, grads, context, scale=None):
    """The course's lab 7 bands: 2x the plain same-dtype backward plus a floor, and in fp32 the
    rounding walk of the scores (attn_reference.gradient_rounding_allowance)."""
    ref = plain_gradients(q, k, v, do, causal, torch.float64, scale)
    plain = plain_gradients(q, k, v, do, causal, q.dtype, scale)
    factor, floor, _ = band("gradient", q.dtype)
    allowance = gradient_rounding_allowance(q, k, v, do, causal, scale) if q.dtype == F32 else {}
    for name, g, r, p in zip(("dq", "dk", "dv"), grads, ref, plain):
        assert g.dtype == q.dtype
        assert_within(within_band(name, g, r, p, factor, floor, allowance.get(name, 0.0), "plain same-dtype backward"),
                      context)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", GRAD_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=lambda t: str(t).removeprefix("torch."))
def test_gradients_match_fp64_autograd(dtype, d, shape, causal):
    b, h, nq, nk = shape
    q, k, v = qkv(b, h, nq, nk, d, dtype, seed=21)
    do = make_inputs([q.shape], dtype, seed=22)[0]
    lq, lk, lv = leaves(q, k, v)
    o = course_attn.attention(lq, lk, lv, causal=causal)
    o.backward(do)
    context = f"attention {dtype} {list(q.shape)} k {list(k.shape)} causal={causal}"
    # The forward, as test_forward checks it (lab 4 in fp32, lab 5 in bf16).
    ref_o, _ = math_attention(q.double(), k.double(), v.double(), causal)
    factor, floor, _ = band("output", dtype)
    extra = output_rounding_allowance(q, k, v) if dtype == F32 else 0.0
    assert_within(within_band("o", o, ref_o, sdpa(q, k, v, causal), factor, floor, extra, "same-dtype SDPA"), context)
    check_gradients(q, k, v, do, causal, [lq.grad, lk.grad, lv.grad], context)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=lambda t: str(t).removeprefix("torch."))
def test_gradient_of_a_sum(dtype):
    # o.sum().backward() hands the backward an expanded (stride 0) gradient: it is made dense.
    q, k, v = qkv(1, 2, 90, 130, 64, dtype, seed=23)
    lq, lk, lv = leaves(q, k, v)
    course_attn.attention(lq, lk, lv, causal=True).sum().backward()
    check_gradients(q, k, v, torch.ones_like(q), True, [lq.grad, lk.grad, lv.grad], f"sum() {dtype}")


def test_gradient_with_a_scale():
    q, k, v = qkv(2, 1, 70, 70, 128, F32, seed=24)
    do = make_inputs([q.shape], F32, seed=25)[0]
    scale = 0.3  # scores about 3.4 times larger than with 1/sqrt(d)
    lq, lk, lv = leaves(q, k, v)
    course_attn.attention(lq, lk, lv, scale=scale).backward(do)
    check_gradients(q, k, v, do, False, [lq.grad, lk.grad, lv.grad], f"scale={scale}", scale)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_gradient_is_the_derivative_of_the_forward(causal):
    """fp32 finite differences of lab 4's forward against lab 7's gradient (see the module doc).

    L(q, k, v) = sum(O * W) for a fixed random W, so dL/dO = W. Along a random direction u (one
    for each of q, k, v), (L(x + h u) - L(x - h u)) / 2h, computed with the kernel's forward,
    must equal <grad L, u> from the kernel's backward up to the finite difference's own error,
    which is measured: its rounding (the kernel's L against fp64 L at the same points) and its
    truncation (the same difference of fp64 L against the fp64 gradient). h = 1e-3 balances the
    two (rounding ~ u32 |L| / h, truncation ~ h^2 L''').
    """
    q, k, v = qkv(1, 2, 96, 150, 64, F32, seed=26)
    w = make_inputs([q.shape], F32, seed=27)[0]
    directions = qkv(1, 2, 96, 150, 64, F32, seed=28)

    def loss(*x):  # with the kernels (no autograd needed)
        with torch.no_grad():
            return (course_attn.forward(*x, causal=causal, kernel="lab4")[0].double() * w.double()).sum().item()

    def loss64(*x):
        return (math_attention(*x, causal)[0] * w.double()).sum().item()

    lq, lk, lv = leaves(q, k, v)
    course_attn.attention(lq, lk, lv, causal=causal).backward(w)
    ref = leaves(q, k, v, dtype=torch.float64)
    math_attention(*ref, causal)[0].backward(w.double())
    fd = finite_difference(loss, loss64, [q, k, v], [lq.grad, lk.grad, lv.grad], [t.grad for t in ref], directions,
                           h=1e-3)
    verdict = fd.verdict()
    assert verdict, verdict.message


def test_fp64_has_no_kernel():
    # The reason gradcheck (fp64) cannot be used: no course kernel takes fp64.
    q = torch.randn(1, 1, 8, 64, dtype=torch.float64, device="cuda", requires_grad=True)
    with pytest.raises(TypeError, match="torch.float64"):
        course_attn.attention(q, q, q)


@pytest.mark.parametrize("dtype", [BF16, F16], ids=lambda t: str(t).removeprefix("torch."))
def test_both_backward_kernels_agree_within_the_band(dtype):
    # bf16 runs on both of lab 7's kernels (fp16 on tensor cores only): each is graded on its own.
    q, k, v = qkv(1, 2, 100, 150, 64, dtype, seed=29)
    do = make_inputs([q.shape], dtype, seed=32)[0]
    o, lse = course_attn.forward(q, k, v, causal=True, kernel="lab5")
    kernels = ["tensor_cores", "cuda_cores"] if dtype == BF16 else ["tensor_cores"]
    for kernel in kernels:
        grads = course_attn.backward(q, k, v, o, do, lse, causal=True, kernel=kernel)
        check_gradients(q, k, v, do, True, list(grads), f"{dtype} {kernel}")
    if dtype == F16:
        with pytest.raises(ValueError, match="CUDA-core kernel takes fp32 or bf16"):
            course_attn.backward(q, k, v, o, do, lse, causal=True, kernel="cuda_cores")


def test_backward_called_directly_matches_autograd():
    q, k, v = qkv(1, 2, 64, 96, 128, BF16, seed=30)
    do = make_inputs([q.shape], BF16, seed=31)[0]
    # The forward attention() runs here (lab 8 on an sm_90 GPU, lab 5 elsewhere): the same o and lse.
    o, lse = course_attn.forward(q, k, v, causal=True, kernel=course_attn.forward_kernel(q))
    dq, dk, dv = course_attn.backward(q, k, v, o, do, lse, causal=True)
    lq, lk, lv = leaves(q, k, v)
    course_attn.attention(lq, lk, lv, causal=True).backward(do)
    # The same kernels on the same inputs. dQ's fp32 atomic adds may come in another order, which
    # can move its rounding to bf16 by one ulp: at most 2^-7 of the largest element.
    assert torch.equal(dk, lk.grad) and torch.equal(dv, lv.grad)
    assert (dq.float() - lq.grad.float()).abs().max() <= 2 ** -7 * dq.float().abs().max()


@pytest.mark.lab8
@pytest.mark.parametrize("dtype", [BF16, F16], ids=lambda t: str(t).removeprefix("torch."))
def test_lab8_forward_under_autograd(dtype):
    # On an sm_90 GPU attention() runs lab 8's forward for 16-bit inputs; its LSE feeds lab 7.
    q, k, v = qkv(1, 2, 150, 230, 64, dtype, seed=33)
    assert course_attn.forward_kernel(q) == "lab8"
    do = make_inputs([q.shape], dtype, seed=34)[0]
    lq, lk, lv = leaves(q, k, v)
    o = course_attn.attention(lq, lk, lv, causal=True)
    assert torch.equal(o, course_attn.forward(q, k, v, causal=True, kernel="lab8")[0])
    o.backward(do)
    check_gradients(q, k, v, do, True, [lq.grad, lk.grad, lv.grad],
                    f"{dtype} lab 8 forward, lab {course_attn.backward_lab(q)} backward")


# Lab 9 is built whenever lab 8 is (both sm_90a, COURSE_ATTN_CUDA_ARCH including 90) and runs on
# the same GPUs: the lab8 marker stands for both.
@pytest.mark.lab8
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", GRAD_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", [BF16, F16], ids=lambda t: str(t).removeprefix("torch."))
def test_lab9_backward_matches_fp64_autograd(dtype, d, shape, causal):
    # On an sm_90 GPU attention() takes its 16-bit gradients from lab 9, and backward(lab=None) too.
    b, h, nq, nk = shape
    q, k, v = qkv(b, h, nq, nk, d, dtype, seed=35)
    assert course_attn.backward_lab(q) == 9
    do = make_inputs([q.shape], dtype, seed=36)[0]
    o, lse = course_attn.forward(q, k, v, causal=causal, kernel="lab8")
    grads = course_attn.backward(q, k, v, o, do, lse, causal=causal, lab=9)
    check_gradients(q, k, v, do, causal, list(grads), f"{dtype} d={d} {shape} lab 9")


@pytest.mark.lab8
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_lab9_deterministic_gives_the_same_bits_every_call(causal):
    # deterministic=True: the K/V tiles add into dq in turn, so every call gives the same dq, dk and
    # dv, bit for bit, on the current stream and on another one; and they are right.
    q, k, v = qkv(1, 4, 1000, 2000, 128, BF16, seed=39)
    do = make_inputs([q.shape], BF16, seed=40)[0]
    o, lse = course_attn.forward(q, k, v, causal=causal, kernel="lab8")
    first = course_attn.backward(q, k, v, o, do, lse, causal=causal, lab=9, deterministic=True)
    side = torch.cuda.Stream()
    for stream in (torch.cuda.current_stream(), side, torch.cuda.current_stream()):
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            again = course_attn.backward(q, k, v, o, do, lse, causal=causal, lab=9, deterministic=True)
        torch.cuda.current_stream().wait_stream(stream)
        for name, a, b in zip(("dq", "dk", "dv"), first, again):
            assert torch.equal(a, b), f"{name} differs between two deterministic calls"
    check_gradients(q, k, v, do, causal, list(first), f"lab 9 deterministic, causal={causal}")
    # Lab 7 adds dq with atomics in whatever order they come: it says it has no such mode.
    with pytest.raises(ValueError, match="deterministic"):
        course_attn.backward(q, k, v, o, do, lse, causal=causal, lab=7, deterministic=True)


@pytest.mark.lab8
def test_which_backward_runs():
    q16 = torch.empty(1, 1, 8, 64, dtype=BF16, device="cuda")
    assert course_attn.backward_lab(q16) == 9
    assert course_attn.backward_lab(q16, kernel="cuda_cores") == 7  # a lab 7 kernel named: lab 7
    assert course_attn.backward_lab(q16.float()) == 7  # lab 9 takes bf16 and fp16 only
    assert course_attn.backward_lab(torch.empty(1, 1, 8, 32, dtype=BF16, device="cuda")) == 7


@pytest.mark.lab8
def test_lab9_refuses_what_it_does_not_take():
    q, k, v = qkv(1, 1, 16, 16, 64, F32, seed=37)
    o, lse = course_attn.forward(q, k, v)
    with pytest.raises(TypeError, match="lab 9"):
        course_attn.backward(q, k, v, o, o, lse, lab=9)
    q16, k16, v16 = (t.to(BF16) for t in (q, k, v))
    o16, lse16 = course_attn.forward(q16, k16, v16, kernel="lab8")
    with pytest.raises(ValueError):
        course_attn.backward(q16, k16, v16, o16, o16, lse16, lab=9, kernel="cuda_cores")
    with pytest.raises(ValueError, match="lab must be 7, 9 or None"):
        course_attn.backward(q16, k16, v16, o16, o16, lse16, lab=8)


@pytest.mark.not_lab8
def test_lab9_on_another_gpu_says_why():
    q, k, v = qkv(1, 1, 16, 16, 64, BF16, seed=38)
    o, lse = course_attn.forward(q, k, v, kernel="lab5")
    assert course_attn.backward_lab(q) == 7
    with pytest.raises(RuntimeError, match="compute capability 9.0"):
        course_attn.backward(q, k, v, o, o, lse, lab=9)


def test_double_backward_is_refused():
    # Lab 7's gradients are not differentiable themselves (@once_differentiable): a second
    # derivative through them is an error, not a silent zero.
    q, k, v = leaves(*qkv(1, 1, 16, 16, 64, F32, seed=32))
    o = course_attn.attention(q, k, v)
    w = torch.ones_like(o, requires_grad=True)
    (g,) = torch.autograd.grad(o, q, grad_outputs=w, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        g.sum().backward()
