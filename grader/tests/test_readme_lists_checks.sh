#!/usr/bin/env bash
# A lab README's "What is graded" section must agree with the grader, so the handout never drifts
# from what is graded:
#   - its table names every check of the grader with the grader's points (a row
#     | `name` | points | ..., further columns allowed);
#   - every row of that table is a check of the grader with those points (no check the grader
#     no longer has, no points the grader does not give);
#   - the heading's total, "## What is graded (N points...)", is the sum of the grader's points,
#     and a breakdown in it ("N points: a for part 1, b for part 2") adds up to N.
# The grader's own list comes from `course_runner list` (each check's points and name).
# Usage: SCRIPT RUNNER GRADER README
set -euo pipefail
# A command that fails stops the script (set -e): say which, so that a failure is never silent.
trap 'echo "FAILED: line $LINENO of $0: \"$BASH_COMMAND\" exited $?"' ERR
runner=$1 grader=$2 readme=$3
status=0
if ! listed=$("$runner" list --binary "$grader"); then
  echo "$runner list --binary $grader failed: no list of checks to compare $readme with"
  exit 1
fi
if [ -z "$listed" ]; then
  echo "$(basename "$grader") lists no check"
  exit 1
fi

# The grader's checks, each in the table with its points.
while IFS=$'\t' read -r points name; do
  if ! grep -Fq "| \`$name\` | $points |" "$readme"; then
    echo "$readme does not list the check \"$name\" worth $points (expected a row: | \`$name\` | $points |)"
    status=1
  fi
done <<< "$listed"

# The section: from its heading to the next heading of the same level.
section=$(awk '/^## What is graded/ { on = 1; print; next } on && /^## / { on = 0 } on' "$readme")
heading=${section%%$'\n'*}  # the first line (a pipe into head could die of SIGPIPE under pipefail)
if [ -z "$heading" ]; then
  echo "$readme has no \"## What is graded (N points)\" section"
  exit 1
fi

# Every row of the table, a check of the grader with the same points.
while IFS= read -r row; do
  name=$(printf '%s' "$row" | sed -E 's/^\| `(.*)` \| ([0-9]+) \|.*$/\1/')
  points=$(printf '%s' "$row" | sed -E 's/^\| `(.*)` \| ([0-9]+) \|.*$/\2/')
  graded=$(printf '%s\n' "$listed" | awk -F'\t' -v n="$name" '$2 == n { print $1 }')
  if [ -z "$graded" ]; then
    echo "$readme lists \"$name\" worth $points, which $(basename "$grader") does not grade"
    status=1
  elif [ "$graded" != "$points" ]; then
    echo "$readme gives \"$name\" $points points; $(basename "$grader") gives it $graded"
    status=1
  fi
done < <(printf '%s\n' "$section" | grep -E '^\| `.*` \| [0-9]+ \|' || true)

# The heading's total, and its breakdown if it has one.
total=$(printf '%s\n' "$listed" | awk -F'\t' '{ s += $1 } END { print s }')
stated=$(printf '%s' "$heading" | sed -nE 's/^## What is graded \(([0-9]+) points?[:)].*$/\1/p')
if [ -z "$stated" ]; then
  echo "$readme: the heading \"$heading\" states no total (expected \"## What is graded ($total points)\")"
  status=1
elif [ "$stated" != "$total" ]; then
  echo "$readme: \"$heading\" says $stated points; $(basename "$grader")'s checks add up to $total"
  status=1
fi
parts=$(printf '%s' "$heading" | sed -nE 's/^## What is graded \([0-9]+ points?: (.*)\)$/\1/p')
if [ -n "$parts" ]; then
  sum=$(printf '%s\n' "$parts" | grep -oE '(^|, )[0-9]+ for' | grep -oE '[0-9]+' | awk '{ s += $1 } END { print s + 0 }')
  if [ "$sum" != "$total" ]; then
    echo "$readme: the parts in \"$heading\" add up to $sum, not $total"
    status=1
  fi
fi

[ $status = 0 ] && echo "$readme lists every check of $(basename "$grader") with its points, $total in all"
exit $status
