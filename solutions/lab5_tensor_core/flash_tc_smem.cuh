// Lab 5 (beyond): the shared memory of a CTA -- how much there is, where each element of a
// tile lives (row-major, optionally XOR-swizzled), how fragments are read from the tiles, and
// how tiles are copied in from global memory.
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

// ------------------------------------------------------------------------------------------
// Shared-memory tiles: row-major, kCols 16-bit elements a row, optionally XOR-swizzled
// ------------------------------------------------------------------------------------------

// Element offset of (row, col). A row is kCols/8 chunks of 16 bytes. Without the swizzle, the 8
// rows that one ldmatrix phase reads all start at the same bank when a row is a multiple of
// 128 bytes: an 8-way conflict. With it, chunk c of row r is stored at chunk c ^ (r % 8), so
// those 8 rows land in 8 different 16-byte bank groups. The XOR keeps 16-byte chunks whole,
// so cp.async and ldmatrix still move aligned 16-byte pieces.
template <int kCols, bool kSwizzle>
__device__ __forceinline__ int tile_offset(int row, int col) {
  if constexpr (kSwizzle) {
    return row * kCols + ((((col >> 3) ^ row) & 7) | ((col >> 3) & ~7)) * 8 + (col & 7);
  } else {
    return row * kCols + col;
  }
}

// Shared-memory byte address that a lane hands to ldmatrix for the 16x16 block at (row0, col0),
// where the lane's own row piece is (lane_row, lane_col) inside the block (lane_row < 16,
// lane_col 0 or 8). row0 is a multiple of 8 and col0 of 16, and both are compile-time constants
// once the loops unroll. Then row0 never changes row % 8, and col0's chunk bits never overlap
// the lane's, so the swizzled address is (lane part, swizzled once) XOR (a constant) plus a
// constant: one LOP3 and one IADD per ldmatrix instead of the whole swizzle each time.
template <int kCols, bool kSwizzle>
__device__ __forceinline__ uint32_t block_address(uint32_t tile, int row0, int col0, int lane_row,
                                                  int lane_col) {
  const uint32_t lane_bytes = 2u * tile_offset<kCols, kSwizzle>(lane_row, lane_col);
  if constexpr (kSwizzle) {
    return tile + 2u * row0 * kCols + (lane_bytes ^ (2u * col0));
  } else {
    return tile + 2u * (row0 * kCols + col0) + lane_bytes;
  }
}

template <class T>
__device__ __forceinline__ uint32_t load_b32(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}
template <class T>
__device__ __forceinline__ uint32_t load_two_b16(const T* lo, const T* hi) {
  const uint32_t l = *reinterpret_cast<const uint16_t*>(lo);
  const uint32_t h = *reinterpret_cast<const uint16_t*>(hi);
  return l | (h << 16);
}

// A fragment of the 16x16 block at (row0, col0) of a row-major tile (Q or P).
template <int kCols, bool kSwizzle, bool kLdmatrix, class T>
__device__ __forceinline__ void load_a_fragment(uint32_t (&a)[4], const T* tile, int row0,
                                                int col0, int lane) {
  if constexpr (kLdmatrix) {
    // lanes 0-7: rows 0-7 cols 0-7 (a0); 8-15: rows 8-15 (a1); 16-23: rows 0-7 cols 8-15 (a2); 24-31: a3
    ldmatrix_x4(a, block_address<kCols, kSwizzle>(smem_address(tile), row0, col0,
                                                  (lane & 7) + ((lane >> 3) & 1) * 8,
                                                  (lane >> 4) * 8));
  } else {
    const int g = lane >> 2, t = lane & 3;
    a[0] = load_b32(tile + tile_offset<kCols, kSwizzle>(row0 + g, col0 + 2 * t));
    a[1] = load_b32(tile + tile_offset<kCols, kSwizzle>(row0 + g + 8, col0 + 2 * t));
    a[2] = load_b32(tile + tile_offset<kCols, kSwizzle>(row0 + g, col0 + 2 * t + 8));
    a[3] = load_b32(tile + tile_offset<kCols, kSwizzle>(row0 + g + 8, col0 + 2 * t + 8));
  }
}

// B fragments of S = Q K^T for the two 8-key tiles n0 and n0+8, k-step (head-dim) col0..col0+15.
// B[k][n] = K[n][k]: a K row holds a B column, so K's row-major tile is already "col" layout.
// b[0], b[1] feed key tile n0; b[2], b[3] key tile n0+8.
template <int kCols, bool kSwizzle, bool kLdmatrix, class T>
__device__ __forceinline__ void load_b_fragments_k(uint32_t (&b)[4], const T* tile, int n0,
                                                   int col0, int lane) {
  if constexpr (kLdmatrix) {
    // lanes 0-7: keys n0..+7, dims col0..+7 (b0 of tile n0); 8-15: dims +8 (b1); 16-31: keys +8
    ldmatrix_x4(b, block_address<kCols, kSwizzle>(smem_address(tile), n0, col0,
                                                  (lane & 7) + (lane >> 4) * 8,
                                                  ((lane >> 3) & 1) * 8));
  } else {
    const int g = lane >> 2, t = lane & 3;
    b[0] = load_b32(tile + tile_offset<kCols, kSwizzle>(n0 + g, col0 + 2 * t));
    b[1] = load_b32(tile + tile_offset<kCols, kSwizzle>(n0 + g, col0 + 2 * t + 8));
    b[2] = load_b32(tile + tile_offset<kCols, kSwizzle>(n0 + 8 + g, col0 + 2 * t));
    b[3] = load_b32(tile + tile_offset<kCols, kSwizzle>(n0 + 8 + g, col0 + 2 * t + 8));
  }
}

// B fragments of O += P V for keys k0..k0+15 and the two 8-wide head-dim tiles n0 and n0+8.
// B[k][n] = V[k][n] with k running down V's rows: b0 = V[k0+2t..2t+1][n0+g] is two elements of
// one column, which ldmatrix.trans gathers for us. b[0], b[1] feed tile n0; b[2], b[3] tile n0+8.
template <int kCols, bool kSwizzle, bool kLdmatrix, class T>
__device__ __forceinline__ void load_b_fragments_v(uint32_t (&b)[4], const T* tile, int k0,
                                                   int n0, int lane) {
  if constexpr (kLdmatrix) {
    // lanes 0-7: keys k0..+7, dims n0..+7 (b0); 8-15: keys +8 (b1); 16-31: dims n0+8
    ldmatrix_x4_trans(b, block_address<kCols, kSwizzle>(smem_address(tile), k0, n0,
                                                        (lane & 7) + ((lane >> 3) & 1) * 8,
                                                        (lane >> 4) * 8));
  } else {
    const int g = lane >> 2, t = lane & 3;
    const auto at = [&](int r, int c) { return tile + tile_offset<kCols, kSwizzle>(r, c); };
    b[0] = load_two_b16(at(k0 + 2 * t, n0 + g), at(k0 + 2 * t + 1, n0 + g));
    b[1] = load_two_b16(at(k0 + 2 * t + 8, n0 + g), at(k0 + 2 * t + 9, n0 + g));
    b[2] = load_two_b16(at(k0 + 2 * t, n0 + 8 + g), at(k0 + 2 * t + 1, n0 + 8 + g));
    b[3] = load_two_b16(at(k0 + 2 * t + 8, n0 + 8 + g), at(k0 + 2 * t + 9, n0 + 8 + g));
  }
}

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
  // BEGIN SOLUTION load_tile device
  //! each thread moves 16-byte chunks (8 elements): thread tid starts at row tid / (kCols/8),
  //! column 8 * (tid % (kCols/8)), and steps down kThreads / (kCols/8) rows per pass
  //! rows >= valid_rows must become zeros (cp.async with src-size 0, or a zero int4 store)
  constexpr int kChunksPerRow = kCols / 8;
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static_assert(kThreads % kChunksPerRow == 0 && kRows % kRowsPerPass == 0, "whole passes");
  static_assert(kRowsPerPass % 8 == 0, "a pass must not change row % 8 (the swizzle)");
  const int row0 = tid / kChunksPerRow;
  const int col = (tid % kChunksPerRow) * 8;
  T* dst = tile + tile_offset<kCols, kSwizzle>(row0, col);
  const T* src = gmem + static_cast<int64_t>(row0) * kCols + col;
#pragma unroll
  for (int pass = 0; pass < kRows / kRowsPerPass; ++pass) {
    const int offset = pass * kRowsPerPass * kCols;
    const bool valid = row0 + pass * kRowsPerPass < valid_rows;
    // For a row past the end, cp.async reads 0 bytes (src-size 0) and the plain path does not
    // load at all, so the out-of-range address is never dereferenced.
    if constexpr (kAsync) {
      cp_async_16(smem_address(dst + offset), src + offset, valid);
    } else {
      int4 chunk = {0, 0, 0, 0};
      if (valid) chunk = *reinterpret_cast<const int4*>(src + offset);
      *reinterpret_cast<int4*>(dst + offset) = chunk;
    }
  }
  // END SOLUTION
}

}  // namespace course::lab5::detail
