"""The kernels run on PyTorch's current stream, not on the default one.

The adversarial test of gpu-mode's reference kernels and of the course's GPU graders: keep the
default stream busy, run the call under torch.cuda.stream(side) and read its results with a copy
ordered on `side` alone. A kernel queued on the default stream has then not run when the copy
reads its output, which starts as NaN: the memory it is allocated from was filled with NaN
bytes first (poison_pool). The last test shows that this check catches a call that ignores the
current stream.
"""
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import course_attn  # noqa: E402
from attn_reference import make_inputs, qkv  # noqa: E402

pytestmark = pytest.mark.gpu

BUSY_CYCLES = 400_000_000  # about 0.2 s of torch.cuda._sleep on an H200 (1.98 GHz): far longer than the kernels


def poison_pool(stream):
    """Leaves the caching allocator with one free 2 MiB segment for `stream`, filled with 0xFF
    bytes (NaN in fp32, bf16 and fp16): the small tensors allocated next on that stream (1 MiB
    or less each) are carved from it, so they start as NaN until a kernel writes them."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # no other free blocks to pick from
    with torch.cuda.stream(stream):
        blocks = [torch.full((1 << 20,), 0xFF, dtype=torch.uint8, device="cuda") for _ in range(2)]
        del blocks


def read_on(stream, tensors):
    """Copies to the host ordered on `stream` only (a blocking copy waits for that stream alone)."""
    with torch.cuda.stream(stream):
        return [t.to("cpu") for t in tensors]


def busy_default_stream():
    torch.cuda.synchronize()
    torch.cuda._sleep(BUSY_CYCLES)  # on the default stream: the current one outside any `with`


@pytest.mark.parametrize("kernel, dtype, nq", [("lab4", torch.float32, 100), ("lab5", torch.bfloat16, 100),
                                               ("lab6", torch.bfloat16, 4),
                                               pytest.param("lab8", torch.float16, 100, marks=pytest.mark.lab8)])
def test_forward_on_a_side_stream(ext, kernel, dtype, nq):
    q, k, v = qkv(1, 2, nq, 300, 64, dtype, seed=41)
    expected = [t.cpu() for t in course_attn.forward(q, k, v, causal=True, kernel=kernel)]  # also warms up
    side = torch.cuda.Stream()
    poison_pool(side)
    busy_default_stream()
    with torch.cuda.stream(side):
        o, lse = course_attn.forward(q, k, v, causal=True, kernel=kernel)
    got = read_on(side, [o, lse])
    torch.cuda.synchronize()
    assert all(torch.equal(g, e) for g, e in zip(got, expected)), \
        f"{kernel}: results read on the current stream differ (NaN: {torch.isnan(got[0].float()).any().item()})"


def test_backward_on_a_side_stream(ext):
    q, k, v = qkv(1, 2, 100, 160, 64, torch.float32, seed=42)
    do = make_inputs([q.shape], torch.float32, seed=43)[0]

    def gradients():
        leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
        course_attn.attention(*leaves, causal=True).backward(do)
        return [t.grad for t in leaves]

    expected = [g.cpu() for g in gradients()]
    side = torch.cuda.Stream()
    poison_pool(side)
    busy_default_stream()
    with torch.cuda.stream(side):
        grads = gradients()  # autograd runs the backward on the stream the forward ran on
    got = read_on(side, grads)
    torch.cuda.synchronize()
    for name, g, e in zip(("dq", "dk", "dv"), got, expected):
        assert torch.isfinite(g).all(), f"{name}: NaN read on the current stream: the kernel ran elsewhere"
        # dQ is summed with fp32 atomics, in an order that may differ from run to run
        assert (g - e).abs().max() <= 1e-5 * max(1.0, e.abs().max().item()), name


def test_the_check_catches_the_default_stream(ext):
    # What a binding that ignores the current stream does: the kernel queued behind the busy
    # default stream, its output read on the side stream before it ran.
    q, k, v = qkv(1, 2, 100, 300, 64, torch.bfloat16, seed=44)
    expected = course_attn.forward(q, k, v, kernel="lab5")[0].cpu()
    side = torch.cuda.Stream()
    poison_pool(torch.cuda.default_stream())
    busy_default_stream()
    o, _ = course_attn.forward(q, k, v, kernel="lab5")  # on the default stream, behind the sleep
    (got,) = read_on(side, [o])
    torch.cuda.synchronize()
    assert not torch.equal(got, expected), "the stream test could not tell the default stream from the current one"
    assert torch.isnan(got.float()).any()
