# Sourced by the tests of how grading copes with an older bubblewrap (test_old_bubblewrap.sh,
# test_bubblewrap_without_bind_fd.sh). use_stand_in_bubblewrap OPTION skips the test (status 77)
# where bubblewrap is not installed, else makes a temporary folder, removed when the test exits,
# and the stand-in in it; it sets dir (the folder) and calls (its record of calls).
# stand_in_bubblewrap DIR OPTION writes DIR/bwrap, a
# bubblewrap that refuses OPTION as an older one does ("Unknown option", exit 1) and otherwise runs
# the real one, noting each call in DIR/calls: "refused OPTION ..." or "ran ARGUMENTS". DIR is
# opened to every user: the lab process's user (nobody, when grading as root) runs the stand-in.
stand_in_bubblewrap() {
  local dir=$1 option=$2 real
  real=$(command -v bwrap) || return 1
  chmod 755 "$dir"
  touch "$dir/calls" && chmod 666 "$dir/calls"
  {
    echo '#!/bin/sh'
    echo 'for a in "$@"; do'
    echo "  if [ \"\$a\" = $option ]; then echo \"refused $option \$*\" >> '$dir/calls'; echo 'bwrap: Unknown option $option' >&2; exit 1; fi"
    echo 'done'
    echo "echo \"ran \$*\" >> '$dir/calls'"
    echo "exec '$real' \"\$@\""
  } > "$dir/bwrap"
  chmod 755 "$dir/bwrap"
}

use_stand_in_bubblewrap() {
  command -v bwrap > /dev/null || { echo "skipped: bubblewrap is not installed"; exit 77; }
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  stand_in_bubblewrap "$dir" "$1"
  calls=$dir/calls
}
