// Lab 7, part 3 (beyond): kernel 2 of the backward pass on tensor cores (mma.sync m16n8k16, bf16
// or fp16 operands, fp32 accumulators), FA2 Algorithm 2 as part 2 runs it on CUDA cores. Kernels
// 1 and 3 (D and the zeroed dQ accumulator; dQ converted) are part 2's, in backward.cu, which
// calls launch_tensor_core_kernel when options.kernel asks for tensor cores.
// Lecture: lectures/07-backward-pass.md, "Part 3: tensor cores". The PTX wrappers, the swizzled
// tile layout and the fragment loads are lab 5's, from include/course/mma_sm80.cuh.
//
// Reading guide. One CTA owns a K/V tile of kBc keys of one (batch, head): 128 keys and 8 warps at
// d = 128 (FA2's shape; 64 keys and 4 warps on a GPU with less shared memory, see TcTiles), 64
// keys and 4 warps at d = 64; warp w owns keys 16 w .. 16 w + 15 of it.
// The CTA walks over the query tiles (kBr = 64 rows) that can see its keys. For each, warp w
// computes, for its 16 keys and the tile's 64 queries,
//   S^T  = K_w Q_i^T        and  P^T  = exp2(S^T tau log2(e) - LSE_i log2(e))    (lines 10-11)
//   dP^T = V_w dO_i^T       and  dS^T = P^T o (dP^T - D_i)                       (lines 13-14)
// all transposed, so that the warp's keys are the rows (the M side) of every product it makes:
//   dV_w += P^T dO_i        dK_w += dS^T Q_i                                     (lines 12, 16)
// with P^T and dS^T fed to the tensor cores straight from the accumulators' registers (lab 5's
// "P in registers": an m16n8 accumulator pair is an m16k16 A fragment). dK_w and dV_w (16 x d
// each) stay in registers for the whole loop. Then dQ_i += dS K_j (line 15) needs dS with the
// queries as rows: the warps write dS^T to shared memory, and each warp reads back, for 16 query
// rows (and, with 8 warps, half of the head dimension), the A fragments of dS with
// ldmatrix.trans, and adds its share of dQ_i into the fp32 accumulator with atomic adds.
//
// Pipelining: K_j and V_j are loaded once; Q_i and dO_i (and the rows' LSE and D) come in two
// shared-memory stages: while the CTA computes on query tile i, cp.async brings tile i + 1 in.
// Where shared memory allows only one stage, tile i + 1 comes in during tile i's dQ step, the
// first moment no warp reads Q_i or dO_i any more.
//
// Numerics. As FlashAttention-2: S, P, dP and dS in fp32 registers; P and dS rounded once to the
// 16-bit type to be the tensor cores' operands; every product accumulated in fp32; dK and dV
// rounded to the dtype once at the end, dQ by kernel 3. Masked scores, keys past Nk, and rows
// that see no key (LSE = -inf, turned into a +inf marker as in part 2) give P = 0.
#include "backward_gpu.cuh"
#include "course/errors.hpp"
#include "course/math_constants.hpp"
#include "course/mma_sm80.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace course::lab7::detail {
namespace {

using namespace course::sm80;

// ---------------------------------------------------------------------------------------------
// Configuration (given).

constexpr int kBr = 64;                 // query rows per step of the loop (B_r)
constexpr int kKeysPerWarp = 16;        // one m16 tile of keys per warp
constexpr int kQueryTiles = kBr / 8;    // 8-wide n-tiles of S^T: 8
constexpr int kQuerySlabs = kBr / 16;   // 16-wide k-slabs of P^T dO: 4
constexpr int kRowGroups = kBr / 16;    // 16-row groups of dQ_i: 4

// The CTA's shape: kWarps warps of 16 keys each, and kQStages shared-memory stages of Q_i and
// dO_i. At d = 128 a CTA owns 128 keys with 8 warps, as FA2's backward does: every Q_i and dO_i
// tile it loads serves twice as many keys, and every dQ row receives half as many rounds of
// atomic adds, as with 64 keys; at d = 64, 4 warps and 64 keys (two CTAs fit on an SM). Both with
// two stages: 145 KB of shared memory at d = 128 (an A100, H100 or H200 has it), 57 KB at d = 64.
template <int D, int kWarps_ = (D == 128 ? 8 : 4), int kQStages_ = 2>
struct TcTiles {
  static_assert(D == 64 || D == 128, "head dimension must be 64 or 128");
  static_assert(kQStages_ == 1 || kQStages_ == 2, "one or two stages of Q_i and dO_i");
  static constexpr int kHeadDim = D;
  static constexpr int kWarps = kWarps_;
  static constexpr int kQStages = kQStages_;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBc = kKeysPerWarp * kWarps;  // keys per CTA (B_c): 64 or 128
  static constexpr int kKeySlabs = kBc / 16;         // 16-wide k-slabs of dS K
  static constexpr int kMinBlocks = kWarps == 8 ? 1 : 2;  // for __launch_bounds__
  // The dQ step: warp w takes the 16 query rows of group w % 4 and, when there are 8 warps, one
  // half of the head dimension (w / 4). It adds at most 8 n-tiles (64 columns) at a time, so that
  // its accumulators fit beside dK and dV: with 4 warps at d = 128, a warp's 128 columns take two
  // passes.
  static constexpr int kDimSplits = kWarps / kRowGroups;
  static_assert(kWarps % kRowGroups == 0, "the dQ step gives each warp 16 query rows");
  static constexpr int kDimTiles = D / 8;                  // 8-wide n-tiles of dV, dK
  static constexpr int kDqDimTiles = kDimTiles / kDimSplits > 8 ? 8 : kDimTiles / kDimSplits;  // per pass
  static constexpr int kDqPasses = kDimTiles / kDimSplits / kDqDimTiles;
  static constexpr int kKvTile = kBc * D;  // elements of the K or V tile
  static constexpr int kQTile = kBr * D;   // elements of a Q or dO tile
  // K, V, the stages of Q and of dO, and dS^T (kBc x kBr), all 16-bit; then the stages of the
  // rows' base-2 LSE and of D (floats).
  static constexpr int kHalfs = 2 * kKvTile + 2 * kQStages * kQTile + kBc * kBr;
  static constexpr int kSmemBytes = kHalfs * 2 + 2 * kQStages * kBr * static_cast<int>(sizeof(float));
};

// d = 128 on a GPU with less shared memory per block (an RTX 30 or 40 or an L4: 99 KB): 4 warps
// and 64 keys, and one stage of Q_i and dO_i, 72.5 KB. (Two stages would take 105 KB. FA2's
// backward also halves its key tile there, to 64, and keeps V in registers instead; at larger
// head dimensions it drops its second stage as this shape does.)
using TcTilesSmallGpu = TcTiles<128, 4, 1>;

// ---------------------------------------------------------------------------------------------
// Device helpers (given).

// Rows [0, kRows) of a row-major [*, D] block into a swizzled shared tile with cp.async (16 bytes
// a thread a pass, coalesced); rows at or past `valid_rows` are zero-filled and never read. The
// CTA's kThreads threads share the copy; the caller commits and waits.
template <int kRows, int D, int kThreads, class T>
__device__ __forceinline__ void copy_tile_async(T* tile, const T* gmem, int valid_rows, int tid) {
  constexpr int kChunksPerRow = D / 8;
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;  // a multiple of 8: keeps row % 8, the swizzle
  static_assert(kRowsPerPass % 8 == 0 && kRows % kRowsPerPass == 0, "whole passes, one swizzle");
  const int row0 = tid / kChunksPerRow;
  const int col = (tid % kChunksPerRow) * 8;
#pragma unroll
  for (int pass = 0; pass < kRows / kRowsPerPass; ++pass) {
    const int row = row0 + pass * kRowsPerPass;
    const bool valid = row < valid_rows;
    cp_async_16(smem_address(tile + tile_offset<D, true>(row, col)),
                valid ? gmem + static_cast<std::int64_t>(row) * D + col : gmem, valid);
  }
}

// The rows' statistics of query tile q0 into one stage: LSE in base 2 (a +inf marker for a row
// past the end of Q or one that sees no key, so that its P row is exp2(S - inf) = 0) and D.
[[maybe_unused]] __device__ __forceinline__ void stage_row_stats(float* lse_s, float* delta_s, const Params& p,
                                                std::int64_t q_head, int q0, int tid) {
  if (tid < kBr) {
    const int row = q0 + tid;
    const float lse = row < p.nq ? p.lse[q_head + row] : -INFINITY;
    lse_s[tid] = lse == -INFINITY ? INFINITY : lse * kLog2eF;
    delta_s[tid] = row < p.nq ? p.delta[q_head + row] : 0.0f;
  }
}

// Two adjacent elements, rounded to T, in one 4-byte store.
template <class T>
__device__ __forceinline__ void store_pair(T* dst, float lo, float hi) {
  *reinterpret_cast<uint32_t*>(dst) = pack_pair<T>(lo, hi);
}

// ---------------------------------------------------------------------------------------------
// The steps of one query tile, per warp.

// Lines 10 and 13: S^T = K_w Q_i^T and dP^T = V_w dO_i^T for the warp's 16 keys and the tile's
// 64 queries. st[n] and dpt[n] are the m16n8 accumulators of queries 8n .. 8n + 7.
template <int D, class T>
__device__ __forceinline__ void scores_transposed(float (&st)[kQueryTiles][4], float (&dpt)[kQueryTiles][4],
                                                  const T* k_s, const T* v_s, const T* q_s, const T* do_s,
                                                  int key_row0, int lane) {
  // TODO: scores_transposed (Algorithm 2 lines 10 and 13; see the lab README)
  // zero st and dpt; for each 16-wide step of the head dimension: the A fragments of K_w and
  // V_w (load_a_fragment at row key_row0), and for each pair of 8-query tiles the B fragments
  // of Q and dO (load_b_fragments_k: a Q row is a column of Q^T, as a K row is in lab 5's
  // S = Q K^T), then four mma_16x8x16
}

// Lines 11 and 14, in place: st becomes P^T = exp2(S^T tau log2(e) - LSE_i log2(e)), 0 where the
// key is masked (past Nk, or causal and after the query's diagonal); dpt becomes
// dS^T = P^T o (dP^T - D_i). The thread's elements: keys key0 + g and key0 + g + 8 (e < 2 and
// e >= 2), queries q0 + 8n + 2t and + 1 (e even and odd).
[[maybe_unused]] __device__ __forceinline__ void probabilities_and_ds(float (&st)[kQueryTiles][4], float (&dpt)[kQueryTiles][4],
                                                     const float* lse_s, const float* delta_s, const Params& p,
                                                     int key0, int q0, bool needs_mask, int lane) {
  // TODO: probabilities_and_ds (Algorithm 2 lines 11 and 14; see the lab README)
  // for each element: its query column c = 8n + 2t + (e & 1) and key = key0 + g + 8 (e >= 2);
  // P = exp2_approx(fmaf(S, p.scale_log2, -lse_s[c])), set to 0 when needs_mask and the key is
  // invisible (key >= Nk, or causal and key > q0 + c + diag, diag = Nk - Nq: bottom-right);
  // then dS = P (dP - delta_s[c])
}

// Two m16n8 accumulators (8-wide tiles 2j and 2j + 1) as the m16k16 A fragment of k-slab j,
// rounded to T (the fragment layouts of mma_sm80.cuh: a0 = rows g, cols 2t; a1 = rows g + 8;
// a2, a3 = the same 8 columns further).
template <class T>
__device__ __forceinline__ void to_a_fragments(uint32_t (&a)[kQuerySlabs][4], const float (&c)[kQueryTiles][4]) {
#pragma unroll
  for (int j = 0; j < kQuerySlabs; ++j) {
    a[j][0] = pack_pair<T>(c[2 * j][0], c[2 * j][1]);
    a[j][1] = pack_pair<T>(c[2 * j][2], c[2 * j][3]);
    a[j][2] = pack_pair<T>(c[2 * j + 1][0], c[2 * j + 1][1]);
    a[j][3] = pack_pair<T>(c[2 * j + 1][2], c[2 * j + 1][3]);
  }
}

// Lines 12 and 16 (tau is applied at the end): dV_w += P^T dO_i and dK_w += dS^T Q_i, A from the
// registers, B (dO or Q with the queries as the k side) through ldmatrix.trans, like V in lab 5.
template <int D, class T>
__device__ __forceinline__ void accumulate_dv_dk(float (&dv)[TcTiles<D>::kDimTiles][4], float (&dk)[TcTiles<D>::kDimTiles][4],
                                                 const uint32_t (&pa)[kQuerySlabs][4],
                                                 const uint32_t (&dsa)[kQuerySlabs][4], const T* q_s,
                                                 const T* do_s, int lane) {
  // TODO: accumulate_dv_dk (Algorithm 2 lines 12 and 16; see the lab README)
  // for each 16-query k-slab j and each pair of 8-wide head-dimension tiles: the B fragments of
  // dO and of Q at (16 j, 16 pair) with load_b_fragments_v, then two mmas into dv (A = pa[j])
  // and two into dk (A = dsa[j])
}

// dS^T (the warp's 16 keys x 64 queries, already 16-bit A fragments) into the shared tile
// ds_s[key][query] (swizzled, 64 columns), for the dQ step.
template <class T>
__device__ __forceinline__ void store_ds_transposed(T* ds_s, const uint32_t (&dsa)[kQuerySlabs][4], int key_row0,
                                                    int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int j = 0; j < kQuerySlabs; ++j) {
    const int r = key_row0 + g, c = 16 * j + 2 * t;
    *reinterpret_cast<uint32_t*>(ds_s + tile_offset<kBr, true>(r, c)) = dsa[j][0];
    *reinterpret_cast<uint32_t*>(ds_s + tile_offset<kBr, true>(r + 8, c)) = dsa[j][1];
    *reinterpret_cast<uint32_t*>(ds_s + tile_offset<kBr, true>(r, c + 8)) = dsa[j][2];
    *reinterpret_cast<uint32_t*>(ds_s + tile_offset<kBr, true>(r + 8, c + 8)) = dsa[j][3];
  }
}

// The A fragment of dS (queries query0 .. + 15 as rows, keys key0 .. + 15 as k) from the shared
// tile of dS^T: ldmatrix.trans hands lane 4r + c the elements (2c, r) and (2c + 1, r) of each
// stored 8 x 8 block, which is (r, 2c) of its transpose -- the A layout. Matrices 0-3 are the
// blocks (queries +0/+8, keys +0/+0/+8/+8), i.e. stored rows key0 + 0/0/8/8 and columns
// query0 + 0/8/0/8.
template <class T>
__device__ __forceinline__ void load_ds_fragment(uint32_t (&a)[4], const T* ds_s, int key0, int query0, int lane) {
  ldmatrix_x4_trans(a, block_address<kBr, true>(smem_address(ds_s), key0, query0, (lane & 7) + (lane >> 4) * 8,
                                                ((lane >> 3) & 1) * 8));
}

// Line 15 (tau is applied by kernel 3): dQ_i += dS K_j for the warp's 16 query rows
// (query0 .. + 15 of the tile) and head-dimension columns dim0 .. dim0 + 8 kDqDimTiles - 1, added
// into the fp32 accumulator two floats at a time (atomic_add_2: one 8-byte atomic on sm_90, two
// 4-byte ones before).
template <class Tiles, class T>
__device__ __forceinline__ void accumulate_dq(const T* ds_s, const T* k_s, float* dq_rows, int query0, int dim0,
                                              int valid_rows, int lane) {
  constexpr int D = Tiles::kHeadDim;
  // TODO: accumulate_dq (Algorithm 2 line 15; see the lab README)
  // dq[n] (n over the warp's kDqDimTiles 8-wide tiles from dim0) = sum over the kKeySlabs key
  // slabs kk of dS(query0.., 16 kk..) (load_ds_fragment) times K(16 kk.., dims)
  // (load_b_fragments_v on k_s); then rows query0 + g and + 8 (if < valid_rows) of dq_rows get
  // the pairs at columns dim0 + 8n + 2t with atomic_add_2 (course/gpu.hpp: one float2
  // atomicAdd on sm_90, two float ones on sm_80-sm_89, where the float2 overload does not exist)
}

// ---------------------------------------------------------------------------------------------
// Kernel 2 on tensor cores. Grid: (K/V tiles, B * H). One CTA = one K/V tile j of one head.

template <class T, class Tiles>
__global__ void __launch_bounds__(Tiles::kThreads, Tiles::kMinBlocks) backward_tc_kernel(const Params p) {
  constexpr int D = Tiles::kHeadDim;
  constexpr int kDimTiles = Tiles::kDimTiles;
  constexpr int kBc = Tiles::kBc;
  constexpr int kThreads = Tiles::kThreads;
  extern __shared__ uint4 smem_tc[];  // uint4: 16-byte alignment for cp.async and ldmatrix
  T* const k_s = reinterpret_cast<T*>(smem_tc);
  T* const v_s = k_s + Tiles::kKvTile;
  T* const q_stages = v_s + Tiles::kKvTile;           // stage s at q_stages + s * kQTile
  T* const do_stages = q_stages + Tiles::kQStages * Tiles::kQTile;  // likewise
  T* const ds_s = do_stages + Tiles::kQStages * Tiles::kQTile;      // dS^T [kBc keys][kBr queries]
  float* const lse_stages = reinterpret_cast<float*>(ds_s + kBc * kBr);  // [kQStages][kBr]
  float* const delta_stages = lse_stages + Tiles::kQStages * kBr;         // [kQStages][kBr]

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int bh = static_cast<int>(blockIdx.y);
  const int kv0 = static_cast<int>(blockIdx.x) * kBc;
  const int kv_rows = min(kBc, p.nk - kv0);
  const std::int64_t q_head = static_cast<std::int64_t>(bh) * p.nq;
  const std::int64_t k_head = static_cast<std::int64_t>(bh) * p.nk;
  const int diag = p.nk - p.nq;
  const int key_row0 = kKeysPerWarp * warp;  // the warp's keys, within the tile
  const T* const q_head_ptr = static_cast<const T*>(p.q) + q_head * D;
  const T* const do_head_ptr = static_cast<const T*>(p.dout) + q_head * D;

  // Causal tile skipping, as in part 2: the query tiles before the one holding row kv0 - diag see
  // none of this tile's keys.
  const int q_begin = p.causal ? max(0, kv0 - diag) / kBr * kBr : 0;

  // TODO: tc_prologue (Algorithm 2 lines 6-7 and the first query tile; see the lab README)
  // Line 6: K_j and V_j into k_s and v_s with copy_tile_async (kv_rows valid rows). The first
  // query tile (q_begin) into stage 0: Q and dO with copy_tile_async, LSE and D with
  // stage_row_stats; one commit.
  // Line 7: dv and dk (the warp's 16 keys x d, as m16n8 accumulators) = 0.

  int stage = 0;
  for (int q0 = q_begin; q0 < p.nq; q0 += kBr, stage = (stage + 1) % Tiles::kQStages) {
    // TODO: tc_query_tile (Algorithm 2 lines 8-17; see the lab README)
    // Wait for this tile's copies, then a barrier (they are visible, and every warp is done
    // with the previous tile: its stage and ds_s may be overwritten). Prefetch the next query
    // tile (copy_tile_async, stage_row_stats, commit; commit even when there is none, so the
    // wait counts stay simple): with two stages now, into the other stage; with one, after the
    // barrier below, when no warp reads Q_i, dO_i, LSE or D any more. Then scores_transposed,
    // probabilities_and_ds (needs_mask when the tile has keys past Nk or, with causal, a key
    // after some query's diagonal), to_a_fragments of P^T and dS^T, accumulate_dv_dk,
    // store_ds_transposed, a barrier (dS^T complete), and accumulate_dq for the warp's 16 rows
    // (in kDqPasses passes of 8 kDqDimTiles columns).
  }

  // TODO: tc_write_dk_dv (Algorithm 2 line 18; see the lab README)
  // Line 18: the warp's keys kv0 + key_row0 + g and + 8 (those < Nk) get dK = tau dk and
  // dV = dv at columns 8n + 2t, rounded to T once (store_pair); keys no query saw get zeros.
}

template <class T, class Tiles>
void launch(const Params& p, const AttentionShape& shape, cudaStream_t stream) {
  constexpr int kSmem = Tiles::kSmemBytes;
  require_shared_memory(kSmem, "lab 7's backward_tc_kernel");
  // More than 48 KB of dynamic shared memory must be asked for explicitly.
  check_cuda(cudaFuncSetAttribute(backward_tc_kernel<T, Tiles>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
             "cudaFuncSetAttribute(backward_tc_kernel, MaxDynamicSharedMemorySize)");
  const dim3 grid(static_cast<unsigned>((shape.Nk + Tiles::kBc - 1) / Tiles::kBc),
                  static_cast<unsigned>(shape.B * shape.H));
  backward_tc_kernel<T, Tiles><<<grid, Tiles::kThreads, kSmem, stream>>>(p);
  check_cuda(cudaGetLastError(), "backward_tc_kernel<<<...>>> launch");
}

// The shipped shapes (TcTiles), the one for a smaller GPU chosen from its shared memory per block.
template <class T>
void launch_for_d(const Params& p, const AttentionShape& shape, cudaStream_t stream) {
  static_assert(TcTiles<64>::kSmemBytes <= kSmallestSharedMemoryPerBlock &&
                    TcTilesSmallGpu::kSmemBytes <= kSmallestSharedMemoryPerBlock,
                "the tiles for GPUs with less shared memory must fit every GPU from sm_80 on");
  if (shape.d == 64) launch<T, TcTiles<64>>(p, shape, stream);
  else if (TcTiles<128>::kSmemBytes <= shared_memory_per_block()) launch<T, TcTiles<128>>(p, shape, stream);
  else launch<T, TcTilesSmallGpu>(p, shape, stream);
}

}  // namespace

void launch_tensor_core_kernel(const Params& p, DType dtype, const AttentionShape& shape, cudaStream_t stream) {
  // TODO: launch_tensor_core_kernel (see the lab README)
  // launch_for_d<__nv_bfloat16> or launch_for_d<__half>, by dtype
  throw course::NotImplemented("launch_tensor_core_kernel", "labs/lab7_backward/backward_tc.cu");
}

}  // namespace course::lab7::detail
