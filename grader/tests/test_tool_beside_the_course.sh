#!/usr/bin/env bash
# COURSE_LAB_TOOL where the toolkit's root would be a folder that holds the course: a tool in a new
# folder in a folder around the course's tree (HOLDER/course-lab-tool-XXXXXX/pass-through), so that
# two levels above it is HOLDER, which holds the tree, its build and its solutions. The lab's sandbox must
# get the tool's own folder only: read_the_solution, run by the tool in the namespaces, earns
# nothing and sends no line of the solution back. With COURSE_SANDBOX=filter (no namespaces, and
# no filter under a tool) the same attack reads the solution: the test can fail.
# usage: test_tool_beside_the_course.sh REPO_ROOT BUILD_DIR
set -uo pipefail
root=$1 build=$2
if [ "${COURSE_SANDBOX:-on}" = on ] && ! bwrap --unshare-all --ro-bind / / true 2>/dev/null; then
  echo "SKIPPED: bubblewrap cannot make namespaces here, and the binding is bubblewrap's"
  exit 77
fi
# The nearest folder around the course that the lab process's user (nobody, when grading runs as
# root) may enter: the tool goes in a new folder there, which that user can reach (a tool it
# cannot reach is refused before any lab runs: test_lab_tool_closed_folder.sh).
enters() {
  if [ "$(id -u)" = 0 ]; then setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$1" 2>/dev/null
  else test -x "$1"; fi
}
holder=$(dirname "$root")
while [ "$holder" != / ] && ! enters "$holder"; do holder=$(dirname "$holder"); done
[ "$holder" != / ] || { echo "SKIPPED: no folder around the course that the lab's user may enter"; exit 77; }
tools=$(mktemp -d "$holder/course-lab-tool-XXXXXX" 2>/dev/null) ||
  { echo "SKIPPED: cannot make a folder in $holder, around the course"; exit 77; }
trap 'rm -rf "$tools"' EXIT
chmod 755 "$tools"
printf '#!/bin/sh\n# Runs the lab process as it is given.\nexec "$@"\n' > "$tools/pass-through"
chmod 755 "$tools/pass-through"
out=$(COURSE_LAB_TOOL="$tools/pass-through" "$root/grader/tests/test_attack.sh" "$root" "$build" read_the_solution)
status=$?
echo "$out"
[ "$status" = 0 ] || exit "$status"
# The attack was stopped where it ran under the tool (not where a tool was never started).
grep -q "^lab 1: .*run by $tools/pass-through" <<< "$out" || { echo "FAILED: lab 1 did not run under the tool"; exit 1; }
if [ "${COURSE_SANDBOX:-on}" = on ]; then
  grep -q "^lab 1: .*in bubblewrap's namespaces" <<< "$out" || { echo "FAILED: lab 1 did not run in the namespaces"; exit 1; }
fi
echo "ok: run by a tool beside the course, the lab saw nothing of it"
