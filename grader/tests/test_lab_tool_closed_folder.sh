#!/usr/bin/env bash
# COURSE_LAB_TOOL in a folder that the lab process's user cannot enter (a toolkit under /root or a
# private home, grading as root): the grader says so, naming the tool, instead of grading every
# check as "your lab's code exited before answering" (bubblewrap, started as that user, could not
# bind the tool's folder).
# usage: test_lab_tool_closed_folder.sh COURSE_RUNNER GRADE_LAB1 LAB1_WORKER
set -uo pipefail
runner=$1 grader=$2 worker=$3
if [ "$(id -u)" != 0 ]; then
  echo "SKIPPED: the lab process runs as another user only when the grader runs as root"
  exit 77
fi
closed=$(mktemp -d)
trap 'rm -rf "$closed"' EXIT
chmod 700 "$closed"
printf '#!/bin/sh\nexec "$@"\n' > "$closed/pass-through"
chmod 755 "$closed/pass-through"
out=$(COURSE_LAB_TOOL="$closed/pass-through" "$runner" expect --binary "$grader" --worker "$worker" --full-marks --seeds 1-1 2>&1)
echo "$out" | tail -n 5
want="COURSE_LAB_TOOL's $closed/pass-through cannot be run by the lab process's user (uid 65534)"
grep -qF "$want" <<< "$out" || { echo "FAILED: no check says \"$want\""; exit 1; }
echo "ok: a tool the lab's user cannot run is named as such"
