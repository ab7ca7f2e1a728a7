"""The Python side of course_attn that needs no compiler and no GPU: kernel choice, argument
checks made before any kernel runs, and the build settings."""
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import course_attn  # noqa: E402
from course_attn import _autograd, _extension, _ops, gpu_labs  # noqa: E402


def q_of(dtype, nq, d):
    return torch.empty(1, 1, nq, d, dtype=dtype)


@pytest.mark.parametrize("dtype, nq, d, kernel", [
    (torch.float16, 1, 64, "lab5"),       # the only fp16 kernel, decoding or not
    (torch.float16, 512, 128, "lab5"),
    (torch.bfloat16, 1, 128, "lab6"),     # decoding: few query rows
    (torch.float32, 16, 64, "lab6"),
    (torch.float32, 17, 64, "lab4"),      # 17 rows: prefill, not decoding
    (torch.bfloat16, 17, 64, "lab5"),
    (torch.bfloat16, 512, 32, "lab4"),    # d = 32: lab 4 only
    (torch.float32, 1, 32, "lab4"),
    (torch.float32, 4096, 128, "lab4"),
])
def test_choose_kernel(dtype, nq, d, kernel):
    assert course_attn.choose_kernel(q_of(dtype, nq, d)) == kernel


@pytest.mark.parametrize("scale, error", [
    (0.0, ValueError), (-1.0, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
    ("0.5", TypeError), (True, TypeError),
])
def test_bad_scale_is_refused_before_any_kernel(scale, error):
    q = q_of(torch.float32, 4, 64)
    with pytest.raises(error, match="scale"):
        course_attn.forward(q, q, q, scale=scale)
    with pytest.raises(error, match="scale"):
        course_attn.attention(q, q, q, scale=scale)


def test_bad_arguments_are_refused_before_any_kernel():
    q = q_of(torch.float32, 4, 64)
    with pytest.raises(ValueError, match="kernel must be"):
        course_attn.forward(q, q, q, kernel="lab7")
    with pytest.raises(TypeError, match="causal"):
        course_attn.forward(q, q, q, causal=1)
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        course_attn.forward(q.numpy(), q, q)
    with pytest.raises(TypeError, match="torch.float64"):
        course_attn.attention(q.double(), q.double(), q.double())


def test_fp64_gradients_are_refused_with_the_reason():
    q = q_of(torch.float32, 4, 64).double().requires_grad_(True)
    with pytest.raises(TypeError, match="torch.float64"):
        course_attn.attention(q, q, q)


def test_backward_kernel_names_are_checked():
    q = q_of(torch.bfloat16, 4, 64)
    with pytest.raises(ValueError, match="kernel must be one of"):
        course_attn.backward(q, q, q, q, q, q[..., 0].float(), kernel="cuda")


def test_gradients_for_an_unsupported_head_dimension_are_refused():
    q = q_of(torch.float32, 4, 32).requires_grad_(True)
    with pytest.raises(ValueError, match="d = 64 or 128"):
        course_attn.attention(q, q, q)


def test_sources_and_build_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("COURSE_ATTN_SOURCES", raising=False)
    monkeypatch.delenv("COURSE_ATTN_BUILD_DIR", raising=False)
    monkeypatch.delenv("COURSE_BUILD_DIR", raising=False)
    assert course_attn.sources() == "solutions"
    assert course_attn.build_directory() == _extension.REPO / "build" / "torch-ext" / "solutions"
    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path))
    assert course_attn.build_directory("labs") == tmp_path / "torch-ext" / "labs"
    monkeypatch.setenv("COURSE_ATTN_BUILD_DIR", str(tmp_path / "x"))
    monkeypatch.setenv("COURSE_ATTN_SOURCES", "labs")
    assert course_attn.build_directory() == tmp_path / "x" / "labs"
    monkeypatch.setenv("COURSE_ATTN_SOURCES", "mine")
    with pytest.raises(ValueError, match="'solutions' or 'labs'"):
        course_attn.sources()


def test_every_source_file_exists():
    for which in _extension.SOURCE_CHOICES:
        assert all(p.endswith((".cpp", ".cu")) for p in _extension.source_files(which))


def test_architectures(monkeypatch):
    monkeypatch.delenv("COURSE_ATTN_CUDA_ARCH", raising=False)
    assert _extension.cuda_arch_flags() == ["-gencode=arch=compute_90,code=sm_90",
                                            "-gencode=arch=compute_90,code=compute_90"]
    monkeypatch.setenv("COURSE_ATTN_CUDA_ARCH", "80;90")
    assert _extension.cuda_arch_flags()[-1] == "-gencode=arch=compute_90,code=compute_90"
    assert "-gencode=arch=compute_80,code=sm_80" in _extension.cuda_arch_flags()
    monkeypatch.setenv("COURSE_ATTN_CUDA_ARCH", "sm_90")
    with pytest.raises(ValueError, match="COURSE_ATTN_CUDA_ARCH"):
        _extension.cuda_arch_flags()


@pytest.mark.parametrize("dtype, nq, d, kernel", [
    (torch.float16, 1, 64, "lab8"),       # fp16 decoding too: lab 6 takes no fp16
    (torch.float16, 512, 128, "lab8"),
    (torch.bfloat16, 512, 64, "lab8"),
    (torch.bfloat16, 16, 64, "lab6"),     # decoding stays with lab 6
    (torch.bfloat16, 512, 32, "lab4"),    # d = 32: lab 4 only
    (torch.float32, 4096, 128, "lab4"),
    (torch.float16, 512, 32, "lab5"),     # lab 8 does not take d = 32: lab 5 reports it
])
def test_choose_kernel_where_lab8_runs(monkeypatch, dtype, nq, d, kernel):
    monkeypatch.setattr(_ops, "lab8_runs_on", lambda device: True)  # as on an H100 or H200
    assert course_attn.choose_kernel(q_of(dtype, nq, d)) == kernel


def test_lab8_never_runs_on_cpu_tensors():
    assert not _ops.lab8_runs_on(torch.device("cpu"))
    assert course_attn.forward_kernel(q_of(torch.bfloat16, 128, 64)) == "lab5"


def test_attention_forward_kernel_where_lab8_runs(monkeypatch):
    monkeypatch.setattr(_autograd, "lab8_runs_on", lambda device: True)
    assert course_attn.forward_kernel(q_of(torch.bfloat16, 128, 64)) == "lab8"
    assert course_attn.forward_kernel(q_of(torch.float16, 128, 128)) == "lab8"
    assert course_attn.forward_kernel(q_of(torch.float32, 128, 64)) == "lab4"


def test_names_come_from_the_list():
    # include/course/gpu_labs.def, as C++ reads it too (grader.gpu_labs_list decodes these ints).
    labs = gpu_labs.load()
    assert course_attn.VERSIONS["lab5"] == {name: i for i, name in enumerate(labs.lab5_versions)}
    assert course_attn.VERSIONS["lab8"] == {name: i for i, name in enumerate(labs.lab8_versions)}
    assert course_attn.BACKWARD_KERNELS == {"auto": 0, "cuda_cores": 1, "tensor_cores": 2}
    assert labs.lab5_best in labs.lab5_versions and labs.lab8_best in labs.lab8_versions


def test_version_names_are_checked():
    assert _ops.version_int("lab5", None) == gpu_labs.DEFAULT_CHOICE
    assert _ops.version_int("lab8", "pingpong") == gpu_labs.load().lab8_versions.index("pingpong")
    with pytest.raises(ValueError, match="has no versions"):
        _ops.version_int("lab4", "swizzle")
    with pytest.raises(ValueError, match="lab5 has no version 'pingpong'"):
        _ops.version_int("lab5", "pingpong")
    q = q_of(torch.bfloat16, 4, 64)
    with pytest.raises(ValueError, match="explicit kernel"):
        course_attn.forward(q, q, q, version="swizzle")


def test_hopper_labs_are_compiled_apart_for_sm90a(monkeypatch):
    """Labs 8 and 9 (wgmma, TMA) are compiled apart, for sm_90a, and only where the architectures
    include 90; elsewhere asking for them is a clear error, not a failed launch."""
    monkeypatch.delenv("COURSE_ATTN_CUDA_ARCH", raising=False)
    assert not any(f.startswith(("lab8_hopper/", "lab9_hopper_backward/")) for f in _extension.LAB_SOURCES)
    assert [lab.number for lab in _extension.separate_labs()] == [8, 9]
    assert _extension.includes_lab(8) and _extension.includes_lab(9)
    labs = gpu_labs.load()
    assert _extension.separate_source_files("solutions", labs.lab(8))[0].endswith(
        "solutions/lab8_hopper/flash_h100.cu")
    assert _extension.separate_source_files("solutions", labs.lab(9))[0].endswith(
        "solutions/lab9_hopper_backward/backward_hopper.cu")
    monkeypatch.setenv("COURSE_ATTN_CUDA_ARCH", "80;89")  # an A100 and an RTX 4090: no lab 8 or 9
    assert _extension.separate_labs() == [] and not _extension.includes_lab(8) and not _extension.includes_lab(9)
    q = q_of(torch.bfloat16, 4, 64)
    with pytest.raises(RuntimeError, match="lab 8 was not compiled"):
        course_attn.forward(q, q, q, kernel="lab8")
    with pytest.raises(RuntimeError, match="lab 9 was not compiled"):
        course_attn.backward(q, q, q, q, q, q[..., 0].float(), lab=9)
    assert _extension.includes_lab(5)
