// The tensor-core toolkit of the GPU labs (sm_80 and later: mma.sync, ldmatrix, cp.async): the
// PTX instructions, one wrapper each, and the shared-memory tile layout with the fragment loads
// built on them. Lab 5's forward kernel (lecture 5 explains every piece) and lab 7's tensor-core
// backward kernel use them; your code may include it. Device code only: include it from .cu
// files compiled by nvcc.
//
// Fragment layouts of mma.sync.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with
// lane = 4*g + t (g = lane/4 is the "group", t = lane%4 the "thread in group"):
//   A (16x16, row-major, 4 x .b32 each holding 2 halves):
//       a0 = A[g][2t..2t+1]    a1 = A[g+8][2t..2t+1]    a2 = A[g][2t+8..2t+9]   a3 = A[g+8][2t+8..2t+9]
//   B (16x8, "col": B[k][n], 2 x .b32):
//       b0 = B[2t..2t+1][g]    b1 = B[2t+8..2t+9][g]
//   C/D (16x8 fp32, 4 floats):
//       c0,c1 = C[g][2t..2t+1] c2,c3 = C[g+8][2t..2t+1]
// So a thread holds two rows of every accumulator (g and g+8): the quad of lanes 4g..4g+3
// together holds whole rows, which is why row reductions are two __shfl_xor_sync (1 and 2).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <type_traits>

namespace course::sm80 {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 matrices of 16-bit elements. Lanes 8i..8i+7 give the row addresses of matrix i;
// register i receives matrix i with lane 4r+c holding row r, columns 2c and 2c+1 -- exactly
// the A/B fragment pieces above.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The same, transposed: lane 4r+c holds column r, rows 2c and 2c+1. Reading a row-major V tile
// this way yields the B fragment of P.V (b0 = V[2t..2t+1][g]) without any data shuffling.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D = A * B + D, 16x8x16, 16-bit inputs, fp32 accumulators.
template <class T>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                            uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// 16 bytes global -> shared without passing through registers. When `valid` is false the source
// size is 0: nothing is read (the address may then point past the tensor) and the 16 bytes are
// zero-filled, so rows past the end of Q/K/V become zeros. That matters for V: a NaN left in
// shared memory times P = 0 would still be NaN.
__device__ __forceinline__ void cp_async_16(uint32_t smem_addr, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
// Wait until at most `kPending` committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// 2^x on the special-function unit (MUFU.EX2); ex2.approx(-inf) = +0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats -> one .b32 register holding two 16-bit values, the first in the low half (the
// lower column/row index of a fragment pair always sits in the low half).
template <class T>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
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

}  // namespace course::sm80
