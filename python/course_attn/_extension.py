"""Compiling the course's kernels into a PyTorch extension, on first use.

The extension is built just in time with torch.utils.cpp_extension.load: nvcc and the host
compiler run through ninja, with no pip, no setup.py and no package registry, so it works on a
machine that has PyTorch and the CUDA toolkit and nothing else. The build is cached: the first
call compiles (about 30 s on 2 cores; lab 5's 28 kernel instantiations are most of it), later
calls, in any process, only load the library unless a source file changed (ninja tracks the
headers too).

Which sources (COURSE_ATTN_SOURCES):
    solutions  (default) the instructors' solutions/, as graded
    labs       your labs/: your own kernels from PyTorch (a function you have not written yet
               raises NotImplementedError naming it)

Where (COURSE_ATTN_BUILD_DIR): the cache goes to $COURSE_ATTN_BUILD_DIR/<sources>, by default
build/torch-ext/<sources> in the repository ($COURSE_BUILD_DIR/torch-ext if that is set, as for
./course), never to torch's own ~/.cache/torch_extensions.

The flags mirror the CMake build of the same files (CMakeLists.txt, cmake/CourseLab.cmake):
C++20 for host and device code, -O3, -lineinfo, no --use_fast_math, code for sm_90 plus its PTX
(COURSE_ATTN_CUDA_ARCH=80;90 for other GPUs, as -DCMAKE_CUDA_ARCHITECTURES does), and include/
on the include path. Two of torch's defaults are undone, because the labs' kernels are written
without them: the -D__CUDA_NO_HALF..._CONVERSIONS__ macros (they remove the float <-> bf16/fp16
conversions of cuda_bf16.h and cuda_fp16.h) and C++17.
"""
from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BINDINGS = Path(__file__).resolve().parent / "csrc" / "bindings.cpp"

# The compiled files of each GPU lab (lab 5's headers sit beside its .cu and are found there).
LAB_SOURCES = (
    "lab4_cuda/flash_forward.cu",
    "lab5_tensor_core/flash_tc.cu",
    "lab6_decoding/split_kv.cu",
    "lab7_backward/backward.cu",
    "lab7_backward/backward_tc.cu",
)

SOURCE_CHOICES = ("solutions", "labs")

# torch adds these to every nvcc command; -U after them undefines them again.
UNDO_TORCH_NVCC_DEFAULTS = [
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
]

_lock = threading.Lock()
_module = None


def sources() -> str:
    """'solutions' or 'labs': the tree the kernels are compiled from (COURSE_ATTN_SOURCES)."""
    which = os.environ.get("COURSE_ATTN_SOURCES", "solutions").strip() or "solutions"
    if which not in SOURCE_CHOICES:
        raise ValueError(f"COURSE_ATTN_SOURCES must be 'solutions' or 'labs', not {which!r}")
    return which


def build_directory(which: str | None = None) -> Path:
    """The folder the extension of `which` (default: sources()) is compiled and cached in."""
    root = os.environ.get("COURSE_ATTN_BUILD_DIR")
    if not root:
        root = str(Path(os.environ.get("COURSE_BUILD_DIR") or REPO / "build") / "torch-ext")
    return Path(root) / (which or sources())


def cuda_arch_flags() -> list[str]:
    """-gencode flags: real code for each listed architecture and PTX for the newest one."""
    archs = [a.strip() for a in os.environ.get("COURSE_ATTN_CUDA_ARCH", "90").replace(",", ";").split(";")]
    archs = [a for a in archs if a]
    if not archs or not all(a.isdigit() for a in archs):
        raise ValueError("COURSE_ATTN_CUDA_ARCH lists compute capabilities such as 90 or 80;90, not "
                         f"{os.environ.get('COURSE_ATTN_CUDA_ARCH')!r}")
    flags = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    newest = max(archs, key=int)
    return flags + [f"-gencode=arch=compute_{newest},code=compute_{newest}"]


def source_files(which: str) -> list[str]:
    tree = REPO / which
    files = [tree / f for f in LAB_SOURCES]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"course_attn: missing source files: {', '.join(missing)}")
    return [str(BINDINGS)] + [str(f) for f in files]


def _check_toolchain(torch) -> None:
    from torch.utils.cpp_extension import CUDA_HOME

    if torch.version.cuda is None:
        raise RuntimeError("course_attn: this PyTorch was built without CUDA, so it cannot run the "
                           "course's kernels (install a CUDA build of PyTorch)")
    if CUDA_HOME is None or not (Path(CUDA_HOME) / "bin" / "nvcc").exists():
        raise RuntimeError("course_attn: the kernels are compiled on first use and need the CUDA "
                           "toolkit's nvcc, which PyTorch did not find: set CUDA_HOME (e.g. /usr/local/cuda)")


def _load(verbose: bool):
    import torch
    from torch.utils import cpp_extension

    _check_toolchain(torch)
    which = sources()
    directory = build_directory(which)
    directory.mkdir(parents=True, exist_ok=True)
    print(f"[course_attn] the kernels of {which}/: compiling or loading them from {directory}", flush=True)
    common = ["-O3", "-DNDEBUG", "-std=c++20"]
    with _build_lock(directory):
        return cpp_extension.load(
            # One module name per tree: both can then be loaded, by separate processes, side by side.
            name=f"course_attn_{which}",
            sources=source_files(which),
            extra_include_paths=[str(REPO / "include")],
            extra_cflags=common,
            extra_cuda_cflags=common + ["-lineinfo"] + UNDO_TORCH_NVCC_DEFAULTS + cuda_arch_flags(),
            build_directory=str(directory),
            verbose=verbose,
        )


class _build_lock:
    """One build of a folder at a time, by a lock that dies with its process.

    torch's own lock is a plain file, `lock`, that a killed build (Ctrl-C, a ctest time limit)
    leaves behind, and every later load then waits for it forever. Every build of this folder
    takes this flock first, so a `lock` file found while holding it is such a leftover."""

    def __init__(self, directory: Path):
        self.directory = directory

    def __enter__(self):
        self.file = open(self.directory / "course_attn.flock", "w")
        fcntl.flock(self.file, fcntl.LOCK_EX)  # waits while another process builds here
        leftover = self.directory / "lock"
        if leftover.exists():
            print(f"[course_attn] removing {leftover}, left by a build that was stopped", flush=True)
            leftover.unlink()
        return self

    def __exit__(self, *exc):
        self.file.close()  # releases the flock


def extension(verbose: bool = False):
    """The compiled extension module: built (or loaded from the cache) on the first call."""
    global _module
    with _lock:
        if _module is None:
            _module = _load(verbose)
        return _module


def build(verbose: bool = False):
    """Compiles the extension now (verbose: print each compiler command) and returns it."""
    return extension(verbose)
