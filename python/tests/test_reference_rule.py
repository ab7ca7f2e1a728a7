"""The comparisons of the other tests can fail: each is shown rejecting a planted wrong result.

The course's rule is that no check is trusted until it has been seen to fail. These run on the
CPU (PyTorch only, no GPU, no extension): the "kernel" here is the plain implementation, and
the planted bugs are edits of its results.
"""
import math

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import attn_reference  # noqa: E402
from attn_reference import (band, finite_difference, gradient_rounding_allowance, make_inputs,  # noqa: E402
                            math_attention, plain_lse, qkv, visible, within_band)

SHAPE = (1, 2, 40, 56, 64)  # B, H, Nq, Nk, d: Nq != Nk, so causal rows differ from the top-left triangle


def forward_verdicts(o, lse, q, k, v, causal, scale=None):
    """The forward comparison of test_forward.py and test_decode.py (attn_reference.forward_verdicts):
    its verdicts on o and on lse, for whatever (o, lse) it is given."""
    return attn_reference.forward_verdicts(o, lse, q, k, v, causal, scale)[:2]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_a_correct_result_passes(dtype, causal):
    # The plain fp32 implementation is itself a correct fp32 "kernel"; in bf16 the correct
    # answer is the fp64 one rounded once, as a kernel with fp32 arithmetic inside gives.
    q, k, v = qkv(*SHAPE, dtype, seed=1, device="cpu")
    o, lse = math_attention(q.double(), k.double(), v.double(), causal)
    o_ok, lse_ok = forward_verdicts(o.to(dtype), lse.float(), q, k, v, causal)
    assert o_ok, o_ok.message
    assert lse_ok, lse_ok.message


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_element_perturbed_is_rejected(dtype):
    q, k, v = qkv(*SHAPE, dtype, seed=2, device="cpu")
    o, lse = math_attention(q.double(), k.double(), v.double(), False)
    o = o.to(dtype)
    o[0, 1, 7, 3] += 0.05  # one element off by 5e-2: a race or an indexing slip
    verdict, _ = forward_verdicts(o, lse.float(), q, k, v, False)
    assert not verdict
    assert "at [0, 1, 7, 3]" in verdict.message


def test_wrong_scale_is_rejected():
    q, k, v = qkv(*SHAPE, torch.bfloat16, seed=3, device="cpu")
    d = q.shape[-1]
    o, lse = math_attention(q.double(), k.double(), v.double(), False, scale=1 / d)  # the bug: 1/d, not 1/sqrt(d)
    o_ok, lse_ok = forward_verdicts(o.to(torch.bfloat16), lse.float(), q, k, v, False, 1 / math.sqrt(d))
    assert not o_ok and not lse_ok


def test_top_left_causal_is_rejected():
    # PyTorch's is_causal=True for Nq != Nk: the classic mistake the explicit mask avoids.
    q, k, v = qkv(*SHAPE, torch.float32, seed=4, device="cpu")
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    verdict, _ = forward_verdicts(o, plain_lse(q, k, True), q, k, v, True)
    assert not verdict


def test_nan_and_a_missing_minus_infinity_are_rejected():
    q, k, v = qkv(1, 1, 6, 3, 64, torch.float32, seed=5, device="cpu")  # causal: rows 0-2 see no key
    o, lse = math_attention(q.double(), k.double(), v.double(), True)
    assert visible(6, 3).any(-1).tolist() == [False, False, False, True, True, True]
    nan_o = o.float().clone()
    nan_o[0, 0, 0, 0] = float("nan")
    verdict, _ = forward_verdicts(nan_o, lse.float(), q, k, v, True)
    assert not verdict and "NaN/Inf" in verdict.message
    finite_lse = lse.float().clone()
    finite_lse[0, 0, 1] = 0.0  # a row with no key must have LSE = -inf
    _, verdict = forward_verdicts(o.float(), finite_lse, q, k, v, True)
    assert not verdict and "finite where the reference is -inf" in verdict.message
    nan_lse = lse.float().clone()
    nan_lse[0, 0, 1] = float("nan")  # NaN is not "finite": the message names what was found
    _, verdict = forward_verdicts(o.float(), nan_lse, q, k, v, True)
    assert not verdict and "NaN or the other infinity where the reference is -inf" in verdict.message


def gradients(q, k, v, do, causal, dtype=torch.float64):
    inputs = [t.detach().to(dtype).requires_grad_(True) for t in (q, k, v)]
    o, _ = math_attention(*inputs, causal)
    o.backward(do.to(dtype))
    return [t.grad for t in inputs]


def test_a_wrong_gradient_is_rejected():
    q, k, v = qkv(*SHAPE, torch.float32, seed=6, device="cpu")
    do = make_inputs([q.shape], torch.float32, seed=7, device="cpu")[0]
    ref = gradients(q, k, v, do, True)
    plain = gradients(q, k, v, do, True, torch.float32)
    allowance = gradient_rounding_allowance(q, k, v, do, True)
    factor, floor, _ = band("gradient", torch.float32)
    # A correct fp32 gradient that is not the yardstick itself (against which it would pass by
    # construction): the fp64 gradient rounded to fp32.
    good = [within_band(n, r.float(), r, p, factor, floor, allowance[n])
            for n, r, p in zip(("dq", "dk", "dv"), ref, plain)]
    assert all(good), [v.message for v in good]
    wrong_dq = plain[0] / math.sqrt(q.shape[-1])  # dQ scaled twice by 1/sqrt(d)
    assert not within_band("dq", wrong_dq, ref[0], plain[0], factor, floor, allowance["dq"])


def test_finite_differences_reject_a_wrong_gradient():
    # The "kernel" is the plain fp32 forward and its fp32 gradient; the bug, dK missing its scale.
    q, k, v = qkv(1, 2, 24, 40, 64, torch.float32, seed=8, device="cpu")
    w = make_inputs([q.shape], torch.float32, seed=9, device="cpu")[0]  # L = sum(O * w), so dO = w
    directions = qkv(1, 2, 24, 40, 64, torch.float32, seed=10, device="cpu")

    def loss(*x):
        return (math_attention(*x, True)[0].double() * w.double()).sum().item()

    def loss64(*x):
        return (math_attention(*x, True)[0] * w.double()).sum().item()

    grads = gradients(q, k, v, w, True, torch.float32)
    grads64 = gradients(q, k, v, w, True)
    good = finite_difference(loss, loss64, [q, k, v], grads, grads64, directions, h=1e-3).verdict()
    assert good, good.message
    wrong = [grads[0], grads[1] * math.sqrt(q.shape[-1]), grads[2]]
    bad = finite_difference(loss, loss64, [q, k, v], wrong, grads64, directions, h=1e-3).verdict()
    assert not bad, bad.message


def test_a_useless_step_is_reported():
    # With h so small that fp32 rounding swamps the difference, the check refuses to judge.
    q, k, v = qkv(1, 1, 8, 8, 64, torch.float32, seed=11, device="cpu")
    w = make_inputs([q.shape], torch.float32, seed=12, device="cpu")[0]
    directions = qkv(1, 1, 8, 8, 64, torch.float32, seed=13, device="cpu")

    def loss(*x):
        return (math_attention(*x)[0].double() * w.double()).sum().item()

    def loss64(*x):
        return (math_attention(*x)[0] * w.double()).sum().item()

    g = gradients(q, k, v, w, False, torch.float32)
    verdict = finite_difference(loss, loss64, [q, k, v], g, gradients(q, k, v, w, False), directions, h=1e-7).verdict()
    assert not verdict and "too noisy" in verdict.message
