#!/usr/bin/env bash
# Gradescope image setup (runs once, as root, when the autograder is built): installs what the
# course needs and builds the trusted side (the runner, each lab's grader and the solution's lab
# process), so that grading a submission compiles only the submission. Made by
# `./course gradescope`.
set -euo pipefail
cd /autograder/source/course
./course setup
targets=(course_runner)
while IFS=$'\t' read -r n _ _ grader _; do
  [ "$grader" = "-" ] || targets+=("grade_lab$n" "lab${n}_worker_solution")
done < build/graders.tsv
cmake --build build -j "$(nproc)" --target "${targets[@]}"
