#!/usr/bin/env bash
# The runner must contain a grader that crashes, aborts or hangs: that lab loses its points and
# the scoreboard says what happened, every other lab is graded as usual, and parents count.
# Usage: test_runner_isolation.sh RUNNER FAKE_GRADER
set -euo pipefail
runner=$1 fake=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for mode in ok crash hang abort skip fail; do
  printf '#!/bin/sh\nFAKE_GRADER_MODE=%s exec %s "$@"\n' "$mode" "$fake" > "$dir/grade_$mode"
  chmod +x "$dir/grade_$mode"
done
n=0
for mode in ok crash hang abort skip fail; do
  n=$((n + 1))
  printf '%d\tfake_%s\tcpu\t%s\t%s\t-\n' "$n" "$mode" "$dir/grade_$mode" "$dir/grade_$mode" >> "$dir/graders.tsv"
done
printf '7\tfake_missing\tcpu\t%s\t%s\t-\n' "$dir/nonexistent" "$dir/grade_ok" >> "$dir/graders.tsv"

set +e
"$runner" grade --manifest "$dir/graders.tsv" --out "$dir/out" --timeout 3 > "$dir/board.txt" 2>&1
rc=$?
set -e
cat "$dir/board.txt"
fail() { echo "FAILED: $*"; exit 1; }
[ $rc = 1 ] || fail "exit code $rc, expected 1 (points were lost)"
grep -Eq '^1 +fake_ok +10/10 +all checks passed' "$dir/board.txt" || fail "the good lab lost points"
grep -Eq '^2 +fake_crash +2/10 +crashed \(Segmentation fault\) during "misbehaving check"' "$dir/board.txt" || fail "crash not reported"
grep -Eq '^3 +fake_hang +2/10 +timed out after 3 s during "misbehaving check"' "$dir/board.txt" || fail "hang not reported"
grep -Eq '^4 +fake_abort +2/10 +crashed \(Aborted\)' "$dir/board.txt" || fail "abort not reported"
grep -Eq '^5 +fake_skip +6/10 +skipped \(2 skipped\)|^5 +fake_skip +6/10 .*\(2 skipped\)' "$dir/board.txt" || fail "skip not shown (a skipped parent skips its child)"
grep -Eq '^6 +fake_fail +6/10 ' "$dir/board.txt" || fail "failing check not scored"
grep -q 'parent failed: "misbehaving check"' "$dir/board.txt" || fail "parent failure not reported"
grep -Eq '^7 +fake_missing +0/10 +build failed' "$dir/board.txt" || fail "a lab that did not build is not reported"
grep -q '"status": "failed", "tags": \["lab5", "skipped"\]' "$dir/out/results.json" || fail "skipped check missing from results.json"
grep -q '<skipped message="no CUDA device' "$dir/out/junit.xml" || fail "skipped check missing from junit.xml"
python3 -c "import json,sys; json.load(open('$dir/out/results.json'))" 2>/dev/null || fail "results.json is not valid JSON"
echo "runner isolation: ok"
