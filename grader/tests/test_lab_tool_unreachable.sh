#!/usr/bin/env bash
# A tool run without namespaces (COURSE_SANDBOX=filter, or a machine where bubblewrap cannot make
# them) must still start the lab's program when the lab process's user cannot reach the trusted
# build or the grading's folders: the program lies in a folder only root may enter, as a build
# under /root does, and the grading's scratch folder does too (the runner's are private); on a GPU
# machine with its output under /root, compute-sanitizer said only "Error launching target app."
# for every GPU lab. Under tool_needing_its_folder.sh, which needs both as compute-sanitizer does
# and then runs the program, lab 1's solution keeps full marks.
# usage: test_lab_tool_unreachable.sh COURSE_RUNNER GRADE_LAB1 LAB1_WORKER
set -euo pipefail
runner=$1 grader=$2 worker=$3
if [ "$(id -u)" != 0 ]; then
  echo "skipped: the lab process runs as another user only when the grader runs as root"
  exit 77
fi
private=$(mktemp -d)
trap 'rm -rf "$private"' EXIT
chmod 700 "$private"
cp "$worker" "$private/"
before=$(find /tmp -maxdepth 1 -name "course-lab-program-*" | wc -l)
COURSE_SANDBOX=filter COURSE_LAB_TOOL="$(dirname "$0")/tool_needing_its_folder.sh" COURSE_LOG_LIMIT=65536 \
  "$runner" expect --binary "$grader" --worker "$private/$(basename "$worker")" --full-marks --seeds 1-1
after=$(find /tmp -maxdepth 1 -name "course-lab-program-*" | wc -l)
if [ "$after" -gt "$before" ]; then
  echo "FAIL: the program's copies in /tmp were left behind ($before before, $after after)"
  exit 1
fi
echo "ok: the tool started the program as the lab's user, and its copy was removed"
