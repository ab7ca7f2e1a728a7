// Lab 5 (beyond): a tensor-core FlashAttention-2 forward kernel, as a staircase of versions.
//
// One kernel template, `flash_tc_forward_kernel<Config, feature bits, T>`, built from small device
// functions; launch_forward<Config, Version, T> picks the features of a Version. Each Version
// switches on one more idea (see features_of below):
//
//   mma_only   : mma.sync.m16n8k16; every fragment register is read from shared memory with a
//                plain 32-bit load (two 16-bit loads for V, which the B operand needs transposed)
//   ldmatrix   : + ldmatrix.x4 for Q, K and P fragments, ldmatrix.x4.trans for V
//   swizzle    : + XOR-swizzled shared-memory tiles: the 8 rows that one ldmatrix reads sit in
//                8 different bank groups, so no bank conflicts
//   pipelined  : + cp.async into two shared-memory stages: tile j+1 streams in while tile j computes
//   register_p : + the S accumulator becomes the A operand of P.V in registers (no round trip of P
//                through shared memory), exp2 with scale*log2(e) folded into one FFMA, and O is
//                rescaled only when a row's max has grown by more than a factor 2^8 (exact: the
//                reference max is only a shift, undone by the final O / l and the LSE)
//
// The algorithm is FlashAttention-2's forward pass (Dao, 2023, Algorithm 1); comments name the
// line of that algorithm each block implements. The FA2 split: a CTA owns kBlockM query rows,
// each warp owns kRowsPerWarp of them outright (16 or 32), so a row's max and sum only ever need
// the 4 lanes of a quad -- never another warp, never shared memory.
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
#include <stdexcept>
#include <string>
#include <type_traits>

#include "course/lab5_tensor_core.hpp"

namespace course::lab5::detail {

// ------------------------------------------------------------------------------------------
// Configuration
// ------------------------------------------------------------------------------------------

// What each step of the staircase switches on. Later versions keep everything earlier ones had.
struct Features {
  bool ldmatrix;        // fragments through ldmatrix instead of 32-bit shared loads
  bool swizzle;         // XOR-swizzled shared-memory tiles
  bool cp_async;        // asynchronous copies into two stages
  bool p_in_registers;  // S accumulator reused as the A operand of P.V; exp2 with folded scale
  bool lazy_rescale;    // keep the old row max (and skip rescaling O) while P stays <= 2^8
};

__host__ __device__ constexpr Features features_of(Version v) {
  switch (v) {
    case Version::mma_only: return {false, false, false, false, false};
    case Version::ldmatrix: return {true, false, false, false, false};
    case Version::swizzle: return {true, true, false, false, false};
    case Version::pipelined: return {true, true, true, false, false};
    case Version::register_p: return {true, true, true, true, true};
  }
  return {true, true, true, true, true};
}

// Tile shape of one CTA. kBlockM query rows, kBlockN keys per K/V tile, kWarps warps; each warp
// owns kBlockM / kWarps consecutive query rows (a multiple of 16, the M of one mma).
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kWarps_, int kMinBlocksPerSm_>
struct TileConfig {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kWarps = kWarps_;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;
  static constexpr int kRowsPerWarp = kBlockM / kWarps;
  static constexpr int kMTiles = kRowsPerWarp / 16;  // 16-row mma tiles per warp
  static constexpr int kNTiles = kBlockN / 8;        // 8-key column tiles of S
  static constexpr int kDTiles = kHeadDim / 8;       // 8-wide column tiles of O
  static_assert(kRowsPerWarp % 16 == 0, "each warp owns whole 16-row mma tiles");
  static_assert(kBlockN % 16 == 0 && kHeadDim % 16 == 0, "k-steps of 16");
  // The swizzle permutes the 8 16-byte chunks of a 128-byte span: rows need >= 8 chunks.
  static_assert(kHeadDim >= 64, "the swizzle needs rows of >= 64 halves (8 chunks)");
};

// A __global__ template cannot take a class-type template argument through nvcc's host stubs,
// so the kernel receives the features as bits.
__host__ __device__ constexpr int encode(Features f) {
  return int(f.ldmatrix) | int(f.swizzle) << 1 | int(f.cp_async) << 2 | int(f.p_in_registers) << 3 |
         int(f.lazy_rescale) << 4;
}
__host__ __device__ constexpr Features decode(int bits) {
  return {(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0, (bits & 8) != 0, (bits & 16) != 0};
}

__host__ __device__ constexpr int stages_of(Features f) { return f.cp_async ? 2 : 1; }

// Dynamic shared memory of one CTA, in elements of the 16-bit type.
template <class Cfg>
__host__ __device__ constexpr int smem_elements(Features f) {
  const int q = Cfg::kBlockM * Cfg::kHeadDim;
  const int kv = 2 * stages_of(f) * Cfg::kBlockN * Cfg::kHeadDim;
  const int p = f.p_in_registers ? 0 : Cfg::kBlockM * Cfg::kBlockN;
  return q + kv + p;
}

struct KernelParams {
  const void* q;  // [B*H, Nq, d]
  const void* k;  // [B*H, Nk, d]
  const void* v;  // [B*H, Nk, d]
  void* o;        // [B*H, Nq, d]
  float* lse;     // [B*H, Nq]
  int nq;
  int nk;
  bool causal;
  float scale;        // softmax scale (1/sqrt(d) by default)
  float scale_log2;   // scale * log2(e): exp(scale*(s-m)) == exp2(s*scale_log2 - m*scale_log2)
};

// ------------------------------------------------------------------------------------------
// PTX wrappers: one instruction each
// ------------------------------------------------------------------------------------------

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

// ------------------------------------------------------------------------------------------
// The pieces of one K/V tile's work (FA2 Algorithm 1, lines 8-10), per warp
// ------------------------------------------------------------------------------------------

// Line 8: S = Q_i K_j^T for this warp's kMTiles*16 rows and the tile's kBlockN keys.
// Each B fragment loaded from K serves kMTiles mmas; each A fragment of Q serves kNTiles.
template <class Cfg, Features kF, class T>
__device__ __forceinline__ void compute_scores(float (&s)[Cfg::kMTiles][Cfg::kNTiles][4],
                                               const T* q_tile, const T* k_tile, int warp_row0,
                                               int lane) {
  // TODO: compute_scores (see the lab README)
  // zero s, then for each 16-wide k-step of the head dimension: load the A fragments of Q
  // (one per 16-row tile), and for each pair of 8-key tiles the four B registers from K,
  // then one mma per (row tile, key tile)
}

// Set S to -inf where the key does not exist (past Nk) or is in the causal future
// (key > query + Nk - Nq, bottom-right aligned). Only called for tiles that need it.
template <class Cfg>
__device__ __forceinline__ void apply_mask(float (&s)[Cfg::kMTiles][Cfg::kNTiles][4],
                                           int first_row, int first_key, int nq, int nk,
                                           bool causal, int lane) {
  // TODO: apply_mask (see the lab README)
  // s[mt][nt][c] is row first_row + 16*mt + g + 8*(c/2), key first_key + 8*nt + 2*t + c%2
}

// Max (or sum) over the 4 lanes of a quad, which together hold one row of an accumulator.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Line 9 (and the rescale half of line 10): the online softmax.
//   m_new = max(m_old, rowmax(S));  P = exp(scale * (S - m_new));  alpha = exp(scale*(m_old - m_new))
//   l = alpha * l + rowsum(P);      O = alpha * O
// S is overwritten by P. m is kept in raw (unscaled) score units. row_sum holds only this lane's
// part of l (its 2*kNTiles columns); the quad adds the parts once, at the end.
// A row that has seen only -inf has m_new = -inf: we subtract 0 instead, so P = exp(-inf) = 0
// and alpha = 0 instead of exp(-inf - -inf) = NaN.
//
// kFeatures.p_in_registers: exp(scale*(x - m)) = 2^(x*scale*log2e - m*scale*log2e), one FFMA and
// one MUFU.EX2 per element instead of FADD, FMUL, FMUL, MUFU.EX2.
// kFeatures.lazy_rescale: m is only a reference point -- any m gives the same O / l and
// m*scale + log(l) -- it just has to keep P from overflowing. So keep m_old until the tile max
// exceeds it by more than 8 in log2 units (P <= 2^8, harmless in fp32 and in bf16/fp16 P);
// then alpha = 1 exactly, and when that holds for every row of the warp, the O rescale
// (kMTiles*kDTiles*4 FMULs a thread) is skipped altogether.
template <class Cfg, Features kF>
__device__ __forceinline__ void online_softmax(float (&s)[Cfg::kMTiles][Cfg::kNTiles][4],
                                               float (&o)[Cfg::kMTiles][Cfg::kDTiles][4],
                                               float (&row_max)[Cfg::kMTiles][2],
                                               float (&row_sum)[Cfg::kMTiles][2], float scale,
                                               float scale_log2) {
  // TODO: online_softmax (see the lab README)
  // row r (0 or 1) of tile mt is in s[mt][*][2r] and s[mt][*][2r+1]; reduce the max over the quad
  // guard the fully masked row: subtract 0 when the new max is -inf (no NaN from -inf - -inf)
  // rescale o and row_sum by alpha = exp(scale*(m_old - m_new)) before adding this tile
}

// register_p: convert P to 16 bits right away, already in A-fragment order for P.V. The C
// fragments of two neighbouring 8-key tiles of S are exactly the A fragment of one 16-key
// k-step of P.V:
//   a0 = P[g][2t..]   = tile 2kk,   c0 c1      a1 = P[g+8][2t..]   = tile 2kk,   c2 c3
//   a2 = P[g][2t+8..] = tile 2kk+1, c0 c1      a3 = P[g+8][2t+8..] = tile 2kk+1, c2 c3
// so P only needs converting, never moving. Packing here, before P.V starts, lets the 32-bit S
// registers die early: the packed P takes half of them.
template <class Cfg, class T>
__device__ __forceinline__ void pack_p_fragments(
    uint32_t (&p_frag)[Cfg::kMTiles][Cfg::kBlockN / 16][4],
    const float (&p)[Cfg::kMTiles][Cfg::kNTiles][4]) {
  // TODO: pack_p_fragments (see the lab README)
  // p_frag[mt][kk] = { pack(tile 2kk c0,c1), pack(tile 2kk c2,c3), pack(tile 2kk+1 c0,c1), pack(tile 2kk+1 c2,c3) }
}

// Line 10, P.V half, register_p version: O += P V_j with P's A fragments already in registers.
template <class Cfg, Features kF, class T>
__device__ __forceinline__ void accumulate_pv_from_registers(
    float (&o)[Cfg::kMTiles][Cfg::kDTiles][4],
    const uint32_t (&p_frag)[Cfg::kMTiles][Cfg::kBlockN / 16][4], const T* v_tile, int lane) {
  // TODO: accumulate_pv_from_registers (see the lab README)
  // for each 16-key k-step and each pair of 8-wide head-dim tiles: load V's B fragments with
  // ldmatrix.trans, then one mma per (row tile, head-dim tile)
}

// Line 10, P.V half, versions 1-4: P goes through this warp's private slice of shared memory
// (16-bit, same layout rules as the other tiles) and comes back as A fragments -- the detour
// that register_p removes. The slice is the warp's own, so __syncwarp is the only barrier.
template <class Cfg, Features kF, class T>
__device__ __forceinline__ void accumulate_pv_through_smem(
    float (&o)[Cfg::kMTiles][Cfg::kDTiles][4], const float (&p)[Cfg::kMTiles][Cfg::kNTiles][4],
    T* p_tile, const T* v_tile, int lane) {
  // TODO: accumulate_pv_through_smem (see the lab README)
  // store P (16-bit) from the C fragment layout: rows g and g+8 of each 16-row tile, cols 2t..2t+1
  // __syncwarp, reload it as A fragments, mma with V's B fragments, __syncwarp before reuse
}

// Lines 12-15: O_i = O / l, L_i = m*scale + log(l); a row that saw no key (l = 0) gets O = 0 and
// LSE = -inf. Each lane writes its two adjacent columns per 8-wide tile (4-byte stores: a quad
// covers 16 contiguous bytes of a row). O is read once per row block, so this is a tiny share of
// the traffic; staging through shared memory for 16-byte stores is a possible refinement.
template <class Cfg, class T>
__device__ __forceinline__ void store_output(const float (&o)[Cfg::kMTiles][Cfg::kDTiles][4],
                                             const float (&row_max)[Cfg::kMTiles][2],
                                             const float (&row_sum)[Cfg::kMTiles][2], T* o_head,
                                             float* lse_head, int first_row, int nq, float scale,
                                             int lane) {
  // TODO: store_output (see the lab README)
  // l = quad_sum(row_sum): each lane only summed its own columns
  // normalise once here (not per tile); guard l == 0; skip rows >= nq
}

// ------------------------------------------------------------------------------------------
// The kernel: one CTA per (query tile, batch*head) -- FA2 Algorithm 1, line 3's loop in parallel
// ------------------------------------------------------------------------------------------

// Number of K/V tiles a query tile [q0, q0 + kBlockM) must visit. Causal (bottom-right): the last
// row, q_last, sees keys up to q_last + Nk - Nq, so later tiles are skipped entirely.
template <class Cfg>
__device__ __forceinline__ int kv_tiles_to_visit(int q0, int nq, int nk, bool causal) {
  const int all_tiles = (nk + Cfg::kBlockN - 1) / Cfg::kBlockN;
  if (!causal) return all_tiles;
  const int q_last = min(q0 + Cfg::kBlockM, nq) - 1;
  const int last_key = q_last + nk - nq;
  if (last_key < 0) return 0;
  return min(all_tiles, last_key / Cfg::kBlockN + 1);
}

// K/V tiles 0 .. (returned value - 1) need no mask for the warp whose first row is `first_row`:
// they lie wholly inside Nk and, if causal, wholly left of that row's diagonal (every later row
// of the warp sees even more keys). Later tiles go through apply_mask.
template <class Cfg>
__device__ __forceinline__ int kv_tiles_without_mask(int first_row, int nq, int nk, bool causal) {
  const int inside_nk = nk / Cfg::kBlockN;
  if (!causal) return inside_nk;
  // Tile j is left of the diagonal when its last key j*N + N - 1 <= first_row + nk - nq.
  const int keys_seen = first_row + nk - nq + 1;
  return keys_seen < 0 ? 0 : min(inside_nk, keys_seen / Cfg::kBlockN);
}

template <class Cfg, int kFeatureBits, class T>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm)
    flash_tc_forward_kernel(const KernelParams params) {
  constexpr Features kF = decode(kFeatureBits);
  constexpr int kStages = stages_of(kF);
  constexpr int M = Cfg::kBlockM, N = Cfg::kBlockN, D = Cfg::kHeadDim;

  extern __shared__ __align__(128) unsigned char smem_bytes[];
  T* q_tile = reinterpret_cast<T*>(smem_bytes);
  T* k_tiles = q_tile + M * D;             // kStages tiles of N x D
  T* v_tiles = k_tiles + kStages * N * D;  // kStages tiles of N x D
  T* p_tiles = v_tiles + kStages * N * D;  // kWarps slices of kRowsPerWarp x N (versions 1-4)

  // Causal: the last query tiles see the most keys. Reversing the tile index starts the heaviest
  // CTAs first, so the light ones fill the gaps at the end instead of a heavy one trailing alone.
  const int q_block = params.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int head = blockIdx.y;  // b * H + h
  const int q0 = q_block * M;
  const int nq = params.nq, nk = params.nk;

  const T* q_head = static_cast<const T*>(params.q) + static_cast<int64_t>(head) * nq * D;
  const T* k_head = static_cast<const T*>(params.k) + static_cast<int64_t>(head) * nk * D;
  const T* v_head = static_cast<const T*>(params.v) + static_cast<int64_t>(head) * nk * D;
  T* o_head = static_cast<T*>(params.o) + static_cast<int64_t>(head) * nq * D;
  float* lse_head = params.lse + static_cast<int64_t>(head) * nq;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int warp_row0 = warp * Cfg::kRowsPerWarp;  // first row of this warp inside the tile
  T* p_tile = p_tiles + warp * Cfg::kRowsPerWarp * N;

  // TODO: flash_tc_forward_kernel (see the lab README)
  // line 4: load Q_i once; line 5: o = 0, row_max = -inf, row_sum = 0 (in registers)
  // line 6-7: loop over the K/V tiles this query tile can see; pipelined versions prefetch tile
  // j+1 with cp.async into the other stage before computing tile j (commit every iteration,
  // wait_group 1, __syncthreads before reading, __syncthreads before the stage is refilled)
  // lines 8-10: compute_scores, apply_mask only on boundary tiles, online_softmax, P.V
  // lines 12-15: store_output
}

}  // namespace course::lab5::detail

// ------------------------------------------------------------------------------------------
// Host side: launching one instantiation
// ------------------------------------------------------------------------------------------

namespace course::lab5::detail {

inline void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorString(status));
}

// Grid: x = query tiles, y = batch*head. Query tiles of one head are neighbours in launch order,
// so the CTAs running at one time share that head's K and V in L2.
// kF is features_of(a Version); the benchmark also launches other mixes to measure one step alone.
template <class Cfg, Features kF, class T>
void launch_features(const KernelParams& params, int batch_heads, cudaStream_t stream) {
  const auto kernel = flash_tc_forward_kernel<Cfg, encode(kF), T>;
  const int smem_bytes = smem_elements<Cfg>(kF) * static_cast<int>(sizeof(T));
  // Above 48 KB a kernel must opt in to its dynamic shared memory.
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes),
             "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  const dim3 grid((params.nq + Cfg::kBlockM - 1) / Cfg::kBlockM, batch_heads);
  kernel<<<grid, Cfg::kThreads, smem_bytes, stream>>>(params);
  check_cuda(cudaGetLastError(), "flash_tc_forward_kernel<<<...>>>");
}

template <class Cfg, Version kVersion, class T>
void launch_forward(const KernelParams& params, int batch_heads, cudaStream_t stream) {
  launch_features<Cfg, features_of(kVersion), T>(params, batch_heads, stream);
}

}  // namespace course::lab5::detail
