// Lab 5 (beyond): the shared memory of a CTA -- how much there is, and how tiles are copied in
// from global memory.
#pragma once

#include <cstdint>

#include "flash_tc_config.cuh"
#include "flash_tc_ptx.cuh"

namespace course::lab5::detail {

// ------------------------------------------------------------------------------------------
// The CTA's shared memory: Q, then the K stages, the V stages, and the P slices
// ------------------------------------------------------------------------------------------

// Dynamic shared memory of one CTA, in elements of the 16-bit type: Q, kStagesOf<Step> stages
// of K and of V, and (until P stays in registers) each warp's slice of P.
template <class Cfg, class Step>
__host__ __device__ constexpr int smem_elements() {
  const int q = Cfg::kBlockM * Cfg::kHeadDim;
  const int kv = 2 * kStagesOf<Step> * Cfg::kBlockN * Cfg::kHeadDim;
  const int p = Step::p_in_registers ? 0 : Cfg::kBlockM * Cfg::kBlockN;
  return q + kv + p;
}

// The tile layout (row-major, optionally XOR-swizzled: tile_offset) and the fragment loads
// (load_a_fragment, load_b_fragments_k, load_b_fragments_v) are in the GPU labs' tensor-core
// toolkit, include/course/mma_sm80.cuh, shared with lab 7.

// ------------------------------------------------------------------------------------------
// Global -> shared copies (FA2 Algorithm 1, lines 4 and 7)
// ------------------------------------------------------------------------------------------

// Copy kRows x kCols elements starting at `gmem` (row stride kCols) into a shared tile; rows at
// or past `valid_rows` are zero-filled. Consecutive threads take consecutive 16-byte chunks of a
// row, so a warp reads 512 contiguous bytes: fully coalesced. Each pass covers kRowsPerPass rows,
// a multiple of 8, so a thread's chunk keeps the same column and the same swizzle on every pass:
// its addresses are one base plus a constant per pass (immediate offsets, no extra registers).
template <int kRows, int kCols, int kThreads, bool kSwizzle, bool kAsync, class T>
__device__ __forceinline__ void load_tile(T* tile, const T* gmem, int valid_rows, int tid) {
  // TODO: load_tile (see the lab README)
  // each thread moves 16-byte chunks (8 elements): thread tid starts at row tid / (kCols/8),
  // column 8 * (tid % (kCols/8)), and steps down kThreads / (kCols/8) rows per pass
  // rows >= valid_rows must become zeros (cp.async with src-size 0, or a zero int4 store)
}

}  // namespace course::lab5::detail
