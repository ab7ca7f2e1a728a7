#!/usr/bin/env bash
# The README check (test_readme_lists_checks.sh) must pass a README that agrees with its grader
# and fail copies of it that do not, each with a message naming what is wrong:
#   - the heading's total one point higher ("says N points");
#   - one check given one point more in the table ("gives ... points");
#   - a row for a check the grader does not have ("does not grade");
#   - a check's row left out ("does not list the check");
#   - where the heading breaks the total into parts, one part one point higher ("parts ... add up").
# Usage: SCRIPT RUNNER GRADER README [GRADER README ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
check=$here/test_readme_lists_checks.sh
runner=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

# expect_failure WHAT GRADER README PATTERN: the check must fail on README, saying PATTERN.
expect_failure() {
  local what=$1 grader=$2 readme=$3 pattern=$4 out
  if out=$("$check" "$runner" "$grader" "$readme" 2>&1); then
    echo "FAIL: $what: the check passed"
    status=1
  elif ! grep -Eq "$pattern" <<< "$out"; then
    echo "FAIL: $what: the check failed without saying /$pattern/:"
    printf '%s\n' "$out" | sed 's/^/  /'
    status=1
  else
    echo "ok   $what: $(grep -E "$pattern" <<< "$out" | head -n 1)"
  fi
}

while [ $# -ge 2 ]; do
  grader=$1 readme=$2
  shift 2
  lab=$(basename "$(dirname "$readme")")
  # Whether the README as it is agrees with its grader is labN.readme_lists_every_check's
  # business; here it is only said, so that a README being updated does not fail this test.
  if out=$("$check" "$runner" "$grader" "$readme" 2>&1); then
    echo "ok   $lab: the README as it is passes"
  else
    echo "note $lab: the README as it is already disagrees with its grader (see lab*.readme_lists_every_check)"
  fi

  first=$("$runner" list --binary "$grader" | sed -n 1p)  # sed reads to the end: no SIGPIPE under pipefail
  points=${first%%$'\t'*} name=${first#*$'\t'}

  copy=$work/$lab-total.md
  perl -pe 's/^(## What is graded \()(\d+)/$1 . ($2 + 1)/e' "$readme" > "$copy"
  expect_failure "$lab: total one point higher" "$grader" "$copy" "says [0-9]+ points; .* add up to [0-9]+"

  copy=$work/$lab-points.md
  NAME=$name POINTS=$points perl -pe 's/^(\| `\Q$ENV{NAME}\E` \| )$ENV{POINTS}( \|)/$1 . ($ENV{POINTS} + 1) . $2/e' \
    "$readme" > "$copy"
  expect_failure "$lab: \"$name\" one point more" "$grader" "$copy" "gives \".*\" $((points + 1)) points; .* gives it $points"

  copy=$work/$lab-stale.md
  NAME=$name perl -pe 'print "| `a check the grader does not have` | 1 |\n" if /^\| `\Q$ENV{NAME}\E` \|/' "$readme" > "$copy"
  expect_failure "$lab: a row for no check" "$grader" "$copy" "lists \"a check the grader does not have\" worth 1, which .* does not grade"

  copy=$work/$lab-missing.md
  NAME=$name perl -ne 'print unless /^\| `\Q$ENV{NAME}\E` \|/' "$readme" > "$copy"
  expect_failure "$lab: \"$name\" left out" "$grader" "$copy" "does not list the check \"$name\""

  if grep -Eq '^## What is graded \([0-9]+ points?: ' "$readme"; then
    copy=$work/$lab-parts.md
    perl -pe 's/^(## What is graded \(\d+ points?: )(\d+)/$1 . ($2 + 1)/e' "$readme" > "$copy"
    expect_failure "$lab: a part one point higher" "$grader" "$copy" "the parts in .* add up to [0-9]+, not [0-9]+"
  fi
done
exit $status
