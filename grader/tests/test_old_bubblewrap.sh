#!/usr/bin/env bash
# A bubblewrap older than 0.8 has no --size, which sizes the sandbox's /tmp and /dev/shm: the
# grader must still run every lab process in bubblewrap's namespaces (with those unsized), not
# fall back to the filter alone. Here a stand-in bubblewrap (COURSE_BWRAP) refuses --size as an
# old one does and otherwise runs the real one, noting each call: lab 1's solution keeps full
# marks, the sized probe was tried and refused, and lab processes ran through it without --size.
# usage: test_old_bubblewrap.sh COURSE_RUNNER GRADE_LAB1 LAB1_WORKER
set -uo pipefail
runner=$1 grader=$2 worker=$3
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/stand_in_bubblewrap.sh"
use_stand_in_bubblewrap --size  # sets dir and calls; skips where bubblewrap is not installed
COURSE_BWRAP=$dir/bwrap "$runner" expect --binary "$grader" --worker "$worker" --full-marks --seeds 1-1 ||
  fail "lab 1's solution lost marks under a bubblewrap without --size"
grep -q '^refused --size' "$calls" || fail "the grader never tried to size the sandbox's /tmp"
ran=$(grep -c '^ran' "$calls")
# the probe, then at least one lab process
[ "$ran" -ge 2 ] || fail "no lab process ran in bubblewrap's namespaces ($ran call(s) without --size): the grader fell back to the filter alone"
echo "ok: $ran runs of bubblewrap without --size after the sized probe was refused"
