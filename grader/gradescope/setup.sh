#!/usr/bin/env bash
# Gradescope image setup (runs once, as root, when the autograder is built): installs what the
# course needs and builds the trusted side (the runner, each lab's grader and the solution's lab
# process), so that grading a submission compiles only the submission. Made by
# `./course gradescope`; only the labs of the assignment (course/.gradescope-labs, written by
# `./course gradescope --lab`) are built.
#
# Gradescope's root is /autograder; AUTOGRADER_ROOT moves it, so that a test can lay out a root
# of its own (grader/tests/test_gradescope.sh).
set -euo pipefail
course=${AUTOGRADER_ROOT:-/autograder}/source/course
build=${COURSE_BUILD_DIR:-$course/build}  # where ./course builds: the two must agree
cd "$course"
# An autograder grades submissions and nothing else: no planted bugs or correct variants (the
# course's own tests), and no CUDA (Gradescope has no GPU; run_autograder grades the CPU labs).
./course setup -DCOURSE_PLANTED_BUGS=OFF -DCOURSE_ENABLE_CUDA=OFF
labs=all
[ -f .gradescope-labs ] && labs=$(tr -d '[:space:]' < .gradescope-labs)
echo "[setup] labs of this assignment: $labs"
targets=(course_runner)
while IFS=$'\t' read -r n _ _ grader _ note; do
  [[ "$labs" == all || ",$labs," == *",$n,"* ]] || continue
  if [ "$grader" = "-" ]; then
    # A GPU lab without the CUDA toolkit: run_autograder will show it as not built here.
    echo "[setup] lab $n cannot be graded on this image: $note"
  else
    targets+=("grade_lab$n" "lab${n}_worker_solution")
  fi
done < "$build/graders.tsv"
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
