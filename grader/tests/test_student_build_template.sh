#!/usr/bin/env bash
# A student build's folder starts from a copy of the compiler detection of a template configured
# once from the repository's own labs/ (./course, seed_student_build), and must end up configured
# exactly as a folder configured from nothing:
#   1. a folder seeded from the template is configured without detecting the compilers again
#      (its configure log names no "compiler identification");
#   2. its CMakeCache.txt and build.ninja are those of a folder configured from nothing
#      (COURSE_STUDENT_BUILD_TEMPLATE=0) and then again, once each folder's path is written the same way;
#   3. a template that no longer configures (here: CMake refuses it) costs nothing but time: the folder is configured again from nothing, and the lab still builds.
# Check 1 also holds the repository's labs/ to configuring as a student build with CUDA on where
# nvcc is (CI's other student builds have no GPU and leave CUDA off): the template is made that
# way, and a failure prints its configure log.
# The test keys its own templates (a folder of its own at the front of PATH), so the ones the rest of
# the suite shares are never touched.
#
# Usage: test_student_build_template.sh REPO_ROOT BUILD_DIR [--course FILE | --planted-unrewritten]
#   --course FILE: the same test of another copy of ./course.
#   --planted-unrewritten: of a copy of ./course whose seeded cache keeps the folder the template was
#   made in (CMake refuses it, so every seeded configure falls back to detecting the compilers):
#   check 1 must fail (CI runs it).
set -uo pipefail
root=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
source "$(dirname "$0")/course_copy.sh"
# CUDA on where a CUDA compiler is: its detection is most of what the template spares (7 s of CPU
# against 0.3 s for C++ alone).
# (COURSE_NO_CUDA=1 from the caller keeps it off: the planted run needs no CUDA to fail.)
if [ -z "${COURSE_NO_CUDA:-}" ]; then
  COURSE_NO_CUDA=1
  command -v nvcc > /dev/null && COURSE_NO_CUDA=0
fi
export COURSE_BUILD_DIR=$build COURSE_BUILD_TIMEOUT=180 COURSE_NO_CUDA
unset COURSE_STUDENT_BUILD_TEMPLATE
course=$root/course
if [ "${3:-}" = --course ]; then
  [ -f "${4:-}" ] || fail "--course needs a copy of ./course"
  course=$work/course
  course_copy "$4" "$root" "$course"
fi
if [ "${3:-}" = --planted-unrewritten ]; then
  cp "$root/course" "$work/course.planted"
  python3 - "$work/course.planted" <<'PY' || fail "--planted-unrewritten: the rewrite of the cache's folder no longer occurs in ./course"
import sys
p = sys.argv[1]; t = open(p).read(); a = '-v new="$sb"'
if a not in t: sys.exit(1)
open(p, "w").write(t.replace(a, '-v new="$from"', 1))
PY
  "$0" "$root" "$build" --course "$work/course.planted"; exit $?
fi
[ -f "$build/graders.tsv" ] || fail "$build is not configured (no graders.tsv)"

# This test's own template key: an empty folder of its own on PATH.
mkdir -p "$work/bin" "$work/tree"
export PATH="$work/bin:$PATH"
cp -R "$root/labs/lab1_softmax" "$work/tree/"
cp "$root/solutions/lab1_softmax/softmax.cpp" "$work/tree/lab1_softmax/"

detects() { grep -q "compiler identification" "$1/configure.log"; }
# A folder's cache and build file, with its own path written as BUILD (and the template's, which
# a seeded cache no longer holds, would show).
normalised() {  # $1 = folder, $2 = file
  sed "s|$1|BUILD|g" "$1/$2" | grep -v '^#'
}

"$course" _student-build "$work/tree" "$work/seeded" 1 || fail "the seeded student build could not be configured"
if detects "$work/seeded"; then
  # A template whose configure of the repository's labs/ failed during this test left its log.
  find "$build/student-build-templates" -maxdepth 1 -name '*.failed.log' -newer "$work" 2>/dev/null |
    while read -r log; do
      echo "the template's configure of the repository's labs/ failed ($log):"; grep -m3 -A3 "Error" "$log"
    done
  fail "1: the folder seeded from the template detected its compilers again (its configure.log)"
fi
echo "ok: a seeded folder is configured without detecting the compilers"

COURSE_STUDENT_BUILD_TEMPLATE=0 "$course" _student-build "$work/tree" "$work/fresh" 1 ||
  fail "the student build could not be configured from nothing"
detects "$work/fresh" || fail "2: the folder configured from nothing did not detect its compilers (is COURSE_STUDENT_BUILD_TEMPLATE=0 ignored?)"
# CMake writes a folder's first build.ninja with a few lines (TARGET_PDB, for MSVC's debug files)
# that it writes differently on every later configure, when the compilers are known: the seeded
# folder is compared with the fresh one configured again, as CMake leaves a folder it has
# configured before (as ./course grade leaves labs/'s).
cmake -S "$root" -B "$work/fresh" > "$work/fresh/configure-again.log" 2>&1 ||
  fail "the folder configured from nothing could not be configured again"
for f in CMakeCache.txt build.ninja; do
  if ! diff <(normalised "$work/seeded" "$f") <(normalised "$work/fresh" "$f") > "$work/$f.diff"; then
    head -20 "$work/$f.diff"
    fail "2: the seeded folder's $f differs from the one configured from nothing"
  fi
done
echo "ok: the seeded folder's CMakeCache.txt and build.ninja are those of a folder configured from nothing"

# 3: a template that CMake refuses (its cache names the folder it was made in, as if the copy had
# not been rewritten: "CMakeCache.txt directory ... is different").
template=$(for t in "$build"/student-build-templates/*/; do
  grep -qF "$work/bin" "$t/made-for" 2>/dev/null && echo "${t%/}"; done | sed -n 1p)
[ -n "$template" ] || fail "3: no template names this test's PATH"
echo /nowhere > "$template/configured-in"
"$course" _student-build "$work/tree" "$work/fallback" 1 1 || fail "3: the student build failed"
detects "$work/fallback" || fail "3: the folder was not configured again from nothing after the template failed"
[ -x "$work/fallback/workers/lab1_worker" ] ||
  fail "3: lab 1 was not built after the fallback: $(cat "$work/fallback/workers/lab1.build-failed" 2>/dev/null)"
echo "ok: a template that no longer configures is replaced by a configure from nothing, and the lab builds"
rm -rf "$template"
echo "PASSED"
