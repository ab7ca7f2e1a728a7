#!/usr/bin/env bash
# The runner must contain a grader that crashes, aborts or hangs: that lab loses its points and
# the scoreboard says what happened, every other lab is graded as usual, and parents count. Calls
# killed at their time limit do not count against a lab's (up to that limit again), and what a
# lab's code printed is made harmless to `cat`.
# Usage: test_runner_isolation.sh RUNNER FAKE_GRADER
set -euo pipefail
runner=$1 fake=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for mode in ok crash hang abort skip fail exit killed_calls killed_calls_forever escapes; do
  printf '#!/bin/sh\nFAKE_GRADER_MODE=%s exec %s "$@"\n' "$mode" "$fake" > "$dir/grade_$mode"
  chmod +x "$dir/grade_$mode"
done
# The manifest names each lab's (here: fake) grader; the student's lab processes are in workers/
# (the fake graders never start them), and lab 7's did not build.
mkdir -p "$dir/workers"
n=0
for mode in ok crash hang abort skip fail; do
  n=$((n + 1))
  printf '%d\tfake_%s\tcpu\t%s\t%s\t-\n' "$n" "$mode" "$dir/grade_$mode" "$dir/grade_$mode" >> "$dir/graders.tsv"
  cp "$dir/grade_ok" "$dir/workers/lab${n}_worker"
done
printf '7\tfake_missing\tcpu\t%s\t%s\t-\n' "$dir/grade_ok" "$dir/grade_ok" >> "$dir/graders.tsv"
printf "labs/lab7/x.cpp:3: error: expected ';'\n    3 | int x\n      |      ^\n" > "$dir/workers/lab7.build-failed"
printf '8\tfake_exit\tcpu\t%s\t%s\t-\n' "$dir/grade_exit" "$dir/grade_exit" >> "$dir/graders.tsv"
cp "$dir/grade_ok" "$dir/workers/lab8_worker"

# An earlier run's log of lab 7, which does not build now: it must not stay to be read as this run's.
mkdir -p "$dir/out/lab7" && echo "not implemented: from an earlier run" > "$dir/out/lab7/grader.log"
set +e
"$runner" grade --manifest "$dir/graders.tsv" --workers "$dir/workers" --out "$dir/out" --timeout 3 > "$dir/board.txt" 2>&1
rc=$?
set -e
cat "$dir/board.txt"
fail() { echo "FAILED: $*"; exit 1; }
[ $rc = 1 ] || fail "exit code $rc, expected 1 (points were lost)"
grep -Eq '^1 +fake_ok +11/12 +1 of 5 checks partial|^1 +fake_ok +11/12' "$dir/board.txt" || fail "the good lab lost points"
# (Under AddressSanitizer a segfault is reported by the sanitizer, which then exits.)
grep -Eq '^2 +fake_crash +2/12 +(crashed \(Segmentation fault\)|exited early \(exit code 1\)) during "misbehaving check"' "$dir/board.txt" || fail "crash not reported"
grep -Eq '^3 +fake_hang +2/12 +timed out after 3 s during "misbehaving check"' "$dir/board.txt" || fail "hang not reported"
grep -Eq '^4 +fake_abort +2/12 +crashed \(Aborted\)' "$dir/board.txt" || fail "abort not reported"
grep -Eq '^5 +fake_skip +7/12 .*\(2 skipped\)' "$dir/board.txt" || fail "skip not shown (a skipped parent skips its child)"
grep -Eq '^6 +fake_fail +7/12 ' "$dir/board.txt" || fail "failing check not scored"
# grading::fail_first: a cause recorded after five symptoms is shown, and before them.
grep -A1 'misbehaving check' "$dir/board.txt" | grep -q 'planted cause, fp32, shape \[1\], seed 1, found last: shown first' ||
  fail "a failure recorded with fail_first is not shown first"
grep -q 'parent failed: "misbehaving check"' "$dir/board.txt" || fail "parent failure not reported"
grep -q '1.8x slower than the solution' "$dir/board.txt" || fail "partial credit not explained"
grep -q '"score": 1, "max_score": 2' "$dir/out/results.json" || fail "partial credit missing from results.json"
grep -Eq '^7 +fake_missing +0/12 +build failed: labs/lab7/x.cpp:3: error' "$dir/board.txt" || fail "a lab that did not build is not reported with its points and reason"
# The compiler's error once, with its lines, not under each check; and in results.json's output.
[ "$(grep -c "expected ';'" "$dir/board.txt")" = 1 ] || fail "a build error is not shown exactly once on the scoreboard"
grep -q '^        *3 | int x$' "$dir/board.txt" || fail "a build error's following lines are not shown"
grep -q '\\n\\nlab 7 (fake_missing): build failed: labs/lab7/x.cpp:3: error' "$dir/out/results.json" ||
  fail "results.json's output lacks the build error"
grep -Eq '^8 +fake_exit +2/12 +exited early \(exit code 3\) during "misbehaving check"' "$dir/board.txt" || fail "exit() in lab code not reported"
grep -q '"status": "failed", "tags": \["lab5", "skipped"\]' "$dir/out/results.json" || fail "skipped check missing from results.json"
grep -q '<skipped message="no CUDA device' "$dir/out/junit.xml" || fail "skipped check missing from junit.xml"
python3 -c "import json,sys; json.load(open('$dir/out/results.json'))" 2>/dev/null || fail "results.json is not valid JSON"
python3 -c "import xml.dom.minidom as m; m.parse('$dir/out/junit.xml')" 2>/dev/null || fail "junit.xml is not valid XML"
grep -q "^7	fake_missing	0	12	build failed" "$dir/out/scores.tsv" || fail "scores.tsv lacks the lab that did not build"
[ ! -e "$dir/out/lab7/grader.log" ] || fail "an earlier run's log of lab 7 was left in out/lab7/"
# A message of several lines shows its first on the scoreboard, which then says where the rest is;
# --verbose shows every line, each indented under its check.
grep -q '^Messages show their first line (up to 400 characters): --verbose prints them whole' "$dir/board.txt" ||
  fail "the scoreboard cut messages short without saying where they are whole"
printf '6\tfake_fail\tcpu\t%s\t%s\t-\n' "$dir/grade_fail" "$dir/grade_fail" > "$dir/fail_only.tsv"
"$runner" grade --manifest "$dir/fail_only.tsv" --workers "$dir/workers" --out "$dir/out_verbose" --timeout 3 --verbose \
  > "$dir/verbose.txt" 2>&1 || true
grep -q '^           planted failure 2' "$dir/verbose.txt" ||
  fail "--verbose did not indent a message's later lines under its check: $(cat "$dir/verbose.txt")"
! grep -q '^Messages show their first line' "$dir/verbose.txt" || fail "--verbose said messages were cut short"
printf '1\tfake_ok\tcpu\t%s\t%s\t-\n' "$dir/grade_ok" "$dir/grade_ok" > "$dir/ok_only.tsv"
"$runner" grade --manifest "$dir/ok_only.tsv" --workers "$dir/workers" --out "$dir/out_ok" --timeout 3 > "$dir/ok.txt" 2>&1 || true
! grep -q '^Messages show their first line' "$dir/ok.txt" || fail "the scoreboard spoke of cut messages where none was cut: $(cat "$dir/ok.txt")"
# expect --exclude leaves checks out of the list and the run (a correctness-only pass): the ok
# grader loses a point only in "half credit", so without it that is full marks, and with it not.
"$runner" expect --binary "$dir/grade_ok" --worker "$dir/grade_ok" --full-marks --seeds 1-2 > "$dir/expect.txt" 2>&1 &&
  fail "expect --full-marks passed a grader that gives half credit"
grep -q 'seed 1: NOT full marks: 11/12 points' "$dir/expect.txt" || fail "expect did not report 11/12: $(cat "$dir/expect.txt")"
"$runner" expect --binary "$dir/grade_ok" --worker "$dir/grade_ok" --full-marks --seeds 1-2 --exclude 'half*' > "$dir/expect.txt" 2>&1 ||
  fail "expect --exclude did not leave the check out: $(cat "$dir/expect.txt")"
grep -q "seed 2: full marks: 10/10 points (checks matching 'half\*' left out)" "$dir/expect.txt" || fail "expect --exclude output: $(cat "$dir/expect.txt")"
"$runner" expect --binary "$dir/grade_ok" --worker "$dir/grade_ok" --full-marks --seeds 3 --only 'first*' > "$dir/expect.txt" 2>&1 ||
  fail "expect --only failed: $(cat "$dir/expect.txt")"
grep -q "seed 3: full marks: 2/2 points (only the checks matching 'first\*')" "$dir/expect.txt" || fail "expect --only output: $(cat "$dir/expect.txt")"
# expect --fail wants the check failed; --short-of-full also takes partial credit (a speed check's
# sliding scale), and both want the planted reason in the message.
expect_rc() {  # WANTED_RC GRADER then the expect options
  local wanted=$1 grader=$dir/grade_$2 rc=0; shift 2
  "$runner" expect --binary "$grader" --worker "$grader" "$@" > "$dir/expect.txt" 2>&1 || rc=$?
  [ "$rc" = "$wanted" ] || fail "expect $* exited $rc, wanted $wanted: $(cat "$dir/expect.txt")"
}
expect_rc 1 ok --fail "half credit" --message "slower"
grep -q 'expected "half credit" to fail, but it partial' "$dir/expect.txt" || fail "expect --fail output: $(cat "$dir/expect.txt")"
expect_rc 0 ok --short-of-full "half credit" --message "slower than the solution"
grep -q 'rejected as expected: "half credit" earned partial points' "$dir/expect.txt" ||
  fail "expect --short-of-full output: $(cat "$dir/expect.txt")"
expect_rc 1 ok --short-of-full "half credit" --message "does not match the reference"
expect_rc 1 ok --short-of-full "first check" --message ""
grep -q 'expected "first check" to fall short of full points, but it passed' "$dir/expect.txt" ||
  fail "expect --short-of-full on a passing check: $(cat "$dir/expect.txt")"
expect_rc 0 fail --short-of-full "misbehaving check" --message "planted failure"
# expect --earns wants one check's full points, whatever the others do (a staircase lab's later
# step not written yet): the failing grader still earns its last check, not the failed one, and
# partial credit is not earned.
expect_rc 0 fail --earns "last check"
grep -q 'earned as expected: "last check" passed' "$dir/expect.txt" || fail "expect --earns output: $(cat "$dir/expect.txt")"
expect_rc 1 fail --earns "misbehaving check"
grep -q 'expected "misbehaving check" to earn its full points, but it failed' "$dir/expect.txt" ||
  fail "expect --earns on a failed check: $(cat "$dir/expect.txt")"
expect_rc 1 ok --earns "half credit"
grep -q 'but it earned partial points' "$dir/expect.txt" || fail "expect --earns on partial credit: $(cat "$dir/expect.txt")"
expect_rc 1 ok --earns "no such check"
expect_rc 2 ok --earns "last check" --full-marks

# A call killed at its time limit has cost its check; its seconds do not count against the lab's
# limit, so the checks after it still run (killed_calls: 4 s of killed calls under a limit of 3 s).
# Up to the limit again: a lab whose calls are killed without end is still stopped, at about twice
# its limit (killed_calls_forever, whose first report, NaN, counts for nothing).
printf '1\tfake_killed_calls\tcpu\t%s\t%s\t-\n2\tfake_killed_forever\tcpu\t%s\t%s\t-\n3\tfake_escapes\tcpu\t%s\t%s\t-\n' \
  "$dir/grade_killed_calls" "$dir/grade_killed_calls" "$dir/grade_killed_calls_forever" \
  "$dir/grade_killed_calls_forever" "$dir/grade_escapes" "$dir/grade_escapes" > "$dir/lab_misbehaves.tsv"
cp "$dir/grade_ok" "$dir/workers/lab3_worker"
started=$SECONDS
"$runner" grade --manifest "$dir/lab_misbehaves.tsv" --workers "$dir/workers" --out "$dir/out_lab" --timeout 3 \
  > "$dir/lab.txt" 2>&1 || true
took=$((SECONDS - started))
grep -Eq '^1 +fake_killed_calls +11/12 ' "$dir/lab.txt" ||
  fail "killed calls' seconds were counted against the lab's time limit: $(cat "$dir/lab.txt")"
grep -Eq '^2 +fake_killed_forever +2/12 +timed out after 3 s \(not counting 3 s in calls killed at their own time limit\) during "misbehaving check"' "$dir/lab.txt" ||
  fail "a lab whose calls are killed without end was not stopped at twice its limit: $(cat "$dir/lab.txt")"
[ "$took" -le 14 ] || fail "grading took $took s: killed calls lengthened a lab's limit by more than the limit"
# What the lab's code printed (lab-process.log, written by the lab process itself) is rewritten
# once grading ends: control characters but newline and tab shown as ^X (ESC as ^[), not acted
# on; invalid UTF-8 as U+FFFD; the rest kept.
log=$dir/out_lab/lab3/lab-process.log
want=$(printf '^[[2J^[[31mred^[[0m\tbell^G del^? cr^M bad \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd csi M-^[31m \xc3\xa9t\xc3\xa9 \xe2\x9c\x93\n^[]0;title^Gsecond line')
[ "$(cat "$log")" = "$want" ] || fail "the lab's log was not made harmless: $(od -c "$log" | head -20)"
! LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$log" || fail "a control character is left in the lab's log"
[ ! -e "$log.tmp" ] || fail "the lab's log was not renamed into place"
echo "runner isolation: ok"
