#!/usr/bin/env bash
# A results file that cannot be written is an error, never a file cut short: course_runner grade
# with results.json.tmp made a folder (as a full disk makes the write fail) exits 2 and says which
# file, and leaves no results.json; the same grading without the obstacle writes it and exits 0.
# usage: test_results_unwritable.sh COURSE_RUNNER MANIFEST
set -uo pipefail
runner=$1 manifest=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$runner" grade --manifest "$manifest" --solutions --labs 2 --out "$work/ok" > "$work/ok.log" 2>&1
rc=$?
[ $rc = 0 ] && [ -s "$work/ok/results.json" ] || { cat "$work/ok.log"; echo "FAIL: the plain grading gave $rc or no results.json"; exit 1; }
mkdir -p "$work/bad/results.json.tmp/blocked"
"$runner" grade --manifest "$manifest" --solutions --labs 2 --out "$work/bad" > "$work/bad.log" 2>&1
rc=$?
if [ $rc != 2 ] || ! grep -q "cannot write $work/bad/results.json" "$work/bad.log" || [ -e "$work/bad/results.json" ]; then
  cat "$work/bad.log"
  echo "FAIL: an unwritable results.json gave exit $rc (2 expected), without the message or with a results.json"
  exit 1
fi
echo "ok: an unwritable results.json is an error (exit 2, named); a writable one is written"
