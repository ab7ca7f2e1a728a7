#!/usr/bin/env bash
# ./course grade on a machine without an NVIDIA GPU compiles none of the student's GPU code (it
# could only be skipped) and shows the GPU lab as skipped, saying why, never as failed: lab 4's
# solution graded as a submission (--labs-dir), its build folder kept and searched for a compiled
# .cu file.
#
# Usage: test_grade_without_gpu.sh REPO_ROOT BUILD_DIR [--compile-gpu-code]
#   --compile-gpu-code: the same with COURSE_NO_CUDA=0 (the student build compiles the GPU code
#   anyway, where nvcc is): the test must then fail, on the compiled .cu file.
# Exit 77 (skipped) where a GPU is present or lab 4 was not configured (no CUDA compiler).
set -uo pipefail
root=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
  echo "SKIPPED: this machine has an NVIDIA GPU"; exit 77
fi
# (graders.tsv holds a line for lab 4 either way: without a CUDA compiler it says "not built".)
awk -F'\t' '$1 == 4 && $0 !~ /not built/ { found = 1 } END { exit !found }' "$build/graders.tsv" 2>/dev/null ||
  { echo "SKIPPED: lab 4 is not configured here (no CUDA compiler)"; exit 77; }
export COURSE_BUILD_DIR=$build COURSE_SUBMISSION_BUILDS=$work/builds COURSE_BUILD_TIMEOUT=180
unset COURSE_NO_CUDA
[ "${3:-}" = --compile-gpu-code ] && export COURSE_NO_CUDA=0
mkdir -p "$work/submission"
cp -r "$root/solutions/lab4_cuda" "$work/submission/"
"$root/course" grade --labs-dir "$work/submission" --lab 4 --keep-builds --out "$work/out" > "$work/board.txt" 2>&1
cat "$work/board.txt"
compiled=$(find "$work/builds" -name '*.cu.o' 2>/dev/null | sed -n 1,3p)
[ -z "$compiled" ] || fail "GPU code was compiled on a machine without a GPU: $compiled"
grep -Eq '^4 +lab4_cuda +skip/[0-9]+ ' "$work/board.txt" || fail "lab 4 is not shown as skipped"
grep -q 'no NVIDIA GPU here' "$work/board.txt" || fail "./course grade did not say that there is no GPU"
! grep -Eq '^ +fail ' "$work/board.txt" || fail "a check of lab 4 failed instead of being skipped"
echo "lab 4 skipped, no GPU code compiled"
