#!/usr/bin/env bash
# ./course grade, one submission graded alone (as a student runs it, or as Gradescope's
# run_autograder runs it with --labs-dir), where grading may use less memory than the default
# limits ask for (COURSE_GRADING_MEMORY_MB stands for a small machine or a container's cgroup
# limit): the lab process gets grade-all's share for one job, the run's first lines say so, and a
# memory hog (grader/tests/attacks/memory_hog.cpp as lab 1) earns nothing while lab 2, the
# solution, keeps its marks. Where grading may use more than the defaults need, nothing is said
# and the limits are the defaults. A copy of ./course that grades without sharing must fail.
#
# Usage: test_grade_alone_shares.sh REPO_ROOT BUILD_DIR
set -uo pipefail
root=$1 build=$2
work=$(mktemp -d)
chmod 711 "$work"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
if [ "$(uname -m)" != x86_64 ]; then echo "SKIPPED: the memory hog's lab is graded with the x86-64 attacks"; exit 77; fi
source "$(dirname "$0")/course_copy.sh"
export COURSE_BUILD_DIR=$build COURSE_NO_CUDA=1 COURSE_BUILD_TIMEOUT=90 COURSE_CALL_TIMEOUT=5

tree=$work/submission
mkdir -p "$tree"
cp -r "$root/solutions/lab2_combine" "$root/labs/lab1_softmax" "$tree/"
"$root/grader/tests/test_attack.sh" "$root" "$build" memory_hog --compose "$tree/lab1_softmax/softmax.cpp" ||
  fail "could not compose the memory hog"

# grade COURSE LABS GRADING_MB: ./course grade on the submission; its output in $work/grade.txt
grade() {
  rm -rf "$work/out"
  COURSE_GRADING_MEMORY_MB=$3 "$1" grade --labs-dir "$tree" --labs "$2" --out "$work/out" > "$work/grade.txt" 2>&1
  cat "$work/grade.txt"
}
first_log_line() { head -n 1 "$work/out/lab$1/lab-process.log" 2>/dev/null; }

# checks COURSE: prints what is wrong, returns 1 where anything is.
checks() {
  local course=$1 bad=0
  # 3000 MiB: 256 MiB each for /tmp and /dev/shm, the rest (2488 MiB) the lab process's.
  grade "$course" 1,2 3000 > /dev/null
  grep -q "one at a time, with the 3000 MiB that grading may use: lab processes get 2488 MiB of address space" "$work/grade.txt" ||
    { echo "  the plan for 3000 MiB was not said: $(head -n 3 "$work/grade.txt")"; bad=1; }
  local line
  for n in 1 2; do
    line=$(first_log_line "$n")
    grep -q "with 2488 MiB of address space" <<< "$line" || { echo "  lab $n's limit: $line"; bad=1; }
  done
  grep -Eq '^1 +lab1_softmax +0/[0-9]+ ' "$work/grade.txt" || { echo "  the memory hog earned points"; bad=1; }
  grep -Eq '^2 +lab2_combine +([0-9]+)/\1 ' "$work/grade.txt" || { echo "  the honest lab 2 lost points"; bad=1; }
  # Room for the defaults: nothing said, the default limit.
  grade "$course" 2 100000 > /dev/null
  ! grep -q "that grading may use" "$work/grade.txt" || { echo "  a plan was said with room to spare"; bad=1; }
  line=$(first_log_line 2)
  grep -q "with 8192 MiB of address space" <<< "$line" || { echo "  lab 2's default limit: $line"; bad=1; }
  return $bad
}

echo "== ./course"
checks "$root/course" || { cat "$work/grade.txt"; fail "./course grade did not share the memory as grade-all does at --jobs 1"; }
echo "== planted: ./course grade without share_alone"
course_copy "$root/course" "$root" "$work/course"
course_plant "$work/course" '  share_alone
  share_the_gpu' '  share_the_gpu'
failures=$(checks "$work/course") && fail "the planted copy passed"
head -n 3 <<< "$failures"
echo "ok: one submission graded alone gets grade-all's share for one job, said where it lowers a limit"
