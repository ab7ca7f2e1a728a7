"""The GPU labs' list, include/course/gpu_labs.def, as Python reads it.

That file is the one place that lists each GPU lab's folder and compiled files and the names of
the kernels a caller chooses between (lab 5's and lab 8's staircase steps, lab 7's backward
kernels); C++ includes it as an X-macro list (course/gpu_labs.hpp), and this module reads the
same lines as text: `MACRO(arg, "string arg", ...)`, one entry per line.

Plain Python (no torch), so that tools and benchmarks use it too: they put python/course_attn on
sys.path and `import gpu_labs` (tools/check-resource-usage, bench/plot_bench.py,
bench/fit_fixed_cost.py); the bridge imports it as course_attn.gpu_labs.

    python3 python/course_attn/gpu_labs.py [--def FILE]

prints the ints the bridge passes to C++ for each name it takes ("lab5 swizzle 2", ...), which
grader/gpu/tests/test_gpu_labs.cpp decodes with course/gpu_labs.hpp and checks against the list.
"""
from __future__ import annotations

import argparse
import functools
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEF_FILE = REPO / "include" / "course" / "gpu_labs.def"

# The int that stands for "the lab's default" (best, automatic), as in course/gpu_labs.hpp.
DEFAULT_CHOICE = -1

_ENTRY = re.compile(r"^(COURSE_[A-Z0-9_]+)\((.*)\)\s*$")


@dataclass(frozen=True)
class Lab:
    number: int
    folder: str   # under labs/ and solutions/
    arch: str     # "" (the build's architectures) or the one it is compiled for, e.g. "90a"


@dataclass(frozen=True)
class Source:
    lab: int
    file: str     # in the lab's folder
    key: str      # its name in tools/check-resource-usage and grader/gpu/resource_ceilings.tsv


@dataclass(frozen=True)
class GpuLabs:
    labs: tuple[Lab, ...]
    sources: tuple[Source, ...]
    lab5_versions: tuple[str, ...]   # course::lab5::Version, in enum order
    lab5_best: str
    lab8_versions: tuple[str, ...]   # course::lab8::Version, in enum order
    lab8_best: str
    lab7_kernels: tuple[str, ...]    # course::lab7::BackwardKernel, in enum order (C++ names)
    lab7_python_names: tuple[str, ...]  # the same, as course_attn.backward(kernel=...) takes them

    def lab(self, number: int) -> Lab:
        return next(lab for lab in self.labs if lab.number == number)

    def source_paths(self, tree: str = "solutions") -> dict[str, str]:
        """{key: "<tree>/<folder>/<file>"} of every compiled file, in list order."""
        return {s.key: f"{tree}/{self.lab(s.lab).folder}/{s.file}" for s in self.sources}

    def choices(self, lab: str) -> dict[str, int]:
        """{name: int} of a lab's choices ("lab5", "lab8": versions; "lab7": backward kernels):
        the names a Python caller gives, the ints the bindings decode (course/gpu_labs.hpp)."""
        names = {"lab5": self.lab5_versions, "lab8": self.lab8_versions, "lab7": self.lab7_python_names}[lab]
        return {name: i for i, name in enumerate(names)}


def _arguments(text: str) -> list:
    """"4, \"lab4_cuda\", \"\"" -> [4, "lab4_cuda", ""]."""
    out = []
    for arg in (a.strip() for a in text.split(",")):
        if len(arg) >= 2 and arg[0] == arg[-1] == '"':
            out.append(arg[1:-1])
        elif arg.isdigit():
            out.append(int(arg))
        else:
            out.append(arg)
    return out


def entries(text: str) -> list[tuple[str, list]]:
    """[(macro, arguments)] of the list's entries, in order. A line inside a C++ #define (the
    file's own defaults) or a comment is not an entry."""
    found = []
    for line in text.splitlines():
        m = _ENTRY.match(line.strip())
        if m:
            found.append((m.group(1), _arguments(m.group(2))))
    return found


def parse(text: str) -> GpuLabs:
    """The list from the text of a gpu_labs.def; ValueError for an entry it does not know."""
    by_macro: dict[str, list[list]] = {}
    for macro, args in entries(text):
        by_macro.setdefault(macro, []).append(args)
    known = {"COURSE_GPU_LAB", "COURSE_GPU_SOURCE", "COURSE_LAB5_VERSION", "COURSE_LAB5_BEST",
             "COURSE_LAB8_VERSION", "COURSE_LAB8_BEST", "COURSE_LAB7_KERNEL"}
    unknown = set(by_macro) - known
    if unknown:
        raise ValueError(f"gpu_labs.def: unknown entries {sorted(unknown)}")

    def one(macro: str) -> str:
        rows = by_macro.get(macro, [])
        if len(rows) != 1:
            raise ValueError(f"gpu_labs.def: {macro} must appear exactly once, not {len(rows)} times")
        return rows[0][0]

    get = by_macro.get
    return GpuLabs(
        labs=tuple(Lab(*row) for row in get("COURSE_GPU_LAB", [])),
        sources=tuple(Source(*row) for row in get("COURSE_GPU_SOURCE", [])),
        lab5_versions=tuple(row[0] for row in get("COURSE_LAB5_VERSION", [])),
        lab5_best=one("COURSE_LAB5_BEST"),
        lab8_versions=tuple(row[0] for row in get("COURSE_LAB8_VERSION", [])),
        lab8_best=one("COURSE_LAB8_BEST"),
        lab7_kernels=tuple(row[0] for row in get("COURSE_LAB7_KERNEL", [])),
        lab7_python_names=tuple(row[1] for row in get("COURSE_LAB7_KERNEL", [])),
    )


@functools.lru_cache(maxsize=None)
def load(path: str | None = None) -> GpuLabs:
    """The list in include/course/gpu_labs.def (or `path`), read once."""
    return parse(Path(path or DEF_FILE).read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description="The bridge's names and ints of the GPU labs' choices.")
    ap.add_argument("--def", dest="def_file", default=str(DEF_FILE))
    labs = load(ap.parse_args().def_file)
    for lab in ("lab5", "lab8", "lab7"):
        for name, value in labs.choices(lab).items():
            print(lab, name, value)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
