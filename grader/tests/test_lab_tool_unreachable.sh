#!/usr/bin/env bash
# A tool run without namespaces (COURSE_SANDBOX=filter, or a machine where bubblewrap cannot make
# them) must still start the lab's program when the lab process's user cannot reach the trusted
# build or the grading's folders: the program lies in a folder only root may enter, as a build
# under /root does, and the grading's scratch folder does too (the runner's are private); on a GPU
# machine with its output under /root, compute-sanitizer said only "Error launching target app."
# for every GPU lab. Under tool_needing_its_folder.sh, which needs both as compute-sanitizer does
# and then runs the program, lab 1's solution keeps full marks. A copy that a grader killed with
# SIGKILL left behind is removed by the next grader that makes one; others' copies stay.
# usage: test_lab_tool_unreachable.sh COURSE_RUNNER GRADE_LAB1 LAB1_WORKER
set -euo pipefail
runner=$1 grader=$2 worker=$3
if [ "$(id -u)" != 0 ]; then
  echo "skipped: the lab process runs as another user only when the grader runs as root"
  exit 77
fi
private=$(mktemp -d)
# The stand-in tool where the lab's user can run it, as a real one (a toolkit under /usr/local) is,
# whatever the modes of the folders above this checkout.
tools=$(mktemp -d)
trap 'rm -rf "$private" "$tools"' EXIT
chmod 700 "$private"
chmod 755 "$tools"
cp "$(dirname "$0")/tool_needing_its_folder.sh" "$tools/"
cp "$worker" "$private/"
# What graders killed with SIGKILL leave behind, which the next grader removes: a copy folder
# named for a PID that no process has. Beside it two that must stay: one of a grader still
# running (this shell's PID), and one of another user's (its PID gone too).
sh -c 'exit 0' & dead=$!
wait "$dead"
orphan=/tmp/course-lab-program-$dead-orphan
live=/tmp/course-lab-program-$$-live
foreign=/tmp/course-lab-program-$dead-foreign
trap 'rm -rf "$private" "$tools" "$orphan" "$live" "$foreign"' EXIT
for d in "$orphan" "$live" "$foreign"; do mkdir "$d" && touch "$d/lab1_worker_solution"; done
chown -R 65534 "$foreign"
before=$(find /tmp -maxdepth 1 -name "course-lab-program-*" | wc -l)
COURSE_SANDBOX=filter COURSE_LAB_TOOL="$tools/tool_needing_its_folder.sh" COURSE_LOG_LIMIT=65536 \
  "$runner" expect --binary "$grader" --worker "$private/$(basename "$worker")" --full-marks --seeds 1-1
after=$(find /tmp -maxdepth 1 -name "course-lab-program-*" | wc -l)
if [ -e "$orphan" ]; then
  echo "FAIL: the copy left by a grader that no longer runs ($orphan) was not removed"
  exit 1
fi
if [ ! -e "$live/lab1_worker_solution" ] || [ ! -e "$foreign/lab1_worker_solution" ]; then
  echo "FAIL: a copy that is not an orphan of this user's was removed (a running grader's, or another user's)"
  exit 1
fi
if [ "$after" -ge "$before" ]; then
  echo "FAIL: the program's copies in /tmp were left behind ($before before, $after after)"
  exit 1
fi
echo "ok: the tool started the program as the lab's user, its copy was removed, and so was an orphan's"
