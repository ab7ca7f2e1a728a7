"""Shared by the bridge's tests: what this machine lacks (tests skip, saying what), seeded inputs.

Markers (every test module that needs more than PyTorch on the CPU sets one):
    gpu        needs a CUDA GPU, PyTorch with CUDA and nvcc (the kernels are compiled on first use)
    lab8       needs what gpu needs, on a GPU of compute capability 9.0 (H100, H200), and an
               extension built with lab 8 (COURSE_ATTN_CUDA_ARCH includes 90, as by default)
    not_lab8   needs a GPU that lab 8 cannot run on (the error lab 8 gives there)
    extension  needs the compiled extension but no GPU (argument checks on CPU tensors)
A test module also skips as a whole where PyTorch is missing (pytest.importorskip).

With COURSE_ATTN_SOURCES=labs (./course bridge --labs), a test that reaches a lab function you
have not written yet is reported as skipped, naming it; with the solutions it fails.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The course_attn package lives in python/, beside this folder.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

try:
    import torch
except ImportError:  # each test module skips itself with pytest.importorskip
    torch = None


def missing_for_extension() -> str | None:
    """Why the extension cannot be built here, or None."""
    if torch is None:
        return "PyTorch is not installed"
    if torch.version.cuda is None:
        return "this PyTorch was built without CUDA"
    from torch.utils.cpp_extension import CUDA_HOME, is_ninja_available

    if CUDA_HOME is None or not (Path(CUDA_HOME) / "bin" / "nvcc").exists():
        return "no CUDA toolkit (nvcc) found: set CUDA_HOME"
    if not is_ninja_available():
        return "ninja is not installed (pip install ninja): torch.utils.cpp_extension compiles with it"
    return None


def missing_for_gpu() -> str | None:
    """Why the kernels cannot run here, or None."""
    return missing_for_extension() or (None if torch.cuda.is_available() else "no CUDA GPU visible to PyTorch")


def missing_for_lab8() -> str | None:
    """Why lab 8 cannot run here, or None."""
    missing = missing_for_gpu()
    if missing:
        return missing
    from course_attn import _extension, _ops

    if not _extension.includes_lab(8):
        return "the extension is built without lab 8 (COURSE_ATTN_CUDA_ARCH does not include 90)"
    if torch.cuda.get_device_capability() != _ops.LAB8_CAPABILITY:
        major, minor = torch.cuda.get_device_capability()
        return f"lab 8 needs a GPU of compute capability 9.0 (H100, H200); this one is sm_{major}{minor}"
    return None


def missing_for_not_lab8() -> str | None:
    """Why the error of lab 8 on another GPU cannot be seen here, or None."""
    missing = missing_for_gpu()
    if missing:
        return missing
    from course_attn import _ops

    if torch.cuda.get_device_capability() == _ops.LAB8_CAPABILITY:
        return "this GPU runs lab 8 (compute capability 9.0)"
    return None


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU, PyTorch with CUDA and nvcc")
    config.addinivalue_line("markers", "lab8: needs an sm_90 GPU (H100, H200) and the extension built with lab 8")
    config.addinivalue_line("markers", "not_lab8: needs a GPU other than sm_90")
    config.addinivalue_line("markers", "extension: needs the compiled extension (PyTorch with CUDA, nvcc), no GPU")
    if torch is not None:
        # fp32 yardsticks must be fp32: no TF32 in PyTorch's matrix products (the default, made sure).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def pytest_collection_modifyitems(config, items):
    reasons = {"gpu": missing_for_gpu(), "lab8": missing_for_lab8(), "not_lab8": missing_for_not_lab8(),
               "extension": missing_for_extension()}
    for item in items:
        for marker, reason in reasons.items():
            if reason and marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))
                break


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With your labs, a function not written yet is a skip that names it, not a failure."""
    outcome = yield
    report = outcome.get_result()
    # course::NotImplemented's message starts "not implemented: "; any other NotImplementedError
    # (PyTorch's own, say) is a real failure.
    if (call.excinfo is not None and call.excinfo.errisinstance(NotImplementedError)
            and str(call.excinfo.value).startswith("not implemented: ")
            and os.environ.get("COURSE_ATTN_SOURCES") == "labs"):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1], f"not written yet: {call.excinfo.value}")


@pytest.fixture(scope="session")
def ext():
    """The compiled extension (built once per pytest run, or loaded from its cache)."""
    import course_attn

    return course_attn.build()

