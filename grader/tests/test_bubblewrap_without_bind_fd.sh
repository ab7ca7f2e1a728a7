#!/usr/bin/env bash
# A bubblewrap that cannot bind a descriptor (no --ro-bind-fd: Ubuntu 24.04's 0.9 as released):
# a lab run under a tool (COURSE_LAB_TOOL, as compute-sanitizer runs the GPU labs) needs it, to
# give the tool the lab's program, and must then run without namespaces, not fail every check;
# a lab run without a tool keeps the namespaces. A stand-in bubblewrap (COURSE_BWRAP) refuses
# --ro-bind-fd as such a bubblewrap does and otherwise runs the real one, noting each call: lab
# 1's solution keeps full marks both ways, the descriptor's probe was refused, and only the run
# without a tool started lab processes through bubblewrap.
# usage: test_bubblewrap_without_bind_fd.sh COURSE_RUNNER GRADE_LAB1 LAB1_WORKER
set -uo pipefail
runner=$1 grader=$2 worker=$3
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/stand_in_bubblewrap.sh"
use_stand_in_bubblewrap --ro-bind-fd  # sets dir and calls; skips where bubblewrap is not installed
lab_runs() { grep -c '^ran .* \(under\|filter\|no-filter\|gpu-filter\)' "$calls"; }  # not the probes

COURSE_BWRAP=$dir/bwrap "$runner" expect --binary "$grader" --worker "$worker" --full-marks --seeds 1-1 ||
  fail "lab 1's solution lost marks, run without a tool under a bubblewrap without --ro-bind-fd"
without_tool=$(lab_runs)
[ "$without_tool" -ge 1 ] || fail "without a tool no lab process ran in bubblewrap's namespaces"
: > "$calls"
COURSE_LAB_TOOL=env COURSE_BWRAP=$dir/bwrap "$runner" expect --binary "$grader" --worker "$worker" --full-marks --seeds 1-1 ||
  fail "lab 1's solution lost marks, run under a tool with a bubblewrap without --ro-bind-fd"
grep -q '^refused --ro-bind-fd' "$calls" || fail "the grader never asked bubblewrap whether it binds a descriptor"
under_tool=$(lab_runs)
[ "$under_tool" = 0 ] || fail "$under_tool lab process(es) run under the tool went through bubblewrap"
echo "ok: without a tool $without_tool lab process(es) in bubblewrap's namespaces; under a tool none," \
     "and full marks both ways"
