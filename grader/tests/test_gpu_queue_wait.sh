#!/usr/bin/env bash
# A GPU lab graded beside others (./course grade-all on one GPU) may wait for its share of the GPU
# longer than its whole time limit: the runner must stop the lab's clock while it waits, and grade
# it in full afterwards. Here the GPU's lock is held for longer than the limit by another process.
# Usage: test_gpu_queue_wait.sh RUNNER FAKE_GRADER
set -euo pipefail
runner=$1 fake=$2
dir=$(mktemp -d)
trap 'kill $holder 2>/dev/null || true; rm -rf "$dir"' EXIT
printf '#!/bin/sh\nFAKE_GRADER_MODE=ok exec %s "$@"\n' "$fake" > "$dir/grade_ok"
chmod +x "$dir/grade_ok"
mkdir -p "$dir/workers"
printf '1\tfake_gpu\tgpu\t%s\t%s\t-\n' "$dir/grade_ok" "$dir/grade_ok" > "$dir/graders.tsv"
cp "$dir/grade_ok" "$dir/workers/lab1_worker"
# Another grader holds the GPU for a speed check (exclusively) for 5 s; the limit is 2 s.
touch "$dir/gpu.lock" && chmod 600 "$dir/gpu.lock"
flock -x "$dir/gpu.lock" sleep 5 &
holder=$!
sleep 0.3
set +e
COURSE_GPU_LOCK="$dir/gpu.lock" "$runner" grade --manifest "$dir/graders.tsv" --workers "$dir/workers" \
  --out "$dir/out" --timeout 2 > "$dir/board.txt" 2>&1
set -e
cat "$dir/board.txt"
fail() { echo "FAILED: $*"; exit 1; }
grep -q 'timed out' "$dir/board.txt" && fail "the wait for the GPU was counted against the lab's time limit"
grep -Eq '^1 +fake_gpu +11/12' "$dir/board.txt" || fail "the lab that waited for the GPU was not graded in full"
echo "PASSED: a wait for the GPU longer than the time limit does not time the lab out"
