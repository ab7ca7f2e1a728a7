#!/usr/bin/env bash
# The launcher (grader/isolation/launcher_main.cpp) installs the system-call filter before the
# lab's program runs its first instruction, with the GPU labs' rules ("gpu-filter") as with the
# CPU labs' ("filter"): a program whose IFUNC resolver prints its seccomp mode (ifunc_probe.cpp)
# must print 2 under both, and 0 under "no-filter", which shows the probe can fail.
#
# Usage: test_launcher_filter.sh LAB_LAUNCHER IFUNC_PROBE
set -uo pipefail
launcher=$1 probe=$2
# The launcher runs the program open at descriptor 1023 (isolation::kExecFd), as the grader
# leaves it.
run_under() { bash -c 'exec 1023<"$1" && exec "$2" "$3"' _ "$probe" "$launcher" "$1" 2>&1; }
base=$(awk '/^Seccomp:/ { print $2 }' /proc/self/status)
if [ "$base" != 0 ]; then
  echo "SKIPPED: this test already runs under a seccomp filter (mode $base), so no-filter cannot show 0"
  exit 77
fi
status=0
for mode in filter gpu-filter no-filter; do
  want=2
  [ "$mode" = no-filter ] && want=0
  got=$(run_under "$mode")
  echo "$mode: $got"
  [ "$got" = "ifunc resolver: Seccomp $want" ] ||
    { echo "FAILED: under '$mode' the IFUNC resolver saw '$got', expected seccomp mode $want"; status=1; }
done
exit $status
