// Lab 8 (beyond): a Hopper FlashAttention forward kernel, as a staircase of versions.
//
// One kernel template, `flash_h100_forward_kernel<Cfg, Step, T>`, built from small device
// functions. Cfg is the tile shape (TileConfig), Step the traits type of one step of the
// staircase (flash_h100_config.cuh: V1_Wgmma .. V9_Persistent), whose flags switch each
// idea on with `if constexpr`; T the 16-bit element type. The pieces it uses live in
//   flash_h100_config.cuh   the steps, TileConfig, the shared-memory layout, KernelParams
//   flash_h100_load.cuh     16-byte loads into the swizzle, TMA tile copies, the barrier wait
//   flash_h100_softmax.cuh  the online softmax (quad reductions from course/quad_reduce.cuh)
//   course/mma_sm90.cuh     the PTX toolkit: wgmma, descriptors, swizzle, mbarrier, TMA
// and flash_h100.cu launches it.
//
// The algorithm is FlashAttention-2's forward pass (Dao, 2023, Algorithm 1); comments name the
// line of that algorithm each block implements (the FA1 paper's Algorithm 1 has the same
// structure with the loops swapped: its lines 8-13 are the body of our K/V loop). What changes
// from lab 5 is who does the matrix products and who moves the data:
//   - a warpgroup (4 warps) issues one wgmma per 16-wide k-step for its 64 query rows, reading
//     Q and K straight from shared memory through descriptors (no ldmatrix, no fragments);
//   - P stays in registers (lab 5's step 5) and is the A operand of O += P V (wgmma's RS form);
//   - from step 2 on, one thread asks the TMA engine for whole tiles; everybody waits on an
//     mbarrier whose phase completes when the bytes have landed.
#pragma once

#include <cstdint>

#include "course/causal_tiles.cuh"
#include "flash_h100_config.cuh"
#include "flash_h100_load.cuh"
#include "flash_h100_softmax.cuh"

namespace course::lab8::detail {

// ------------------------------------------------------------------------------------------
// The two matrix products (FA2 Algorithm 1, lines 8 and 10), per warpgroup
// ------------------------------------------------------------------------------------------

// Byte offset of k-step kk (columns 16kk .. 16kk+15) in a K-major swizzled tile of kRows rows:
// the k-steps 0-3 of a 64-column block are 32 bytes apart inside each 128-byte row (the
// hardware applies the swizzle to the advanced address: micro-test 1), and every 4 k-steps the
// next column block begins, kRows * 128 bytes further.
template <int kRows>
__device__ __forceinline__ uint32_t k_major_step_offset(int kk) {
  return (kk / 4) * (kRows * 128) + (kk % 4) * 32;
}

// Line 8: S = Q_i K_j^T for this warpgroup's 64 rows and the tile's kBlockN keys: d/16 wgmma
// (m64 n=kBlockN k16), both operands K-major in shared memory. The warpgroup's 64 rows of Q
// start 64 * 128 bytes into each column block of the Q tile. wgmma only starts the product and
// the products of one call form one commit group: s is readable once that group has completed
// (wgmma_wait_group), and fence_operand keeps the compiler from moving reads of s above the wait.
template <class Cfg, class T>
__device__ __forceinline__ void issue_scores(float (&s)[Cfg::kBlockN / 2], uint32_t q_tile,
                                             uint32_t k_tile, int warpgroup) {
  // BEGIN SOLUTION issue_scores device
  //! zero s (wgmma names it read-write), wgmma_fence, then for kk < d/16 one wgmma_ss<kBlockN, T>
  //! with desc_k_major_sw128(tile + k_major_step_offset<rows>(kk)) for Q (+ 64 * 128 * warpgroup)
  //! and K, accumulating from kk = 1 on; commit the group
  constexpr int M = Cfg::kBlockM, N = Cfg::kBlockN;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) s[i] = 0.0f;
  fence_operand(s);
  wgmma_fence();
  const uint32_t q_rows = q_tile + warpgroup * (64 * 128);
#pragma unroll
  for (int kk = 0; kk < Cfg::kHeadDim / 16; ++kk)
    wgmma_ss<N, T>(s, desc_k_major_sw128(q_rows + k_major_step_offset<M>(kk)),
                   desc_k_major_sw128(k_tile + k_major_step_offset<N>(kk)), /*accumulate=*/kk > 0);
  wgmma_commit_group();
  // END SOLUTION
}

// Line 8 to the end: the scores, waited for (steps 1-5: nothing else is in flight).
template <class Cfg, class T>
__device__ __forceinline__ void compute_scores(float (&s)[Cfg::kBlockN / 2], uint32_t q_tile,
                                               uint32_t k_tile, int warpgroup) {
  issue_scores<Cfg, T>(s, q_tile, k_tile, warpgroup);
  wgmma_wait_group<0>();
  fence_operand(s);
}

// P as the A operand of O += P V, in registers (DESIGN.md section 4): the A fragment of k-step
// kk (keys 16kk .. 16kk+15) is exactly S's accumulators 8kk .. 8kk+7, packed in pairs in that
// order -- the same thread holds them, so P is converted, never moved. Low half = lower column.
template <class T>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  T l, h;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    l = __float2bfloat16_rn(lo);
    h = __float2bfloat16_rn(hi);
  } else {
    l = __float2half_rn(lo);
    h = __float2half_rn(hi);
  }
  return uint32_t(*reinterpret_cast<uint16_t*>(&l)) | (uint32_t(*reinterpret_cast<uint16_t*>(&h)) << 16);
}

template <int kBlockN, class T>
__device__ __forceinline__ void pack_p(uint32_t (&p)[kBlockN / 16][4], const float (&s)[kBlockN / 2]) {
  // BEGIN SOLUTION pack_p device
  //! p[kk][i] = pack_pair<T>(s[8kk + 2i], s[8kk + 2i + 1]) for i < 4
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) p[kk][i] = pack_pair<T>(s[8 * kk + 2 * i], s[8 * kk + 2 * i + 1]);
  // END SOLUTION
}

// Line 10, P V half: O += P V_j, kBlockN/16 wgmma (m64 n=d k16) with P from registers and V
// from shared memory, as one commit group. V's tile is [keys][d]: for this product keys are K and
// d is N, so V is MN-major (trans-b = 1): LBO = the distance between its 64-column blocks
// (kBlockN * 128 bytes; used at d = 128 only), SBO = 1024 (8 keys), and k-step kk starts 16 keys
// = 2048 bytes further. The wgmma_fence is required here: o was just rescaled and p packed by
// ordinary instructions. Until the group completes, the product reads p and writes o.
template <class Cfg, class T>
__device__ __forceinline__ void issue_pv(float (&o)[Cfg::kHeadDim / 2],
                                         const uint32_t (&p)[Cfg::kBlockN / 16][4], uint32_t v_tile) {
  // BEGIN SOLUTION issue_pv device
  //! fence_operand(o), wgmma_fence, kBlockN/16 x wgmma_rs<d, T, /*trans_b=*/1>(o, p[kk],
  //! desc_mn_major_sw128(v_tile + 2048 * kk, kBlockN * 128), true); commit the group
  constexpr int N = Cfg::kBlockN, D = Cfg::kHeadDim;
  fence_operand(o);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk)
    wgmma_rs<D, T, /*trans_b=*/1>(o, p[kk], desc_mn_major_sw128(v_tile + 2048 * kk, N * 128),
                                  /*accumulate=*/true);
  wgmma_commit_group();
  // END SOLUTION
}

// Line 10 to the end: O += P V_j, waited for (steps 1-5).
template <class Cfg, class T>
__device__ __forceinline__ void accumulate_pv(float (&o)[Cfg::kHeadDim / 2],
                                              const uint32_t (&p)[Cfg::kBlockN / 16][4],
                                              uint32_t v_tile) {
  issue_pv<Cfg, T>(o, p, v_tile);
  wgmma_wait_group<0>();
  fence_operand(o);
}

// Set S to -inf where the key does not exist (past Nk; TMA filled those K rows with zeros, which
// would otherwise score 0) or is in the causal future (key > query + Nk - Nq, bottom-right
// aligned). Element i of this thread is row first_row + acc_row(t, i), key first_key + acc_col(t, i).
template <int kBlockN>
__device__ __forceinline__ void apply_mask(float (&s)[kBlockN / 2], int first_row, int first_key,
                                           int nq, int nk, bool causal, int thread_in_warpgroup) {
  // BEGIN SOLUTION apply_mask device
  //! for every i: row and key from acc_row / acc_col; -inf if key >= nk or (causal and
  //! key > row + nk - nq)
  const int diagonal = nk - nq;
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) {
    const int row = first_row + acc_row(thread_in_warpgroup, i);
    const int key = first_key + acc_col(thread_in_warpgroup, i);
    if (key >= nk || (causal && key > row + diagonal)) s[i] = -INFINITY;
  }
  // END SOLUTION
}

// Lines 12-15: O_i = O / l, L_i = m*scale + log(l); a row that saw no key (l = 0) gets O = 0
// and LSE = -inf. Rows past Nq (the zero-filled end of the last query tile) are not written.
// Each thread stores pairs of columns (4-byte stores: a quad covers 16 contiguous bytes).
template <int kHeadDim, class T>
__device__ __forceinline__ void store_output(const float (&o)[kHeadDim / 2], const float (&row_max)[2],
                                             const float (&row_sum)[2], T* o_head, float* lse_head,
                                             int first_row, int nq, float scale,
                                             int thread_in_warpgroup) {
  // BEGIN SOLUTION store_output device
  //! l = quad_sum(row_sum[r]) (each lane summed only its own columns); row r of this thread is
  //! first_row + acc_row(t, 2r); skip rows >= nq; o[4j + 2r + c] is column 8j + 2(t % 4) + c;
  //! lane t % 4 == 0 writes the LSE
  const int quad_lane = thread_in_warpgroup % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = quad_sum(row_sum[r]);
    const int row = first_row + acc_row(thread_in_warpgroup, 2 * r);
    if (row >= nq) continue;
    const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
    T* out = o_head + static_cast<int64_t>(row) * kHeadDim;
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j)
      *reinterpret_cast<uint32_t*>(out + 8 * j + 2 * quad_lane) =
          pack_pair<T>(o[4 * j + 2 * r] * inv_l, o[4 * j + 2 * r + 1] * inv_l);
    if (quad_lane == 0) lse_head[row] = l > 0.0f ? row_max[r] * scale + logf(l) : -INFINITY;
  }
  // END SOLUTION
}

// ------------------------------------------------------------------------------------------
// Steps 1-3: every thread moves data (or waits for it) and computes
// ------------------------------------------------------------------------------------------

// Steps 1-4 visit every K/V tile, also the ones a causal query tile cannot see (they are masked
// to -inf entirely): correct first; skipping them is step 5 (tiles_to_visit below).
template <class Cfg>
__device__ __forceinline__ int kv_tiles(int nk) {
  return (nk + Cfg::kBlockN - 1) / Cfg::kBlockN;
}

// The K/V tiles the query tile starting at row q0 visits: every tile up to step 4; from step 5
// on, a causal query tile stops after the tile holding its last row's last visible key
// (course/causal_tiles.cuh, as lab 5). Zero when no row of the tile sees any key.
template <class Cfg, class Step>
__device__ __forceinline__ int tiles_to_visit(int q0, int nq, int nk, bool causal) {
  if constexpr (Step::causal_skip) return kv_tiles_to_visit<Cfg>(q0, nq, nk, causal);
  return kv_tiles<Cfg>(nk);
}

// The first tile that needs apply_mask for the 64 rows from first_row on. Up to step 4 a causal
// problem masks every tile; from step 5 on only the tiles that cross these rows' diagonal or Nk.
template <class Cfg, class Step>
__device__ __forceinline__ int first_masked_tile(int first_row, int nq, int nk, bool causal) {
  if constexpr (Step::causal_skip) return kv_tiles_without_mask<Cfg>(first_row, nq, nk, causal);
  return causal ? 0 : nk / Cfg::kBlockN;
}

// Steps 1-3: every thread loads (step 1) or waits for the copy engine (steps 2-3) and computes.
// The maps are the kernel's __grid_constant__ parameters, passed on by reference: a TMA copy
// needs the parameter's own address.
template <class Cfg, class Step, class T>
__device__ __forceinline__ void forward_one_role(const CUtensorMap& q_map, const CUtensorMap& k_map,
                                                 const CUtensorMap& v_map, const KernelParams& params) {
  using Smem = SmemLayout<Cfg, Step>;
  constexpr int kStages = Smem::kStages;
  constexpr int M = Cfg::kBlockM, N = Cfg::kBlockN, D = Cfg::kHeadDim;

  // Dynamic shared memory, rounded up to 1024 bytes (the swizzle repeats every 1024 bytes and is
  // computed from address bits). The barriers are static shared memory: 8-byte aligned.
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  unsigned char* q_tile = smem;
  __shared__ __align__(8) uint64_t q_full;
  __shared__ __align__(8) uint64_t k_full[kStages];  // step 2: K and V of a tile on k_full[0]
  __shared__ __align__(8) uint64_t v_full[kStages];

  const int head = blockIdx.y;  // b * H + h
  const int q0 = blockIdx.x * M;
  const int nq = params.nq, nk = params.nk;
  const T* q_head = static_cast<const T*>(params.q) + static_cast<int64_t>(head) * nq * D;
  const T* k_head = static_cast<const T*>(params.k) + static_cast<int64_t>(head) * nk * D;
  const T* v_head = static_cast<const T*>(params.v) + static_cast<int64_t>(head) * nk * D;
  T* o_head = static_cast<T*>(params.o) + static_cast<int64_t>(head) * nq * D;
  float* lse_head = params.lse + static_cast<int64_t>(head) * nq;

  const int tid = threadIdx.x;
  const int warpgroup = tid / 128, thread_in_warpgroup = tid % 128;
  const int first_row = q0 + 64 * warpgroup;  // this warpgroup's first query row

  // BEGIN SOLUTION flash_h100_forward_kernel device
  //! step 2+: thread 0 initialises the barriers (count 1 each), fence_mbarrier_init, __syncthreads
  //! line 4: Q_i into shared memory (step 1: load_tile_sw128 by everyone; step 2+: thread 0
  //! arrive_expect_tx(q_full, bytes) + tma_load_tile, everyone waits on parity 0)
  //! step 3: thread 0 issues the first kStages K/V tiles (K on k_full[s], V on v_full[s])
  //! line 5: o = 0, row_max = -inf, row_sum = 0 (registers)
  //! lines 6-7 per tile j: step 1: __syncthreads, load K_j and V_j, fence_proxy_async_shared,
  //! __syncthreads; step 2: __syncthreads, thread 0 loads K_j and V_j on one barrier, wait on
  //! parity j & 1; step 3: stage j % kStages, parity (j / kStages) & 1, K and V waited separately
  //! lines 8-10: compute_scores, apply_mask (causal: every tile; else only a tile crossing Nk),
  //! online_softmax, pack_p, accumulate_pv; step 3: __syncthreads, then thread 0 refills the stage
  //! lines 12-15: store_output
  const auto k_tile = [&](int stage) { return smem + Smem::k_offset(stage); };
  const auto v_tile = [&](int stage) { return smem + Smem::v_offset(stage); };
  // Step 3: one thread asks for K and V of tile `tile` into stage `stage`, each on its own
  // barrier, announcing the full box's bytes (zero-filled rows past Nk count too).
  const auto issue_kv = [&](int tile, int stage) {
    mbarrier_arrive_expect_tx(&k_full[stage], Smem::kTileBytes);
    tma_load_tile<N, D>(k_tile(stage), &k_map, &k_full[stage], tile * N, head);
    mbarrier_arrive_expect_tx(&v_full[stage], Smem::kTileBytes);
    tma_load_tile<N, D>(v_tile(stage), &v_map, &v_full[stage], tile * N, head);
  };
  const int n_tiles = kv_tiles<Cfg>(nk);

  if constexpr (Step::tma) {
    // One thread makes the barriers; the fence publishes them to the async proxy (the TMA unit
    // completes transactions on them), the __syncthreads to the other threads.
    if (tid == 0) {
      prefetch_tensormap(&q_map);
      prefetch_tensormap(&k_map);
      prefetch_tensormap(&v_map);
      mbarrier_init(&q_full, 1);
      for (int s = 0; s < kStages; ++s) {
        mbarrier_init(&k_full[s], 1);
        mbarrier_init(&v_full[s], 1);
      }
      fence_mbarrier_init();
    }
    __syncthreads();
    // Line 4: Q_i (rows past Nq arrive as zeros).
    if (tid == 0) {
      mbarrier_arrive_expect_tx(&q_full, Smem::kQBytes);
      tma_load_tile<M, D>(q_tile, &q_map, &q_full, q0, head);
      if constexpr (Step::pipelined) {
        // Fill every stage before computing anything: these copies overlap the wait for Q.
        for (int t = 0; t < kStages && t < n_tiles; ++t) issue_kv(t, t);
      }
    }
  } else {
    // Line 4: Q_i by everyone (made visible to wgmma with the first K/V tile's fence and barrier).
    load_tile_sw128<M, D, Cfg::kThreads>(q_tile, q_head + static_cast<int64_t>(q0) * D, nq - q0, tid);
  }

  // Line 5: O, l, m on chip. Each thread holds d/2 accumulators of O and two rows' m and l.
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};
  if constexpr (Step::tma) wait_barrier(&q_full, 0);

  // Line 6: for each K/V tile j.
  for (int j = 0; j < n_tiles; ++j) {
    const int stage = Step::pipelined ? j % kStages : 0;
    // The phase of this stage's barriers that tile j completes: each use of a stage is one phase.
    const uint32_t parity = Step::pipelined ? (j / kStages) & 1 : j & 1;

    // Line 7: K_j, V_j into shared memory.
    if constexpr (!Step::tma) {
      __syncthreads();  // every warpgroup's wgmma have finished reading tile j-1 (wait_group<0>)
      load_tile_sw128<N, D, Cfg::kThreads>(k_tile(0), k_head + static_cast<int64_t>(j) * N * D, nk - j * N, tid);
      load_tile_sw128<N, D, Cfg::kThreads>(v_tile(0), v_head + static_cast<int64_t>(j) * N * D, nk - j * N, tid);
      fence_proxy_async_shared();  // this thread's st.shared -> wgmma's reads (the async proxy)
      __syncthreads();             // ... for every thread's stores
    } else if constexpr (!Step::pipelined) {
      __syncthreads();  // nobody still reads tile j-1 when the copy engine overwrites it
      if (tid == 0) {
        mbarrier_arrive_expect_tx(&k_full[0], 2 * Smem::kTileBytes);  // K and V on one barrier
        tma_load_tile<N, D>(k_tile(0), &k_map, &k_full[0], j * N, head);
        tma_load_tile<N, D>(v_tile(0), &v_map, &k_full[0], j * N, head);
      }
      wait_barrier(&k_full[0], parity);
    } else {
      wait_barrier(&k_full[stage], parity);  // V may still be on its way
    }

    // Line 8: S = Q_i K_j^T.
    float s[N / 2];
    compute_scores<Cfg, T>(s, smem_address(q_tile), smem_address(k_tile(stage)), warpgroup);

    // Keys past Nk, and the causal future (steps 1-3: every tile of a causal problem).
    if (params.causal || (j + 1) * N > nk)
      apply_mask<N>(s, first_row, j * N, nq, nk, params.causal, thread_in_warpgroup);

    // Line 9 and the rescale of line 10.
    online_softmax<N, D>(s, o, row_max, row_sum, params.scale_log2);

    // Line 10: O += P V_j, P in registers.
    uint32_t p[N / 16][4];
    pack_p<N, T>(p, s);
    if constexpr (Step::pipelined) wait_barrier(&v_full[stage], parity);
    accumulate_pv<Cfg, T>(o, p, smem_address(v_tile(stage)));

    if constexpr (Step::pipelined) {
      // Both warpgroups have finished reading this stage (their wait_group<0> returned): refill
      // it with tile j + kStages, which then loads while tiles j+1 .. j+kStages-1 compute.
      __syncthreads();
      if (tid == 0 && j + kStages < n_tiles) issue_kv(j + kStages, stage);
    }
  }

  // Lines 12-15.
  store_output<D, T>(o, row_max, row_sum, o_head, lse_head, first_row, nq, params.scale,
                     thread_in_warpgroup);
  // END SOLUTION
}

// ------------------------------------------------------------------------------------------
// Step 4: a producer warpgroup and consumer warpgroups (DESIGN.md sections 3 and 5)
// ------------------------------------------------------------------------------------------

// One consumer warpgroup's 64 query rows of one head (steps 4-9): where they start, where their
// O and LSE go, and from which K/V tile on their scores need apply_mask.
template <class Cfg, class Step, class T>
struct ConsumerRows {
  const KernelParams& params;
  int thread_in_warpgroup;  // 0..127
  int first_row;            // this consumer's first query row
  T* o_head;
  float* lse_head;
  int first_masked;         // the first tile that needs apply_mask for these rows

  __device__ __forceinline__ ConsumerRows(const KernelParams& p, int q0, int head, int consumer)
      : params(p),
        thread_in_warpgroup(threadIdx.x % 128),
        first_row(q0 + 64 * consumer),
        o_head(static_cast<T*>(p.o) + static_cast<int64_t>(head) * p.nq * Cfg::kHeadDim),
        lse_head(p.lse + static_cast<int64_t>(head) * p.nq),
        first_masked(first_masked_tile<Cfg, Step>(first_row, p.nq, p.nk, p.causal)) {}

  // Keys past Nk, and the causal future, in K/V tile j (step 4: every tile of a causal problem,
  // as steps 1-3; from step 5 on only the tiles crossing these rows' diagonal or Nk).
  __device__ __forceinline__ void mask(float (&s)[Cfg::kBlockN / 2], int j) const {
    if (j >= first_masked)
      apply_mask<Cfg::kBlockN>(s, first_row, j * Cfg::kBlockN, params.nq, params.nk, params.causal,
                               thread_in_warpgroup);
  }

  // Lines 12-15.
  __device__ __forceinline__ void store(const float (&o)[Cfg::kHeadDim / 2], const float (&row_max)[2],
                                        const float (&row_sum)[2]) const {
    store_output<Cfg::kHeadDim, T>(o, row_max, row_sum, o_head, lse_head, first_row, params.nq,
                                   params.scale, thread_in_warpgroup);
  }
};

// The barriers of step 4, in static shared memory (8-byte aligned). Per stage, K and V each have
//   full:  count 1 -- the producer's arrive_expect_tx; the phase completes when the copy
//          engine has also delivered the announced bytes (the tile is there);
//   empty: count = consumer warps -- each consumer warp arrives once it has finished reading
//          the stage (the tile may be overwritten).
// Use u = 0, 1, 2, ... of a stage is phase u of its barriers: tile t uses stage t % kStages in
// phase t / kStages, and a wait names the phase by its parity (t / kStages) & 1. From step 9 on
// t counts the K/V tiles of every work tile the CTA has taken so far, not of the current one: the
// barriers do not start again at phase 0 when a new work tile begins (KvSlot).
// Q has its full barrier, and from step 9 on an empty one too (one arrival per consumer warp once
// its last S = Q K^T of the work tile has completed): the CTA's work tile w is Q's use w.
template <int kStages>
struct StageBarriers {
  uint64_t q_full;
  uint64_t q_empty;
  uint64_t k_full[kStages];
  uint64_t v_full[kStages];
  uint64_t k_empty[kStages];
  uint64_t v_empty[kStages];
};

// Where the CTA's K/V tile number `count` lives (counting across work tiles from step 9 on): its
// stage, and the parity of the phase of that stage's barriers that the tile completes.
template <int kStages>
struct KvSlot {
  int stage;
  uint32_t parity;
  __device__ __forceinline__ explicit KvSlot(int count)
      : stage(count % kStages), parity(uint32_t(count / kStages) & 1) {}
};

// A consumer warp gives a stage back. Called after the wgmma_wait_group that covers the warp's
// last wgmma reading the stage: wgmma reads shared memory asynchronously until its group has
// completed, so an earlier release would let the copy engine overwrite operands still in use.
// One arrival per warp (lane 0, once the warp has converged), which is what the count expects.
__device__ __forceinline__ void release_stage(uint64_t* empty_barrier) {
  // BEGIN SOLUTION release_stage device
  //! __syncwarp, then lane 0 of the warp arrives on the barrier
  __syncwarp();
  if (threadIdx.x % 32 == 0) mbarrier_arrive(empty_barrier);
  // END SOLUTION
}

// The producer: one elected thread of warpgroup 0 issues every copy of the CTA. Line 4 (Q_i)
// once, then line 7 (K_j, V_j) for every tile, each into its stage as soon as the consumers have
// released the stage's previous tile. The producer's first pass waits on parity 1 of a fresh
// barrier, which refers to the phase before phase 0 and counts as complete: no stage has been
// used yet (micro-test 6 checks this on the device).
// Step 9 calls it once per work tile: kv_before is the number of K/V tiles the CTA loaded for
// its earlier work tiles (0 before step 9), which says where this work tile's first K/V tile goes.
template <class Cfg, class Step>
__device__ __forceinline__ void produce_tiles(const CUtensorMap& q_map, const CUtensorMap& k_map,
                                              const CUtensorMap& v_map, unsigned char* smem,
                                              StageBarriers<SmemLayout<Cfg, Step>::kStages>& bar,
                                              int q0, int head, int n_tiles, int kv_before) {
  using Smem = SmemLayout<Cfg, Step>;
  constexpr int kStages = Smem::kStages;
  constexpr int M = Cfg::kBlockM, N = Cfg::kBlockN, D = Cfg::kHeadDim;
  // BEGIN SOLUTION produce_tiles device
  //! line 4: arrive_expect_tx(q_full, Q's bytes), tma_load_tile<M, D> of Q_i
  //! line 7, for every tile t: KvSlot(kv_before + t) gives the stage and the phase's parity;
  //! wait on k_empty of the stage with parity ^ 1, arrive_expect_tx(k_full, one tile's bytes),
  //! tma_load_tile<N, D> of K_t; the same for V on v_empty / v_full
  uint64_t* k_full = bar.k_full;  // the names step 3 uses
  uint64_t* v_full = bar.v_full;
  uint64_t* k_empty = bar.k_empty;
  uint64_t* v_empty = bar.v_empty;
  mbarrier_arrive_expect_tx(&bar.q_full, Smem::kQBytes);
  tma_load_tile<M, D>(smem, &q_map, &bar.q_full, q0, head);
  for (int tile = 0; tile < n_tiles; ++tile) {
    const KvSlot<kStages> slot(kv_before + tile);
    const int stage = slot.stage;
    const uint32_t phase = slot.parity;
    // K first: the consumers need K_t before V_t (S = Q K^T comes first), and release it earlier.
    wait_barrier(&k_empty[stage], phase ^ 1);
    mbarrier_arrive_expect_tx(&k_full[stage], Smem::kTileBytes);
    tma_load_tile<N, D>(smem + Smem::k_offset(stage), &k_map, &k_full[stage], tile * N, head);
    wait_barrier(&v_empty[stage], phase ^ 1);
    mbarrier_arrive_expect_tx(&v_full[stage], Smem::kTileBytes);
    tma_load_tile<N, D>(smem + Smem::v_offset(stage), &v_map, &v_full[stage], tile * N, head);
  }
  // END SOLUTION
}

// A consumer warpgroup: 64 query rows, FA2 Algorithm 1 lines 5-15 on tiles someone else loads.
// The loop body is step 3's, with the CTA-wide barrier before a refill replaced by two releases:
// K's stage after S = Q K^T has completed, V's after O += P V has.
template <class Cfg, class Step, class T>
__device__ __forceinline__ void consume_tiles(const unsigned char* smem,
                                              StageBarriers<SmemLayout<Cfg, Step>::kStages>& bar,
                                              const KernelParams& params, int q0, int head,
                                              int consumer, int n_tiles) {
  using Smem = SmemLayout<Cfg, Step>;
  constexpr int kStages = Smem::kStages;
  constexpr int N = Cfg::kBlockN, D = Cfg::kHeadDim;
  const ConsumerRows<Cfg, Step, T> rows(params, q0, head, consumer);
  const uint32_t q_tile = smem_address(smem);
  // BEGIN SOLUTION consume_tiles device
  //! line 5: o = 0, row_max = -inf, row_sum = 0 (the caller has waited for Q)
  //! per tile j (stage j % kStages, parity (j / kStages) & 1): wait k_full; compute_scores (its
  //! wait_group<0> ends this warpgroup's reads of K); release_stage(k_empty); rows.mask(s, j);
  //! online_softmax; pack_p; wait v_full; accumulate_pv; release_stage(v_empty)
  //! lines 12-15: rows.store
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};

  for (int j = 0; j < n_tiles; ++j) {
    const int stage = j % kStages;
    const uint32_t phase = (j / kStages) & 1;
    const uint32_t k_tile = smem_address(smem + Smem::k_offset(stage));
    const uint32_t v_tile = smem_address(smem + Smem::v_offset(stage));

    // Line 8: S = Q_i K_j^T; compute_scores returns after wait_group<0>: K_j is no longer read.
    wait_barrier(&bar.k_full[stage], phase);
    float s[N / 2];
    compute_scores<Cfg, T>(s, q_tile, k_tile, consumer);
    release_stage(&bar.k_empty[stage]);

    rows.mask(s, j);  // keys past Nk, and the causal future

    // Line 9 and the rescale of line 10.
    online_softmax<N, D>(s, o, row_max, row_sum, params.scale_log2);

    // Line 10: O += P V_j, P in registers; accumulate_pv returns after wait_group<0>.
    uint32_t p[N / 16][4];
    pack_p<N, T>(p, s);
    wait_barrier(&bar.v_full[stage], phase);
    accumulate_pv<Cfg, T>(o, p, v_tile);
    release_stage(&bar.v_empty[stage]);
  }

  rows.store(o, row_max, row_sum);  // lines 12-15
  // END SOLUTION
}

// ------------------------------------------------------------------------------------------
// Steps 6-8: the two products of neighbouring tiles in flight together
// ------------------------------------------------------------------------------------------

// Step 7's turns (FA3's ping-pong; with more than two consumers, a round robin): consumer c may
// issue its products once consumer c - 1 has issued its own. Named barrier 1 + c (0 is
// __syncthreads') counts 256 threads: consumer c's 128 wait on it (bar.sync), its predecessor's
// 128 arrive (bar.arrive, no wait). The last consumer arrives once before its first turn so that
// consumer 0 goes first, and not after its last turn, so every arrival is matched by a wait and
// no barrier is left half-counted at exit (every consumer takes the same number of turns).
template <class Step>
__device__ __forceinline__ void take_turn(int consumer) {
  if constexpr (Step::pingpong) named_barrier_sync(1 + consumer, 256);
}
template <class Step, int kConsumers>
__device__ __forceinline__ void pass_turn(int consumer) {
  const int next = consumer == kConsumers - 1 ? 0 : consumer + 1;
  if constexpr (Step::pingpong) named_barrier_arrive(1 + next, 256);
}

// A consumer warpgroup of steps 6-8. Iteration j issues S_j = Q K_j^T and then O += P_{j-1} V_{j-1}
// (two commit groups), waits for the older group to finish only as far as S_j (wait_group<1>),
// and computes the softmax of S_j while the tensor cores still multiply P_{j-1} V_{j-1}. O may be
// rescaled (line 10) only when that product has finished (wait_group<0>), and P_j packed only
// then, since the product still reads P_{j-1}'s registers. Tile 0's scores form the prologue, the
// last tile's P V the epilogue. Each consumer issues n_tiles + 1 times (step 7 alternates them).
// Q has landed when it is called. Step 9 calls it once per work tile, with kv_before the K/V
// tiles the CTA consumed for its earlier work tiles (0 before step 9), and gives Q back as soon
// as the last S = Q K^T has completed, so that the next work tile's Q loads under the epilogue.
template <class Cfg, class Step, class T>
__device__ __forceinline__ void consume_tiles_overlapped(const unsigned char* smem,
                                                         StageBarriers<SmemLayout<Cfg, Step>::kStages>& bar,
                                                         const KernelParams& params, int q0, int head,
                                                         int consumer, int n_tiles, int kv_before) {
  using Smem = SmemLayout<Cfg, Step>;
  constexpr int kStages = Smem::kStages;
  constexpr int N = Cfg::kBlockN, D = Cfg::kHeadDim;
  constexpr int kLast = Cfg::kWarpgroups - 1;  // the last consumer (step 7's turns)
  const ConsumerRows<Cfg, Step, T> rows(params, q0, head, consumer);
  const uint32_t q_tile = smem_address(smem);
  const auto k_tile = [&](int stage) { return smem_address(smem + Smem::k_offset(stage)); };
  const auto v_tile = [&](int stage) { return smem_address(smem + Smem::v_offset(stage)); };
  const auto pass = [&] { pass_turn<Step, Cfg::kWarpgroups>(consumer); };
  // BEGIN SOLUTION consume_tiles_overlapped device
  //! line 5 as step 4; tile j's stage and parity are KvSlot(kv_before + j)'s; if n_tiles > 0:
  //! prologue (tile 0): wait k_full; [turn] issue_scores; wait_group<0>; release K; rows.mask;
  //! softmax_tile (alpha unused: O is still 0); pack_p
  //! j = 1 .. n_tiles-1: wait k_full of j and v_full of j-1; [turn] issue_scores (S_j), issue_pv
  //! (P_{j-1} V_{j-1}); wait_group<1>, fence s; release K_j; rows.mask; softmax_tile -> alpha;
  //! wait_group<0>, fence o; release V_{j-1}; rescale_output(o, alpha); pack_p
  //! step 9: release q_empty (every S of this work tile has completed; also when n_tiles == 0)
  //! epilogue: wait v_full of the last tile; [turn] issue_pv; wait_group<0>; release V
  //! [turn] = take_turn before the issue, pass after it (the last consumer, kLast, not after its
  //! last turn); kLast passes once before the prologue
  //! lines 12-15: rows.store
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};

  if (n_tiles > 0) {
    float s[N / 2];
    uint32_t p[N / 16][4];
    float alpha[2];
    if (consumer == kLast) pass();  // consumer 0 takes the first turn

    // Prologue, tile 0: line 8 and line 9 (O = 0: nothing to rescale yet).
    const KvSlot<kStages> first(kv_before);
    wait_barrier(&bar.k_full[first.stage], first.parity);
    take_turn<Step>(consumer);
    issue_scores<Cfg, T>(s, q_tile, k_tile(first.stage), consumer);
    pass();
    wgmma_wait_group<0>();
    fence_operand(s);
    release_stage(&bar.k_empty[first.stage]);
    rows.mask(s, 0);
    softmax_tile<N, Step::kPolyOf8>(s, row_max, row_sum, params.scale_log2, alpha);
    pack_p<N, T>(p, s);

    for (int j = 1; j < n_tiles; ++j) {
      const KvSlot<kStages> now(kv_before + j), before(kv_before + j - 1);
      const int stage = now.stage, prev = before.stage;
      wait_barrier(&bar.k_full[stage], now.parity);
      wait_barrier(&bar.v_full[prev], before.parity);
      // Line 8 of tile j and line 10 of tile j-1, in flight together.
      take_turn<Step>(consumer);
      issue_scores<Cfg, T>(s, q_tile, k_tile(stage), consumer);
      issue_pv<Cfg, T>(o, p, v_tile(prev));
      pass();
      wgmma_wait_group<1>();  // the older group, S_j, has completed; P_{j-1} V_{j-1} may still run
      fence_operand(s);
      release_stage(&bar.k_empty[stage]);
      // Line 9 of tile j under the product of tile j-1.
      rows.mask(s, j);
      softmax_tile<N, Step::kPolyOf8>(s, row_max, row_sum, params.scale_log2, alpha);
      wgmma_wait_group<0>();  // P_{j-1} V_{j-1} has completed: O is ours again, P_{j-1} is free
      fence_operand(o);
      release_stage(&bar.v_empty[prev]);
      rescale_output<D>(o, alpha);  // line 10's rescale for tile j
      pack_p<N, T>(p, s);
    }

    // Step 9: every S = Q K^T of this work tile has completed; the producer may bring the next Q.
    if constexpr (Step::persistent) release_stage(&bar.q_empty);

    // Epilogue: line 10 of the last tile.
    const KvSlot<kStages> last(kv_before + n_tiles - 1);
    const int stage = last.stage;
    wait_barrier(&bar.v_full[stage], last.parity);
    take_turn<Step>(consumer);
    issue_pv<Cfg, T>(o, p, v_tile(stage));
    if (consumer != kLast) pass();  // the last consumer's last turn has no one to pass to
    wgmma_wait_group<0>();
    fence_operand(o);
    release_stage(&bar.v_empty[stage]);
  } else if constexpr (Step::persistent) {
    release_stage(&bar.q_empty);  // no key to see: Q was never read
  }

  rows.store(o, row_max, row_sum);  // lines 12-15
  // END SOLUTION
}

// ------------------------------------------------------------------------------------------
// Step 9: persistent CTAs, one per SM, each doing its share of the work tiles in turn
// ------------------------------------------------------------------------------------------

// One work tile: a query tile of one head, and the K/V tiles it visits.
struct WorkTile {
  int q0;       // its first query row
  int head;     // b * H + h
  int n_tiles;  // K/V tiles to visit (tiles_to_visit)
};

template <class Cfg, class Step>
__device__ __forceinline__ WorkTile work_tile(const KernelParams& params, int q_block, int head) {
  const int q0 = q_block * Cfg::kBlockM;
  return {q0, head, tiles_to_visit<Cfg, Step>(q0, params.nq, params.nk, params.causal)};
}

// Step 9's schedule, fixed before the launch, so that the producer and the consumers walk it
// each on their own and never need to tell each other which work tile comes next. The work is
// cut into items of equal cost, and CTA c does items c, c + gridDim.x, c + 2 gridDim.x, ...:
//   - not causal: an item is one query tile of one head (every one visits every K/V tile);
//   - causal: an item is a pair of query tiles of one head, the i-th from the end (which sees
//     the most keys) and then the i-th from the start (which sees the fewest): each pair visits
//     about as many K/V tiles as any other, where single tiles would give some CTAs all the long
//     ones. With an odd number of query tiles the middle one is an item of its own.
// Items are numbered head by head, so that the CTAs working at one time share a few heads' K and
// V in L2, as the grid of steps 1-8 is ordered.
template <class Cfg, class Step>
struct WorkSchedule {
  const KernelParams& params;
  int q_blocks;  // query tiles per head
  int per_head;  // items per head
  int items;     // items in all

  __device__ __forceinline__ explicit WorkSchedule(const KernelParams& p)
      : params(p),
        q_blocks(query_tiles(p.nq)),
        per_head(items_per_head(q_blocks, p.causal)),
        items(per_head * p.batch_heads) {}

  // Also what the launch needs to size the grid.
  __host__ __device__ static int query_tiles(int nq) { return (nq + Cfg::kBlockM - 1) / Cfg::kBlockM; }
  __host__ __device__ static int items_per_head(int q_blocks, bool causal) {
    return causal ? (q_blocks + 1) / 2 : q_blocks;
  }

  // The work tiles of an item: 2 for a causal pair, 1 otherwise.
  __device__ __forceinline__ int tiles_in(int item) const {
    const int i = item % per_head;
    return params.causal && i != q_blocks - 1 - i ? 2 : 1;
  }

  // Work tile t (0 or 1) of an item.
  __device__ __forceinline__ WorkTile tile(int item, int t) const {
    const int head = item / per_head, i = item % per_head;
    const int q_block = !params.causal ? i : t == 0 ? q_blocks - 1 - i : i;
    return work_tile<Cfg, Step>(params, q_block, head);
  }
};

// Step 9's producer: step 4's, once per work tile of the CTA's share. Before it brings a work
// tile's Q it waits until every consumer warp has given the previous Q back (q_empty), and it
// counts the K/V tiles it has loaded so that the stages and phases carry on where the previous
// work tile left them.
template <class Cfg, class Step>
__device__ __forceinline__ void produce_work_tiles(const CUtensorMap& q_map, const CUtensorMap& k_map,
                                                   const CUtensorMap& v_map, unsigned char* smem,
                                                   StageBarriers<SmemLayout<Cfg, Step>::kStages>& bar,
                                                   const KernelParams& params) {
  const WorkSchedule<Cfg, Step> schedule(params);
  // BEGIN SOLUTION produce_work_tiles device
  //! q_uses = 0, kv_loaded = 0; for item = blockIdx.x, + gridDim.x, ... below schedule.items, for
  //! each of its schedule.tiles_in(item) work tiles w: wait q_empty with parity (q_uses & 1) ^ 1;
  //! produce_tiles for w with kv_before = kv_loaded; kv_loaded += w.n_tiles; ++q_uses
  int q_uses = 0;     // work tiles whose Q this CTA has loaded
  int kv_loaded = 0;  // K/V tiles loaded for them
  for (int item = blockIdx.x; item < schedule.items; item += gridDim.x)
    for (int t = 0; t < schedule.tiles_in(item); ++t) {
      const WorkTile w = schedule.tile(item, t);
      wait_barrier(&bar.q_empty, (q_uses & 1) ^ 1);  // the consumers are done with the previous Q
      produce_tiles<Cfg, Step>(q_map, k_map, v_map, smem, bar, w.q0, w.head, w.n_tiles, kv_loaded);
      kv_loaded += w.n_tiles;
      ++q_uses;
    }
  // END SOLUTION
}

// Step 9's consumer warpgroup: the same walk through the CTA's share, step 7's loop on each work
// tile once its Q has landed, with the K/V count carried on.
template <class Cfg, class Step, class T>
__device__ __forceinline__ void consume_work_tiles(const unsigned char* smem,
                                                   StageBarriers<SmemLayout<Cfg, Step>::kStages>& bar,
                                                   const KernelParams& params, int consumer) {
  const WorkSchedule<Cfg, Step> schedule(params);
  // BEGIN SOLUTION consume_work_tiles device
  //! the producer's walk; for each work tile w: wait q_full with parity q_uses & 1;
  //! consume_tiles_overlapped for w with kv_before = kv_used (it gives Q back); kv_used +=
  //! w.n_tiles; ++q_uses
  int q_uses = 0;   // work tiles whose Q this warpgroup has used
  int kv_used = 0;  // K/V tiles consumed for them
  for (int item = blockIdx.x; item < schedule.items; item += gridDim.x)
    for (int t = 0; t < schedule.tiles_in(item); ++t) {
      const WorkTile w = schedule.tile(item, t);
      wait_barrier(&bar.q_full, q_uses & 1);  // this work tile's Q has landed
      consume_tiles_overlapped<Cfg, Step, T>(smem, bar, params, w.q0, w.head, consumer, w.n_tiles, kv_used);
      kv_used += w.n_tiles;
      ++q_uses;
    }
  // END SOLUTION
}

// Step 4's CTA: warpgroup 0 produces, warpgroups 1..kWarpgroups consume (64 query rows each).
// After the barriers are made, the roles never meet at a __syncthreads again (the producer's
// other threads have exited): they talk through the barriers only.
template <class Cfg, class Step, class T>
__device__ __forceinline__ void forward_warp_specialized(const CUtensorMap& q_map,
                                                         const CUtensorMap& k_map,
                                                         const CUtensorMap& v_map,
                                                         const KernelParams& params) {
  using Smem = SmemLayout<Cfg, Step>;
  using Budget = RegisterBudget<Cfg>;
  constexpr int kStages = Smem::kStages;
  static_assert(kStages >= 2, "step 4 overlaps a tile's loads with the previous tile's math");
  static_assert(Budget::kThreads == kThreadsOf<Cfg, Step>, "one producer warpgroup");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  __shared__ __align__(8) StageBarriers<kStages> bar;

  // Steps 4-8: the CTA's work tile is its place in the grid. Step 5, causal: the last query tiles
  // see the most keys; launching them first keeps the SMs busy at the end of the grid with the
  // short tiles instead of the long ones (as lab 5). Step 9 walks its share of WorkSchedule.
  const int q_block = Step::causal_skip && params.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const WorkTile own = work_tile<Cfg, Step>(params, q_block, blockIdx.y);
  const int warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0);
  // BEGIN SOLUTION forward_warp_specialized device
  //! thread 0: mbarrier_init q_full, k_full, v_full with count 1, q_empty, k_empty and v_empty
  //! with one arrival per consumer warp; fence_mbarrier_init; __syncthreads (the last one)
  //! warpgroup 0: setmaxnreg_dec<Budget::kProducer>; in warp 0, elect_one_sync() picks the thread
  //! that prefetches the maps and runs produce_tiles for `own` (step 9: produce_work_tiles);
  //! everyone else in warpgroup 0 is done
  //! warpgroups 1..: setmaxnreg_inc<Budget::kConsumer>; as consumer warpgroup - 1, wait for Q
  //! (q_full, parity 0), then consume_tiles (steps 6-8: consume_tiles_overlapped) for `own`;
  //! step 9: consume_work_tiles
  if (threadIdx.x == 0) {
    mbarrier_init(&bar.q_full, 1);
    mbarrier_init(&bar.q_empty, 4 * Budget::kConsumers);  // step 9; unused before
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&bar.k_full[s], 1);
      mbarrier_init(&bar.v_full[s], 1);
      mbarrier_init(&bar.k_empty[s], 4 * Budget::kConsumers);  // one arrival per consumer warp
      mbarrier_init(&bar.v_empty[s], 4 * Budget::kConsumers);
    }
    fence_mbarrier_init();  // visible to the copy engine (async proxy) ...
  }
  __syncthreads();  // ... and to every thread

  if (warpgroup == 0) {
    // The producer keeps a few registers (a loop counter, addresses) and gives the rest away.
    setmaxnreg_dec<Budget::kProducer>();
    if (threadIdx.x / 32 == 0 && elect_one_sync()) {
      prefetch_tensormap(&q_map);
      prefetch_tensormap(&k_map);
      prefetch_tensormap(&v_map);
      if constexpr (Step::persistent)
        produce_work_tiles<Cfg, Step>(q_map, k_map, v_map, smem, bar, params);
      else
        produce_tiles<Cfg, Step>(q_map, k_map, v_map, smem, bar, own.q0, own.head, own.n_tiles, 0);
    }
  } else {
    // The consumers hold S, P and O: they get the producer's registers.
    setmaxnreg_inc<Budget::kConsumer>();
    const int consumer = warpgroup - 1;
    if constexpr (Step::persistent) {
      consume_work_tiles<Cfg, Step, T>(smem, bar, params, consumer);
    } else {
      wait_barrier(&bar.q_full, 0);  // line 4's Q_i has landed
      if constexpr (Step::intra_wg_overlap)
        consume_tiles_overlapped<Cfg, Step, T>(smem, bar, params, own.q0, own.head, consumer, own.n_tiles, 0);
      else
        consume_tiles<Cfg, Step, T>(smem, bar, params, own.q0, own.head, consumer, own.n_tiles);
    }
  }
  // END SOLUTION
}

// ------------------------------------------------------------------------------------------
// The kernel: one CTA per (query tile, batch*head) -- FA2 Algorithm 1, line 3's loop in parallel;
// step 9: one CTA per SM, each running its share of line 3's loop (WorkSchedule)
// ------------------------------------------------------------------------------------------

// __launch_bounds__ with the 1 (at most one CTA per SM) gives every thread a register cap at
// launch; without it ptxas drops setmaxnreg (DESIGN.md section 6).
template <class Cfg, class Step, class T>
__global__ void __launch_bounds__(kThreadsOf<Cfg, Step>, 1)
    flash_h100_forward_kernel(const __grid_constant__ CUtensorMap q_map,
                              const __grid_constant__ CUtensorMap k_map,
                              const __grid_constant__ CUtensorMap v_map, const KernelParams params) {
  if constexpr (Step::warp_specialized) {
    forward_warp_specialized<Cfg, Step, T>(q_map, k_map, v_map, params);
  } else {
    forward_one_role<Cfg, Step, T>(q_map, k_map, v_map, params);
  }
}

}  // namespace course::lab8::detail
