#!/usr/bin/env bash
# A GPU lab's sandbox holds the folder of the CUDA runtime its program loads, where the system's
# folders do not (library_folder_to_bind, grader/isolation/lab_process.hpp). Lab 1's solution
# stands in for a GPU lab: its program needs a stand-in library that lies in RUNTIME_FOLDER (made
# here, outside the system's folders), and its graders start it as a GPU lab's. In bubblewrap's
# namespaces and under Landlock's rules in turn:
#   - the grader built to bind RUNTIME_FOLDER: full marks, and the lab process's log names it;
#   - the grader built to bind none (the sandbox as it was before it held the runtime's folder):
#     the program cannot start, and the message says a shared library could not be loaded.
#
# Usage: test_gpu_runtime_folder.sh COURSE_RUNNER GRADER GRADER_WITHOUT_FOLDER WORKER LIBRARY RUNTIME_FOLDER
set -uo pipefail
runner=$1 grader=$2 grader_without=$3 worker=$4 library=$5 folder=$6
work=$(mktemp -d)
trap 'rm -rf "$work" "$folder"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
rm -rf "$folder" && mkdir -p "$folder" && chmod 755 "$folder" || fail "could not make $folder"
cp "$library" "$folder/" && chmod 644 "$folder/$(basename "$library")" || fail "could not copy the library"
# The lab process runs as another user when grading runs as root: it must reach the worker too.
cp "$worker" "$work/lab" && chmod 755 "$work" "$work/lab"
check="softmax: fp64 matches reference"
modes=(filter)
if command -v "${COURSE_BWRAP:-bwrap}" > /dev/null; then modes=(on filter); else echo "(no bubblewrap here: Landlock's rules only)"; fi
for mode in "${modes[@]}"; do
  echo "== COURSE_SANDBOX=$mode"
  # Graded as ./course grades (a manifest of one lab), so that the lab process's log is kept.
  printf '1\tlab1_softmax\tcpu\t%s\t%s\t-\n' "$grader" "$work/lab" > "$work/manifest.tsv"
  COURSE_SANDBOX=$mode "$runner" grade --manifest "$work/manifest.tsv" --solutions --labs 1 --out "$work/$mode" \
    > "$work/grade-$mode.txt" 2>&1
  grep -E "Score: [0-9]+/" "$work/grade-$mode.txt"
  grep -qE "Score: ([0-9]+)/\1 " "$work/grade-$mode.txt" || fail "$mode: the lab lost marks with its runtime's folder bound"
  how=$(head -n 1 "$work/$mode/lab1/lab-process.log")
  echo "$how"
  case "$how" in
    *"without file rules"*|*"without the system-call filter"*) echo "SKIPPED: no Landlock or no filter here"; exit 77 ;;
    *"the CUDA runtime's folder in view ($folder)"*) ;;
    *) fail "$mode: the lab process's log does not name the runtime's folder" ;;
  esac
  COURSE_SANDBOX=$mode "$runner" expect --binary "$grader_without" --worker "$work/lab" --fail "$check" \
    --message "could not load a shared library it needs" > "$work/planted-$mode.txt" 2>&1 ||
    { tail -n 5 "$work/planted-$mode.txt"; fail "$mode: without the runtime's folder the lab should not have started"; }
  tail -n 1 "$work/planted-$mode.txt"
done
echo "a GPU lab's sandbox holds the runtime's folder, and without it the lab cannot start"
