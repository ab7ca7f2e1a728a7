#!/usr/bin/env bash
# A lab README's table of graded checks must name every check of the grader with its points,
# so the handout never drifts from what is graded. Usage: SCRIPT RUNNER GRADER README
set -euo pipefail
runner=$1 grader=$2 readme=$3
status=0
while IFS=$'\t' read -r points name; do
  # A table row: | `name` | points |
  if ! grep -Fq "| \`$name\` | $points |" "$readme"; then
    echo "$readme does not list the check \"$name\" worth $points (expected a row: | \`$name\` | $points |)"
    status=1
  fi
done < <("$runner" list --binary "$grader")
[ $status = 0 ] && echo "$readme lists every check of $(basename "$grader") with its points"
exit $status
