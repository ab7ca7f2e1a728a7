#!/bin/sh
# Stands in for a tool that, like compute-sanitizer, reaches the folder it was started in by its
# path and then runs the program it is given by its path. compute-sanitizer, started in a folder
# its user could not reach, said only "Error launching target app."
here=$(pwd -P 2>/dev/null) && cd "$here" 2>/dev/null || {
  echo "tool_needing_its_folder: cannot reach the folder it was started in (${here:-unknown})"
  exit 1
}
exec "$@"
