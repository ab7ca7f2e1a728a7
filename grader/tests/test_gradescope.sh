#!/usr/bin/env bash
# The Gradescope autograder end to end, run as Gradescope runs it. `./course gradescope --lab 1,2`
# packs the working tree (so that uncommitted edits are what is tested) into a zip; the zip is
# unpacked into a fresh root laid out as Gradescope's /autograder (AUTOGRADER_ROOT):
#   source/          the unpacked zip; setup.sh runs once and builds the trusted side in a build
#                    folder of its own inside it (COURSE_BUILD_DIR unset), labs 1 and 2 only
#   run_autograder   copied from source/, as Gradescope copies it; run from the root
#   submission/      one submission at a time
#   results/         where run_autograder must leave results.json
# Six submissions are graded (the last one twice):
#   solution   the solutions' lab folders, at the top of the submission: full marks
#   loose_file lab 1's softmax.cpp alone, no folder, to an assignment of lab 1 only (the root's
#              .gradescope-labs set to 1 for it): graded as lab1_softmax/, full marks
#   no_labs    a notes.txt and no lab folder: a score of 0 that says why (not an autograder error)
#   skeleton   the unedited skeletons, in a labs/ folder: nothing, every check failed, and each
#              lab says "not implemented"
#   hostile    a lab 1 that includes the solution of the unpacked course by its absolute path
#              (what a student could aim at under /autograder/source) and a skeleton lab 2:
#              nothing, lab 1 rejected when it is built
#   reader     graded without namespaces (COURSE_SANDBOX=filter, as in a container where
#              bubblewrap cannot make them): a lab 1 that reads that solution at run time, kept
#              out of the results by Landlock's file rules, and back in them without the rules
# Each results.json must be valid against grader/gradescope/results_schema.json (Gradescope's
# format), grade labs 1 and 2 and no other, and add up. Before that, the validator must reject a
# few broken results files: a check that cannot fail proves nothing.
#
# Usage: test_gradescope.sh REPO_ROOT      (exit 77: cannot run here, and says why)
set -uo pipefail
[ $# = 1 ] && [ -d "$1" ] || { echo "usage: test_gradescope.sh REPO_ROOT"; exit 2; }
repo=$(cd "$1" && pwd)
schema=$repo/grader/gradescope/results_schema.json
validate=$repo/grader/gradescope/validate_json.py
work=$(mktemp -d)
chmod 711 "$work"  # as /autograder is: other users may pass through (the lab processes run as nobody)
failures=0
# The files are kept when the test fails: the logs and the build folders say why.
clean_up() { if [ $failures = 0 ]; then rm -rf "$work"; else echo "kept for a look: $work"; fi; }
trap clean_up EXIT
fail() { echo "FAILED (gradescope): $*"; failures=$((failures + 1)); }
stop() { echo "FAILED (gradescope): $*"; failures=$((failures + 1)); exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }
show_log() { echo "--- last lines of $1:"; tail -n "${2:-40}" "$1"; echo "---"; }

# --- Can this machine run it? Gradescope's setup runs as root and installs what is missing; here
# that is only possible as root or with sudo that asks no password.
command -v python3 > /dev/null || skip "python3 is missing"
git -C "$repo" rev-parse -q --verify HEAD > /dev/null 2>&1 || skip "$repo is not a git checkout (the zip is packed from git)"
can_install() { [ "$(id -u)" = 0 ] || { command -v sudo > /dev/null && sudo -n true 2> /dev/null; }; }
if ! can_install; then
  for tool in zip cmake c++ ninja; do
    command -v "$tool" > /dev/null || skip "$tool is missing, and this user cannot install it"
  done
  for header in /usr/include/eigen3/Eigen/Core /usr/include/doctest/doctest.h; do
    [ -e "$header" ] || skip "$header is missing, and this user cannot install it (the packed course has no .deps/)"
  done
fi

# --- The validator rejects broken results (cheap, so first).
good='{"score": 2, "execution_time": 1.5, "output": "seed 1", "stdout_visibility": "hidden", "tests": [
  {"name": "a check", "number": "1", "score": 2, "max_score": 2, "status": "passed", "tags": ["lab1"],
   "output": "", "visibility": "visible"}]}'
declare -A broken=(
  [status_ok]='{"score": 2, "execution_time": 1, "output": "", "tests": [
     {"name": "a", "number": "1", "score": 2, "max_score": 2, "status": "ok", "tags": [], "output": ""}]}'
  [no_tests]='{"score": 2, "execution_time": 1, "output": ""}'
  [score_as_text]='{"score": "2", "execution_time": 1, "output": "", "tests": []}'
  [score_nan]='{"score": NaN, "execution_time": 1, "output": "", "tests": []}'
  [misspelt_field]='{"score": 2, "execution_time": 1, "output": "", "tests": [], "stdout_visibilty": "visible"}'
  [test_without_max_score]='{"score": 2, "execution_time": 1, "output": "", "tests": [
     {"name": "a", "number": "1", "score": 2, "status": "passed", "tags": [], "output": ""}]}'
  [number_not_text]='{"score": 2, "execution_time": 1, "output": "", "tests": [
     {"name": "a", "number": 1, "score": 2, "max_score": 2, "status": "passed", "tags": [], "output": ""}]}'
  [negative_score]='{"score": -1, "execution_time": 1, "output": "", "tests": []}'
  [truncated]='{"score": 2, "execution_time": 1, "output": "", "tests": ['
)
mkdir -p "$work/documents"
printf '%s\n' "$good" > "$work/documents/good.json"
"$validate" "$schema" "$work/documents/good.json" || fail "the validator rejects a valid results.json"
for name in "${!broken[@]}"; do
  printf '%s\n' "${broken[$name]}" > "$work/documents/$name.json"
  "$validate" "$schema" "$work/documents/$name.json" > "$work/documents/$name.out" 2>&1
  status=$?
  if [ $status -ne 1 ]; then
    cat "$work/documents/$name.out"
    fail "the validator did not reject the broken results.json \"$name\" (exit $status, not 1)"
  fi
done
[ $failures = 0 ] || stop "the validator is wrong: nothing after it would be checked"
echo "validator: a valid results.json passes, ${#broken[@]} broken ones are rejected"

# --- The zip, from the working tree, for labs 1 and 2.
zip=$work/autograder.zip
COURSE_GRADESCOPE_SOURCE=worktree "$repo/course" gradescope --lab 1,2 --out "$zip" > "$work/zip.log" 2>&1 ||
  { show_log "$work/zip.log"; stop "./course gradescope failed"; }
cat "$work/zip.log"

# --- A Gradescope root: the zip unpacked into source/ (file modes kept, as unzip keeps them).
ag=$work/autograder
mkdir -p "$ag/source"
python3 - "$zip" "$ag/source" <<'EOF' || stop "the zip is not as Gradescope needs it"
import os, sys, zipfile
zip_path, dest = sys.argv[1], sys.argv[2]
problems = []
with zipfile.ZipFile(zip_path) as z:
    infos = {i.filename: i for i in z.infolist()}
    for script in ("setup.sh", "run_autograder"):  # at the root of the zip, not in a folder
        if script not in infos:
            problems.append("%s is not at the root of the zip" % script)
        elif not (infos[script].external_attr >> 16) & 0o100:
            problems.append("%s is not executable in the zip" % script)
    if "course/.gradescope-labs" not in infos:
        problems.append("the zip does not say which labs it grades (course/.gradescope-labs)")
    for name in infos:
        if name.startswith(("course/build", "course/.git/", "course/out/")):
            problems.append("the zip holds %s (a build folder, git's data or results)" % name)
            break
    for info in z.infolist():
        path = z.extract(info, dest)
        mode = (info.external_attr >> 16) & 0o777
        if mode and not info.is_dir():
            os.chmod(path, mode)
for p in problems:
    print("FAILED (gradescope): " + p)
sys.exit(1 if problems else 0)
EOF
labs=$(tr -d '[:space:]' < "$ag/source/course/.gradescope-labs")
[ "$labs" = 1,2 ] || fail "course/.gradescope-labs says '$labs', not 1,2"

# --- setup.sh, once, as Gradescope runs it when it builds the image.
echo "running setup.sh (configures the course and builds the trusted side of labs 1 and 2)"
start=$(date +%s)
(cd "$ag" && env -u COURSE_BUILD_DIR AUTOGRADER_ROOT="$ag" bash "$ag/source/setup.sh") > "$work/setup.log" 2>&1 ||
  { show_log "$work/setup.log" 60; stop "setup.sh failed"; }
echo "setup.sh took $(( $(date +%s) - start )) s"
build=$ag/source/course/build
for n in 1 2; do
  [ -x "$build/grader/lab${n}_"*/grade_lab$n ] || fail "setup.sh did not build the grader of lab $n"
done
[ ! -e "$build/grader/lab3_attention/grade_lab3" ] || fail "setup.sh built lab 3's grader, which this assignment does not grade"
cp "$ag/source/run_autograder" "$ag/run_autograder"
[ -x "$ag/run_autograder" ] || stop "run_autograder is not executable"

# --- The submissions.
submit() {  # NAME: grades $ag/submission; the results in $work/NAME.json, the output in NAME.log
  local name=$1
  rm -rf "$ag/results"
  mkdir -p "$ag/results"
  local start; start=$(date +%s)
  (cd "$ag" && env -u COURSE_BUILD_DIR AUTOGRADER_ROOT="$ag" ./run_autograder) > "$work/$name.log" 2>&1
  local status=$?
  echo "run_autograder ($name): exit $status, $(( $(date +%s) - start )) s"
  grep -E '^ *[0-9]+ +lab[0-9]' "$work/$name.log" | sed 's/^/    /'
  if [ $status -ne 0 ] || [ ! -f "$ag/results/results.json" ]; then
    show_log "$work/$name.log"
    fail "$name: run_autograder failed or wrote no results/results.json"
    return 1
  fi
  cp "$ag/results/results.json" "$work/$name.json"
  if ! "$validate" "$schema" "$work/$name.json" > "$work/$name.schema.txt"; then
    head -n 10 "$work/$name.schema.txt" | sed 's/^/    /'
    [ "$(wc -l < "$work/$name.schema.txt")" -le 10 ] || echo "    ... ($(wc -l < "$work/$name.schema.txt") problems in all)"
    fail "$name: results.json is not valid against Gradescope's schema"
    return 1
  fi
}

# expect NAME KIND: the points of $work/NAME.json are what KIND (full, not_implemented,
# rejected) must earn; prints a FAILED line for each way they are not.
expect() {
  python3 - "$work/$1.json" "$1" "$2" <<'EOF'
import json, sys
path, name, kind = sys.argv[1:]
r = json.load(open(path, encoding="utf-8"))
tests = r["tests"]
problems = []
labs = sorted({t["number"] for t in tests})
if labs != ["1", "2"]:
    problems.append("graded the labs %s, not 1 and 2" % ", ".join(labs))
possible = sum(t["max_score"] for t in tests)
earned = sum(t["score"] for t in tests)
if abs(r["score"] - earned) > 1e-9:
    problems.append("the score %s is not the sum of the tests' scores, %s" % (r["score"], earned))
if any(t["score"] > t["max_score"] for t in tests):
    problems.append("a test scores above its max_score")
if kind == "full":
    if possible <= 0 or r["score"] != possible:
        problems.append("the solution earns %s of %s" % (r["score"], possible))
    for t in tests:
        if t["status"] != "passed" or t["score"] != t["max_score"]:
            problems.append("lab %s, \"%s\": %s, %s of %s: %s" % (t["number"], t["name"], t["status"], t["score"], t["max_score"], t["output"][:200]))
else:
    if r["score"] != 0 or possible <= 0:
        problems.append("earns %s of %s, not 0" % (r["score"], possible))
    for t in tests:
        if t["status"] != "failed" or t["score"] != 0:
            problems.append("lab %s, \"%s\" is %s with %s points" % (t["number"], t["name"], t["status"], t["score"]))
    for lab in labs:
        outputs = [t["output"] for t in tests if t["number"] == lab]
        if kind == "not_implemented":
            if not any("not implemented" in o for o in outputs):
                problems.append("lab %s: no check says \"not implemented\"" % lab)
        elif lab == "2":  # the hostile submission's lab 2 is a symbolic link to the solution
            if not all("symbolic link" in o for o in outputs):
                problems.append("lab 2 was not refused as a symbolic link: %s" % outputs[0][:300])
        else:  # rejected: every check of lab 1 says that it was not built, the output says why
            why = "solutions/lab1_softmax/softmax.cpp"
            if not all("did not build" in o for o in outputs) or why not in r.get("output", ""):
                problems.append("lab 1 was not rejected for including %s: %s / %s" % (why, outputs[0][:200], r.get("output", "")[:300]))
for p in problems[:10]:
    print("FAILED (gradescope, %s): %s" % (name, p))
if len(problems) > 10:
    print("FAILED (gradescope, %s): ... and %d more" % (name, len(problems) - 10))
print("%s: %s of %s points%s" % (name, r["score"], possible, "" if problems else ", as expected"))
sys.exit(1 if problems else 0)
EOF
  [ $? = 0 ] || fail "$1: not the points it should earn"
}

# The solutions, as lab folders at the top of the submission.
mkdir -p "$ag/submission"
cp -r "$repo/solutions/lab1_softmax" "$repo/solutions/lab2_combine" "$ag/submission/"
submit solution && expect solution full

# An assignment of lab 1 alone (as `./course gradescope --lab 1` writes it), and a student who
# uploaded softmax.cpp itself, no folder (Gradescope's drag and drop): graded as lab1_softmax/,
# full marks. (The same root: setup.sh built lab 1's grader too.)
echo 1 > "$ag/source/course/.gradescope-labs"
rm -rf "$ag/submission"; mkdir -p "$ag/submission"
cp "$repo/solutions/lab1_softmax/softmax.cpp" "$ag/submission/"
if submit loose_file; then
  grep -q "graded as lab1_softmax/" "$work/loose_file.log" || fail "loose_file: run_autograder did not say where it put the file"
  python3 - "$work/loose_file.json" <<'EOF' || fail "loose_file: an uploaded softmax.cpp did not earn lab 1's points"
import json, sys
r = json.load(open(sys.argv[1], encoding="utf-8"))
tests = r["tests"]
labs = {t["number"] for t in tests}
possible = sum(t["max_score"] for t in tests)
if labs != {"1"} or possible <= 0 or r["score"] != possible:
    sys.exit("labs %s, %s of %s points" % (sorted(labs), r["score"], possible))
EOF
fi
printf '%s\n' "$labs" > "$ag/source/course/.gradescope-labs"

# No lab folder at all (a file of notes, to the assignment of labs 1 and 2): a score of 0 that says
# why, in a valid results.json, not an autograder failure.
rm -rf "$ag/submission"; mkdir -p "$ag/submission"
echo "my notes" > "$ag/submission/notes.txt"
if submit no_labs; then
  python3 - "$work/no_labs.json" <<'EOF' || fail "no_labs: not a score of 0 saying that the submission has no lab folder"
import json, sys
r = json.load(open(sys.argv[1], encoding="utf-8"))
if r["score"] != 0 or "no lab folder in the submission" not in r["output"]:
    sys.exit("score %s, output %r" % (r["score"], r["output"][:300]))
EOF
fi

# The skeletons, in a labs/ folder.
rm -rf "$ag/submission"; mkdir -p "$ag/submission/labs"
cp -r "$repo/labs/lab1_softmax" "$repo/labs/lab2_combine" "$ag/submission/labs/"
submit skeleton && expect skeleton not_implemented

# Hostile: lab 1 includes the solution inside the autograder's own source by its absolute path,
# and lab 2 is a symbolic link to the solution's folder there.
rm -rf "$ag/submission"; mkdir -p "$ag/submission"
cp -r "$repo/labs/lab1_softmax" "$ag/submission/"
printf '#include "%s"\n' "$ag/source/course/solutions/lab1_softmax/softmax.cpp" > "$ag/submission/lab1_softmax/softmax.cpp"
ln -s "$ag/source/course/solutions/lab2_combine" "$ag/submission/lab2_combine"
submit hostile && expect hostile rejected

# A container where bubblewrap cannot make namespaces (COURSE_SANDBOX=filter, as it falls back
# there): lab 1 reads the autograder's own copy of the solution at run time and sends it back in
# its messages (grader/tests/attacks/read_the_solution.cpp); lab 2 is the solution. Landlock's file
# rules must keep the solution out of the results; without them (COURSE_LANDLOCK=off) it must come
# back, which shows that the check can fail.
leaks() {  # NAME: 0 when $work/NAME.json holds a line of lab 1's solution
  python3 - "$work/$1.json" "$repo/solutions/lab1_softmax/softmax.cpp" <<'EOF'
import json, sys
results, solution = sys.argv[1:]
text = json.dumps(json.load(open(results, encoding="utf-8")))
lines = [l.strip() for l in open(solution, encoding="utf-8") if len(l.strip()) > 30]
sys.exit(0 if any(json.dumps(l)[1:-1] in text for l in lines) else 1)
EOF
}
rm -rf "$ag/submission"; mkdir -p "$ag/submission"
cp -r "$repo/labs/lab1_softmax" "$repo/solutions/lab2_combine" "$ag/submission/"
"$repo/grader/tests/test_attack.sh" "$repo" "${COURSE_BUILD_DIR:-$repo/build}" read_the_solution \
  --compose "$ag/submission/lab1_softmax/softmax.cpp" > /dev/null || stop "could not compose read_the_solution"
sed -i "s|$repo/solutions/|$ag/source/course/solutions/|" "$ag/submission/lab1_softmax/softmax.cpp"
if COURSE_SANDBOX=filter submit reader; then
  grep -q "within Landlock's file rules" "$ag/results/course/lab1/lab-process.log" 2>/dev/null ||
    echo "note: no Landlock here: $(head -n 1 "$ag/results/course/lab1/lab-process.log" 2>/dev/null)"
  ! leaks reader || fail "reader: the solution came back in results.json without namespaces"
  python3 - "$work/reader.json" <<'EOF' || fail "reader: lab 1 earned points, or lab 2 lost some"
import json, sys
tests = json.load(open(sys.argv[1], encoding="utf-8"))["tests"]
lab = lambda n, key: sum(t[key] for t in tests if t["number"] == n)
sys.exit(0 if lab("1", "score") == 0 and lab("2", "score") == lab("2", "max_score") > 0 else 1)
EOF
fi
if COURSE_SANDBOX=filter COURSE_LANDLOCK=off submit reader_without_file_rules; then
  leaks reader_without_file_rules || fail "reader_without_file_rules: the solution did not come back, so the check above cannot fail"
fi

if [ $failures -gt 0 ]; then
  echo "gradescope end to end: $failures failure(s) (the logs of setup.sh and run_autograder are kept)"
  exit 1
fi
echo "gradescope end to end: passed"
