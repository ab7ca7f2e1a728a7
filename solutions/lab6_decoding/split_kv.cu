// Lab 6: split-KV decoding (flash-decoding) on CUDA cores. Implements
// include/course/lab6_decoding.hpp. Lecture: lectures/06-split-kv-decoding.md.
//
// Reading guide. In decoding, each (batch, head) has 1 to 16 new query rows and a long KV cache.
// Lab 4's grid (one CTA per 64-row query tile) would launch B * H CTAs, each reading the whole
// cache alone: at small B * H most multiprocessors idle, and at any B * H a CTA spends its life
// waiting for K and V to arrive. So the keys are cut into `num_splits` contiguous chunks, and
//   kernel 1 (split_kv_kernel), one CTA per (split, batch * head), runs FA1 Algorithm 1 over its
//            chunk for all Nq rows at once (every K/V row read once serves every query row: that
//            is the point of decoding) and writes a normalised partial output O_s and its
//            log-sum-exp LSE_s, in fp32, to the workspace;
//   kernel 2 (merge_kernel), one CTA per output row, merges the splits with lab 2's combine:
//            LSE = M + log sum_s exp(LSE_s - M), M = max_s LSE_s, and O = sum_s exp(LSE_s - LSE) O_s.
// (FlashAttention-2's loop order, the key loop cut into pieces, as in Dao et al.'s
// "Flash-Decoding" note, 2023; the line numbers below are FA1 Algorithm 1's.)
//
// Work split inside a kernel-1 CTA (128 threads = 4 warps). Decoding does about 2 * Nq FLOPs per
// element of K/V (Nq FLOP/byte in bf16, Nq/2 in fp32): it is memory-bound, so the layout serves
// the loads.
//   * A K or V row of d elements is read by G = d / E threads, one 16-byte piece each (E = 4
//     fp32 or 8 bf16 elements): a "group". G is 8, 16 or 32 (bf16 d = 64 ... fp32 d = 128); the
//     CTA has 128 / G groups, so it reads 128 / G rows of K (and of V) with one 16-byte load per
//     thread, coalesced: the groups of a warp read consecutive rows.
//   * Each thread issues the loads for U key rows (4; 2 when Nq > 4) before using any of them,
//     so 2 * U * 16 bytes per thread are in flight: what hides the memory latency.
//   * A score q_i . k_j is E multiply-adds per thread and a sum over the G lanes of the group
//     (warp shuffles). Every lane of the group then holds the score, runs the online softmax
//     for row i and accumulates p_ij * v_j into its own E columns of O_i.
//   * So each group keeps its own (m, l, O) per query row over the keys it read. At the end of
//     the chunk those states are merged, again with lab 2's combine: first between the groups
//     of a warp (shuffles), then between the 4 warps (shared memory).
//
// Numerics: fp32 everywhere on chip. Q is staged in shared memory times scale * log2(e), so the
// scores are in base 2 and every exponential is one exp2f; LSE_s is written in natural log.
// bf16 is converted once on load; the merge rounds O once, at the end.
//
// Conventions: a split with no key (beyond the batch element's length, more splits than keys, or
// every key masked by causality) has LSE_s = -inf and O_s = 0 and merges to nothing. A query
// row that sees no key at all gets O = 0 and LSE = -inf, as in lab 4. Never NaN.
//
// Input checks: course::check_decoding and check_merge with lab 6's rules (course/attention.hpp),
// which return the checked call that the kernels' parameters are filled from.
#include "course/attention.hpp"
#include "course/errors.hpp"
#include "course/lab6_decoding.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace course::lab6 {
namespace {

// ---------------------------------------------------------------------------------------------
// Configuration (given).

constexpr int kThreads = 128;        // kernel 1: 4 warps per CTA
constexpr int kMergeThreads = 512;   // kernel 2: one CTA per row, 16 warps over its d columns and S splits
// SKELETON: [[maybe_unused]]
constexpr int kWarps = kThreads / 32;
constexpr int kMaxNq = kLab6Rules.max_query_rows;  // 16: the most rows check_decoding lets through

// Kernel 1's compile-time sizes. NQ is Nq rounded up to 1, 4 or 16: the per-thread state
// (m, l and E columns of O for every query row) lives in registers, so its size must be known
// at compile time, and plain decoding (Nq = 1) should not pay for 16 rows.
template <typename T, int D, int NQ>
struct SplitConfig {
  static_assert(D == 64 || D == 128, "head dimension must be 64 or 128");
  static constexpr int kElems = 16 / static_cast<int>(sizeof(T));  // E: elements per 16-byte load
  static constexpr int kLanesPerKey = D / kElems;                  // G: lanes that read one row
  static constexpr int kGroups = kThreads / kLanesPerKey;          // rows read at once per CTA
  static constexpr int kUnroll = NQ > 4 ? 2 : 4;                   // U: rows per group per step
  static constexpr int kKeysPerStep = kGroups * kUnroll;
  static_assert(32 % kLanesPerKey == 0, "a group must not straddle two warps");
};

struct SplitParams {
  const void* q;
  const void* k;
  const void* v;
  const int* seqlens_k;  // [B] or null
  float* o_partial;      // [num_splits, rows, D]
  float* lse_partial;    // [num_splits, rows]
  int heads;             // H: batch element b = bh / H
  int nq;
  int nk_max;
  int num_splits;
  int rows;              // B * H * Nq
  bool causal;
  float scale_log2;      // softmax scale * log2(e)
};

struct MergeParams {
  const float* o_partial;
  const float* lse_partial;
  void* o;
  float* lse;
  int rows;
  int num_splits;
  int d;
};

// ---------------------------------------------------------------------------------------------
// Device helpers (given). 16-byte loads of K, V and Q rows are course::load16, and load_shared,
// group_sum and store_one are course/gpu.hpp's too.

// The merge's exponential of a difference of natural-log LSEs.
// SKELETON: [[maybe_unused]]
__device__ __forceinline__ float merge_exp(float x) { return expf(x); }

// ---------------------------------------------------------------------------------------------
// Kernel 1. Grid: (num_splits, B * H). One CTA = one chunk of the keys of one (batch, head),
// for all Nq query rows of that head.

template <typename T, int D, int NQ>
__global__ void __launch_bounds__(kThreads) split_kv_kernel(const SplitParams p) {
  let_next_grid_launch();  // the merge may be scheduled now; it waits for this grid's end (given)
  // BEGIN SOLUTION split_kv_kernel device
  using Cfg = SplitConfig<T, D, NQ>;
  constexpr int E = Cfg::kElems;
  constexpr int G = Cfg::kLanesPerKey;
  constexpr int U = Cfg::kUnroll;
  constexpr float kNegInf = -INFINITY;

  __shared__ __align__(16) float q_s[NQ * D];          // Q_i, times scale * log2(e)
  __shared__ float m_s[kWarps][NQ];                    // each warp's (m, l, O) at the end
  __shared__ float l_s[kWarps][NQ];
  __shared__ __align__(16) float o_s[kWarps][NQ][D];

  const int split = static_cast<int>(blockIdx.x);
  const int bh = static_cast<int>(blockIdx.y);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int group = static_cast<int>(threadIdx.x) / G;  // which row of a step this thread reads
  const int part = static_cast<int>(threadIdx.x) % G;   // which 16 bytes of it: columns part*E..

  //! This split's keys. The batch element's length (clamped into [0, Nk_max]) is cut into
  //! num_splits chunks of ceil(len / num_splits) keys; the last ones may be short or empty.
  const int b = bh / p.heads;
  int len = p.nk_max;
  if (p.seqlens_k != nullptr) len = min(max(p.seqlens_k[b], 0), p.nk_max);
  const int chunk = (len + p.num_splits - 1) / p.num_splits;
  const int key_begin = min(len, split * chunk);
  const int key_end = min(len, key_begin + chunk);
  //! Bottom-right causal alignment with this element's own length: row i sees keys j <= i + diag.
  const int diag = len - p.nq;

  const T* q_g = static_cast<const T*>(p.q) + static_cast<std::int64_t>(bh) * p.nq * D;
  const T* k_g = static_cast<const T*>(p.k) + static_cast<std::int64_t>(bh) * p.nk_max * D;
  const T* v_g = static_cast<const T*>(p.v) + static_cast<std::int64_t>(bh) * p.nk_max * D;

  //! Algorithm 1 line 8, once: stage the Nq query rows in shared memory (fp32, pre-multiplied
  //! by scale * log2(e)); rows past Nq are zeros and never used.
  for (int e = static_cast<int>(threadIdx.x); e < NQ * G; e += kThreads) {
    const int row = e / G;
    const int col = (e % G) * E;
    float x[E];
    if (row < p.nq) {
      load16(q_g + static_cast<std::int64_t>(row) * D + col, x);
    } else {
#pragma unroll
      for (int u = 0; u < E; ++u) x[u] = 0.0f;
    }
#pragma unroll
    for (int u = 0; u < E; ++u) q_s[row * D + col + u] = x[u] * p.scale_log2;
  }
  __syncthreads();

  //! Algorithm 1 line 2, per group and query row: m = -inf, l = 0, O = 0 (this lane's columns).
  float m[NQ], l[NQ], o[NQ][E];
#pragma unroll
  for (int i = 0; i < NQ; ++i) {
    m[i] = kNegInf;
    l[i] = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) o[i][e] = 0.0f;
  }

  //! Line 5: for each step of kKeysPerStep keys of the chunk. Group g reads the keys
  //! k0 + u * kGroups + g, u < U: at a given u the groups of a warp read consecutive rows.
  for (int k0 = key_begin; k0 < key_end; k0 += Cfg::kKeysPerStep) {
    //! Line 6: issue every load of the step first (K and V rows, 16 bytes per thread each),
    //! then compute: 2 * U loads are in flight together. Keys past the chunk are not read at
    //! all (a KV cache holds anything past a sequence's length, NaN included): they are zeros
    //! and get the score -inf below.
    float kf[U][E], vf[U][E];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int key = k0 + u * Cfg::kGroups + group;
      if (key < key_end) {
        load16(k_g + static_cast<std::int64_t>(key) * D + part * E, kf[u]);
        load16(v_g + static_cast<std::int64_t>(key) * D + part * E, vf[u]);
      } else {
#pragma unroll
        for (int e = 0; e < E; ++e) kf[u][e] = vf[u][e] = 0.0f;
      }
    }

#pragma unroll
    for (int i = 0; i < NQ; ++i) {
      if (i < p.nq) {  // the same for every thread: the shuffles below see all 32 lanes
        //! Line 9: S_ij = Q_i K_j^T, E products per lane, summed over the group's G lanes.
        float qf[E];
        load_shared<E>(q_s + i * D + part * E, qf);
        float s[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < E; ++e) dot = fmaf(qf[e], kf[u][e], dot);
          s[u] = group_sum<G>(dot);
          const int key = k0 + u * Cfg::kGroups + group;
          if (key >= key_end || (p.causal && key > i + diag)) s[u] = kNegInf;
        }
        //! Lines 10-12 in FA2's form (one rescale per step, no division): m_new = max(m, S),
        //! alpha = exp2(m - m_new), l = alpha l + sum P, O = alpha O + P V. While a row has
        //! seen no key, m_new = -inf: subtract 0 instead, so alpha and P are exact zeros.
        float m_new = m[i];
#pragma unroll
        for (int u = 0; u < U; ++u) m_new = fmaxf(m_new, s[u]);
        const float m_ref = (m_new == kNegInf) ? 0.0f : m_new;
        const float alpha = exp2f(m[i] - m_ref);
        l[i] *= alpha;
#pragma unroll
        for (int e = 0; e < E; ++e) o[i][e] *= alpha;
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const float pu = exp2f(s[u] - m_ref);
          l[i] += pu;
#pragma unroll
          for (int e = 0; e < E; ++e) o[i][e] = fmaf(pu, vf[u][e], o[i][e]);
        }
        m[i] = m_new;
      }
    }
  }  // line 15: end for

  //! The groups' states are partial results over disjoint sets of keys: merge them with lab 2's
  //! combine (Algorithm 1 line 11 applied to (m, l, O)). First a butterfly over the groups of a
  //! warp: lanes `lane` and `lane ^ offset` (offset >= G) hold the same columns of two groups.
  //! Any order of combining is exact, because combine is associative and commutative.
#pragma unroll
  for (int offset = G; offset < 32; offset *= 2) {
#pragma unroll
    for (int i = 0; i < NQ; ++i) {
      if (i < p.nq) {
        const float m_other = __shfl_xor_sync(0xffffffffu, m[i], offset);
        const float l_other = __shfl_xor_sync(0xffffffffu, l[i], offset);
        const float m_new = fmaxf(m[i], m_other);
        const float m_ref = (m_new == kNegInf) ? 0.0f : m_new;
        const float a = exp2f(m[i] - m_ref);
        const float c = exp2f(m_other - m_ref);
        l[i] = a * l[i] + c * l_other;
#pragma unroll
        for (int e = 0; e < E; ++e) {
          o[i][e] = a * o[i][e] + c * __shfl_xor_sync(0xffffffffu, o[i][e], offset);
        }
        m[i] = m_new;
      }
    }
  }
  //! ... then between the warps, through shared memory: the first group of each warp (lanes
  //! 0 .. G-1) now holds the warp's state.
  if (lane < G) {
#pragma unroll
    for (int i = 0; i < NQ; ++i) {
      if (i < p.nq) {
        if (lane == 0) {
          m_s[warp][i] = m[i];
          l_s[warp][i] = l[i];
        }
#pragma unroll
        for (int e = 0; e < E; ++e) o_s[warp][i][part * E + e] = o[i][e];
      }
    }
  }
  __syncthreads();

  //! Lines 12-13 for this chunk: combine the 4 warps, divide by l once, and write the partial
  //! O_s (normalised) and LSE_s = ln 2 * (m + log2 l). A row with no key in this chunk has
  //! l = 0: O_s = 0 and LSE_s = -inf, so that the merge gives it the weight exp(-inf) = 0.
  for (int idx = static_cast<int>(threadIdx.x); idx < p.nq * D; idx += kThreads) {
    const int i = idx / D;
    const int col = idx % D;
    float m_all = kNegInf;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, m_s[w][i]);
    const float m_ref = (m_all == kNegInf) ? 0.0f : m_all;
    float l_all = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float c = exp2f(m_s[w][i] - m_ref);
      l_all = fmaf(c, l_s[w][i], l_all);
      acc = fmaf(c, o_s[w][i][col], acc);
    }
    const std::int64_t row = static_cast<std::int64_t>(split) * p.rows +
                             static_cast<std::int64_t>(bh) * p.nq + i;
    p.o_partial[row * D + col] = (l_all > 0.0f) ? acc / l_all : 0.0f;
    if (col == 0) p.lse_partial[row] = (l_all > 0.0f) ? (m_all + log2f(l_all)) * kLn2F : kNegInf;
  }
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Kernel 2. Grid: one CTA of kMergeThreads threads per output row. The merge reads S (d + 1)
// floats per row and does a few flops per float: its time is the wait for those loads. At
// B * H = 32 there are only 32 rows, so the loads of a row must be spread over many threads, all
// in flight at once: thread t reads column t % d of the splits s = t / d, t / d + classes, ...
// (classes = kMergeThreads / d: 4 at d = 128, 8 at d = 64), and the classes are summed in shared
// memory at the end. (One warp walking a row's splits one load after another took 27 us at 33
// splits on an H200, as long as kernel 1 itself.)

template <typename T>
__global__ void __launch_bounds__(kMergeThreads) merge_kernel(const MergeParams p) {
  wait_for_previous_grid();  // kernel 1's partial results are complete and visible (given)
  // BEGIN SOLUTION merge_kernel device
  constexpr float kNegInf = -INFINITY;
  __shared__ float class_sum[kMergeThreads];
  const std::int64_t row = blockIdx.x;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  const float* lse_s = p.lse_partial + row;  // split s at lse_s[s * rows]

  //! Lab 2's combine over all the splits at once. M = max_s LSE_s; if every split is empty
  //! (M = -inf) the reference point is 0, so that exp(-inf - 0) = 0, never exp(-inf + inf).
  //! Every warp computes M and the sum for itself (no barrier needed): lane i reads LSE_s for
  //! s = i, i + 32, ..., and the warp reduces them with shuffles.
  float m = kNegInf;
  for (int s = lane; s < p.num_splits; s += 32) m = fmaxf(m, lse_s[std::int64_t(s) * p.rows]);
  m = group_max<32>(m);
  const float m_ref = (m == kNegInf) ? 0.0f : m;
  float sum = 0.0f;
  for (int s = lane; s < p.num_splits; s += 32) sum += merge_exp(lse_s[std::int64_t(s) * p.rows] - m_ref);
  sum = group_sum<32>(sum);
  //! LSE = M + log sum_s exp(LSE_s - M); a row with no key anywhere keeps LSE = -inf.
  const float lse = (m == kNegInf) ? kNegInf : m_ref + logf(sum);
  const float inv_sum = (sum > 0.0f) ? 1.0f / sum : 0.0f;

  //! O = sum_s exp(LSE_s - LSE) O_s over this thread's class of splits, in its column. Unrolled,
  //! so that the loads of several splits are issued before the first is used.
  const int classes = kMergeThreads / p.d;
  const int col = tid % p.d;
  float acc = 0.0f;
  if (tid < classes * p.d) {
#pragma unroll 4
    for (int s = tid / p.d; s < p.num_splits; s += classes) {
      const float w = merge_exp(lse_s[std::int64_t(s) * p.rows] - m_ref) * inv_sum;
      acc = fmaf(w, p.o_partial[(std::int64_t(s) * p.rows + row) * p.d + col], acc);
    }
  }
  class_sum[tid] = acc;
  __syncthreads();

  //! The first class adds the others' sums and rounds O once to the output dtype.
  if (tid < p.d) {
    for (int c = 1; c < classes; ++c) acc += class_sum[c * p.d + tid];
    store_one(static_cast<T*>(p.o) + row * p.d + tid, acc);
  }
  if (tid == 0) p.lse[row] = lse;
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Launchers (given).

template <typename T, int D, int NQ>
void launch_split(const SplitParams& params, int batch_heads, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(params.num_splits), static_cast<unsigned>(batch_heads));
  split_kv_kernel<T, D, NQ><<<grid, kThreads, 0, stream>>>(params);
  check_cuda(cudaGetLastError(), "split_kv_kernel<<<...>>> launch");
}

// Nq rounded up to the compiled row counts 1, 4 and 16.
template <typename T, int D>
void launch_split_for_nq(const SplitParams& params, int batch_heads, cudaStream_t stream) {
  if (params.nq == 1) {
    launch_split<T, D, 1>(params, batch_heads, stream);
  } else if (params.nq <= 4) {
    launch_split<T, D, 4>(params, batch_heads, stream);
  } else {
    launch_split<T, D, kMaxNq>(params, batch_heads, stream);
  }
}

template <typename T>
void launch_split_for_dtype(const SplitParams& params, int d, int batch_heads, cudaStream_t stream) {
  if (d == 64) {
    launch_split_for_nq<T, 64>(params, batch_heads, stream);
  } else {
    launch_split_for_nq<T, 128>(params, batch_heads, stream);
  }
}

template <typename T>
void launch_merge(const MergeParams& params, cudaStream_t stream) {
  // One CTA per row, scheduled while kernel 1's last CTAs run (sm_90 and up): its launch hides
  // behind them.
  launch_after_previous(merge_kernel<T>, dim3(static_cast<unsigned>(params.rows)), dim3(kMergeThreads), stream, params,
                        "merge_kernel launch");
}

// CTAs of kernel 1 that one multiprocessor holds at once, for this dtype, d and Nq.
template <typename T, int D>
int resident_ctas(int nq) {
  int n = 0;
  if (nq == 1) {
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, split_kv_kernel<T, D, 1>, kThreads, 0),
               "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  } else if (nq <= 4) {
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, split_kv_kernel<T, D, 4>, kThreads, 0),
               "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  } else {
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, split_kv_kernel<T, D, kMaxNq>, kThreads, 0),
               "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  }
  return std::max(n, 1);
}

// The decoding shape as the front door reads it: a forward call's shape whose Nk is the KV
// cache's capacity.
AttentionShape attention_shape(const DecodeShape& s) { return {s.B, s.H, s.Nq, s.Nk_max, s.d}; }

}  // namespace

// The split heuristic (given). Kernel 1 runs B * H * S CTAs; the GPU holds `slots` of them at
// once (multiprocessors x CTAs per multiprocessor). The last wave is what wastes time: with
// waves = B H S / slots, a fraction waves / ceil(waves) of the GPU is busy on average. Take the
// smallest S whose fraction is within 85% of the best one, with at least 256 keys per split
// (fewer make the merge and the launch the larger cost) and at most 128 splits. Adapted from
// FlashAttention-2's num_splits_heuristic, which differs in three ways (lecture 6): it returns
// 1 split outright when the grid without splitting already fills 80% of its slots, it counts
// its slots as 2 CTAs per multiprocessor, and it skips split counts that leave the number of
// key blocks per split unchanged.
int choose_num_splits(const DecodeShape& shape, DType dtype, int sm_count) {
  check_decoding_shape(kLab6Rules, "lab6::choose_num_splits", attention_shape(shape));
  constexpr int kMaxSplits = 128;
  constexpr int kMinKeysPerSplit = 256;
  const int per_sm = dtype == DType::fp32
                         ? (shape.d == 64 ? resident_ctas<float, 64>(shape.Nq) : resident_ctas<float, 128>(shape.Nq))
                         : (shape.d == 64 ? resident_ctas<__nv_bfloat16, 64>(shape.Nq)
                                          : resident_ctas<__nv_bfloat16, 128>(shape.Nq));
  const double slots = double(std::max(sm_count, 1)) * per_sm;
  const double heads = double(shape.B) * shape.H;
  const int max_splits = std::max(1, std::min(kMaxSplits, shape.Nk_max / kMinKeysPerSplit));
  auto efficiency = [&](int s) {
    const double waves = heads * s / slots;
    return waves / std::ceil(waves);
  };
  double best = 0.0;
  for (int s = 1; s <= max_splits; ++s) best = std::max(best, efficiency(s));
  int best_splits = 1;
  for (int s = 1; s <= max_splits; ++s) {
    if (efficiency(s) >= 0.85 * best) {
      best_splits = s;
      break;
    }
  }
  return best_splits;
}

// The size and the layout of the workspace are the front door's (course::decoding_workspace_bytes),
// so that check_decoding checks the size that this function gives.
std::size_t split_kv_workspace_bytes(const DecodeShape& shape, DType dtype, int num_splits) {
  check_decoding_shape(kLab6Rules, kLab6Rules.workspace_bytes, attention_shape(shape));
  check_split_count(kLab6Rules.workspace_bytes, num_splits);
  const int s = num_splits > 0 ? num_splits : choose_num_splits(shape, dtype, multiprocessor_count());
  return decoding_workspace_bytes(attention_shape(shape), s);
}

void merge_partials(const float* O_partial, const float* lse_partial, void* O, float* lse,
                    DType dtype, int rows, int num_splits, int d,
                    cudaStream_t stream) {
  // Input checks (given, course/attention.hpp).
  check_merge(kLab6Rules, O_partial, lse_partial, O, lse, dtype, rows, num_splits, d);
  // SKELETON: [[maybe_unused]]
  const MergeParams params{O_partial, lse_partial, O, lse, rows, num_splits, d};

  // BEGIN SOLUTION merge_partials
  //! Launch merge_kernel<float> or merge_kernel<__nv_bfloat16> through launch_merge, on `stream`.
  if (dtype == DType::fp32) {
    launch_merge<float>(params, stream);
  } else {
    launch_merge<__nv_bfloat16>(params, stream);
  }
  // END SOLUTION
}

void split_kv_forward(const void* Q, const void* K, const void* V, void* O, float* lse,
                      DType dtype, const DecodeShape& shape, const DecodeOptions& options) {
  // Input checks (given, course/attention.hpp): check_forward's (pointers, 16-byte alignment,
  // dtype, d, B, H, Nq, Nk_max >= 1, B * H within the grid, the scale: 0 means 1/sqrt(d)) and the
  // decoding's own (Nq <= 16, num_splits >= 0, the workspace's size for the split count). The
  // checked call carries the split count, choose_num_splits' when options.num_splits is 0, and the
  // workspace cut into the partial results O_s and LSE_s.
  const DecodingCall call = check_decoding(
      kLab6Rules, Q, K, V, O, lse, dtype, attention_shape(shape), options.causal, options.scale,
      options.seqlens_k, options.num_splits, {options.workspace, options.workspace_bytes}, options.stream,
      [&] { return choose_num_splits(shape, dtype, multiprocessor_count()); });

  // SKELETON: [[maybe_unused]]
  SplitParams params{};
  params.q = call.q;
  params.k = call.k;
  params.v = call.v;
  params.seqlens_k = call.seqlens_k;
  params.o_partial = call.o_partial;
  params.lse_partial = call.lse_partial;
  params.heads = call.heads;
  params.nq = call.nq;
  params.nk_max = call.nk;
  params.num_splits = call.num_splits;
  params.rows = call.rows;
  params.causal = call.causal;
  params.scale_log2 = call.scale_log2;

  // BEGIN SOLUTION split_kv_forward
  //! Kernel 1 (launch_split_for_dtype<float> or <__nv_bfloat16>), then the merge
  //! (merge_partials) of the partial results call.o_partial and call.lse_partial into O and lse,
  //! both on call.stream: the merge runs after kernel 1 because a stream runs in order.
  if (call.dtype == DType::fp32) {
    launch_split_for_dtype<float>(params, call.d, call.batch_heads, call.stream);
  } else {
    launch_split_for_dtype<__nv_bfloat16>(params, call.d, call.batch_heads, call.stream);
  }
  merge_partials(call.o_partial, call.lse_partial, call.o, call.lse, call.dtype, call.rows, call.num_splits,
                 call.d, call.stream);
  // END SOLUTION
}

}  // namespace course::lab6
