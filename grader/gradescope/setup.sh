#!/usr/bin/env bash
# Gradescope image setup (runs once, as root, when the autograder is built): installs what the
# course needs and builds the trusted side (graders, runner, the solutions' lab processes), so
# that grading a submission only compiles the submission. Made by `./course gradescope`.
set -euo pipefail
cd /autograder/source/course
COURSE_NO_CUDA=1 ./course setup
cmake --build build -j "$(nproc)"
