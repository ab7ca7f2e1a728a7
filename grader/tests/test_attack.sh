#!/usr/bin/env bash
# One hostile submission against the whole grading path: the student build (vetting included),
# the lab process and the runner. The submission's lab 1 is the attack (grader/tests/attacks/
# NAME.cpp, composed into an otherwise unimplemented softmax.cpp); its lab 2 is the solution, an
# honest lab graded in the same run that must keep its full marks. Asserted: lab 1 earns nothing (0 of all
# its points, listed, or a build rejected for the stated reason), lab 2 keeps its full marks,
# results.json parses as JSON, junit.xml as XML, the scoreboard holds no escape character, and
# nothing is rewritten after the runner has ended.
#
# Usage: test_attack.sh REPO_ROOT BUILD_DIR NAME      (NAME = stale_build: see the end)
#        test_attack.sh REPO_ROOT BUILD_DIR NAME --compose FILE   (writes the attack's lab 1 only)
set -uo pipefail
root=$1 build=$2 name=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED ($name): $*"; exit 1; }
export COURSE_BUILD_DIR=$build COURSE_NO_CUDA=1 COURSE_BUILD_TIMEOUT=90 COURSE_CALL_TIMEOUT=5
# A build that never ends (the compile-time bomb) is stopped by any limit: a short one keeps CI
# short. Every other attack's lab 1 must build, so it gets 90 s (a loaded CI machine).
[ "$name" = compile_time_bomb ] && export COURSE_BUILD_TIMEOUT=10

make_tree() {  # a submission: skeletons (its lab 2 is the solution, see grade)
  mkdir -p "$work/tree"
  cp -r "$root/labs/." "$work/tree/"
}

grade() {  # build lab 1, grade labs 1 and 2; the scoreboard in $work/board.txt
  "$root/course" _student-build "$work/tree" "$work/sb" "${1:-1}" 1 > "$work/build.txt" 2>&1 ||
    { cat "$work/build.txt"; fail "the student build stopped"; }
  # The honest lab 2 is the solution's lab process, built once by the main build.
  cp "$build/grader/lab2_combine/lab2_worker_solution" "$work/sb/workers/lab2_worker"
  "$build/grader/course_runner" grade --manifest "$build/graders.tsv" --workers "$work/sb/workers" \
    --labs 1,2 --out "$work/out" --timeout 10 > "$work/board.txt" 2>&1
  cat "$work/board.txt"
  # How lab 1's lab process ran (namespaces, filter, user, tool, memory): the log's first line.
  [ -f "$work/out/lab1/lab-process.log" ] && echo "lab 1: $(head -n 1 "$work/out/lab1/lab-process.log")"
  [ -f "$work/sb/workers/lab1.build-failed" ] && { echo "lab 1 build:"; cat "$work/sb/workers/lab1.build-failed"; }
}

check_outputs() {
  grep -Eq '^2 +lab2_combine +([0-9]+)\/\1 ' "$work/board.txt" || fail "the honest lab 2 lost points"
  # Whatever a lab answers, the trusted grader never crashes on it (its checks would go unrun).
  ! grep -q 'the grader crashed' "$work/board.txt" || fail "the attack crashed the trusted grader"
  python3 -c "import json; json.load(open('$work/out/results.json', encoding='utf-8'))" || fail "results.json is not valid JSON"
  python3 -c "import xml.dom.minidom as m; m.parse('$work/out/junit.xml')" || fail "junit.xml is not valid XML"
  ! grep -q $'\x1b' "$work/board.txt" "$work/out/results.json" "$work/out/junit.xml" || fail "an escape character got through"
  [ "$(stat -c %s "$work/out/results.json")" -lt 200000 ] || fail "results.json is larger than 200 KB"
  if [ -f "$work/out/lab1/lab-process.log" ]; then
    [ "$(stat -c %s "$work/out/lab1/lab-process.log")" -le $((1 << 20)) ] || fail "the lab process's log passed its 1 MiB limit"
    # What the lab printed is rewritten once grading ends, its escape codes shown as ^[ (an instructor may cat it).
    ! grep -q $'\x1b' "$work/out/lab1/lab-process.log" || fail "an escape character got through to the lab process's log"
  fi
}

if [ "$name" = stale_build ]; then
  # A correct lab 1 is built, then replaced by the skeleton with old time stamps: a build that
  # trusted time stamps would grade the old, correct objects.
  make_tree
  cp "$root/solutions/lab1_softmax/softmax.cpp" "$work/tree/lab1_softmax/softmax.cpp"
  grade 1 > /dev/null
  grep -Eq '^1 +lab1_softmax +([0-9]+)/\1 ' "$work/board.txt" || fail "the correct lab 1 did not earn full marks"
  cp "$root/labs/lab1_softmax/softmax.cpp" "$work/tree/lab1_softmax/softmax.cpp"
  touch -d '2000-01-01' "$work/tree/lab1_softmax/softmax.cpp"
  grade 0
  grep -Eq '^1 +lab1_softmax +0/[1-9][0-9] ' "$work/board.txt" || fail "the stale build was graded"
  check_outputs
  echo "attack $name: blocked"
  exit 0
fi

attack="$root/grader/tests/attacks/$name.cpp"
[ -f "$attack" ] || fail "no attack $attack"
# env: VAR=VALUE, the grading's settings for this attack (a smaller limit, as a model of the
# default), unless the test's environment sets VAR (a counterpart that lifts the limit).
while IFS= read -r setting; do
  var=${setting%%=*}
  [ -n "${!var:-}" ] || export "$setting"
done < <(sed -n 's|^// env: ||p' "$attack")
if grep -q 'asm volatile("syscall"' "$attack" && [ "$(uname -m)" != x86_64 ]; then
  echo "SKIPPED: raw x86-64 system calls"; exit 77
fi
# Without namespaces, only the files' modes stand between the lab's user and the solution: in a
# tree that user cannot enter (a clone under a private mktemp -d), reading it fails for that
# reason, and the run shows nothing of what the namespaces stop.
if [ "$name" = read_the_solution ] && [ "${COURSE_SANDBOX:-on}" != on ] && [ "$(id -u)" = 0 ] &&
   ! setpriv --reuid=65534 --regid=65534 --clear-groups test -r "$root/solutions/lab1_softmax/softmax.cpp" 2>/dev/null; then
  echo "SKIPPED: the lab's user (uid 65534) cannot read $root/solutions: its folders' modes stop the attack"
  exit 77
fi
make_tree
# @MARKER@: a file that the attack writes only if it runs code outside the system-call filter,
# in a folder that the lab process (user nobody when grading runs as root) may write to.
mkdir -p "$work/open" && chmod 711 "$work" && chmod 1777 "$work/open"
marker="$work/open/marker"
# @SOLUTION_WORKER@: the solution's lab process, copied where the lab process's user can run it
# (whatever the modes of the folders above the build), so that an attack on it fails only for
# what the grading does, never for a path it cannot reach.
solution_worker="$work/open/lab1_worker_solution"
cp "$build/grader/lab1_softmax/lab1_worker_solution" "$solution_worker" && chmod 755 "$solution_worker"
subst() { sed -e "s|@ROOT@|$root|g" -e "s|@SOLUTION_WORKER@|$solution_worker|g" -e "s|@MARKER@|$marker|g"; }
section() { awk -v want="$1" '/^\/\/ --- / { on = ($3 == want); next } on' "$attack" | subst; }
expect=$(sed -n 's|^// expect: ||p' "$attack" | subst)
out="$work/tree/lab1_softmax/softmax.cpp"
if grep -q '^// --- whole' "$attack"; then
  section whole > "$out"
else
  { echo '// A hostile lab 1 (grader/tests/attacks): it implements nothing and attacks the grader.'
    echo '#include "course/lab1_softmax.hpp"'
    section top
    echo 'namespace course::lab1 {'
    for fn in "Matrix<T> softmax_rows" "Vector<accum_t<T>> logsumexp_rows"; do
      echo "template <class T>"
      echo "$fn(const Matrix<T>& x) {"
      section body
      echo "  throw NotImplemented(\"${fn##* }\", \"labs/lab1_softmax/softmax.cpp\");"
      echo "}"
    done
    for T in double float bf16 fp16; do
      echo "template Matrix<$T> softmax_rows<$T>(const Matrix<$T>&);"
      echo "template Vector<accum_t<$T>> logsumexp_rows<$T>(const Matrix<$T>&);"
    done
    echo '}  // namespace course::lab1'; } > "$out"
fi
# --compose FILE: only write the composed lab 1 to FILE (for a class of attacks graded together).
if [ "${4:-}" = --compose ]; then cp "$out" "$5"; exit 0; fi
grade 1
before=$(sha256sum "$work/out/results.json" "$work/out/scores.tsv")
sleep 3  # anything left running would rewrite the results now
[ "$before" = "$(sha256sum "$work/out/results.json" "$work/out/scores.tsv")" ] || fail "the results changed after the runner ended"
case "$expect" in
  "no points") grep -Eq '^1 +lab1_softmax +0/[1-9][0-9] ' "$work/board.txt" || fail "lab 1 earned points: $(grep '^1 ' "$work/board.txt")" ;;
  *) grep -Eq '^1 +lab1_softmax +0/[1-9][0-9] +build failed' "$work/board.txt" || fail "lab 1 was not rejected at build time"
     [ "$expect" = "build failed" ] || grep -qF -- "$expect" "$work/sb/workers/lab1.build-failed" ||
       fail "lab 1 was rejected, but not for the reason \"$expect\"" ;;
esac
check_outputs
[ ! -e "$marker" ] || fail "the lab ran code outside the system-call filter: it wrote $(cat "$marker")"
# secret: a course file (solutions/...) that the attack tries to read and send back: no line of it
# that the repository's labs/ and include/ do not also hold may appear in the results.
secret=$(sed -n 's|^// secret: ||p' "$attack")
if [ -n "$secret" ]; then
  python3 - "$root" "$secret" "$work/out/results.json" "$work/board.txt" <<'PY' || fail "the results hold lines of $secret"
import json, pathlib, sys
root, secret, results, board = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
public = set()
for folder in ("labs", "include"):
    for f in (root / folder).rglob("*"):
        if f.is_file():
            public |= {l.strip() for l in f.read_text(errors="replace").splitlines()}
lines = {l.strip() for l in (root / secret).read_text().splitlines()}
lines = {l for l in lines if len(l) >= 20 and l not in public}
def strings(v):
    if isinstance(v, str): yield v
    elif isinstance(v, dict):
        for x in v.values(): yield from strings(x)
    elif isinstance(v, list):
        for x in v: yield from strings(x)
text = "\n".join(strings(json.load(open(results, encoding="utf-8")))) + open(board, errors="replace").read()
leaked = sorted(l for l in lines if l in text)
for l in leaked[:3]: print("leaked:", l)
sys.exit(1 if leaked else 0)
PY
fi
# message: a text that the failed checks' messages must hold (why the attack earned nothing).
message=$(sed -n 's|^// message: ||p' "$attack")
[ -z "$message" ] || grep -qF -- "$message" "$work/out/results.json" || fail "no check says \"$message\""
echo "attack $name: blocked"
