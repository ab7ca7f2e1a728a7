#!/usr/bin/env bash
# COURSE_BWRAP names the bubblewrap that ./course uses, for the compiles of a submission as much
# as for its lab processes (a bubblewrap that is not on PATH: a newer one built apart, or one
# staged on a machine without a package registry). A stand-in that notes each call and runs the
# real one: ./course grade --labs-dir with lab 1's solution keeps full marks, and the stand-in ran
# both a compile (the build sandbox binds / read-only) and a lab process.
#
# Usage: test_course_bwrap.sh REPO_ROOT BUILD_DIR
set -uo pipefail
root=$1 build=$2
real=$(command -v bwrap) || { echo "SKIPPED: bubblewrap is not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"  # the compiles and the lab processes run as nobody when grading runs as root
fail() { echo "FAILED: $*"; exit 1; }
calls=$work/calls
touch "$calls" && chmod 666 "$calls"
cat > "$work/bwrap" <<STANDIN
#!/bin/sh
case " \$* " in
  *" --ro-bind / / "*) echo compile >> '$calls' ;;
  *" --unshare-all "*) echo lab >> '$calls' ;;
esac
exec '$real' "\$@"
STANDIN
chmod 755 "$work/bwrap"
mkdir -p "$work/tree" && cp -r "$root/solutions/lab1_softmax" "$work/tree/"
COURSE_BWRAP=$work/bwrap COURSE_BUILD_DIR=$build COURSE_NO_CUDA=1 COURSE_BUILD_TIMEOUT=90 \
  "$root/course" grade --labs-dir "$work/tree" --lab 1 --out "$work/out" > "$work/grade.txt" 2>&1
grep -q "Score: 21/21" "$work/grade.txt" || { cat "$work/grade.txt"; fail "lab 1's solution lost marks"; }
grep -qx compile "$calls" || { cat "$work/grade.txt"; fail "the compile did not run in COURSE_BWRAP's bubblewrap"; }
grep -qx lab "$calls" || fail "no lab process ran in COURSE_BWRAP's bubblewrap"
echo "ok: COURSE_BWRAP ran $(grep -cx compile "$calls") compile call(s) and $(grep -cx lab "$calls") lab process call(s)"
