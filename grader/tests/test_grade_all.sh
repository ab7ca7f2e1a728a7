#!/usr/bin/env bash
# ./course grade-all on a class of eleven submissions of labs 1 and 2, as an instructor runs it,
# with the names a roster produces (quotes, ';', '$', spaces, a newline, non-ASCII, a leading '='
# or '-'), and what a class hands in: solutions, skeletons, a build failure, a crash, a hang, a
# partial tree, a global symbol that the checks of lab code reject, symbolic links into the
# course's solutions/, a stray file, one too large.
# Asserted, in each part:
#   - every submission gets a gradebook row with the points it earned and, where a lab could not
#     be graded to the end, why; the exit code says that some could not be graded;
#   - no build folder is left behind, and every file written is valid UTF-8;
# in part jobs1 (--jobs 1), then:
#   - --resume grades again only what changed, and gives the same gradebook.
# Each part leaves its gradebook in BUILD_DIR/grade_all_gradebooks/PART.csv, and the test
# grader.grade_all.same_at_jobs_1_and_8 holds the two byte-identical. (Two parts, not one test:
# each is about a fifth of CI's test stage on two cores, and one after the other they were its
# longest chain.)
#
# Usage: test_grade_all.sh REPO_ROOT BUILD_DIR PART [--planted NAME]     PART: jobs1 | jobs8
#   --planted unquoted_name: part jobs1, on three of the submissions, of a copy of the course
#   whose grade-all passes a submission's name to its job unquoted (split on spaces, globbed):
#   it must fail, on the gradebook's rows.
set -uo pipefail
root=$1 build=$2 part=${3:-} planted=${5:-}
case "$part" in
  jobs1) jobs=1 ;;
  jobs8) jobs=8 ;;
  *) echo "usage: test_grade_all.sh REPO_ROOT BUILD_DIR jobs1|jobs8 [--planted NAME]"; exit 2 ;;
esac
kept=$build/grade_all_gradebooks/$part.csv  # not written by a planted copy's run
[ -n "$planted" ] || rm -f "$kept"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
export COURSE_BUILD_DIR=$build COURSE_NO_CUDA=1 COURSE_BUILD_TIMEOUT=60 COURSE_CALL_TIMEOUT=5
export COURSE_SUBMISSION_LIMIT_MB=1
# The submissions' build folders in a folder of this test's own, so that another test grading
# beside it (they share the build folder) cannot be mistaken for one this run left behind.
export COURSE_SUBMISSION_BUILDS=$work/builds
course=$root/course
if [ -n "$planted" ]; then
  [ "$planted" = unquoted_name ] || fail "no planted copy named $planted"
  # A copy of ./course with the bug, working on this repository (its root set to it).
  course=$work/course
  source "$(dirname "$0")/course_copy.sh"
  course_copy "$root/course" "$root" "$course"
  course_plant "$course" 'grade_submission "$name")' 'grade_submission $name)'
fi
made=()  # the submissions made, by name
wanted() {  # whether to make submission $1 (with --planted, three of them)
  [ -z "$planted" ] || [[ "$1" == "o'brien" || "$1" == "semi;colon \$HOME" || "$1" == "linked lab" ]] || return 1
  made+=("$1")
}

subs="$work/submissions"
mkdir -p "$subs"
solution() { mkdir -p "$1"; cp -r "$root/solutions/lab1_softmax" "$root/solutions/lab2_combine" "$1/"; }
skeleton() { mkdir -p "$1"; cp -r "$root/labs/lab1_softmax" "$root/labs/lab2_combine" "$1/"; }
# The solution's lab 1 with its first line of softmax_rows replaced.
lab1_with() {  # $1 = submission, $2 = the replacement
  solution "$1"
  local f="$1/lab1_softmax/softmax.cpp" first='require_no_nan_or_pos_inf<T>(x, "softmax_rows");'
  grep -qF "$first" "$f" || fail "the solution's softmax_rows no longer starts with: $first"
  python3 - "$f" "$first" "$2" <<'EOF'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
open(path, "w").write(text.replace(old, new, 1))
EOF
}

wanted "o'brien" && mkdir -p "$subs/o'brien" && solution "$subs/o'brien/labs"  # a labs/ folder inside
wanted "semi;colon \$HOME" && skeleton "$subs/semi;colon \$HOME"
wanted "new"$'\n'"line" && lab1_with "$subs/new"$'\n'"line" 'this is not C++;'  # does not build
wanted "ünïcødé spaced" && lab1_with "$subs/ünïcødé spaced" '__builtin_trap();'      # crashes
# Hangs, asleep (the attack tests have a spinning one; this one spares CI's two cores).
wanted -hang && lab1_with "$subs/-hang" 'for (;;) ::sleep(1);' &&
  sed -i '1i #include <unistd.h>' "$subs/-hang/lab1_softmax/softmax.cpp"
wanted partial && mkdir -p "$subs/partial" && cp -r "$root/solutions/lab1_softmax" "$subs/partial/"
wanted '=HYPERLINK("x")' && mkdir -p "$subs/=HYPERLINK(\"x\")" && ln -s "$root/solutions" "$subs/=HYPERLINK(\"x\")/labs"
wanted "linked lab" && skeleton "$subs/linked lab" && rm -r "$subs/linked lab/lab1_softmax" &&
  ln -s "$root/solutions/lab1_softmax" "$subs/linked lab/lab1_softmax"
wanted stray-symbol && solution "$subs/stray-symbol" &&  # vet-lab's rejection, its reason in the notes
  echo 'int stray_global_symbol = 1;' >> "$subs/stray-symbol/lab1_softmax/softmax.cpp"
wanted stray-file && echo "not a submission" > "$subs/stray-file"
wanted too-big && solution "$subs/too-big" && head -c $((2 << 20)) /dev/zero > "$subs/too-big/core"
# GitHub's "Download ZIP" of a student's fork: the labs two folders down.
wanted zip-download && mkdir -p "$subs/zip-download/flash-course-main" && solution "$subs/zip-download/flash-course-main/labs"
wanted empty && mkdir -p "$subs/empty"  # no lab folder anywhere: not graded, saying so
# What a folder unzipped on a Mac holds beside the submissions: hidden, never a submission (no row).
[ -n "$planted" ] || echo "Finder's" > "$subs/.DS_Store"

grade_all() {  # $1 = out folder, then options; the terminal output in $1.txt, the exit code in $1.rc
  "$course" grade-all "$subs" --out "$1" --lab 1,2 --timeout 10 "${@:2}" > "$1.txt" 2>&1
  echo $? > "$1.rc"
  cat "$1.txt"
}

echo "== --jobs $jobs"
grade_all "$work/one" --jobs $jobs
book="$work/one/gradebook.csv"
[ -f "$book" ] || fail "no gradebook"

# Each row, read as a spreadsheet would (RFC 4180).
python3 - "$book" "${made[@]}" <<'EOF' || fail "the gradebook's rows are not as expected"
import csv, sys
rows = {r["submission"]: r for r in csv.DictReader(open(sys.argv[1], encoding="utf-8", newline=""))}
made = sys.argv[2:]
if len(rows) != len(made):
    sys.exit(f"{len(rows)} rows for {len(made)} submissions: {list(rows)}")
def expect(name, lab1, lab2, graded="yes", note=""):
    if name.lstrip("'") not in made:
        return
    r = rows.get(name)
    if r is None:
        sys.exit(f"no row for {name!r}; rows: {list(rows)}")
    got = (r["lab1"], r["lab2"], r["graded"])
    if lab1 == "some":  # earned some of lab 1's points, not all (the checks that never call softmax_rows)
        lab1 = got[0] if got[0] not in ("0", "21") else "some of 21"
    if got != (lab1, lab2, graded) or note not in r["notes"]:
        sys.exit(f"{name!r}: lab1, lab2, graded = {got}, notes {r['notes']!r}; expected {(lab1, lab2, graded)} and a note with {note!r}")
expect("o'brien", "21", "25")
expect("semi;colon $HOME", "0", "0")
expect("new\nline", "0", "25", note="lab1: build failed: lab1_softmax/softmax.cpp:")  # the error's own line
expect("ünïcødé spaced", "some", "25")
expect("'-hang", "0", "25", note="lab1: timed out")
expect("partial", "21", "0", note="lab2: no folder lab2_combine")
expect("'=HYPERLINK(\"x\")", "0", "0", note="symbolic link")
expect("linked lab", "0", "0", note="lab1: not graded: lab1_softmax is a symbolic link")
expect("stray-symbol", "0", "25", note="lab1: build failed: rejected by the grader's checks of lab code: softmax.cpp defines stray_global_symbol")
expect("stray-file", "", "", graded="no", note="not a folder")
expect("too-big", "", "", graded="no", note="over the limit of 1 MiB")
expect("zip-download", "21", "25")
expect("empty", "", "", graded="no", note="no lab folder in the submission")
failed_build = rows.get("new\nline")
if failed_build and "error:" not in failed_build["notes"]:
    sys.exit("the build failure's note is not its error line: " + repr(failed_build["notes"]))
if rows["o'brien"]["total"] != "46" or rows["o'brien"]["possible"] != "46":
    sys.exit("o'brien's total is not 46/46")
EOF
[ -z "$planted" ] || exit 0
[ "$(cat "$work/one.rc")" = 1 ] || fail "grade-all exited $(cat "$work/one.rc"), not 1, with submissions it could not grade"
grep -q "left out: 1 hidden entry of" "$work/one.txt" || fail "the hidden .DS_Store was not said to be left out"
grep -q "error:" "$work/one/submissions/new"$'\n'"line/lab1/build.log" || fail "the whole build log of a lab that did not build was not kept"

# Every file written is valid UTF-8 (names, compiler output and lab output included).
python3 - "$work/one" <<'EOF' || fail "a file in the results is not valid UTF-8"
import os, sys
for top, _, files in os.walk(sys.argv[1]):
    for f in files:
        p = os.path.join(top, f)
        try:
            open(p, encoding="utf-8").read()
        except UnicodeDecodeError as e:
            sys.exit(f"{p}: {e}")
EOF
# One line per submission as it ends, counted 1..N once each whatever the order the jobs end in.
counts=$(grep -oE '^\[course\] +[0-9]+/[0-9]+ ' "$work/one.txt" | grep -oE '[0-9]+/[0-9]+' | sort -n | tr '\n' ' ')
expected=$(for ((i = 1; i <= ${#made[@]}; i++)); do printf '%s/%s ' "$i" "${#made[@]}"; done)
[ "$counts" = "$expected" ] || fail "the submissions' lines are not counted 1..${#made[@]}: $counts"
[ -d "$work/builds" ] || fail "grade-all did not build in COURSE_SUBMISSION_BUILDS ($work/builds)"
left=$(find "$work/builds" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
[ "$left" = 0 ] || fail "$left build folders were left under $work/builds"
mkdir -p "$(dirname "$kept")" && cp "$book" "$kept"
[ "$part" = jobs1 ] || { echo "grade-all --jobs $jobs: every submission has its row"; exit 0; }

echo "== --resume, nothing changed"
cp "$book" "$work/before.csv"
grade_all "$work/one" --jobs 2 --resume
cmp "$book" "$work/before.csv" || fail "--resume changed the gradebook"
[ "$(grep -c 'already graded' "$work/one.txt")" = 10 ] || fail "--resume did not keep the ten graded submissions"

echo "== --resume, one submission changed"
cp -r "$root/solutions/lab2_combine" "$subs/partial/"
grade_all "$work/one" --jobs 2 --resume
[ "$(grep -c 'already graded' "$work/one.txt")" = 9 ] || fail "--resume did not grade the changed submission again"
grep -q '^partial,21,25,' "$book" || fail "the changed submission's row was not updated"
echo "== a GPU lab without a GPU: skip, whether or not the submission holds its folder"
mkdir -p "$work/gpu-subs/no-lab4" "$work/gpu-subs/with-lab4"
cp -r "$root/solutions/lab1_softmax" "$work/gpu-subs/no-lab4/"
cp -r "$root/solutions/lab1_softmax" "$root/labs/lab4_cuda" "$work/gpu-subs/with-lab4/"
"$course" grade-all "$work/gpu-subs" --out "$work/gpu" --lab 1,4 --timeout 10 --jobs 2 > "$work/gpu.txt" 2>&1 ||
  fail "grade-all of two graded submissions failed: $(cat "$work/gpu.txt")"
# (skip where the trusted build has lab 4's grader, that is where the CUDA toolkit is, as in CI;
# without the toolkit lab 4 is worth nothing to anyone)
lab4_grader=$(awk -F'\t' '$1 == 4 { print $4 }' "$build/graders.tsv")
python3 - "$work/gpu/gradebook.csv" "$lab4_grader" <<'EOF' || fail "a GPU lab that cannot run here was not skipped alike"
import csv, sys
rows = {r["submission"]: r for r in csv.DictReader(open(sys.argv[1], encoding="utf-8", newline=""))}
got = {name: (rows[name]["lab4"], rows[name]["possible"]) for name in ("no-lab4", "with-lab4")}
if got["no-lab4"] != got["with-lab4"] or (sys.argv[2] != "-" and got["no-lab4"][0] != "skip"):
    sys.exit(f"lab4 and the points possible: {got}")
EOF
echo "grade-all --jobs 1: every submission has its row, and --resume grades only what changed"
