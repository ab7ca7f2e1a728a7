#!/usr/bin/env bash
# A class with hostile submissions graded beside an honest one by ./course grade-all at --jobs 4,
# as an instructor runs it on a machine with less memory than that asks for: each hostile lab 1
# (grader/tests/attacks/NAME.cpp, composed as test_attack.sh does; lab 2 the solution) earns nothing, and the honest neighbour, graded at the
# same time, keeps every point and finds its files untouched. The attacks chosen act on others:
# SIGKILL, prlimit and renice every process they can see, fork, hog memory, read the solution.
#
# Usage: test_grade_all_attacks.sh REPO_ROOT BUILD_DIR
set -uo pipefail
root=$1 build=$2
work=$(mktemp -d)
chmod 711 "$work"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
if [ "$(uname -m)" != x86_64 ]; then echo "SKIPPED: the attacks make raw x86-64 system calls"; exit 77; fi
export COURSE_BUILD_DIR=$build COURSE_NO_CUDA=1 COURSE_BUILD_TIMEOUT=60 COURSE_CALL_TIMEOUT=5

subs=$work/submissions
mkdir -p "$subs/honest"
cp -r "$root/solutions/lab1_softmax" "$root/solutions/lab2_combine" "$subs/honest/"
attacks=(harm_the_neighbours fork_children memory_hog read_the_solution)
for a in "${attacks[@]}" harm_the_neighbours; do
  name=$a; [ -d "$subs/$name" ] && name=$a-again  # two harmers, so that one overlaps the honest grading
  mkdir -p "$subs/$name"
  cp -r "$root/solutions/lab2_combine" "$root/labs/lab1_softmax" "$subs/$name/"
  "$root/grader/tests/test_attack.sh" "$root" "$build" "$a" --compose "$subs/$name/lab1_softmax/softmax.cpp" ||
    fail "could not compose the attack $a"
done
before=$(cd "$subs/honest" && find . -type f -print0 | sort -z | xargs -0 sha256sum)

# On a machine smaller than --jobs 4 asks for (grading may use 6 GiB): three at a time, each with
# 2 GiB, so the memory hog's lab process gets 1536 MiB of address space, not the 8 GiB it gets
# graded alone; the runs beside it fit in what grading may use.
COURSE_GRADING_MEMORY_MB=6144 "$root/course" grade-all "$subs" --labs 1,2 --jobs 4 --out "$work/out" > "$work/grade-all.txt" 2>&1
cat "$work/grade-all.txt"
grep -q "holds 3 jobs of 2048 MiB" "$work/grade-all.txt" && grep -q "3 at a time, each with 2048 MiB" "$work/grade-all.txt" || fail "grade-all did not lower --jobs to what 6 GiB holds"
grep -q "each job's build folder may hold" "$work/grade-all.txt" || fail "grade-all did not share the disk among its jobs"
hog_log=$work/out/submissions/memory_hog/lab1/lab-process.log
grep -q "with 1536 MiB of address space" "$hog_log" ||
  fail "the memory hog's lab process did not get a third of 6 GiB less its /tmp: $(head -n 1 "$hog_log" 2>/dev/null)"
book=$work/out/gradebook.csv
[ -f "$book" ] || fail "no gradebook"
# The gradebook's rows as name,total,lab points... : read with Python's csv module.
python3 - "$book" <<'PY' || fail "the gradebook is not as expected"
import csv, sys
rows = {r["submission"]: r for r in csv.DictReader(open(sys.argv[1], encoding="utf-8"))}
bad = []
honest = rows.get("honest")
if not honest or honest["lab1"] != "21" or honest["lab2"] != "25":
    bad.append(f"the honest submission lost points: {honest}")
for name, r in rows.items():
    if name != "honest" and r["lab1"] != "0":
        bad.append(f"{name} earned {r['lab1']} on lab 1")
    if name != "honest" and r["lab2"] != "25":
        bad.append(f"{name}'s honest lab 2 lost points: {r['lab2']}")
if len(rows) != 6:
    bad.append(f"{len(rows)} rows, not 6")
for b in bad: print(b)
sys.exit(1 if bad else 0)
PY
after=$(cd "$subs/honest" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
[ "$before" = "$after" ] || fail "the honest submission's files changed"
echo "grade-all with attacks: the honest neighbour kept its points and files"
