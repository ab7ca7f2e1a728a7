// Lab 5 (beyond): the PTX the kernel is built from -- mma.sync, ldmatrix, cp.async, ex2.approx
// and the 16-bit packing of fragment pairs -- one instruction per wrapper. They live in the GPU
// labs' tensor-core toolkit, include/course/mma_sm80.cuh (read it: its top comment draws the
// fragment layouts of mma.sync.m16n8k16), which lab 7's tensor-core backward shares; this file
// makes them visible to the kernel's namespace.
#pragma once

#include "course/mma_sm80.cuh"

namespace course::lab5::detail {
using namespace course::sm80;
}  // namespace course::lab5::detail
