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

The files compiled are the GPU labs' in include/course/gpu_labs.def (read by gpu_labs.py), and
the flags mirror the CMake build of the same files (CMakeLists.txt, cmake/CourseLab.cmake):
C++20 for host and device code, -O3, -lineinfo, no --use_fast_math, code for sm_90 plus its PTX
(COURSE_ATTN_CUDA_ARCH=80;90 for other GPUs, as -DCMAKE_CUDA_ARCHITECTURES does), and include/
on the include path. Two of torch's defaults are undone, because the labs' kernels are written
without them: the -D__CUDA_NO_HALF..._CONVERSIONS__ macros (they remove the float <-> bf16/fp16
conversions of cuda_bf16.h and cuda_fp16.h) and C++17.

A lab that the list gives an architecture of its own (lab 8: "90a", for wgmma and TMA) is
compiled for that architecture only, as CMake builds its objects (CUDA_ARCHITECTURES 90a-real):
into a library of its own (course_attn_lab8_<sources>, beside the extension), which the
extension links. It is built when COURSE_ATTN_CUDA_ARCH includes its family (90 for 90a, as the
default does); for a machine without such a GPU (COURSE_ATTN_CUDA_ARCH=80, 86 or 89) the
extension is built without it, and forward(kernel="lab8") says so.
"""
from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from . import gpu_labs

REPO = Path(__file__).resolve().parents[2]
CSRC = Path(__file__).resolve().parent / "csrc"
BINDINGS = CSRC / "bindings.cpp"


def _lab_sources(arch: str) -> tuple[str, ...]:
    """The compiled files ("<folder>/<file>") of the GPU labs built for `arch` ("" for the
    extension's own architectures), from course/gpu_labs.def; each lab's headers sit beside them."""
    labs = gpu_labs.load()
    return tuple(f"{labs.lab(s.lab).folder}/{s.file}" for s in labs.sources if labs.lab(s.lab).arch == arch)


# The files of labs 4-7, compiled into the extension itself.
LAB_SOURCES = _lab_sources("")

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


def cuda_archs() -> list[str]:
    """The compute capabilities COURSE_ATTN_CUDA_ARCH lists ("90" by default)."""
    archs = [a.strip() for a in os.environ.get("COURSE_ATTN_CUDA_ARCH", "90").replace(",", ";").split(";")]
    archs = [a for a in archs if a]
    if not archs or not all(a.isdigit() for a in archs):
        raise ValueError("COURSE_ATTN_CUDA_ARCH lists compute capabilities such as 90 or 80;90, not "
                         f"{os.environ.get('COURSE_ATTN_CUDA_ARCH')!r}")
    return archs


def cuda_arch_flags() -> list[str]:
    """-gencode flags: real code for each listed architecture and PTX for the newest one."""
    archs = cuda_archs()
    flags = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    newest = max(archs, key=int)
    return flags + [f"-gencode=arch=compute_{newest},code=compute_{newest}"]


def _arch_family(arch: str) -> str:
    """"90a" -> "90": the compute capability an architecture-specific target runs on."""
    return arch.rstrip("abcdefghijklmnopqrstuvwxyz")


def separate_labs() -> list[gpu_labs.Lab]:
    """The labs compiled for an architecture of their own (lab 8: sm_90a) that this build
    includes: those whose family COURSE_ATTN_CUDA_ARCH lists."""
    archs = set(cuda_archs())
    return [lab for lab in gpu_labs.load().labs if lab.arch and _arch_family(lab.arch) in archs]


def includes_lab(number: int) -> bool:
    """Whether the extension built with these settings has lab `number`'s kernels."""
    labs = gpu_labs.load()
    return any(s.lab == number for s in labs.sources) and (
        not labs.lab(number).arch or any(lab.number == number for lab in separate_labs()))


def _existing(files: list[Path]) -> list[str]:
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"course_attn: missing source files: {', '.join(missing)}")
    return [str(f) for f in files]


def source_files(which: str) -> list[str]:
    """The extension's own sources: the bindings and labs 4-7's files of `which`."""
    return [str(BINDINGS)] + _existing([REPO / which / f for f in LAB_SOURCES])


def separate_source_files(which: str, lab: gpu_labs.Lab) -> list[str]:
    """The files of a lab compiled for its own architecture (lab 8), in the tree `which`."""
    return _existing([REPO / which / f for f in _lab_sources(lab.arch) if f.startswith(lab.folder + "/")])


def _check_toolchain(torch) -> None:
    from torch.utils.cpp_extension import CUDA_HOME

    if torch.version.cuda is None:
        raise RuntimeError("course_attn: this PyTorch was built without CUDA, so it cannot run the "
                           "course's kernels (install a CUDA build of PyTorch)")
    if CUDA_HOME is None or not (Path(CUDA_HOME) / "bin" / "nvcc").exists():
        raise RuntimeError("course_attn: the kernels are compiled on first use and need the CUDA "
                           "toolkit's nvcc, which PyTorch did not find: set CUDA_HOME (e.g. /usr/local/cuda)")


COMMON_FLAGS = ["-O3", "-DNDEBUG", "-std=c++20"]


def _load_separate_lab(cpp_extension, which: str, lab: gpu_labs.Lab, directory: Path, verbose: bool) -> Path:
    """Builds (or finds up to date) the library of a lab with an architecture of its own, compiled
    for that architecture only, and returns its path. As -gencode, never -arch=sm_90a: that
    shorthand would also run a plain compute_90 pass, where wgmma does not exist."""
    name = f"course_attn_lab{lab.number}_{which}"
    directory.mkdir(parents=True, exist_ok=True)
    with _build_lock(directory):
        built = cpp_extension.load(
            name=name,
            sources=separate_source_files(which, lab),
            extra_include_paths=[str(REPO / "include")],
            extra_cflags=COMMON_FLAGS,
            extra_cuda_cflags=COMMON_FLAGS + ["-lineinfo"] + UNDO_TORCH_NVCC_DEFAULTS
            + [f"-gencode=arch=compute_{lab.arch},code=sm_{lab.arch}"],
            build_directory=str(directory),
            verbose=verbose,
            is_python_module=False,  # a plain shared library, loaded here, linked by the extension
        )
    # torch returns the library's path (older versions return None: then its usual name).
    library = Path(built) if isinstance(built, str) else directory / f"{name}.so"
    if not library.is_file():
        raise RuntimeError(f"course_attn: building lab {lab.number} did not leave {library}")
    return library


def _load(verbose: bool):
    import torch
    from torch.utils import cpp_extension

    _check_toolchain(torch)
    which = sources()
    directory = build_directory(which)
    directory.mkdir(parents=True, exist_ok=True)
    print(f"[course_attn] the kernels of {which}/: compiling or loading them from {directory}", flush=True)
    libraries, defines = [], []
    for lab in separate_labs():
        libraries.append(str(_load_separate_lab(cpp_extension, which, lab, directory / f"lab{lab.number}", verbose)))
        defines.append(f"-DCOURSE_ATTN_HAVE_LAB{lab.number}=1")  # the bindings then bind its kernel
    with _build_lock(directory):
        return cpp_extension.load(
            # One module name per tree: both can then be loaded, by separate processes, side by side.
            name=f"course_attn_{which}",
            sources=source_files(which),
            extra_include_paths=[str(REPO / "include"), str(CSRC)],
            extra_cflags=COMMON_FLAGS + defines,
            extra_cuda_cflags=COMMON_FLAGS + ["-lineinfo"] + UNDO_TORCH_NVCC_DEFAULTS + cuda_arch_flags(),
            # By absolute path: the extension finds the separate labs' libraries wherever it runs.
            extra_ldflags=libraries,
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
