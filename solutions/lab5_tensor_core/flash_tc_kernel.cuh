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
  // BEGIN SOLUTION compute_scores device
  //! zero s, then for each 16-wide k-step of the head dimension: load the A fragments of Q
  //! (one per 16-row tile), and for each pair of 8-key tiles the four B registers from K,
  //! then one mma per (row tile, key tile)
  constexpr int D = Cfg::kHeadDim;
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < Cfg::kNTiles; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) s[mt][nt][c] = 0.0f;

#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[Cfg::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < Cfg::kMTiles; ++mt)
      load_a_fragment<D, Step::swizzle, Step::ldmatrix>(a[mt], q_tile, warp_row0 + 16 * mt, 16 * kk,
                                                  lane);
#pragma unroll
    for (int np = 0; np < Cfg::kNTiles / 2; ++np) {
      uint32_t b[4];
      load_b_fragments_k<D, Step::swizzle, Step::ldmatrix>(b, k_tile, 16 * np, 16 * kk, lane);
#pragma unroll
      for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
        mma_16x8x16<T>(s[mt][2 * np], a[mt], b[0], b[1]);
        mma_16x8x16<T>(s[mt][2 * np + 1], a[mt], b[2], b[3]);
      }
    }
  }
  // END SOLUTION
}

// Set S to -inf where the key does not exist (past Nk) or is in the causal future
// (key > query + Nk - Nq, bottom-right aligned). Only called for tiles that need it.
template <class Cfg>
__device__ __forceinline__ void apply_mask(float (&s)[Cfg::kMTiles][Cfg::kNTiles][4],
                                           int first_row, int first_key, int nq, int nk,
                                           bool causal, int lane) {
  // BEGIN SOLUTION apply_mask device
  //! s[mt][nt][c] is row first_row + 16*mt + g + 8*(c/2), key first_key + 8*nt + 2*t + c%2
  const int g = lane >> 2, t = lane & 3;
  const int diagonal = nk - nq;
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < Cfg::kNTiles; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int row = first_row + 16 * mt + g + 8 * (c >> 1);
        const int key = first_key + 8 * nt + 2 * t + (c & 1);
        if (key >= nk || (causal && key > row + diagonal)) s[mt][nt][c] = -INFINITY;
      }
  // END SOLUTION
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
  // BEGIN SOLUTION pack_p_fragments device
  //! p_frag[mt][kk] = { pack(tile 2kk c0,c1), pack(tile 2kk c2,c3), pack(tile 2kk+1 c0,c1), pack(tile 2kk+1 c2,c3) }
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt)
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk) {
      p_frag[mt][kk][0] = pack_pair<T>(p[mt][2 * kk][0], p[mt][2 * kk][1]);
      p_frag[mt][kk][1] = pack_pair<T>(p[mt][2 * kk][2], p[mt][2 * kk][3]);
      p_frag[mt][kk][2] = pack_pair<T>(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);
      p_frag[mt][kk][3] = pack_pair<T>(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);
    }
  // END SOLUTION
}

// Line 10, P.V half, with P in registers (versions 5-7): O += P V_j with P's A fragments already in registers.
template <class Cfg, class Step, class T>
__device__ __forceinline__ void accumulate_pv_from_registers(
    float (&o)[Cfg::kMTiles][Cfg::kDTiles][4],
    const uint32_t (&p_frag)[Cfg::kMTiles][Cfg::kBlockN / 16][4], const T* v_tile, int lane) {
  // BEGIN SOLUTION accumulate_pv_from_registers device
  //! for each 16-key k-step and each pair of 8-wide head-dim tiles: load V's B fragments with
  //! ldmatrix.trans, then one mma per (row tile, head-dim tile)
  constexpr int D = Cfg::kHeadDim;
#pragma unroll
  for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk) {
#pragma unroll
    for (int dp = 0; dp < Cfg::kDTiles / 2; ++dp) {
      uint32_t b[4];
      load_b_fragments_v<D, Step::swizzle, Step::ldmatrix>(b, v_tile, 16 * kk, 16 * dp, lane);
#pragma unroll
      for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
        mma_16x8x16<T>(o[mt][2 * dp], p_frag[mt][kk], b[0], b[1]);
        mma_16x8x16<T>(o[mt][2 * dp + 1], p_frag[mt][kk], b[2], b[3]);
      }
    }
  }
  // END SOLUTION
}

// Line 10, P.V half, versions 1-4: P goes through this warp's private slice of shared memory
// (16-bit, same layout rules as the other tiles) and comes back as A fragments -- the detour
// that Step::p_in_registers removes. The slice is the warp's own, so __syncwarp is the only barrier.
template <class Cfg, class Step, class T>
__device__ __forceinline__ void accumulate_pv_through_smem(
    float (&o)[Cfg::kMTiles][Cfg::kDTiles][4], const float (&p)[Cfg::kMTiles][Cfg::kNTiles][4],
    T* p_tile, const T* v_tile, int lane) {
  // BEGIN SOLUTION accumulate_pv_through_smem device
  //! store P (16-bit) from the C fragment layout: rows g and g+8 of each 16-row tile, cols 2t..2t+1
  //! __syncwarp, reload it as A fragments, mma with V's B fragments, __syncwarp before reuse
  constexpr int N = Cfg::kBlockN;
  constexpr int D = Cfg::kHeadDim;
  static_assert(N >= 64, "the swizzled P slice needs rows of >= 64 halves (8 chunks)");
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < Cfg::kNTiles; ++nt) {
      const int row = 16 * mt + g, col = 8 * nt + 2 * t;
      *reinterpret_cast<uint32_t*>(p_tile + tile_offset<N, Step::swizzle>(row, col)) =
          pack_pair<T>(p[mt][nt][0], p[mt][nt][1]);
      *reinterpret_cast<uint32_t*>(p_tile + tile_offset<N, Step::swizzle>(row + 8, col)) =
          pack_pair<T>(p[mt][nt][2], p[mt][nt][3]);
    }
  __syncwarp();
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
    uint32_t a[Cfg::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < Cfg::kMTiles; ++mt)
      load_a_fragment<N, Step::swizzle, Step::ldmatrix>(a[mt], p_tile, 16 * mt, 16 * kk, lane);
#pragma unroll
    for (int dp = 0; dp < Cfg::kDTiles / 2; ++dp) {
      uint32_t b[4];
      load_b_fragments_v<D, Step::swizzle, Step::ldmatrix>(b, v_tile, 16 * kk, 16 * dp, lane);
#pragma unroll
      for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
        mma_16x8x16<T>(o[mt][2 * dp], a[mt], b[0], b[1]);
        mma_16x8x16<T>(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
  __syncwarp();  // the next tile overwrites p_tile
  // END SOLUTION
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
  // BEGIN SOLUTION store_output device
  //! l = quad_sum(row_sum): each lane only summed its own columns
  //! normalise once here (not per tile); guard l == 0; skip rows >= nq
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = quad_sum(row_sum[mt][r]);
      const int row = first_row + 16 * mt + g + 8 * r;
      if (row >= nq) continue;
      const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
      T* out = o_head + static_cast<int64_t>(row) * Cfg::kHeadDim;
#pragma unroll
      for (int dt = 0; dt < Cfg::kDTiles; ++dt)
        *reinterpret_cast<uint32_t*>(out + 8 * dt + 2 * t) =
            pack_pair<T>(o[mt][dt][2 * r] * inv_l, o[mt][dt][2 * r + 1] * inv_l);
      if (t == 0) lse_head[row] = l > 0.0f ? row_max[mt][r] * scale + logf(l) : -INFINITY;
    }
  // END SOLUTION
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

  // BEGIN SOLUTION flash_tc_forward_kernel device
  //! line 4: load Q_i once; line 5: o = 0, row_max = -inf, row_sum = 0 (in registers)
  //! line 6-7: loop over the K/V tiles this query tile can see; pipelined versions prefetch tile
  //! j+1 with cp.async into the other stage before computing tile j (commit every iteration,
  //! wait_group 1, __syncthreads before reading, __syncthreads before the stage is refilled)
  //! lines 8-10: compute_scores, apply_mask only on boundary tiles, online_softmax, P.V
  //! lines 12-15: store_output
  const int n_tiles = kv_tiles_to_visit<Cfg>(q0, nq, nk, params.causal);
  const int unmasked_tiles = kv_tiles_without_mask<Cfg>(q0 + warp_row0, nq, nk, params.causal);
  const auto load_kv = [&](int tile, int stage) {
    const int kv0 = tile * N;
    load_tile<N, D, Cfg::kThreads, Step::swizzle, Step::cp_async>(
        k_tiles + stage * N * D, k_head + static_cast<int64_t>(kv0) * D, nk - kv0, tid);
    load_tile<N, D, Cfg::kThreads, Step::swizzle, Step::cp_async>(
        v_tiles + stage * N * D, v_head + static_cast<int64_t>(kv0) * D, nk - kv0, tid);
  };

  // Line 4: Q_i into shared memory (rows past Nq zero-filled). Line 5: O, l, m on chip.
  load_tile<M, D, Cfg::kThreads, Step::swizzle, Step::cp_async>(
      q_tile, q_head + static_cast<int64_t>(q0) * D, nq - q0, tid);
  if constexpr (Step::cp_async) {
    if (n_tiles > 0) load_kv(0, 0);
    cp_async_commit();  // group: Q and K/V tile 0
  }

  float o[Cfg::kMTiles][Cfg::kDTiles][4];
  float row_max[Cfg::kMTiles][2], row_sum[Cfg::kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
#pragma unroll
    for (int dt = 0; dt < Cfg::kDTiles; ++dt)
#pragma unroll
      for (int c = 0; c < 4; ++c) o[mt][dt][c] = 0.0f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[mt][r] = -INFINITY;
      row_sum[mt][r] = 0.0f;
    }
  }

  // Line 6: for each K/V tile j.
  for (int j = 0; j < n_tiles; ++j) {
    const int stage = kStages == 2 ? (j & 1) : 0;
    // Line 7: K_j, V_j into shared memory.
    if constexpr (Step::cp_async) {
      if (j + 1 < n_tiles) load_kv(j + 1, stage ^ 1);  // prefetch: overlaps all of tile j's math
      cp_async_commit();                               // (an empty group on the last tile)
      cp_async_wait<1>();                              // everything but that prefetch has landed
      __syncthreads();                                 // ... for every thread's copies
    } else {
      __syncthreads();  // all warps are done reading the previous tile
      load_kv(j, 0);
      __syncthreads();
    }
    const T* k_tile = k_tiles + stage * N * D;
    const T* v_tile = v_tiles + stage * N * D;

    // Line 8: S = Q_i K_j^T.
    float s[Cfg::kMTiles][Cfg::kNTiles][4];
    compute_scores<Cfg, Step, T>(s, q_tile, k_tile, warp_row0, lane);

    // Only tiles that cross Nk or this warp's causal diagonal pay for the mask.
    if (j >= unmasked_tiles)
      apply_mask<Cfg>(s, q0 + warp_row0, j * N, nq, nk, params.causal, lane);

    // Line 9 and the rescale of line 10.
    online_softmax<Cfg, Step>(s, o, row_max, row_sum, params.scale, params.scale_log2);

    // Line 10: O += P V_j.
    if constexpr (Step::p_in_registers) {
      uint32_t p_frag[Cfg::kMTiles][Cfg::kBlockN / 16][4];
      pack_p_fragments<Cfg, T>(p_frag, s);
      accumulate_pv_from_registers<Cfg, Step, T>(o, p_frag, v_tile, lane);
    } else {
      accumulate_pv_through_smem<Cfg, Step, T>(o, s, p_tile, v_tile, lane);
    }
    if constexpr (Step::cp_async) __syncthreads();  // the next prefetch overwrites this stage
  }

  // Lines 12-15.
  store_output<Cfg, T>(o, row_max, row_sum, o_head, lse_head, q0 + warp_row0, nq, params.scale,
                       lane);
  // END SOLUTION
}

}  // namespace course::lab5::detail
