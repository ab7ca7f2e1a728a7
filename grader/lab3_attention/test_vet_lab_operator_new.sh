#!/usr/bin/env bash
# A lab 3 that replaces the global operator new and delete (weakly, by ones that map memory) must
# be refused by vet-lab when it is built as a student's lab is: those functions would take every
# allocation of the lab process past the heap meter. The planted bug operator_new_by_mmap shows
# the grader's runtime checks catching the same code, which the trusted build never vets.
#
# Usage: test_vet_lab_operator_new.sh REPO_ROOT BUILD_DIR
set -uo pipefail
root=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
export COURSE_BUILD_DIR=$build COURSE_NO_CUDA=1

# The submission: the skeletons, lab 3's with the allocation functions appended.
mkdir -p "$work/tree"
cp -r "$root/labs/." "$work/tree/"
cat >> "$work/tree/lab3_attention/attention.cpp" <<'EOF'

#include <sys/mman.h>

#include <new>

__attribute__((weak)) void* operator new(std::size_t n) {
  void* p = mmap(nullptr, n + 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  *static_cast<std::size_t*>(p) = n + 16;
  return static_cast<char*>(p) + 16;
}
__attribute__((weak)) void operator delete(void* p) noexcept {
  if (p) munmap(static_cast<char*>(p) - 16, *reinterpret_cast<std::size_t*>(static_cast<char*>(p) - 16));
}
__attribute__((weak)) void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
EOF

"$root/course" _student-build "$work/tree" "$work/sb" 1 3 > "$work/build.txt" 2>&1 ||
  { cat "$work/build.txt"; fail "the student build stopped"; }
failed="$work/sb/workers/lab3.build-failed"
[ -f "$failed" ] || fail "lab 3 was built: vet-lab let the global operator new through"
cat "$failed"
grep -q "rejected by the grader's checks of lab code" "$failed" || fail "lab 3 failed to build, but not in vet-lab"
for f in 'operator new(unsigned long)' 'operator delete(void\*)' 'operator delete(void\*, unsigned long)'; do
  grep -q "defines the global $f: a lab may not replace the allocation functions" "$failed" ||
    fail "vet-lab did not name the global $f"
done
[ ! -e "$work/sb/workers/lab3_worker" ] || fail "a lab process was linked all the same"
echo "vet-lab rejects a lab 3 that defines the global operator new and delete"
