#!/usr/bin/env bash
# A lab's program that the dynamic loader cannot start (a shared library it needs is out of the
# sandbox's reach, as a CUDA toolkit under /opt would be) fails its checks with a message that says
# so, and that it is the machine's setup, not the lab's code. The stand-in program needs a library
# that is removed after it is linked.
#
# Usage: test_lab_cannot_load_library.sh COURSE_RUNNER GRADE_LAB1 CXX
set -uo pipefail
runner=$1 grader=$2 cxx=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
fail() { echo "FAILED: $*"; exit 1; }
echo 'int from_the_library() { return 0; }' > "$work/library.cpp"
"$cxx" -shared -fPIC -o "$work/libout_of_reach.so" "$work/library.cpp" || fail "could not build the library"
echo 'int from_the_library(); int main() { return from_the_library(); }' > "$work/lab.cpp"
"$cxx" -o "$work/lab" "$work/lab.cpp" -L"$work" -lout_of_reach -Wl,-rpath,"$work" || fail "could not build the program"
rm "$work/libout_of_reach.so"
"$runner" expect --binary "$grader" --worker "$work/lab" --fail "softmax: fp64 matches reference" \
  --message "could not load a shared library it needs" || fail "the message does not say that the program could not be loaded"
