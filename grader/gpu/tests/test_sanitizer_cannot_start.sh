#!/usr/bin/env bash
# A compute-sanitizer that cannot start the lab's program checked nothing: lab 6's race check
# must then be skipped, saying so, neither passed (nothing was shown clean) nor failed as if the
# tool had found something in the student's kernels. Needs a GPU: skipped (77) without one.
# usage: test_sanitizer_cannot_start.sh COURSE_RUNNER GRADE_LAB6 LAB6_WORKER FAKE_SANITIZER
set -uo pipefail
runner=$1 grader=$2 worker=$3 fake=$4
check="races: compute-sanitizer finds no race, barrier misuse or bad access"
out=$(COURSE_COMPUTE_SANITIZER=$fake "$runner" expect --binary "$grader" --worker "$worker" --seeds 1-1 \
        --only "fp32: small shapes match the fp64 reference,races:*" --fail "$check" 2>&1)
rc=$?
echo "$out"
if grep -q "^every check was skipped" <<<"$out"; then exit 77; fi
if [ "$rc" != 77 ] || ! grep -q "^  skip    $check" <<<"$out"; then
  echo "FAIL: the race check should be skipped when compute-sanitizer cannot start the program (exit $rc)"
  exit 1
fi
if ! grep -q "could not start your lab's program on this machine" <<<"$out"; then
  echo "FAIL: the skipped check does not say that the tool could not start the program"
  exit 1
fi
echo "ok: skipped, saying that compute-sanitizer could not start the program"
