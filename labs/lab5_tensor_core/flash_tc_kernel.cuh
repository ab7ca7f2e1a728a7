// Lab 5 (beyond): a tensor-core FlashAttention-2 forward kernel, as a staircase of versions.
//
// One kernel template, `flash_tc_forward_kernel<Cfg, Step, T>`, built from small device
// functions. Cfg is the tile shape (TileConfig), Step the traits type of one step of the
// staircase (flash_tc_config.cuh: V1_MmaOnly ... V7_LazyRescale), whose flags switch each idea
// on with `if constexpr`; T the 16-bit element type. The pieces it uses live in
//   flash_tc_config.cuh   the steps, TileConfig, KernelParams
//   flash_tc_ptx.cuh      mma.sync, ldmatrix, cp.async, ex2 wrappers (course/mma_sm80.cuh draws
//                         the fragment layouts)
//   flash_tc_smem.cuh     shared-memory size and tile copies (the swizzle and the fragment loads
//                         are course/mma_sm80.cuh's)
//   flash_tc_softmax.cuh  the online softmax (quad reductions from course/quad_reduce.cuh)
// and flash_tc.cu launches it.
//
// The algorithm is FlashAttention-2's forward pass (Dao, 2023, Algorithm 1); comments name the
// line of that algorithm each block implements. The FA2 split: a CTA owns kBlockM query rows,
// each warp owns kRowsPerWarp of them outright (16 or 32), so a row's max and sum only ever need
// the 4 lanes of a quad -- never another warp, never shared memory.
#pragma once

#include <cstdint>

#include "course/causal_tiles.cuh"
#include "flash_tc_config.cuh"
#include "flash_tc_ptx.cuh"
#include "flash_tc_smem.cuh"
#include "flash_tc_softmax.cuh"

namespace course::lab5::detail {

// ------------------------------------------------------------------------------------------
// The pieces of one K/V tile's work (FA2 Algorithm 1, lines 8-10), per warp
// ------------------------------------------------------------------------------------------

// Line 8: S = Q_i K_j^T for this warp's kMTiles*16 rows and the tile's kBlockN keys.
// Each B fragment loaded from K serves kMTiles mmas; each A fragment of Q serves kNTiles.
template <class Cfg, class Step, class T>
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


// Step::p_in_registers: convert P to 16 bits right away, already in A-fragment order for P.V. The C
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

// Line 10, P.V half, with P in registers (versions 5-7): O += P V_j with P's A fragments already in registers.
template <class Cfg, class Step, class T>
__device__ __forceinline__ void accumulate_pv_from_registers(
    float (&o)[Cfg::kMTiles][Cfg::kDTiles][4],
    const uint32_t (&p_frag)[Cfg::kMTiles][Cfg::kBlockN / 16][4], const T* v_tile, int lane) {
  // TODO: accumulate_pv_from_registers (see the lab README)
  // for each 16-key k-step and each pair of 8-wide head-dim tiles: load V's B fragments with
  // ldmatrix.trans, then one mma per (row tile, head-dim tile)
}

// Line 10, P.V half, versions 1-4: P goes through this warp's private slice of shared memory
// (16-bit, same layout rules as the other tiles) and comes back as A fragments -- the detour
// that Step::p_in_registers removes. The slice is the warp's own, so __syncwarp is the only barrier.
template <class Cfg, class Step, class T>
__device__ __forceinline__ void accumulate_pv_through_smem(
    float (&o)[Cfg::kMTiles][Cfg::kDTiles][4], const float (&p)[Cfg::kMTiles][Cfg::kNTiles][4],
    T* p_tile, const T* v_tile, int lane) {
  // TODO: accumulate_pv_through_smem (see the lab README)
  // store P (16-bit) from the C fragment layout: rows g and g+8 of each 16-row tile, cols 2t..2t+1
  // __syncwarp, reload it as A fragments, mma with V's B fragments, __syncwarp before reuse
}

// Lines 12-15: O_i = O / l, L_i = m*scale + log(l); a row that saw no key (l = 0) gets O = 0 and
// LSE = -inf. Each lane writes its two adjacent columns per 8-wide tile (4-byte stores: a quad
// covers 16 contiguous bytes of a row). O is written once per row block, so this is a tiny share
// of the traffic; staging through shared memory for 16-byte stores is a possible refinement.
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

// kv_tiles_to_visit and kv_tiles_without_mask (which K/V tiles a causal query tile visits, and
// which of them need a mask): course/causal_tiles.cuh, shared with lab 8.

template <class Cfg, class Step, class T>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm)
    flash_tc_forward_kernel(const KernelParams params) {
  constexpr int kStages = kStagesOf<Step>;
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
