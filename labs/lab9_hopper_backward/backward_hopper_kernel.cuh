// Lab 9 (beyond): the attention backward pass on Hopper, step 1 -- FA2 Algorithm 2 with every
// matrix product on wgmma, and the tiles brought in by TMA on mbarriers.
// Lecture: lectures/09-hopper-backward.md. The toolkit (wgmma, descriptors, swizzle, mbarrier,
// TMA) is lab 8's, course/mma_sm90.cuh; the host side is backward_hopper.cu.
//
// Reading guide. Three kernels, as in lab 7: kernel 1 computes D = rowsum(dO o O) and zeroes the
// fp32 dQ accumulator, kernel 3 turns the accumulator into dQ, and kernel 2 (this file's
// backward_hopper_kernel) does the rest. One CTA of kernel 2 owns a K/V tile of kBc = 128 keys of
// one (batch, head) and walks over the query tiles (kBr rows) that can see it:
//
//   K_j, V_j         TMA, once, into shared memory (line 6)
//   Q_i, dO_i        TMA, two shared-memory stages: tile i + 2 is copied in while the CTA
//                    computes on tiles i and i + 1
//   LSE_i, D_i       plain loads into shared memory, one tile ahead
//
// Two warpgroups (256 threads); warpgroup w owns keys 64w .. 64w + 63 of the tile, the M side of
// its products. Per query tile, warpgroup w computes (line numbers of lecture 7's table)
//   S^T  = K_w Q_i^T                       (line 10)  wgmma SS, both operands K-major
//   dP^T = V_w dO_i^T                      (line 13)  wgmma SS, both operands K-major
//   P^T  = exp(S^T - LSE_i), masked        (line 11)  in registers
//   dS^T = P^T o (dP^T - D_i)              (line 14)  in registers
//   dV_w += P^T dO_i                       (line 12)  wgmma RS: P^T from registers, dO MN-major
//   dK_w += dS^T Q_i                       (line 16)  wgmma RS: dS^T from registers, Q MN-major
// and writes dS^T to shared memory. Then both warpgroups together compute
//   dQ_i += dS K_j                         (line 15)  wgmma SS: dS (from dS^T, MN-major) and K
//                                                      (MN-major), fp32 atomic adds to global
// each warpgroup one 64 x 64 block of the kBr x d product. dK_w and dV_w stay in registers for
// the whole loop and are written once at the end (line 18). With options.deterministic, the
// CTAs add their shares of dQ_i one after another, K/V tile 0 first, ordered by a counter per
// query tile (wait_for_dq_turn, pass_dq_turn): the same bits in every run.
//
// Why transposed: wgmma's M side is 64 rows of one warpgroup, and the gradients that stay on
// chip, dK and dV, have the keys as rows. Computing S^T and dP^T (keys as rows) makes P^T and
// dS^T arrive in the accumulator layout that is also the register A-operand layout of the next
// products: no data moves between threads, and only dS^T goes through shared memory (for dQ,
// whose rows are the queries).
//
// Numerics, as lab 7's tensor-core kernel: S, P, dP, dS in fp32 registers; P and dS rounded to
// the 16-bit type once, as operands; all products accumulated in fp32; dK and dV rounded once
// at the end, dQ by kernel 3. Rows past Nq (zero-filled by TMA) and rows that see no key carry
// a +inf "LSE" (P = exp2(S - inf) = 0); keys past Nk and above the causal diagonal are masked.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "course/math_constants.hpp"
#include "course/mma_sm90.cuh"

namespace course::lab9::detail {

using namespace course::sm90;

// ------------------------------------------------------------------------------------------
// Configuration and parameters (given)
// ------------------------------------------------------------------------------------------

// The tile shape of kernel 2 for head dimension D. Both warpgroups' dQ blocks are 64 x 64, so
// kBr * D = 2 * 64 * 64: at d = 64 the query tile has 128 rows (warpgroup w takes rows 64w..,
// all 64 columns), at d = 128 it has 64 (warpgroup w takes columns 64w..).
template <int D>
struct Tiles {
  static_assert(D == 64 || D == 128, "head dimension must be 64 or 128");
  static constexpr int kHeadDim = D;
  static constexpr int kThreads = 256;            // two warpgroups
  static constexpr int kBc = 128;                 // keys per CTA: 64 per warpgroup
  static constexpr int kBr = D == 64 ? 128 : 64;  // query rows per step
  static constexpr int kStages = 2;               // shared-memory stages of Q_i and dO_i
  static constexpr bool kDqSplitsRows = kBr == 128;  // else the columns are split
  static_assert(kBr * D == 2 * 64 * 64, "each warpgroup's dQ block is 64 x 64");

  // Shared memory (bytes from a 1024-aligned base; every swizzled tile 1024-aligned).
  static constexpr int kKvTileBytes = kBc * D * 2;
  static constexpr int kQTileBytes = kBr * D * 2;
  static constexpr int kK = 0;
  static constexpr int kV = kK + kKvTileBytes;
  static constexpr int kQ = kV + kKvTileBytes;               // kStages Q tiles
  static constexpr int kDO = kQ + kStages * kQTileBytes;     // kStages dO tiles
  static constexpr int kDsT = kDO + kStages * kQTileBytes;   // dS^T [kBc][kBr], 16-bit
  static constexpr int kLse = kDsT + kBc * kBr * 2;          // kStages x kBr floats
  static constexpr int kDelta = kLse + kStages * kBr * 4;    // kStages x kBr floats
  static constexpr int kBarriers = kDelta + kStages * kBr * 4;  // K/V, then one per stage
  static constexpr int kBytes = kBarriers + 8 * (1 + kStages);
  static constexpr int kAllocBytes = kBytes + 1024;  // room to align the base to 1024
  static_assert(kDsT % 1024 == 0 && kLse % 8 == 0 && kBarriers % 8 == 0, "alignment");
};

struct Params {
  const void* o;
  const void* dout;
  const float* lse;  // natural log, -inf for a row that sees no key
  void* dk;
  void* dv;
  float* dq_accum;   // [B*H, Nq, d] fp32, in the workspace
  float* delta;      // [B*H, Nq] fp32: D_i, in the workspace
  int* dq_turns;     // [B*H, query tiles]: whose turn it is to add into dQ_i, in the workspace
  int nq;
  int nk;
  bool causal;
  float scale;       // tau
  float scale_log2;  // tau * log2(e)
};

// The turn counter of query tile q0 of head bh (deterministic mode): one int per query tile of
// kBr rows, after D in the workspace (course::backward_workspace_bytes keeps one per 64 rows,
// enough for both tile heights).
template <class Cfg>
__device__ __forceinline__ int* dq_turn_counter(const Params& p, int bh, int q0) {
  const int tiles = (p.nq + Cfg::kBr - 1) / Cfg::kBr;
  return p.dq_turns + static_cast<std::int64_t>(bh) * tiles + q0 / Cfg::kBr;
}

// ------------------------------------------------------------------------------------------
// Device helpers (given)
// ------------------------------------------------------------------------------------------

// A barrier wait that stops the kernel after about 9 s (lab 8's wait_barrier): a protocol
// mistake fails the launch instead of hanging the GPU.
constexpr long long kBarrierTimeoutCycles = 1LL << 34;
__device__ __forceinline__ void wait_barrier(uint64_t* bar, uint32_t parity) {
  if (mbarrier_try_wait_parity(bar, parity)) return;
  const long long start = clock64();
  while (!mbarrier_try_wait_parity(bar, parity)) {
    if (clock64() - start > kBarrierTimeoutCycles) asm volatile("brkpt;");
  }
}

// Deterministic dQ (options.deterministic): the order of line 15's adds, dQ_i += dS K_j. With
// atomics, the K/V tiles' shares of dQ_i land in whatever order the CTAs reach them, and fp32
// addition is not associative: the bits of dQ change from run to run. FlashAttention-3's remedy, a semaphore per query tile: a counter in the
// workspace (zeroed by kernel 1) says how many K/V tiles have added their share; a K/V tile adds
// only when it reads its turn (dq_turn, below: the order), then bumps it. Thread 0 waits and
// passes the turn for the whole CTA; the __syncthreads around the adds order every thread's
// adds after the wait and before the pass. The wait is bounded as wait_barrier's: a turn that
// never comes stops the kernel instead of hanging the GPU.
__device__ __forceinline__ void wait_for_dq_turn(const int* turn, int mine) {
  if (threadIdx.x == 0) {
    const long long start = clock64();
    int now;
    do {
      // ld.acquire: the adds of the CTA that passed the turn are visible after this load.
      asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(now) : "l"(turn) : "memory");
      if (now != mine && clock64() - start > kBarrierTimeoutCycles) asm volatile("brkpt;");
    } while (now != mine);
  }
  __syncthreads();
}

// After every thread's adds (the caller's __syncthreads): the next K/V tile's turn. red.release
// makes this CTA's adds visible before the counter moves.
__device__ __forceinline__ void pass_dq_turn(int* turn) {
  if (threadIdx.x == 0) asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(turn) : "memory");
}

// One tile of kRows rows from row0 of head `head`: one TMA copy per 64-column block, all
// completing on `bar` (lab 8's tma_load_tile). Rows past the head's end arrive as zeros.
template <int kRows, int D>
__device__ __forceinline__ void tma_load_tile(unsigned char* tile, const CUtensorMap* map, uint64_t* bar,
                                              int row0, int head) {
#pragma unroll
  for (int block = 0; block < D / 64; ++block) tma_load_3d(tile + block * kRows * 128, map, bar, 64 * block, row0, head);
}

// Byte offset of k-step kk (16 columns) in a K-major swizzled tile of kRows rows (lab 8).
template <int kRows>
__device__ __forceinline__ uint32_t k_major_step_offset(int kk) {
  return (kk / 4) * (kRows * 128) + (kk % 4) * 32;
}

// Two floats as one register of two 16-bit values, the lower column in the low half.
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

// The accumulator layout (course/mma_sm90.cuh, section 3): thread t of a warpgroup holds, in
// acc[4j + e], row 16 (t / 32) + (t % 32) / 4 + 8 (e / 2) and column 8j + 2 (t % 4) + e % 2.
__device__ __forceinline__ int frag_row(int t, int e) { return 16 * (t / 32) + (t % 32) / 4 + 8 * (e >> 1); }
__device__ __forceinline__ int frag_col(int t, int j, int e) { return 8 * j + 2 * (t % 4) + (e & 1); }

// ------------------------------------------------------------------------------------------
// The products (yours)
// ------------------------------------------------------------------------------------------

// Lines 10 and 13: acc = A_w B^T for this warpgroup's 64 keys, where A_w is K_w or V_w (64 rows
// of the [kBc][d] tile at kv_rows, 64 * 128 * w bytes into each column block) and B is Q_i or
// dO_i ([kBr][d] at b_tile): S^T or dP^T, 64 keys x kBr queries. Both operands are K-major (d
// contiguous), so no transpose; d/16 k-steps. Only issued: the caller commits and waits.
template <class Cfg, class T>
__device__ __forceinline__ void issue_transposed_scores(float (&acc)[Cfg::kBr / 2], uint32_t kv_rows,
                                                        uint32_t b_tile) {
  // TODO: issue_transposed_scores (see the lab README)
  // for kk < d/16: wgmma_ss<kBr, T>(acc, desc_k_major_sw128(kv_rows + k_major_step_offset<kBc>(kk)),
  // desc_k_major_sw128(b_tile + k_major_step_offset<kBr>(kk)), /*accumulate=*/kk > 0)
}

// Lines 12 and 16: acc (64 keys x d) += A B, A = P^T or dS^T from registers (a[kk] = the A
// fragment of queries 16kk .. 16kk + 15), B = dO_i or Q_i, [kBr][d] at b_tile. Here the queries
// are the K dimension and d the N dimension, so B is MN-major (trans-b = 1, as V in lab 8's
// O += P V): LBO = kBr * 128 (the distance between its 64-column blocks), k-step kk 2048 bytes
// (16 rows) further. Only issued.
template <class Cfg, class T>
__device__ __forceinline__ void issue_key_gradient(float (&acc)[Cfg::kHeadDim / 2],
                                                   const uint32_t (&a)[Cfg::kBr / 16][4], uint32_t b_tile) {
  // TODO: issue_key_gradient (see the lab README)
  // for kk < kBr/16: wgmma_rs<d, T, /*trans_b=*/1>(acc, a[kk],
  // desc_mn_major_sw128(b_tile + 2048 * kk, kBr * 128), /*accumulate=*/true)
}

// Line 15: acc (a 64 x 64 block of dQ_i's share) = dS K_j over the tile's 128 keys. A = dS, read
// from dS^T [kBc][kBr] in shared memory: queries (M) are contiguous, so A is MN-major
// (trans-a = 1) and starts at 64-query column block `query_block` of dS^T. B = K_j [kBc][d]:
// keys (K) by d (N), MN-major (trans-b = 1), from 64-column block `dim_block`. Both step 16 keys
// = 2048 bytes per k-step; LBO = kBc * 128. Only issued.
template <class Cfg, class T>
__device__ __forceinline__ void issue_dq(float (&acc)[32], uint32_t ds_t_tile, uint32_t k_tile, int query_block,
                                         int dim_block) {
  // TODO: issue_dq (see the lab README)
  // for kk < kBc/16: wgmma_ss<64, T, /*trans_a=*/1, /*trans_b=*/1>(acc,
  // desc_mn_major_sw128(ds_t_tile + query_block * kBc * 128 + 2048 * kk, kBc * 128),
  // desc_mn_major_sw128(k_tile + dim_block * kBc * 128 + 2048 * kk, kBc * 128), kk > 0)
}

// The first query row (a multiple of kBr) that the CTA of the K/V tile starting at key kv0
// visits. Visiting all of them is correct (the mask zeroes what a query must not see), but causal
// attention can skip those that see none of this tile's keys.
template <class Cfg>
__device__ __forceinline__ int first_query_row(const Params& p, int kv0) {
  constexpr int kBr = Cfg::kBr;
  const int diag = p.nk - p.nq;  // bottom-right causal: query r sees key c iff c <= r + diag
  int q_begin = 0;
  // TODO: causal_skip (see the lab README)
  // causal tile skipping: the first query row that sees key kv0 is kv0 - diag; start at the
  // query tile that holds row max(0, kv0 - diag)
  return q_begin;
}

// ------------------------------------------------------------------------------------------
// The deterministic mode's order (given)
// ------------------------------------------------------------------------------------------

// The K/V tiles add their shares of dQ_i in the order their CTAs start (blockIdx.x): the CTA a
// turn waits for has a smaller index, so it is running or done, and no wait can deadlock.
//
// Which CTA owns which K/V tile decides what the order costs. Without causal masking every K/V
// tile visits every query tile, CTA b owns tile b, and its turn is b: the CTAs run in lock step,
// each one add behind the one before. With causal masking K/V tile j starts at the diagonal
// (first_query_row), and only tiles 0 .. last reach query tile i. Had CTA b owned tile b and
// turn b, tile 0 (the longest: every query tile) would go first everywhere, and tile j would
// reach each query tile before tile j - 1 had added there: every tile waits behind all the longer
// ones, and the last CTA of a head finishes about n tiles late. So in deterministic causal mode
// CTA b owns tile n - 1 - b, the shortest first ("shortest processing time first", as
// FlashAttention-3's deterministic backward schedules it), and at query tile i the tiles add
// from `last` down to 0: tile j + 1 started one K/V tile nearer the end, reaches query tile i
// earlier than tile j, and has added by the time j arrives, so the order costs almost no waiting.
template <bool kDeterministic>
__device__ __forceinline__ int kv_tile_of_cta(const Params& p) {
  const int b = static_cast<int>(blockIdx.x);
  return kDeterministic && p.causal ? static_cast<int>(gridDim.x) - 1 - b : b;
}

// This K/V tile's turn at query tile q0 (the value of q0's counter when it may add): its CTA's
// rank among the CTAs whose K/V tiles visit q0. Without causal masking all of them do, and the
// turn is the tile's index; with it, the tiles 0 .. last do (last: the largest whose first
// query row is at or before q0), and the shortest, `last`, goes first.
template <class Cfg>
__device__ __forceinline__ int dq_turn(const Params& p, int kv_tile, int q0) {
  if (!p.causal) return kv_tile;
  int last = static_cast<int>(gridDim.x) - 1;
  while (first_query_row<Cfg>(p, last * Cfg::kBc) > q0) --last;  // stops at kv_tile at the latest
  return last - kv_tile;
}

// ------------------------------------------------------------------------------------------
// Kernel 2
// ------------------------------------------------------------------------------------------

// Grid: (K/V tiles, B * H); 256 threads. kDeterministic: options.deterministic, a template
// parameter so that the default kernel carries none of the mode's code (its branches and
// registers cost about 3% of the default speed, measured on the H200, when they were run-time
// tests).
template <int D, class T, bool kDeterministic>
__global__ void __launch_bounds__(256, 1)
    backward_hopper_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                           const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_do,
                           const Params p) {
  using Cfg = Tiles<D>;
  constexpr int kBr = Cfg::kBr, kBc = Cfg::kBc, kStages = Cfg::kStages;

  extern __shared__ unsigned char smem_raw[];
  unsigned char* const smem =
      smem_raw + ((1024 - (smem_address(smem_raw) & 1023)) & 1023);  // 1024-aligned for the swizzle
  const uint32_t base = smem_address(smem);
  float* const lse_s = reinterpret_cast<float*>(smem + Cfg::kLse);
  float* const delta_s = reinterpret_cast<float*>(smem + Cfg::kDelta);
  uint64_t* const kv_full = reinterpret_cast<uint64_t*>(smem + Cfg::kBarriers);
  uint64_t* const q_full = kv_full + 1;  // [kStages]

  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid / 128;  // warpgroup: keys 64 wg .. 64 wg + 63
  const int t = tid % 128;   // thread in the warpgroup
  const int bh = static_cast<int>(blockIdx.y);
  const int kv_tile = kv_tile_of_cta<kDeterministic>(p);
  const int kv0 = kv_tile * kBc;
  const std::int64_t q_head = static_cast<std::int64_t>(bh) * p.nq;
  const std::int64_t k_head = static_cast<std::int64_t>(bh) * p.nk;
  const int diag = p.nk - p.nq;  // bottom-right causal: query r sees key c iff c <= r + diag

  const int q_begin = first_query_row<Cfg>(p, kv0);
  const int n_tiles = q_begin < p.nq ? (p.nq - q_begin + kBr - 1) / kBr : 0;

  // The rows' base-2 LSE (+inf where the row adds nothing) and D of query tile `it`, into its
  // stage, by the first kBr threads.
  auto load_row_stats = [&](int it) {
    if (tid < kBr) {
      const int row = q_begin + it * kBr + tid;
      const float lse = row < p.nq ? p.lse[q_head + row] : -INFINITY;
      lse_s[(it % kStages) * kBr + tid] = lse == -INFINITY ? INFINITY : lse * kLog2eF;
      delta_s[(it % kStages) * kBr + tid] = row < p.nq ? p.delta[q_head + row] : 0.0f;
    }
  };
  // Q_i and dO_i of query tile `it` into its stage, by thread 0.
  auto issue_query_tile = [&](int it) {
    const int stage = it % kStages;
    mbarrier_arrive_expect_tx(&q_full[stage], 2 * Cfg::kQTileBytes);
    tma_load_tile<kBr, D>(smem + Cfg::kQ + stage * Cfg::kQTileBytes, &map_q, &q_full[stage], q_begin + it * kBr, bh);
    tma_load_tile<kBr, D>(smem + Cfg::kDO + stage * Cfg::kQTileBytes, &map_do, &q_full[stage], q_begin + it * kBr, bh);
  };

  if (tid == 0) {
    mbarrier_init(kv_full, 1);
    for (int s = 0; s < kStages; ++s) mbarrier_init(&q_full[s], 1);
    fence_mbarrier_init();
  }
  if (n_tiles > 0) load_row_stats(0);
  __syncthreads();
  if (tid == 0 && n_tiles > 0) {
    mbarrier_arrive_expect_tx(kv_full, 2 * Cfg::kKvTileBytes);
    tma_load_tile<kBc, D>(smem + Cfg::kK, &map_k, kv_full, kv0, bh);  // line 6
    tma_load_tile<kBc, D>(smem + Cfg::kV, &map_v, kv_full, kv0, bh);
    for (int it = 0; it < kStages && it < n_tiles; ++it) issue_query_tile(it);
  }

  // Line 7: dK_w and dV_w, 64 keys x d, in registers.
  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.0f;
  float st[kBr / 2], dpt[kBr / 2], dq[32];
#pragma unroll
  for (int i = 0; i < kBr / 2; ++i) st[i] = dpt[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < 32; ++i) dq[i] = 0.0f;

  const uint32_t k_tile = base + Cfg::kK, v_tile = base + Cfg::kV, ds_t_tile = base + Cfg::kDsT;
  const uint32_t kv_rows = static_cast<uint32_t>(wg) * (64 * 128);  // this warpgroup's keys
  const int query_block = Cfg::kDqSplitsRows ? wg : 0, dim_block = Cfg::kDqSplitsRows ? 0 : wg;

  for (int it = 0; it < n_tiles; ++it) {  // line 8: the query tiles that see this K/V tile
    const int stage = it % kStages;
    const int q0 = q_begin + it * kBr;
    const uint32_t q_tile = base + Cfg::kQ + stage * Cfg::kQTileBytes;
    const uint32_t do_tile = base + Cfg::kDO + stage * Cfg::kQTileBytes;
    const float* const lse_row = lse_s + stage * kBr;
    const float* const delta_row = delta_s + stage * kBr;
    if (it == 0) wait_barrier(kv_full, 0);
    wait_barrier(&q_full[stage], (it / kStages) & 1);

    uint32_t pt[kBr / 16][4], dst[kBr / 16][4];
    // TODO: backward_tile (see the lab README)
    // Lines 10 and 13: S^T and dP^T (issue_transposed_scores twice, one commit group; wait
    // for it and fence both accumulators). Lines 11 and 14: for every accumulator element
    // (key frag_row, query frag_col), P^T = exp2(S^T scale_log2 - lse_row[query]), 0 where
    // masked (key >= nk, or causal and key > q0 + query + diag); dS^T = P^T (dP^T - D); pack
    // both into pt and dst (A fragment kk = accumulators 8kk .. 8kk + 7 in pairs). Lines 12
    // and 16: issue_key_gradient for dV and dK, one commit group, left in flight.

    // dS^T into shared memory for dQ: key rows, query columns, swizzled like a TMA tile of
    // kBc rows (4-byte stores: one packed pair of queries). The fence makes these ordinary
    // stores visible to wgmma (the async proxy); the barrier, to the other warpgroup.
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int j = 2 * kk + i / 2, e = 2 * (i % 2);
        const int key = 64 * wg + frag_row(t, e), query = frag_col(t, j, e);
        *reinterpret_cast<uint32_t*>(smem + Cfg::kDsT + sw128_tile_offset<kBc>(key, query)) = dst[kk][i];
      }
    }
    fence_proxy_async_shared();
    if (it + 1 < n_tiles) load_row_stats(it + 1);  // its stage was last read in tile it - 1
    __syncthreads();

    // TODO: dq_accumulate (see the lab README)
    // Line 15: issue_dq into dq (wgmma_fence first), commit, wait for every group (dV and dK
    // too), fence dq, dk, dv, pt and dst (the last two were operands still being read). In
    // deterministic mode (kDeterministic), wait_for_dq_turn(dq_turn_counter<Cfg>(p, bh, q0),
    // dq_turn<Cfg>(p, kv_tile, q0)) before adding (thread 0 waits, so only it needs the turn;
    // the turn is passed for you, after the barrier below). Then
    // add dq into p.dq_accum with atomicAdd on float2 pairs: dq[4j + 2h], dq[4j + 2h + 1] is
    // row 64 * query_block + frag_row(t, 2h), columns 64 * dim_block + frag_col(t, j, 0) + {0, 1};
    // rows at or past nq add nothing.
    __syncthreads();  // every warpgroup is done with this stage and with dS^T, and has added its dQ
    if constexpr (kDeterministic) pass_dq_turn(dq_turn_counter<Cfg>(p, bh, q0));  // K/V tile j + 1's turn
    if (tid == 0 && it + kStages < n_tiles) issue_query_tile(it + kStages);
  }

  // Line 18: dK_j = tau dK, dV_j, rounded once to T. Keys past Nk are not written.
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = kv0 + 64 * wg + frag_row(t, 2 * h);
      if (key >= p.nk) continue;
      const int col = frag_col(t, j, 0);
      const std::int64_t at = (k_head + key) * D + col;
      *reinterpret_cast<uint32_t*>(static_cast<T*>(p.dk) + at) =
          pack_pair<T>(p.scale * dk[4 * j + 2 * h], p.scale * dk[4 * j + 2 * h + 1]);
      *reinterpret_cast<uint32_t*>(static_cast<T*>(p.dv) + at) = pack_pair<T>(dv[4 * j + 2 * h], dv[4 * j + 2 * h + 1]);
    }
  }
}

}  // namespace course::lab9::detail
