// Lab 9 (beyond): the attention backward pass on Hopper -- FA2 Algorithm 2 with every matrix
// product on wgmma, and the tiles brought in by TMA on mbarriers, in two steps: step 1 (one
// kind of warpgroup that loads, computes and adds dQ with atomics) and step 2 (a producer warp,
// setmaxnreg, and dQ added from shared memory by bulk reductions; "Kernel 2, step 2" below).
// Lecture: lectures/09-hopper-backward.md. The toolkit (wgmma, descriptors, swizzle, mbarrier,
// TMA) is lab 8's, course/mma_sm90.cuh; the host side is backward_hopper.cu.
//
// Reading guide. Three kernels, as in lab 7: kernel 1 computes D = rowsum(dO o O) and zeroes the
// fp32 dQ accumulator, kernel 3 turns the accumulator into dQ, and kernel 2 (this file's
// backward_hopper_kernel for step 1, backward_warp_specialized_kernel for step 2) does the rest.
// What follows is step 1's CTA; step 2 keeps its tiles and products and changes who loads and who
// adds dQ. One CTA of kernel 2 owns a K/V tile of kBc = 128 keys of one (batch, head) and walks
// over the query tiles (kBr rows) that can see it:
//
//   K_j, V_j         TMA, once, into shared memory (line 6)
//   Q_i, dO_i        TMA, two shared-memory stages: tile i + 2 is requested once tile i is
//                    done, and is copied in while the CTA computes on tile i + 1
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

#include "course/gpu.hpp"  // atomic_add_2
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
__device__ __forceinline__ void spin_until_dq_turn(const int* turn, int mine) {
  const long long start = clock64();
  int now;
  do {
    // ld.acquire: the adds of the CTA that passed the turn are visible after this load.
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(now) : "l"(turn) : "memory");
    if (now != mine && clock64() - start > kBarrierTimeoutCycles) asm volatile("brkpt;");
  } while (now != mine);
}

// Step 1: thread 0 waits for the CTA, and the barrier holds every thread's adds until then.
__device__ __forceinline__ void wait_for_dq_turn(const int* turn, int mine) {
  if (threadIdx.x == 0) spin_until_dq_turn(turn, mine);
  __syncthreads();
}

// After every thread's adds (the caller's __syncthreads; step 2: after its one reduction has
// completed), by one thread: the next K/V tile's turn. red.release makes this CTA's adds
// visible before the counter moves.
__device__ __forceinline__ void pass_dq_turn(int* turn) {
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(turn) : "memory");
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
// One query tile of one warpgroup (both steps)
// ------------------------------------------------------------------------------------------

// Where one query tile's operands are: Q_i and dO_i in their shared-memory stage, the rows'
// statistics beside them, and the tile's first row.
struct QueryTile {
  uint32_t q_tile;         // Q_i, [kBr][d], swizzled (shared-memory address)
  uint32_t do_tile;        // dO_i, the same shape
  const float* lse_row;    // the kBr rows' base-2 LSE, +inf where a row adds nothing
  const float* delta_row;  // the kBr rows' D
  int q0;                  // the tile's first query row
};

// The base-2 LSE (+inf where the row adds nothing) and D of rows q0 .. q0 + kBr - 1 into a
// stage: row r by the thread `thread` of `threads` with r % threads == thread.
template <class Cfg>
__device__ __forceinline__ void load_row_stats(const Params& p, std::int64_t q_head, int q0, float* lse_s,
                                               float* delta_s, int thread, int threads) {
  for (int r = thread; r < Cfg::kBr; r += threads) {
    const int row = q0 + r;
    const float lse = row < p.nq ? p.lse[q_head + row] : -INFINITY;
    lse_s[r] = lse == -INFINITY ? INFINITY : lse * kLog2eF;
    delta_s[r] = row < p.nq ? p.delta[q_head + row] : 0.0f;
  }
}

// Lines 10-14 for warpgroup wg's 64 keys (from kv0 + 64 wg, at k_rows and v_rows in shared
// memory) and query tile q, then lines 12 and 16 issued and left in flight: P^T and dS^T come
// back packed as A fragments (pt, dst), which must stay untouched until that group completes.
// st and dpt are the S^T and dP^T accumulators (the caller's, so that they are set once, not
// at every tile: at d = 64 that costs ptxas spills).
template <class Cfg, class T>
__device__ __forceinline__ void backward_tile(const Params& p, const QueryTile& q, uint32_t k_rows, uint32_t v_rows,
                                              int kv0, int wg, int t, float (&st)[Cfg::kBr / 2],
                                              float (&dpt)[Cfg::kBr / 2], float (&dk)[Cfg::kHeadDim / 2],
                                              float (&dv)[Cfg::kHeadDim / 2], uint32_t (&pt)[Cfg::kBr / 16][4],
                                              uint32_t (&dst)[Cfg::kBr / 16][4]) {
  constexpr int kBr = Cfg::kBr, kBc = Cfg::kBc;
  const int diag = p.nk - p.nq;  // bottom-right causal: query r sees key c iff c <= r + diag
  // TODO: backward_tile (see the lab README)
  // Lines 10 and 13: S^T and dP^T (issue_transposed_scores twice, one commit group; wait
  // for it and fence both accumulators). Lines 11 and 14: for every accumulator element
  // (key frag_row, query frag_col), P^T = exp2(S^T scale_log2 - q.lse_row[query]), 0 where
  // masked (key >= nk, or causal and key > q.q0 + query + diag); dS^T = P^T (dP^T - D); pack
  // both into pt and dst (A fragment kk = accumulators 8kk .. 8kk + 7 in pairs). Lines 12
  // and 16: issue_key_gradient for dV and dK, one commit group, left in flight.
}

// dS^T of warpgroup wg into shared memory for dQ (given): key rows, query columns, swizzled like
// a TMA tile of kBc rows (4-byte stores: one packed pair of queries). The caller then fences
// (these ordinary stores are read by wgmma, the async proxy) and synchronises both warpgroups.
template <class Cfg>
__device__ __forceinline__ void store_ds_transposed(unsigned char* ds_t, const uint32_t (&dst)[Cfg::kBr / 16][4],
                                                    int wg, int t) {
#pragma unroll
  for (int kk = 0; kk < Cfg::kBr / 16; ++kk) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j = 2 * kk + i / 2, e = 2 * (i % 2);
      const int key = 64 * wg + frag_row(t, e), query = frag_col(t, j, e);
      *reinterpret_cast<uint32_t*>(ds_t + sw128_tile_offset<Cfg::kBc>(key, query)) = dst[kk][i];
    }
  }
}

// Line 18 (given): dK_j = tau dK, dV_j, rounded once to T, for warpgroup wg's 64 keys. Keys past
// Nk are not written.
template <class Cfg, class T>
__device__ __forceinline__ void store_key_gradients(const Params& p, const float (&dk)[Cfg::kHeadDim / 2],
                                                    const float (&dv)[Cfg::kHeadDim / 2], std::int64_t k_head,
                                                    int kv0, int wg, int t) {
#pragma unroll
  for (int j = 0; j < Cfg::kHeadDim / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = kv0 + 64 * wg + frag_row(t, 2 * h);
      if (key >= p.nk) continue;
      const int col = frag_col(t, j, 0);
      const std::int64_t at = (k_head + key) * Cfg::kHeadDim + col;
      *reinterpret_cast<uint32_t*>(static_cast<T*>(p.dk) + at) =
          pack_pair<T>(p.scale * dk[4 * j + 2 * h], p.scale * dk[4 * j + 2 * h + 1]);
      *reinterpret_cast<uint32_t*>(static_cast<T*>(p.dv) + at) = pack_pair<T>(dv[4 * j + 2 * h], dv[4 * j + 2 * h + 1]);
    }
  }
}

// ------------------------------------------------------------------------------------------
// Kernel 2, step 1: one kind of warpgroup that loads, computes and adds
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

  const int q_begin = first_query_row<Cfg>(p, kv0);
  const int n_tiles = q_begin < p.nq ? (p.nq - q_begin + kBr - 1) / kBr : 0;

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
  if (n_tiles > 0) load_row_stats<Cfg>(p, q_head, q_begin, lse_s, delta_s, tid, Cfg::kThreads);
  __syncthreads();
  if (tid == 0 && n_tiles > 0) {
    mbarrier_arrive_expect_tx(kv_full, 2 * Cfg::kKvTileBytes);
    tma_load_tile<kBc, D>(smem + Cfg::kK, &map_k, kv_full, kv0, bh);  // line 6
    tma_load_tile<kBc, D>(smem + Cfg::kV, &map_v, kv_full, kv0, bh);
    for (int it = 0; it < kStages && it < n_tiles; ++it) issue_query_tile(it);
  }

  // Line 7: dK_w and dV_w, 64 keys x d, in registers.
  float dk[D / 2], dv[D / 2], st[kBr / 2], dpt[kBr / 2], dq[32];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < kBr / 2; ++i) st[i] = dpt[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < 32; ++i) dq[i] = 0.0f;

  const uint32_t k_tile = base + Cfg::kK, v_tile = base + Cfg::kV, ds_t_tile = base + Cfg::kDsT;
  const uint32_t kv_rows = static_cast<uint32_t>(wg) * (64 * 128);  // this warpgroup's keys
  const int query_block = Cfg::kDqSplitsRows ? wg : 0, dim_block = Cfg::kDqSplitsRows ? 0 : wg;

  for (int it = 0; it < n_tiles; ++it) {  // line 8: the query tiles that see this K/V tile
    const int stage = it % kStages;
    const QueryTile q{base + Cfg::kQ + stage * Cfg::kQTileBytes, base + Cfg::kDO + stage * Cfg::kQTileBytes,
                      lse_s + stage * kBr, delta_s + stage * kBr, q_begin + it * kBr};
    if (it == 0) wait_barrier(kv_full, 0);
    wait_barrier(&q_full[stage], (it / kStages) & 1);

    uint32_t pt[kBr / 16][4], dst[kBr / 16][4];
    backward_tile<Cfg, T>(p, q, k_tile + kv_rows, v_tile + kv_rows, kv0, wg, t, st, dpt, dk, dv, pt, dst);
    store_ds_transposed<Cfg>(smem + Cfg::kDsT, dst, wg, t);
    fence_proxy_async_shared();
    // The next tile's row statistics, into the stage that tile it - 1 last read.
    if (it + 1 < n_tiles)
      load_row_stats<Cfg>(p, q_head, q.q0 + kBr, lse_s + ((it + 1) % kStages) * kBr,
                          delta_s + ((it + 1) % kStages) * kBr, tid, Cfg::kThreads);
    __syncthreads();

    // TODO: dq_accumulate (see the lab README)
    // Line 15: issue_dq into dq (wgmma_fence first), commit, wait for every group (dV and dK
    // too), fence dq, dk, dv, pt and dst (the last two were operands still being read). In
    // deterministic mode (kDeterministic), wait_for_dq_turn(dq_turn_counter<Cfg>(p, bh, q.q0),
    // dq_turn<Cfg>(p, kv_tile, q.q0)) before adding (thread 0 waits, so only it needs the turn;
    // the turn is passed for you, after the barrier below). Then
    // add dq into p.dq_accum with atomicAdd on float2 pairs: dq[4j + 2h], dq[4j + 2h + 1] is
    // row 64 * query_block + frag_row(t, 2h), columns 64 * dim_block + frag_col(t, j, 0) + {0, 1};
    // rows at or past nq add nothing.
    __syncthreads();  // every warpgroup is done with this stage and with dS^T, and has added its dQ
    if constexpr (kDeterministic) {
      if (tid == 0) pass_dq_turn(dq_turn_counter<Cfg>(p, bh, q.q0));  // the next K/V tile's turn
    }
    if (tid == 0 && it + kStages < n_tiles) issue_query_tile(it + kStages);
  }

  store_key_gradients<Cfg, T>(p, dk, dv, k_head, kv0, wg, t);  // line 18
}

// ------------------------------------------------------------------------------------------
// Kernel 2, step 2: a producer warp, and dQ added from shared memory by the copy engine
// ------------------------------------------------------------------------------------------
//
// Step 1's profile (bench/results/lab9-profile_2026-12-03_nvidia-h200_e62d933.txt, d = 128)
// spends 12% of its stall samples on the dQ atomics (REDG), and its warpgroups wait at two
// CTA-wide barriers per query tile, one of them for thread 0 to issue the next loads. Step 2
// moves both off the consumers' path, as FlashAttention-3's backward does:
//   - warpgroup 0 is the producer's: its first warp loads Q_i, dO_i (TMA) and LSE_i, D_i (its
//     32 lanes) into a stage as soon as the consumers release it (q_empty), kStages tiles ahead;
//     its second warp is the dQ writer (below). It keeps 24 registers and gives the rest to the
//     consumers (setmaxnreg, 240 each);
//   - warpgroups 1 and 2 are step 1's two warpgroups. They write their dQ block (fp32) into a
//     shared-memory buffer, and one thread has the copy engine add the whole buffer into the
//     accumulator with one bulk reduction (cp.reduce.async.bulk .add.f32, atomic per element)
//     while they go on to the next tile. Two buffers: a buffer is written again two tiles later,
//     after that thread has seen its reduction read it (bulk_wait_group_read<1>).
//   - in deterministic mode a reduction must wait for its turn and be complete before the turn
//     is passed; a consumer thread doing that would hold up both warpgroups at the next barrier
//     (it cost this mode 20-46% of its speed on the H200). There the reductions are the dQ
//     writer's: warpgroup 0's second warp, to which the consumers hand each buffer on named
//     barriers (kDqFull) and which hands it back once read (kDqEmpty). In the default mode the
//     writer warp measured slower (0.79-0.89x at d = 64, where the consumers' registers then
//     spill, and 0.92-1.00x at d = 128), so there the consumers keep the reduction.
// The accumulator's rows are stored with their 8-column groups permuted (dq_accum_column): the
// consumers' float2 stores into the buffer then hit 32 different banks, and the copy keeps the
// buffer's order; kernel 3 undoes the permutation.

// The column at which element (row, col) of the fp32 dQ accumulator is stored in step 2 (row:
// the accumulator's flat row, B * H * Nq of them): the 8-column group g of a row is stored at
// group g ^ (row % 4). Sixteen threads (half a warp) store rows r .. r + 3, 8 columns each, at once
// (the accumulator layout); without the permutation the 4 rows' columns fall on the same 8
// banks.
__host__ __device__ constexpr int dq_accum_column(std::int64_t row, int col) {
  return col ^ (static_cast<int>(row & 3) << 3);
}

// Step 2's CTA: step 1's tiles, a producer warpgroup, two dQ buffers and the stages' empty
// barriers. Shared memory (bytes from a 1024-aligned base): step 1's K, V, Q, dO and dS^T, then
// the dQ buffers, then LSE and D, then the barriers.
template <int D>
struct WarpSpecializedTiles {
  using Cfg = Tiles<D>;
  static constexpr int kThreads = 384;        // the producer's warpgroup, then two consumers'
  static constexpr int kConsumerThreads = 256;
  static constexpr int kProducerRegs = 24;    // setmaxnreg: 24 + 2 * 240 = 504 = 3 * (65536 / 384
  static constexpr int kConsumerRegs = 240;   // rounded down to 8), lab 8's step 4 budget
  static constexpr int kDqBufferBytes = Cfg::kBr * D * 4;
  static constexpr int kDqBuffers = 2;
  static constexpr int kDq = Cfg::kDsT + Cfg::kBc * Cfg::kBr * 2;
  static constexpr int kLse = kDq + kDqBuffers * kDqBufferBytes;
  static constexpr int kDelta = kLse + Cfg::kStages * Cfg::kBr * 4;
  static constexpr int kBarriers = kDelta + Cfg::kStages * Cfg::kBr * 4;  // K/V, q_full, q_empty
  static constexpr int kBytes = kBarriers + 8 * (1 + 2 * Cfg::kStages);
  static constexpr int kAllocBytes = kBytes + 1024;
  // Named barriers (0 is __syncthreads', which every warp would have to join). kDsReady and
  // kTileDone: the two consumer warpgroups (dS^T written by both; both through the tile: dS^T
  // read by both dQ products, the dQ block written). kDqFull + b and kDqEmpty + b (deterministic
  // mode): the consumers and the dQ writer warp hand dQ buffer b over (written; read).
  static constexpr uint32_t kDsReady = 1, kTileDone = 2, kDqFull = 3, kDqEmpty = 3 + kDqBuffers;
  static constexpr uint32_t kDqHandOverThreads = kConsumerThreads + 32;
  static_assert(kProducerRegs + 2 * kConsumerRegs <= 3 * ((65536 / kThreads) / 8 * 8),
                "setmaxnreg: the consumers ask for more registers than the producer gives back");
  static_assert(kDq % 128 == 0 && kBarriers % 8 == 0, "alignment");
  static_assert(kAllocBytes <= 227 * 1024, "an H100/H200 CTA has at most 227 KB of shared memory");
};

// The producer: warpgroup 0's first warp, all 32 lanes (they load the rows' statistics; one
// elected lane issues the TMA copies). K_j and V_j once, then every query tile into its stage
// once the consumers have released the stage's previous tile.
template <class Cfg, class WS>
__device__ __forceinline__ void produce_query_tiles(const CUtensorMap& map_q, const CUtensorMap& map_k,
                                                    const CUtensorMap& map_v, const CUtensorMap& map_do,
                                                    unsigned char* smem, const Params& p, int bh, int kv0,
                                                    int q_begin, int n_tiles) {
  constexpr int kBr = Cfg::kBr, kStages = Cfg::kStages;
  uint64_t* const kv_full = reinterpret_cast<uint64_t*>(smem + WS::kBarriers);
  uint64_t* const q_full = kv_full + 1;
  uint64_t* const q_empty = q_full + kStages;
  float* const lse_s = reinterpret_cast<float*>(smem + WS::kLse);
  float* const delta_s = reinterpret_cast<float*>(smem + WS::kDelta);
  const std::int64_t q_head = static_cast<std::int64_t>(bh) * p.nq;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const bool leader = elect_one_sync();
  if (n_tiles == 0) return;
  if (leader) {
    prefetch_tensormap(&map_q);
    prefetch_tensormap(&map_do);
    mbarrier_arrive_expect_tx(kv_full, 2 * Cfg::kKvTileBytes);
    tma_load_tile<Cfg::kBc, Cfg::kHeadDim>(smem + Cfg::kK, &map_k, kv_full, kv0, bh);  // line 6
    tma_load_tile<Cfg::kBc, Cfg::kHeadDim>(smem + Cfg::kV, &map_v, kv_full, kv0, bh);
  }
  for (int it = 0; it < n_tiles; ++it) {
    const int stage = it % kStages;
    const int q0 = q_begin + it * kBr;
    // TODO: produce_query_tiles (see the lab README)
    // From the second round of stages on, wait until the consumers have released the stage
    // (q_empty[stage]: its (it / kStages)-th phase, parity (it / kStages - 1) & 1). Then the 32
    // lanes load the tile's row statistics into the stage (load_row_stats, lane of 32) and
    // arrive on q_full[stage] (32 arrivals: each lane's own stores are released by its
    // arrival); the leader arrives with expect_tx of the two tiles' bytes and issues the TMA
    // copies of Q_i and dO_i, as step 1's issue_query_tile.
  }
}

// The dQ writer of the deterministic mode: warpgroup 0's second warp. For every query tile, once
// the consumers have written its dQ block into buffer it % kDqBuffers (kDqFull), one elected
// lane waits for the K/V tile's turn, adds the buffer's rows into the accumulator with one bulk
// reduction and passes the turn once the adds are done (not only read). Then the buffer goes
// back to the consumers (kDqEmpty), unless no later tile uses it.
template <class Cfg, class WS>
__device__ __forceinline__ void write_dq_tiles(unsigned char* smem, const Params& p, int bh, int kv_tile, int q_begin,
                                               int n_tiles) {
  constexpr int kBr = Cfg::kBr, D = Cfg::kHeadDim;
  const std::int64_t q_head = static_cast<std::int64_t>(bh) * p.nq;
  const bool leader = elect_one_sync();
  for (int it = 0; it < n_tiles; ++it) {
    const int b = it % WS::kDqBuffers;
    const int q0 = q_begin + it * kBr;
    const float* const buffer = reinterpret_cast<const float*>(smem + WS::kDq + b * WS::kDqBufferBytes);
    // TODO: write_dq_tiles (see the lab README)
    // named_barrier_sync(WS::kDqFull + b, WS::kDqHandOverThreads): the block is in the buffer.
    // The leader: spin_until_dq_turn(dq_turn_counter<Cfg>(p, bh, q0), dq_turn<Cfg>(p, kv_tile,
    // q0)); bulk_reduce_add_f32 of min(kBr, nq - q0) rows (the buffer's rows past nq would land
    // in the next head) into p.dq_accum + (q_head + q0) * D; bulk_commit_group;
    // bulk_wait_group<0> (the adds done, not only the buffer read); pass_dq_turn. __syncwarp,
    // then, if tile it + kDqBuffers exists, named_barrier_arrive(WS::kDqEmpty + b,
    // WS::kDqHandOverThreads).
  }
}

// Consumer warpgroup wg's dQ block of one query tile (dq, as step 1's) into the tile's shared-
// memory buffer, [kBr][d] fp32 rows in the accumulator's order (dq_accum_column), row 0 being
// the accumulator's row `row0`.
template <class Cfg>
__device__ __forceinline__ void store_dq_block(float* buffer, const float (&dq)[32], std::int64_t row0,
                                               int query_block, int dim_block, int t) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = 64 * query_block + frag_row(t, 2 * h);
      const int col = dq_accum_column(row0 + row, 64 * dim_block + frag_col(t, j, 0));
      *reinterpret_cast<float2*>(buffer + row * Cfg::kHeadDim + col) = make_float2(dq[4 * j + 2 * h], dq[4 * j + 2 * h + 1]);
    }
  }
}

// The consumers: warpgroup wg (0 or 1) of the two, thread t of its 128 (ct of the 256).
template <class Cfg, class WS, class T, bool kDeterministic>
__device__ __forceinline__ void consume_query_tiles(unsigned char* smem, const Params& p, int bh, int kv_tile,
                                                    int q_begin, int n_tiles, int wg, int t) {
  constexpr int kBr = Cfg::kBr, kStages = Cfg::kStages, D = Cfg::kHeadDim;
  const uint32_t base = smem_address(smem);
  uint64_t* const kv_full = reinterpret_cast<uint64_t*>(smem + WS::kBarriers);
  uint64_t* const q_full = kv_full + 1;
  uint64_t* const q_empty = q_full + kStages;
  float* const lse_s = reinterpret_cast<float*>(smem + WS::kLse);
  float* const delta_s = reinterpret_cast<float*>(smem + WS::kDelta);
  const int ct = 128 * wg + t;  // the default mode's reductions are thread 0's
  const int kv0 = kv_tile * Cfg::kBc;
  const std::int64_t q_head = static_cast<std::int64_t>(bh) * p.nq;
  const std::int64_t k_head = static_cast<std::int64_t>(bh) * p.nk;

  float dk[D / 2], dv[D / 2], st[kBr / 2], dpt[kBr / 2], dq[32];  // line 7, and the tile's accumulators
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < kBr / 2; ++i) st[i] = dpt[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < 32; ++i) dq[i] = 0.0f;

  const uint32_t k_tile = base + Cfg::kK, v_tile = base + Cfg::kV, ds_t_tile = base + Cfg::kDsT;
  const uint32_t kv_rows = static_cast<uint32_t>(wg) * (64 * 128);
  const int query_block = Cfg::kDqSplitsRows ? wg : 0, dim_block = Cfg::kDqSplitsRows ? 0 : wg;

  for (int it = 0; it < n_tiles; ++it) {
    const int stage = it % kStages;
    const QueryTile q{base + Cfg::kQ + stage * Cfg::kQTileBytes, base + Cfg::kDO + stage * Cfg::kQTileBytes,
                      lse_s + stage * kBr, delta_s + stage * kBr, q_begin + it * kBr};
    if (it == 0) wait_barrier(kv_full, 0);
    wait_barrier(&q_full[stage], (it / kStages) & 1);
    // Deterministic mode: the other warpgroup's dQ product of the last tile may still read dS^T,
    // and both must be through it before this tile's dS^T is written (the default mode's
    // kTileDone barrier, at the end of the tile, does that there).
    if (kDeterministic && it > 0) named_barrier_sync(WS::kTileDone, WS::kConsumerThreads);

    uint32_t pt[kBr / 16][4], dst[kBr / 16][4];
    backward_tile<Cfg, T>(p, q, k_tile + kv_rows, v_tile + kv_rows, kv0, wg, t, st, dpt, dk, dv, pt, dst);
    store_ds_transposed<Cfg>(smem + Cfg::kDsT, dst, wg, t);
    fence_proxy_async_shared();

    // TODO: dq_to_buffer (see the lab README)
    // Default mode: thread ct 0 waits until tile it - 2's reduction has read this tile's buffer
    // (bulk_wait_group_read<WS::kDqBuffers - 1>). named_barrier_sync(WS::kDsReady, 256): dS^T
    // complete. Line 15 as in step 1 (issue_dq, commit, wait<0>, the fences); the stage is now
    // read by nobody: every thread arrives on q_empty[stage]. Deterministic mode, from tile
    // kDqBuffers on: named_barrier_sync(WS::kDqEmpty + b, WS::kDqHandOverThreads) (the writer has
    // handed the buffer back). store_dq_block into the buffer (row0 = q_head + q.q0), then
    // fence_proxy_async_shared (the copy engine reads it). Deterministic mode: hand it to the
    // writer, named_barrier_arrive(WS::kDqFull + b, WS::kDqHandOverThreads). Default mode:
    // named_barrier_sync(WS::kTileDone, 256), then thread ct 0 issues bulk_reduce_add_f32 of
    // min(kBr, nq - q0) rows (the buffer's rows past nq would land in the next head) into
    // p.dq_accum + (q_head + q.q0) * D, and bulk_commit_group.
  }
  // Default mode: no reduction may still read a buffer when the CTA ends.
  if (!kDeterministic && ct == 0) bulk_wait_group_read<0>();
  store_key_gradients<Cfg, T>(p, dk, dv, k_head, kv0, wg, t);  // line 18
}

// Grid: (K/V tiles, B * H); 384 threads. __launch_bounds__ with the 1 gives every thread a
// register cap at launch; without it ptxas drops setmaxnreg (lab 8's DESIGN.md section 6).
template <int D, class T, bool kDeterministic>
__global__ void __launch_bounds__(384, 1)
    backward_warp_specialized_kernel(const __grid_constant__ CUtensorMap map_q,
                                     const __grid_constant__ CUtensorMap map_k,
                                     const __grid_constant__ CUtensorMap map_v,
                                     const __grid_constant__ CUtensorMap map_do, const Params p) {
  using Cfg = Tiles<D>;
  using WS = WarpSpecializedTiles<D>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024 - (smem_address(smem_raw) & 1023)) & 1023);
  uint64_t* const kv_full = reinterpret_cast<uint64_t*>(smem + WS::kBarriers);
  uint64_t* const q_full = kv_full + 1;
  uint64_t* const q_empty = q_full + Cfg::kStages;

  const int bh = static_cast<int>(blockIdx.y);
  const int kv_tile = kv_tile_of_cta<kDeterministic>(p);
  const int q_begin = first_query_row<Cfg>(p, kv_tile * Cfg::kBc);
  const int n_tiles = q_begin < p.nq ? (p.nq - q_begin + Cfg::kBr - 1) / Cfg::kBr : 0;
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);

  if (threadIdx.x == 0) {
    mbarrier_init(kv_full, 1);
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbarrier_init(&q_full[s], 32);                     // the producer warp's lanes
      mbarrier_init(&q_empty[s], WS::kConsumerThreads);  // every consumer thread
    }
    fence_mbarrier_init();
  }
  __syncthreads();  // the last CTA-wide barrier: the producer does not come back to one

  if (warpgroup == 0) {
    setmaxnreg_dec<WS::kProducerRegs>();
    const int warp = static_cast<int>(threadIdx.x) / 32;
    if (warp == 0)
      produce_query_tiles<Cfg, WS>(map_q, map_k, map_v, map_do, smem, p, bh, kv_tile * Cfg::kBc, q_begin, n_tiles);
    else if (kDeterministic && warp == 1)
      write_dq_tiles<Cfg, WS>(smem, p, bh, kv_tile, q_begin, n_tiles);
  } else {
    setmaxnreg_inc<WS::kConsumerRegs>();
    consume_query_tiles<Cfg, WS, T, kDeterministic>(smem, p, bh, kv_tile, q_begin, n_tiles, warpgroup - 1,
                                                    static_cast<int>(threadIdx.x) % 128);
  }
}

}  // namespace course::lab9::detail
