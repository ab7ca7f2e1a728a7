// Row reductions on tensor-core accumulators: the 4 lanes of a quad (lanes 4g .. 4g + 3) hold one
// row of an mma.sync m16n8 accumulator (lab 5) and of a wgmma m64nN accumulator (lab 8), so the
// max or the sum of a row is the thread's own values, then two shuffles across the quad.
#pragma once

namespace course {

// Max (or sum) over the 4 lanes of a quad, which together hold one row of an accumulator.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace course
