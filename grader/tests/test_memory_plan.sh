#!/usr/bin/env bash
# grade-all's share of the memory and the disk (./course's share_memory and share_disk) over a grid
# of machines: what grading may use (COURSE_GRADING_MEMORY_MB, COURSE_GRADING_DISK_MB), --jobs,
# cores, with and without GPU labs. Whatever
# the jobs run at one time (each job either its lab process, with its /tmp and /dev/shm, or its
# compiles with their /tmp) must fit in what grading may use, with as many jobs as fit, none
# below what an honest job needs (the floors in ./course: a compile 1536 MiB, a job 2048 MiB, a
# GPU lab 4096 MiB),
# and never more jobs or compiles than asked for. Where not even one job fits, one runs, and the
# message says so; limits set in the environment are kept. Then three copies of ./course, each
# with a planted bug (the lab's limit not shared, --jobs not lowered, compiles not lowered), must
# each fail the same checks.
# usage: test_memory_plan.sh REPO_ROOT
set -uo pipefail
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/course_copy.sh"

declare -A p  # the figures of one plan, by name (plan)
plan() {  # $1 = a ./course, $2 = memory MiB, $3 = disk MiB, $4 = --jobs, $5 = cores, $6 = GPU labs (0|1)
  local line name value
  line=$(COURSE_GRADING_MEMORY_MB=$2 COURSE_GRADING_DISK_MB=$3 "$1" _memory-plan "$4" "$5" "$6" | tail -n 1)
  p=()
  set -- $line
  while [ $# -ge 2 ]; do p[$1]=$2; shift 2; done
  p[line]=$line
}
# The jobs that TOTAL MiB hold at FLOOR MiB each, at most WANT and at least one.
expected_jobs() {  # $1 = WANT, $2 = TOTAL, $3 = FLOOR
  local fits=$(($2 / $3))
  [ "$fits" -ge 1 ] || fits=1
  echo $(($1 < fits ? $1 : fits))
}

check_plans() {  # $1 = a ./course; prints the failures, returns 1 where there are any
  local course=$1 bad=0 total gpu want cores disk out why
  for total in 2500 6144 17000 64000 200000 1000000; do
    for gpu in 0 1; do
      local floor=$((gpu == 1 ? 4608 : 2048))
      for want in 1 2 3 4 8 16 64; do
        for cores in 1 2 16 128; do
          plan "$course" "$total" 1000000 "$want" "$cores" "$gpu"
          local jobs=${p[jobs]} lab=${p[lab]} data=${p[data]} tmp=${p[tmp]} compile=${p[compile]}
          local lab_process=$(( (gpu == 1 && data > lab ? data : lab) + 2 * tmp ))
          local build=$((p[build_jobs] * compile + p[build_tmp]))
          local running=$((lab_process > build ? lab_process : build)) expect
          expect=$(expected_jobs "$want" "$total" "$floor")
          why=""
          [ "$jobs" = "$expect" ] || why="$jobs jobs at a time, not $expect"
          [ $((jobs * running)) -le $((total > floor ? total : floor)) ] || why="$why; $jobs jobs of $running MiB exceed $total"
          [ "$compile" -ge 1536 ] && [ "$lab" -ge 1024 ] || why="$why; a compile gets $compile MiB, a lab $lab"
          [ "$gpu" = 0 ] || [ "$data" -ge 4096 ] || why="$why; a GPU lab gets $data MiB"
          [ "${p[build_jobs]}" -ge 1 ] && [ "${p[build_jobs]}" -le $(( (cores + jobs - 1) / jobs )) ] ||
            why="$why; ${p[build_jobs]} compiles at a time"
          [ "$lab" -le 8192 ] && [ "$data" -le 16384 ] && [ "$compile" -le 16384 ] && [ "$tmp" -le 256 ] ||
            why="$why; above the defaults: ${p[line]}"
          if [ -n "$why" ]; then
            echo "  $total MiB, GPU labs $gpu, --jobs $want, $cores cores: ${why#; }"; bad=$((bad + 1))
          fi
        done
      done
    done
  done
  # The disk: each job's build folder and what a build step may write before its quota is checked.
  for disk in 300 3000 20000 500000; do
    for want in 1 2 3 8 64; do
      for cores in 1 16; do
        plan "$course" 1000000 "$disk" "$want" "$cores" 0
        local jobs=${p[jobs]} quota=${p[quota]} file=${p[file]} expect
        local held=$((quota + p[build_jobs] * (file > 64 ? file : 0)))  # a file at its 64 MiB floor aside
        expect=$(expected_jobs "$want" "$disk" 512)
        why=""
        [ "$jobs" = "$expect" ] || why="$jobs jobs at a time, not $expect"
        [ $((jobs * held)) -le $((disk > 512 ? disk : 512)) ] || why="$why; $jobs build folders of $held MiB exceed $disk"
        [ "$quota" -ge 256 ] && [ "$quota" -le 4096 ] && [ "$file" -ge 64 ] && [ "$file" -le 1024 ] ||
          why="$why; a quota of $quota MiB, files of $file"
        if [ -n "$why" ]; then
          echo "  disk $disk MiB, --jobs $want, $cores cores: ${why#; }"; bad=$((bad + 1))
        fi
      done
    done
  done
  out=$(COURSE_GRADING_MEMORY_MB=1000 COURSE_GRADING_DISK_MB=1000000 "$course" _memory-plan 4 2 0)
  grep -q "warning: grading may use 1000 MiB of memory (COURSE_GRADING_MEMORY_MB sets it), less than one job" <<< "$out" ||
    { echo "  no warning: $out"; bad=$((bad + 1)); }
  grep -q "^jobs 1 " <<< "$out" || { echo "  not one job: $out"; bad=$((bad + 1)); }
  out=$(COURSE_GRADING_MEMORY_MB=6144 COURSE_GRADING_DISK_MB=100000 COURSE_LAB_MEMORY_MB=700 COURSE_BUILD_MEMORY_MB=900 \
        COURSE_BUILD_QUOTA_MB=300 "$course" _memory-plan 3 2 0 | tail -n 1)
  [[ "$out" == "jobs 3 build_jobs 1 lab 700 data "*" compile 900 "*" quota 300 "* ]] ||
    { echo "  the environment's limits were not kept: $out"; bad=$((bad + 1)); }
  return "$((bad > 0))"
}

echo "== ./course"
check_plans "$root/course" || { echo "FAILED: a plan does not fit"; exit 1; }
plant() {  # $1 = what is planted, $2 = FROM, $3 = TO: the copy must fail
  course_copy "$root/course" "$root" "$work/course"
  course_plant "$work/course" "$2" "$3"
  echo "== planted: $1"
  local failures
  failures=$(check_plans "$work/course") && { echo "FAILED: the planted bug ($1) passed"; exit 1; }
  head -n 3 <<< "$failures"
}
plant "the lab's limit not shared" 'export COURSE_LAB_MEMORY_MB=${COURSE_LAB_MEMORY_MB:-$((rest < default_lab_memory_mb ? rest : default_lab_memory_mb))}' 'export COURSE_LAB_MEMORY_MB=8192'
plant "the GPU lab's floor left out" '[ "$gpu" = 1 ] && [ "$floor" -lt "$gpu_floor" ] && floor=$gpu_floor' ':'
plant "--jobs not lowered" 'if [ "$njobs" -gt "$fit" ]; then' 'if false; then'
plant "compiles not lowered" '[ "$build_jobs" -le "$most" ] || build_jobs=$most' ':'
plant "the build quota not shared" 'build_quota_mb=${COURSE_BUILD_QUOTA_MB:-$((half < default_build_quota_mb ? half : default_build_quota_mb))}' 'build_quota_mb=4096'
plant "the disk's jobs not fitted" 'fit_jobs "$disk_total" "$min_job_disk_mb" "disk for its builds" COURSE_GRADING_DISK_MB ||
    disk_total=$min_job_disk_mb' ':'
echo "ok: every plan fits, and each planted bug was caught"
