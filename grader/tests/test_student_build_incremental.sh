#!/usr/bin/env bash
# The student build of labs/ (./course grade) compiles again what changed in content, and only
# that, never trusting time stamps. Lab 7's folder (one C++ source, two CUDA sources, the header
# that both CUDA sources include, its README) is built, then edited, every edited file's time stamp
# set back to 2000, so that a build that trusted time stamps would compile nothing again:
#   - backward.cpp changed: backward.cpp is compiled again, backward.cu and backward_tc.cu are not;
#   - README.md and a note whose name holds spaces and brackets changed: nothing is compiled;
#   - backward_gpu.cuh (a header) changed: all three are compiled again.
# The files are small stand-ins with lab 7's names and includes (the .cu files include the header,
# the .cpp does not), so that the nvcc compiles take seconds instead of the skeleton's minute
# (about 38 s on two cores); which objects are compiled depends on the files' names, includes and
# contents, not on the code in them. Without a CUDA compiler lab 7 compiles backward.cpp alone, and
# the checks of the .cu files are left out (the documents' check still fails a build that
# compiles the whole lab on any change).
#
# Usage: test_student_build_incremental.sh REPO_ROOT BUILD_DIR [--course FILE]
#   --course FILE: the same test of another copy of ./course, run on this repository (an earlier
#   version's, say: git show COMMIT:course > FILE), to see the test fail on a student build that
#   compiles the whole lab whenever a file of it changes.
set -uo pipefail
root=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
source "$(dirname "$0")/course_copy.sh"
export COURSE_BUILD_DIR=$build COURSE_BUILD_TIMEOUT=180
unset COURSE_NO_CUDA
course=$root/course
if [ "${3:-}" = --course ]; then
  [ -f "${4:-}" ] || fail "--course needs a copy of ./course"
  course=$work/course
  course_copy "$4" "$root" "$course"
fi
[ -f "$build/graders.tsv" ] || fail "$build is not configured (no graders.tsv)"

lab=$work/tree/lab7_backward
note="notes [draft] v2.md"
mkdir -p "$lab"
cat > "$lab/backward_gpu.cuh" <<'EOF'
// A stand-in for lab 7's backward_gpu.cuh (grader/tests/test_student_build_incremental.sh).
#pragma once
inline constexpr int kStandIn = 1;
EOF
cat > "$lab/backward.cpp" <<'EOF'
// A stand-in for lab 7's backward.cpp: it does not include backward_gpu.cuh, as the lab's does not.
int lab7_stand_in_cpp() { return 1; }
EOF
for f in backward backward_tc; do
  printf '// A stand-in for lab 7'\''s %s.cu.\n#include "backward_gpu.cuh"\nint lab7_stand_in_%s() { return kStandIn; }\n' "$f" "$f" > "$lab/$f.cu"
done
echo "# Lab 7 (a stand-in)" > "$lab/README.md"
echo "my notes" > "$lab/$note"
touch -d '2000-01-01 00:00:00' "$lab"/*

step=0
build_lab7() {  # $1 = 1 for a fresh build folder: the build's log in $work/stepN.log
  step=$((step + 1))
  "$course" _student-build "$work/tree" "$work/sb" "$1" 7 > "$work/step$step.out" 2>&1 ||
    { cat "$work/step$step.out"; fail "the student build stopped (step $step)"; }
  [ -f "$work/sb/lab7.build.log" ] || { cat "$work/step$step.out"; fail "the build wrote no log (step $step)"; }
  cp "$work/sb/lab7.build.log" "$work/step$step.log"
  echo "--- step $step: $2"
  grep -E '^\[[0-9]+/[0-9]+\] |^ninja: ' "$work/step$step.log"
  ! grep -q '^FAILED: ' "$work/step$step.log" || { cat "$work/step$step.log"; fail "a stand-in did not compile (step $step)"; }
}
compiled() {  # $1 = source: whether this step compiled its object
  grep -qE "Building [A-Z]+ object .*/lab7_worker_impl\\.dir/(.*/)?${1//./\\.}\\.o\$" "$work/step$step.log"
}
edit() {  # $1 = file: a line added, its time stamp set back
  echo "// edited" >> "$lab/$1"
  touch -d '2000-01-01 00:00:00' "$lab/$1"
}

build_lab7 1 "a fresh build"
compiled backward.cpp || fail "the first build did not compile backward.cpp"
cuda=0
if compiled backward.cu; then
  cuda=1
  compiled backward_tc.cu || fail "the first build compiled backward.cu but not backward_tc.cu"
else
  echo "(no CUDA compiler in the student build: lab 7 compiles backward.cpp alone; the .cu checks are left out)"
fi

edit backward.cpp
build_lab7 0 "backward.cpp changed (old time stamp)"
compiled backward.cpp || fail "backward.cpp changed in content, with an old time stamp, and was not compiled again"
if [ $cuda = 1 ]; then
  ! compiled backward.cu || fail "only backward.cpp changed, and backward.cu was compiled again"
  ! compiled backward_tc.cu || fail "only backward.cpp changed, and backward_tc.cu was compiled again"
fi

edit README.md
edit "$note"
build_lab7 0 "README.md and '$note' changed"
for f in backward.cpp backward.cu backward_tc.cu; do
  ! compiled "$f" || fail "only documents changed, and $f was compiled again"
done

edit backward_gpu.cuh
build_lab7 0 "backward_gpu.cuh changed (old time stamp)"
compiled backward.cpp || fail "a header of the lab changed, and backward.cpp was not compiled again"
if [ $cuda = 1 ]; then
  compiled backward.cu || fail "backward_gpu.cuh changed, and backward.cu (which includes it) was not compiled again"
  compiled backward_tc.cu || fail "backward_gpu.cuh changed, and backward_tc.cu (which includes it) was not compiled again"
fi
echo "PASSED: the student build compiles again what changed, and only that$([ $cuda = 1 ] || echo ' (no CUDA compiler: backward.cpp only)')"
