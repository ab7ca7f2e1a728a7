#!/usr/bin/env bash
# COURSE_LAB_TOOL where the toolkit's root would be the folder that holds the course: a tool in a
# folder beside the course's tree (PARENT/course-lab-tool-XXXXXX/pass-through), so that two levels
# above it is PARENT, which holds the tree, its build and its solutions. The lab's sandbox must
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
parent=$(dirname "$root")
tools=$(mktemp -d "$parent/course-lab-tool-XXXXXX" 2>/dev/null) ||
  { echo "SKIPPED: cannot make a folder beside the course ($parent)"; exit 77; }
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
