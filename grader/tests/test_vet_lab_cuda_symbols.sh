#!/usr/bin/env bash
# vet-lab on objects that nvcc compiled, as a GPU lab's student build makes them. Accepted: a
# kernel defined in namespace course::lab4 (nvcc gives its host stub, __device_stub__..., a global
# symbol), and a file-scope anonymous namespace holding a variable, a function, a __constant__
# array and a kernel (nvcc gives those global symbols too, in a namespace named after the file).
# Rejected, each by name: a variable and a kernel at global scope, a function in another named
# namespace, and a variable in a namespace named as another file's anonymous one.
#
# Usage: test_vet_lab_cuda_symbols.sh REPO_ROOT [NVCC]
set -uo pipefail
root=$1 nvcc=${2:-nvcc}
command -v "$nvcc" > /dev/null || { echo "SKIPPED: no nvcc"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

vet() {  # $1 = case name, then the .cu source on standard input; vet-lab's output in $work/$1.txt
  local lab=$work/$1/lab4_cuda build=$work/$1/build
  mkdir -p "$lab" "$build/CMakeFiles/lab4_worker_impl.dir"
  cat > "$lab/kernels.cu"
  "$nvcc" -std=c++20 -O3 -arch=sm_80 -c "$lab/kernels.cu" -o "$build/CMakeFiles/lab4_worker_impl.dir/kernels.cu.o" ||
    fail "$1: nvcc failed"
  "$root/grader/isolation/vet-lab" 4 "$build" "$lab" "$root" > "$work/$1.txt" 2>&1
}

vet kernel_in_the_lab_namespace <<'CU' || { cat "$work/kernel_in_the_lab_namespace.txt"; fail "a kernel in course::lab4 was rejected"; }
namespace course::lab4 {
__global__ void scale(float* x, float s) { x[threadIdx.x] *= s; }
void run(float* x) { scale<<<1, 32>>>(x, 2.0f); }
}  // namespace course::lab4
CU

vet anonymous_namespace <<'CU' || { cat "$work/anonymous_namespace.txt"; fail "an anonymous namespace at file scope was rejected"; }
namespace {
int calls = 0;
__constant__ float weights[4];
__global__ void scale(float* x) { x[threadIdx.x] *= weights[0]; }
int count_call() { return ++calls; }
}  // namespace
namespace course::lab4 {
int run(float* x) { scale<<<1, 32>>>(x); return count_call(); }
}  // namespace course::lab4
CU

if vet outside_the_lab <<'CU'
int stray_counter = 0;
__global__ void stray_kernel(float* x) { x[0] = 1.0f; }
namespace other { int helper(int a) { return a + 1; } }
namespace _GLOBAL__N__12345678_8_other_cu_87654321 { int borrowed = 0; }  // as another file's
namespace course::lab4 {
void run(float* x) {
  stray_kernel<<<1, 1>>>(x);
  stray_counter = other::helper(stray_counter) + _GLOBAL__N__12345678_8_other_cu_87654321::borrowed;
}
}  // namespace course::lab4
CU
then
  fail "vet-lab accepted symbols outside course::lab4"
fi
for name in stray_counter stray_kernel 'other::helper' 'other_cu_876543218borrowedE'; do
  grep -q "defines .*$name.* outside namespace course::lab4" "$work/outside_the_lab.txt" ||
    { cat "$work/outside_the_lab.txt"; fail "vet-lab did not name $name"; }
done
echo "vet-lab accepts nvcc's symbols of course::lab4 and of anonymous namespaces, and names what is outside them"
