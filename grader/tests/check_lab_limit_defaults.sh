#!/usr/bin/env bash
# ./course shares the machine's memory out among the jobs of a grading, and caps each share at a
# lab process's default limits; lab_process.cpp applies those defaults where nothing lowers them.
# The two spell the same three numbers (address space of a CPU lab, writable memory of a GPU lab,
# the sandbox's /tmp): this fails where they differ, naming the one that does. With --self-test it
# checks that it can fail: a copy of ./course with one number changed must be rejected.
#
# Usage: check_lab_limit_defaults.sh SOURCE_DIR [--self-test]
set -uo pipefail
src=$1
course=$src/course lab_process=$src/grader/isolation/lab_process.cpp
# One default each, from each file: the number after the name, or "" where it is not found.
from_course() {
  case "$1" in
    memory) sed -nE 's/^default_lab_memory_mb=([0-9]+).*/\1/p' "$2" ;;
    gpu_data) sed -nE 's/.*default_gpu_data_mb=([0-9]+).*/\1/p' "$2" ;;
    tmp) sed -nE 's/.*local tmp_mb=\$\(\(share \/ 8 < ([0-9]+) \? share \/ 8 : ([0-9]+)\)\).*/\2/p' "$2" ;;
  esac
}
from_lab_process() {
  local name; name=$(case "$1" in memory) echo MEMORY ;; gpu_data) echo GPU_DATA ;; tmp) echo TMP ;; esac)
  sed -nE "s/.*env_long\(\"COURSE_LAB_${name}_MB\", ([0-9]+)\).*/\1/p" "$lab_process" | head -n 1
}
check() {  # COURSE_FILE: 0 when every default agrees
  local bad=0 what a b
  for what in memory gpu_data tmp; do
    a=$(from_course "$what" "$1") b=$(from_lab_process "$what")
    if [ -z "$a" ] || [ -z "$b" ]; then
      echo "FAILED: the default $what limit was not found (./course: '${a}', lab_process.cpp: '${b}')"; bad=1
    elif [ "$a" != "$b" ]; then
      echo "FAILED: the default $what limit is $a MiB in ./course and $b MiB in lab_process.cpp"; bad=1
    else
      echo "ok: the default $what limit is $a MiB in both"
    fi
  done
  return $bad
}
if [ "${2:-}" = --self-test ]; then
  copy=$(mktemp)
  trap 'rm -f "$copy"' EXIT
  memory=$(from_course memory "$course")
  sed -E "s/^default_lab_memory_mb=$memory/default_lab_memory_mb=$((memory + 1))/" "$course" > "$copy"
  if check "$copy" > /dev/null; then echo "FAILED: a ./course whose default differs was accepted"; exit 1; fi
  echo "ok: a ./course whose default differs is rejected"
  exit 0
fi
check "$course"
