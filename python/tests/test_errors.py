"""Bad input gets a Python exception that says what is wrong, never a crash: TypeError for a
dtype the kernel does not take, ValueError for the device, the layout, the shapes, and what the
lab itself rejects (its course::BadInput message). Each test goes on using the process, which is
the proof that nothing crashed."""
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import course_attn  # noqa: E402
from attn_reference import qkv  # noqa: E402

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16


@pytest.mark.extension
@pytest.mark.parametrize("kernel", ["lab4", "lab5", "lab6"])
def test_cpu_tensors(ext, kernel):
    q = torch.randn(1, 1, 8, 64)
    with pytest.raises(ValueError, match="must be a CUDA tensor, got one on cpu"):
        course_attn.forward(q, q, q, kernel=kernel)
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        course_attn.backward(q, q, q, q, q, q[..., 0])


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, dtype, takes", [
    ("lab4", F16, "takes torch.float32 and torch.bfloat16, not torch.float16"),
    ("lab5", F32, "takes torch.bfloat16 and torch.float16, not torch.float32"),
    ("lab6", F16, "takes torch.float32 and torch.bfloat16, not torch.float16"),
    ("lab4", torch.float64, "not torch.float64"),
])
def test_dtype_the_kernel_does_not_take(kernel, dtype, takes):
    q, k, v = qkv(1, 1, 8, 8, 64, dtype, seed=1)
    with pytest.raises(TypeError, match=takes):
        course_attn.forward(q, k, v, kernel=kernel)


@pytest.mark.gpu
def test_mixed_dtypes_and_devices():
    q, k, v = qkv(1, 1, 8, 8, 64, BF16, seed=2)
    with pytest.raises(TypeError, match="k is torch.float32 but q is torch.bfloat16"):
        course_attn.forward(q, k.float(), v, kernel="lab4")
    with pytest.raises(ValueError, match="v must be a CUDA tensor, got one on cpu"):
        course_attn.forward(q, k, v.cpu(), kernel="lab5")


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["lab4", "lab5", "lab6"])
def test_layout(kernel):
    q, k, v = qkv(1, 2, 8, 8, 64, BF16, seed=3)
    with pytest.raises(ValueError, match="q is not contiguous"):
        course_attn.forward(q.transpose(1, 2), k, v, kernel=kernel)  # [B, N, H, d] viewed as [B, H, N, d]
    with pytest.raises(ValueError, match="4 dimensions"):
        course_attn.forward(q[0], k[0], v[0], kernel=kernel)
    # A view that starts 2 bytes into its storage: contiguous, but not 16-byte aligned.
    flat = torch.empty(q.numel() + 1, dtype=BF16, device="cuda")
    shifted = flat[1:].view(q.shape).copy_(q)
    with pytest.raises(ValueError, match="16-byte boundary"):
        course_attn.forward(shifted, k, v, kernel=kernel)
    with pytest.raises(ValueError, match="empty dimension"):
        course_attn.forward(q[:, :, :0], k, v, kernel=kernel)


@pytest.mark.gpu
def test_shapes_that_do_not_match():
    q, k, v = qkv(1, 2, 8, 8, 64, BF16, seed=4)
    with pytest.raises(ValueError, match="k and v must have the same shape"):
        course_attn.forward(q, k, v[:, :, :4].contiguous(), kernel="lab5")
    with pytest.raises(ValueError, match="must agree in B, H and d"):
        course_attn.forward(q, k[:, :1].contiguous(), v[:, :1].contiguous(), kernel="lab5")


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, dtype, d", [("lab4", F32, 96), ("lab5", BF16, 32), ("lab5", F16, 256),
                                              ("lab6", BF16, 32)])
def test_head_dimension_the_lab_rejects(kernel, dtype, d):
    # Checked by the lab itself: its course::BadInput arrives as a ValueError with its message.
    q, k, v = qkv(1, 1, 8, 8, d, dtype, seed=5)
    with pytest.raises(ValueError, match="head dimension"):
        course_attn.forward(q, k, v, kernel=kernel)


@pytest.mark.gpu
def test_too_many_queries_for_decoding():
    q, k, v = qkv(1, 1, 17, 64, 64, BF16, seed=6)
    with pytest.raises(ValueError, match="Nq = 17"):
        course_attn.forward(q, k, v, kernel="lab6")


@pytest.mark.gpu
def test_backward_arguments():
    q, k, v = qkv(1, 2, 8, 8, 64, BF16, seed=7)
    o, lse = course_attn.forward(q, k, v, kernel="lab5")
    with pytest.raises(TypeError, match=r"lab 7 \(its GPU parts\) takes"):
        f64 = [t.double() for t in (q, k, v, o, o)]
        course_attn.backward(*f64, lse)
    with pytest.raises(ValueError, match="CUDA-core kernel takes fp32 or bf16"):
        h = [t.half() for t in (q, k, v, o, o)]
        course_attn.backward(*h, lse, kernel="cuda_cores")
    with pytest.raises(TypeError, match="lse must be torch.float32"):
        course_attn.backward(q, k, v, o, o, lse.double())
    with pytest.raises(ValueError, match=r"lse must be \[B, H, Nq\]"):
        course_attn.backward(q, k, v, o, o, lse[:, :1].contiguous())
    with pytest.raises(ValueError, match="must have q's shape"):
        course_attn.backward(q, k, v, o[:, :, :4].contiguous(), o, lse)
    with pytest.raises(ValueError, match=r"head dimension d\b.*\b32"):
        q32, k32, v32 = qkv(1, 1, 8, 8, 32, BF16, seed=8)
        o32, lse32 = course_attn.forward(q32, k32, v32, kernel="lab4")
        course_attn.backward(q32, k32, v32, o32, o32, lse32)


@pytest.mark.gpu
def test_still_working_after_the_errors():
    q, k, v = qkv(1, 1, 8, 8, 64, BF16, seed=9)
    for kernel in ("lab4", "lab5", "lab6"):
        o, _ = course_attn.forward(q, k, v, kernel=kernel)
        assert torch.isfinite(o).all()


@pytest.mark.lab8
@pytest.mark.parametrize("dtype, d, error, match", [
    (F32, 64, TypeError, "lab 8 takes torch.bfloat16 and torch.float16, not torch.float32"),
    (BF16, 32, ValueError, "head dimension"),
    (F16, 256, ValueError, "head dimension"),
])
def test_lab8_rejects_what_it_does_not_take(dtype, d, error, match):
    q, k, v = qkv(1, 1, 8, 8, d, dtype, seed=10)
    with pytest.raises(error, match=match):
        course_attn.forward(q, k, v, kernel="lab8")
    o, _ = course_attn.forward(*qkv(1, 1, 8, 8, 64, BF16, seed=10), kernel="lab8")  # and still works
    assert torch.isfinite(o).all()


@pytest.mark.lab8
def test_lab8_layout():
    q, k, v = qkv(1, 2, 8, 8, 64, BF16, seed=3)
    with pytest.raises(ValueError, match="q is not contiguous"):
        course_attn.forward(q.transpose(1, 2), k, v, kernel="lab8")
    flat = torch.empty(q.numel() + 1, dtype=BF16, device="cuda")
    shifted = flat[1:].view(q.shape).copy_(q)
    with pytest.raises(ValueError, match="16-byte boundary"):
        course_attn.forward(shifted, k, v, kernel="lab8")


@pytest.mark.not_lab8
def test_lab8_on_another_gpu_says_why():
    q, k, v = qkv(1, 1, 8, 8, 64, BF16, seed=11)
    with pytest.raises(RuntimeError, match="compute capability 9.0|not compiled"):
        course_attn.forward(q, k, v, kernel="lab8")
    assert course_attn.choose_kernel(q) != "lab8"


@pytest.mark.gpu
def test_bad_version_names():
    q, k, v = qkv(1, 1, 8, 8, 64, BF16, seed=12)
    with pytest.raises(ValueError, match="lab5 has no version 'pingpong'"):
        course_attn.forward(q, k, v, kernel="lab5", version="pingpong")
    with pytest.raises(ValueError, match="has no versions"):
        course_attn.forward(q, k, v, kernel="lab4", version="swizzle")
