#!/usr/bin/env bash
# ./course grade-all --slurm against a real Slurm: a one-node cluster on this machine
# (grader/tests/slurm/slurm-local; skipped, exit 77, where it cannot be installed or started as
# root). Four submissions of labs 1 and 2 are graded twice, on this machine (--jobs 2) and as a
# job array of two tasks of two submissions plus the job that writes the gradebook; the two
# gradebooks must be byte-identical, and every task's log must say what it graded.
#
# Usage: test_grade_all_slurm.sh REPO_ROOT BUILD_DIR
set -uo pipefail
root=$1 build=$2
slurm="$root/grader/tests/slurm/slurm-local"
fail() { echo "FAILED: $*"; exit 1; }
"$slurm" install || exit $?                      # 77: no Slurm here, and it cannot be installed
cluster=$(mktemp -d /tmp/slurm.XXXXXX)           # short: Slurm's socket paths are
work=$(mktemp -d)
trap '"$slurm" stop "$cluster" > /dev/null 2>&1; rm -rf "$cluster" "$work"' EXIT
"$slurm" start "$cluster" > /dev/null || fail "the test cluster did not start"
. "$cluster/env"
export COURSE_BUILD_DIR=$build COURSE_NO_CUDA=1 COURSE_BUILD_TIMEOUT=60 COURSE_CALL_TIMEOUT=5

subs="$work/submissions"
mkdir -p "$subs/alice" "$subs/o'brien \$x; y" "$subs/partial"
cp -r "$root/solutions/lab1_softmax" "$root/solutions/lab2_combine" "$subs/alice/"
cp -r "$root/labs/lab1_softmax" "$root/labs/lab2_combine" "$subs/o'brien \$x; y/"
cp -r "$root/solutions/lab1_softmax" "$subs/partial/"
echo "not a submission" > "$subs/stray-file"

"$root/course" grade-all "$subs" --out "$work/local" --lab 1,2 --jobs 2 --timeout 10 || true
echo "== the same as a Slurm job array"
"$root/course" grade-all "$subs" --out "$work/slurm" --lab 1,2 --timeout 10 --slurm --chunk 2 --wait
status=$?
for log in "$work/slurm/.grade-all/slurm/"*.log; do echo "-- $log"; cat "$log"; done
[ "$status" = 1 ] || fail "grade-all --slurm exited $status, not 1 (one submission is a stray file)"
[ -f "$work/slurm/gradebook.csv" ] || fail "the Slurm run wrote no gradebook"
cmp "$work/local/gradebook.csv" "$work/slurm/gradebook.csv" ||
  { diff "$work/local/gradebook.csv" "$work/slurm/gradebook.csv"; fail "the Slurm run's gradebook differs from the local one"; }
grep -q '^alice,21,25,46,46,yes,' "$work/slurm/gradebook.csv" || fail "alice's row is not 21,25 of 46"
[ "$(cat "$work/slurm/.grade-all/slurm/"task-*.log | grep -c '^\[course\] ')" -ge 4 ] ||
  fail "the tasks' logs do not name the four submissions"
echo "grade-all --slurm: the job array's gradebook is the local one"
