// Lab 6 part 2: decoding as served, with a paged, grouped KV cache. Implements
// include/course/lab6_paged.hpp. Lecture: lectures/06-split-kv-decoding.md, "Part 2".
//
// Reading guide. Part 1's kernel 1 read the keys of one (batch, head) from one contiguous array.
// A server's cache is different in three ways, and this file changes part 1's kernel in three
// places:
//   * Paging. The cache is a pool of pages of page_size rows; sequence b's key j is row
//     j % page_size of page block_table[b][j / page_size]. Every key row's address goes through
//     that lookup (key_row), one read of the block table per key row, which the L1 cache serves.
//     A step of the key loop reads kKeysPerStep consecutive keys, which may lie in two or more
//     pages (a page of 16 rows is smaller than a step of 32 or 64 keys, and a split's first key
//     need not start a page): the lookup is per row, never per step.
//   * Grouped heads (GQA, MQA). `group` query heads share one KV head. A CTA takes the Nq query
//     rows of every head of a group (group * Nq rows, packed head after head) against one KV
//     head, so each K/V row read from memory serves all of them: the bytes read fall by the
//     group size, and the FLOPs per byte rise by it. Part 1's register state holds at most 16
//     rows, so a group of more than 16 rows is cut into tiles of 16 (grid dimension z), each of
//     which reads the KV head once.
//   * Per-sequence lengths and several new rows. The length includes the Nq new rows; new row i
//     sees the keys j <= len - Nq + i (bottom-right causal masking, as in part 1).
// The new rows' K and V are written into their pages first, by append_kv's small kernel.
// The merge of the splits is part 1's kernel 2 (lab 2's combine), here for bf16 and fp16 output.
//
// Thread layout of the split kernel: part 1's. Groups of G = d / 8 lanes read one 16-byte piece
// each of a K or V row; the CTA reads 128 / G rows per load, U rows per group per step; every
// group keeps its own (m, l, O) per query row and the groups are merged at the end.
#include "course/attention.hpp"
#include "course/errors.hpp"
#include "course/lab6_paged.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace course::lab6 {
namespace {

// ---------------------------------------------------------------------------------------------
// Configuration (given).

constexpr int kThreads = 128;  // 4 warps per CTA
// SKELETON: [[maybe_unused]]
constexpr int kWarps = kThreads / 32;
constexpr int kTileRows = kPagedMaxQueryRows;  // 16: the most query rows one CTA holds

template <typename T, int D, int NQ>
struct PagedConfig {
  static_assert(D == 64 || D == 128, "head dimension must be 64 or 128");
  static_assert(sizeof(T) == 2, "bf16 or fp16");
  static constexpr int kElems = 8;                         // E: 16-bit elements per 16-byte load
  static constexpr int kLanesPerKey = D / kElems;          // G: 8 or 16 lanes read one row
  static constexpr int kGroups = kThreads / kLanesPerKey;  // rows read at once per CTA
  static constexpr int kUnroll = NQ > 4 ? 2 : 4;           // U: rows per group per step
  static constexpr int kKeysPerStep = kGroups * kUnroll;
};

struct PagedParams {
  const void* q;            // [B, H_q, Nq, D]
  const void* k_pages;      // [num_pages, H_kv, page_size, D]
  const void* v_pages;
  const int* block_table;   // [B, max_pages]
  const int* seqlens;       // [B]
  float* o_partial;         // [num_splits, rows, D]
  float* lse_partial;       // [num_splits, rows]
  int h_q, h_kv, group;
  int heads_per_cta;        // query heads packed into one CTA's rows: the whole group
  int nq;
  int page_shift;           // page_size = 1 << page_shift
  int max_pages;
  int capacity;             // max_pages * page_size
  int num_splits;
  int rows;                 // B * H_q * Nq
  bool causal;
  float scale_log2;
};

struct AppendParams {
  const void* k_new;        // [B, H_kv, Nq, D]
  const void* v_new;
  void* k_pages;
  void* v_pages;
  const int* block_table;
  const int* seqlens;
  int h_kv, nq, d, page_shift, max_pages, capacity;
};

struct PagedMergeParams {
  const float* o_partial;
  const float* lse_partial;
  void* o;
  float* lse;
  int rows;
  int num_splits;
  int d;
};

// ---------------------------------------------------------------------------------------------
// Device helpers (given). course/gpu.hpp has load16, load_shared, group_sum and store_one.

// Packed row r of a CTA's tile -> (which head of the CTA's heads, which new query row).
// SKELETON: [[maybe_unused]]
__device__ __forceinline__ void unpack_row(int r, int nq, int heads_per_cta, int& head, int& query) {
  (void)heads_per_cta;
  head = r / nq;
  query = r % nq;
}

// ---------------------------------------------------------------------------------------------
// The page lookup: the element offset, in the pool, of row `key` of sequence b's KV head kvh.

// SKELETON: [[maybe_unused]]
__device__ __forceinline__ std::int64_t key_row(const int* block_table, int max_pages, int page_shift, int h_kv,
                                                int b, int kvh, int key, int d) {
  std::int64_t offset = 0;
  // BEGIN SOLUTION key_row device the page of key `key`, then its row in that page
  //! Page j / page_size of sequence b's row of the block table, then row j % page_size of that
  //! page's block for KV head kvh. Everything in int64: a pool of a few GB has more elements
  //! than an int counts.
  const int page = block_table[static_cast<std::int64_t>(b) * max_pages + (key >> page_shift)];
  const int row = key & ((1 << page_shift) - 1);
  offset = (((static_cast<std::int64_t>(page) * h_kv + kvh) << page_shift) + row) * d;
  // END SOLUTION
  return offset;
}

// ---------------------------------------------------------------------------------------------
// The split kernel. Grid: (num_splits, B * H_kv * tiles_per_group... see launch_paged): x the
// split, y the (sequence, KV head, group of heads_per_cta query heads), z the 16-row tile of
// those heads' packed rows.

template <typename T, int D, int NQ>
__global__ void __launch_bounds__(kThreads) paged_split_kernel(const PagedParams p) {
  // BEGIN SOLUTION paged_split_kernel device
  using Cfg = PagedConfig<T, D, NQ>;
  constexpr int E = Cfg::kElems;
  constexpr int G = Cfg::kLanesPerKey;
  constexpr int U = Cfg::kUnroll;
  constexpr float kNegInf = -INFINITY;

  __shared__ __align__(16) float q_s[NQ * D];
  __shared__ float m_s[kWarps][NQ];
  __shared__ float l_s[kWarps][NQ];
  __shared__ __align__(16) float o_s[kWarps][NQ][D];
  __shared__ int query_s[NQ];  // each packed row's new-row index i (for the causal rule)

  const int split = static_cast<int>(blockIdx.x);
  const int ctas_per_seq = p.h_q / p.heads_per_cta;
  const int b = static_cast<int>(blockIdx.y) / ctas_per_seq;
  const int h0 = (static_cast<int>(blockIdx.y) % ctas_per_seq) * p.heads_per_cta;  // first query head
  const int kvh = h0 / p.group;
  const int row0 = static_cast<int>(blockIdx.z) * kTileRows;  // this tile's first packed row
  const int tile_rows = min(kTileRows, p.heads_per_cta * p.nq - row0);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int group = static_cast<int>(threadIdx.x) / G;
  const int part = static_cast<int>(threadIdx.x) % G;

  //! This split's keys: the sequence's length clamped into [0, capacity], cut as in part 1.
  int len = min(max(p.seqlens[b], 0), p.capacity);
  const int chunk = (len + p.num_splits - 1) / p.num_splits;
  const int key_begin = min(len, split * chunk);
  const int key_end = min(len, key_begin + chunk);
  //! New row i sees keys j <= i + diag (bottom-right: the last new row sees the whole length).
  const int diag = len - p.nq;

  //! Algorithm 1 line 8, once: stage the tile's query rows (pre-multiplied by scale * log2(e));
  //! row r of the tile is head
  //! h0 + head, new row `query` (unpack_row), and its partial result goes to the same row of O.
  for (int e = static_cast<int>(threadIdx.x); e < NQ * G; e += kThreads) {
    const int r = e / G;
    const int col = (e % G) * E;
    float x[E];
    if (r < tile_rows) {
      int head, query;
      unpack_row(row0 + r, p.nq, p.heads_per_cta, head, query);
      const std::int64_t q_row = (static_cast<std::int64_t>(b) * p.h_q + h0 + head) * p.nq + query;
      load16(static_cast<const T*>(p.q) + q_row * D + col, x);
      if (col == 0) query_s[r] = query;
    } else {
#pragma unroll
      for (int u = 0; u < E; ++u) x[u] = 0.0f;
    }
#pragma unroll
    for (int u = 0; u < E; ++u) q_s[r * D + col + u] = x[u] * p.scale_log2;
  }
  __syncthreads();

  //! Line 2, per group and row: m = -inf, l = 0, O = 0; and each row's new-row index.
  float m[NQ], l[NQ], o[NQ][E];
  int query_of[NQ];
#pragma unroll
  for (int i = 0; i < NQ; ++i) {
    m[i] = kNegInf;
    l[i] = 0.0f;
    query_of[i] = i < tile_rows ? query_s[i] : 0;
#pragma unroll
    for (int e = 0; e < E; ++e) o[i][e] = 0.0f;
  }

  const T* k_pool = static_cast<const T*>(p.k_pages);
  const T* v_pool = static_cast<const T*>(p.v_pages);
  for (int k0 = key_begin; k0 < key_end; k0 += Cfg::kKeysPerStep) {
    //! Lines 5-6: every load of the step first. Each key row's address goes through the block
    //! table by itself: a step's keys may lie in several pages.
    float kf[U][E], vf[U][E];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int key = k0 + u * Cfg::kGroups + group;
      if (key < key_end) {
        const std::int64_t at = key_row(p.block_table, p.max_pages, p.page_shift, p.h_kv, b, kvh, key, D);
        load16(k_pool + at + part * E, kf[u]);
        load16(v_pool + at + part * E, vf[u]);
      } else {
#pragma unroll
        for (int e = 0; e < E; ++e) kf[u][e] = vf[u][e] = 0.0f;
      }
    }

#pragma unroll
    for (int i = 0; i < NQ; ++i) {
      if (i < tile_rows) {
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
          if (key >= key_end || (p.causal && key > query_of[i] + diag)) s[u] = kNegInf;
        }
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
  }

  //! Lines 9-12 above are part 1's (scores, masks, the online softmax in FA2's form). The groups'
  //! states are merged as in part 1 (line 11's combine): across the groups of a warp, then the
  //! 4 warps.
#pragma unroll
  for (int offset = G; offset < 32; offset *= 2) {
#pragma unroll
    for (int i = 0; i < NQ; ++i) {
      if (i < tile_rows) {
        const float m_other = __shfl_xor_sync(0xffffffffu, m[i], offset);
        const float l_other = __shfl_xor_sync(0xffffffffu, l[i], offset);
        const float m_new = fmaxf(m[i], m_other);
        const float m_ref = (m_new == kNegInf) ? 0.0f : m_new;
        const float a = exp2f(m[i] - m_ref);
        const float c = exp2f(m_other - m_ref);
        l[i] = a * l[i] + c * l_other;
#pragma unroll
        for (int e = 0; e < E; ++e) o[i][e] = a * o[i][e] + c * __shfl_xor_sync(0xffffffffu, o[i][e], offset);
        m[i] = m_new;
      }
    }
  }
  if (lane < G) {
#pragma unroll
    for (int i = 0; i < NQ; ++i) {
      if (i < tile_rows) {
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

  //! Lines 12-13 for this chunk: the partial O_s (divided by l once) and LSE_s of each row of the
  //! tile, at that row's place in [B, H_q, Nq]: the merge then writes O in the API's layout.
  for (int idx = static_cast<int>(threadIdx.x); idx < tile_rows * D; idx += kThreads) {
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
    int head, query;
    unpack_row(row0 + i, p.nq, p.heads_per_cta, head, query);
    const std::int64_t row = static_cast<std::int64_t>(split) * p.rows +
                             (static_cast<std::int64_t>(b) * p.h_q + h0 + head) * p.nq + query;
    p.o_partial[row * D + col] = (l_all > 0.0f) ? acc / l_all : 0.0f;
    if (col == 0) p.lse_partial[row] = (l_all > 0.0f) ? (m_all + log2f(l_all)) * kLn2F : kNegInf;
  }
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// The merge (given): part 1's kernel 2, for bf16 and fp16 output. One warp per row.

template <typename T>
__global__ void __launch_bounds__(kThreads) paged_merge_kernel(const PagedMergeParams p) {
  constexpr float kNegInf = -INFINITY;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (row >= p.rows) return;
  const float* lse_s = p.lse_partial + row;
  float m = kNegInf;
  for (int s = 0; s < p.num_splits; ++s) m = fmaxf(m, lse_s[std::int64_t(s) * p.rows]);
  const float m_ref = (m == kNegInf) ? 0.0f : m;
  float sum = 0.0f;
  for (int s = 0; s < p.num_splits; ++s) sum += expf(lse_s[std::int64_t(s) * p.rows] - m_ref);
  const float lse = (m == kNegInf) ? kNegInf : m_ref + logf(sum);
  const float inv_sum = (sum > 0.0f) ? 1.0f / sum : 0.0f;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int s = 0; s < p.num_splits; ++s) {
    const float w = expf(lse_s[std::int64_t(s) * p.rows] - m_ref) * inv_sum;
    const float* o_s = p.o_partial + (std::int64_t(s) * p.rows + row) * p.d;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int col = lane + 32 * c;
      if (col < p.d) acc[c] = fmaf(w, o_s[col], acc[c]);
    }
  }
  T* o = static_cast<T*>(p.o) + row * p.d;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int col = lane + 32 * c;
    if (col < p.d) store_one(o + col, acc[c]);
  }
  if (lane == 0) p.lse[row] = lse;
}

// ---------------------------------------------------------------------------------------------
// The append kernel. Grid: B * H_kv CTAs; CTA (b, kvh) copies the Nq new rows of K and V of that
// KV head into their pages, 16 bytes per thread per step.

template <typename T>
__global__ void __launch_bounds__(kThreads) append_kernel(const AppendParams p) {
  // BEGIN SOLUTION append_kernel device
  const int b = static_cast<int>(blockIdx.x) / p.h_kv;
  const int kvh = static_cast<int>(blockIdx.x) % p.h_kv;
  const int len = min(max(p.seqlens[b], 0), p.capacity);
  constexpr int E = 16 / static_cast<int>(sizeof(T));
  const int pieces = p.d / E;  // 16-byte pieces per row
  for (int e = static_cast<int>(threadIdx.x); e < p.nq * pieces; e += kThreads) {
    const int i = e / pieces;
    const int col = (e % pieces) * E;
    //! New row i goes to position len - Nq + i; a position below 0 (a length shorter than Nq)
    //! has no place in the cache.
    const int pos = len - p.nq + i;
    if (pos < 0) continue;
    const std::int64_t src = ((static_cast<std::int64_t>(b) * p.h_kv + kvh) * p.nq + i) * p.d + col;
    const std::int64_t dst = key_row(p.block_table, p.max_pages, p.page_shift, p.h_kv, b, kvh, pos, p.d) + col;
    *reinterpret_cast<uint4*>(static_cast<T*>(p.k_pages) + dst) =
        *reinterpret_cast<const uint4*>(static_cast<const T*>(p.k_new) + src);
    *reinterpret_cast<uint4*>(static_cast<T*>(p.v_pages) + dst) =
        *reinterpret_cast<const uint4*>(static_cast<const T*>(p.v_new) + src);
  }
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Launchers (given).

// Query heads packed into one CTA: the whole group.
int heads_per_cta(const PagedCall& call) { return call.group; }

int row_tiles(int heads, int nq) { return (heads * nq + kTileRows - 1) / kTileRows; }

template <typename T, int D, int NQ>
void launch_paged(const PagedParams& params, int B, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(params.num_splits),
                  static_cast<unsigned>(B * (params.h_q / params.heads_per_cta)),
                  static_cast<unsigned>(row_tiles(params.heads_per_cta, params.nq)));
  paged_split_kernel<T, D, NQ><<<grid, kThreads, 0, stream>>>(params);
  check_cuda(cudaGetLastError(), "paged_split_kernel<<<...>>> launch");
}

// The tile's rows rounded up to the compiled row counts 1, 4 and 16.
template <typename T, int D>
void launch_paged_for_rows(const PagedParams& params, int B, cudaStream_t stream) {
  const int rows = std::min(kTileRows, params.heads_per_cta * params.nq);
  if (rows == 1) {
    launch_paged<T, D, 1>(params, B, stream);
  } else if (rows <= 4) {
    launch_paged<T, D, 4>(params, B, stream);
  } else {
    launch_paged<T, D, kTileRows>(params, B, stream);
  }
}

template <typename T>
void launch_paged_for_dtype(const PagedParams& params, int d, int B, cudaStream_t stream) {
  if (d == 64) {
    launch_paged_for_rows<T, 64>(params, B, stream);
  } else {
    launch_paged_for_rows<T, 128>(params, B, stream);
  }
}

template <typename T>
void launch_paged_merge(const PagedMergeParams& params, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((params.rows + kWarps - 1) / kWarps);
  paged_merge_kernel<T><<<blocks, kThreads, 0, stream>>>(params);
  check_cuda(cudaGetLastError(), "paged_merge_kernel<<<...>>> launch");
}

template <typename T, int D>
int resident_ctas(int rows) {
  int n = 0;
  const char* what = "cudaOccupancyMaxActiveBlocksPerMultiprocessor";
  if (rows == 1) {
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, paged_split_kernel<T, D, 1>, kThreads, 0), what);
  } else if (rows <= 4) {
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, paged_split_kernel<T, D, 4>, kThreads, 0), what);
  } else {
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, paged_split_kernel<T, D, kTileRows>, kThreads, 0),
               what);
  }
  return std::max(n, 1);
}

int device_sm_count() {
  int device = 0, sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
             "cudaDeviceGetAttribute(MultiProcessorCount)");
  return sms;
}

}  // namespace

// The split heuristic (given): part 1's rule (the smallest split count whose last wave keeps
// the GPU within 85% of the best count's busy fraction, at least 256 keys per split, at most
// 128 splits), counted on the CTAs this call launches: one per (sequence, KV head, row tile),
// not per query head, and on the cache's capacity (the lengths are on the device).
int choose_paged_splits(const PagedShape& shape, DType dtype, int sm_count) {
  check_paged_shape("lab6::choose_paged_splits", shape);
  constexpr int kMaxSplits = 128;
  constexpr int kMinKeysPerSplit = 256;
  const int rows = std::min(kTileRows, shape.group() * shape.Nq);
  const bool bf16 = dtype != DType::fp16;
  const int per_sm = shape.d == 64 ? (bf16 ? resident_ctas<__nv_bfloat16, 64>(rows) : resident_ctas<__half, 64>(rows))
                                   : (bf16 ? resident_ctas<__nv_bfloat16, 128>(rows) : resident_ctas<__half, 128>(rows));
  const double slots = double(std::max(sm_count, 1)) * per_sm;
  const double ctas = double(shape.B) * shape.H_kv * row_tiles(shape.group(), shape.Nq);
  const int max_splits =
      static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(kMaxSplits, shape.capacity() / kMinKeysPerSplit)));
  auto efficiency = [&](int s) {
    const double waves = ctas * s / slots;
    return waves / std::ceil(waves);
  };
  double best = 0.0;
  for (int s = 1; s <= max_splits; ++s) best = std::max(best, efficiency(s));
  for (int s = 1; s <= max_splits; ++s)
    if (efficiency(s) >= 0.85 * best) return s;
  return 1;
}

std::size_t paged_workspace_bytes(const PagedShape& shape, DType dtype, int num_splits) {
  check_paged_shape("lab6::paged_workspace_bytes", shape);
  check_split_count("lab6::paged_workspace_bytes", num_splits);
  const int s = num_splits > 0 ? num_splits : choose_paged_splits(shape, dtype, device_sm_count());
  return paged_partials_bytes(shape, s);
}

void paged_decode(const void* Q, const PagedCache& cache, void* O, float* lse, DType dtype, const PagedShape& shape,
                  const PagedOptions& options) {
  // Input checks (given, course/lab6_paged.hpp).
  const PagedCall call = check_paged_decoding(Q, cache, O, lse, dtype, shape, options,
                                              [&] { return choose_paged_splits(shape, dtype, device_sm_count()); });
  // SKELETON: [[maybe_unused]]
  PagedParams params{};
  params.q = call.q;
  params.k_pages = call.k_pages;
  params.v_pages = call.v_pages;
  params.block_table = call.block_table;
  params.seqlens = call.seqlens;
  params.o_partial = call.o_partial;
  params.lse_partial = call.lse_partial;
  params.h_q = call.h_q;
  params.h_kv = call.h_kv;
  params.group = call.group;
  params.heads_per_cta = heads_per_cta(call);
  params.nq = call.nq;
  params.page_shift = call.page_shift;
  params.max_pages = call.max_pages;
  params.capacity = call.capacity;
  params.num_splits = call.num_splits;
  params.rows = call.rows;
  params.causal = call.causal;
  params.scale_log2 = call.scale_log2;
  // SKELETON: [[maybe_unused]]
  const PagedMergeParams merge{call.o_partial, call.lse_partial, call.o, call.lse, call.rows, call.num_splits, call.d};

  // BEGIN SOLUTION paged_decode
  //! The split kernel (launch_paged_for_dtype<__nv_bfloat16> or <__half>), then the merge
  //! (launch_paged_merge), both on call.stream.
  if (call.dtype == DType::bf16) {
    launch_paged_for_dtype<__nv_bfloat16>(params, call.d, call.B, call.stream);
    launch_paged_merge<__nv_bfloat16>(merge, call.stream);
  } else {
    launch_paged_for_dtype<__half>(params, call.d, call.B, call.stream);
    launch_paged_merge<__half>(merge, call.stream);
  }
  // END SOLUTION
}

void append_kv(const void* K_new, const void* V_new, const PagedCache& cache, DType dtype, const PagedShape& shape,
               cudaStream_t stream) {
  check_append(K_new, V_new, cache, dtype, shape);  // given, course/lab6_paged.hpp
  int shift = 0;
  while ((1 << shift) < shape.page_size) ++shift;
  // SKELETON: [[maybe_unused]]
  const AppendParams params{K_new, V_new, cache.k_pages, cache.v_pages, cache.block_table, cache.seqlens, shape.H_kv,
                            shape.Nq, shape.d, shift, shape.max_pages, static_cast<int>(shape.capacity())};
  // BEGIN SOLUTION append_kv
  //! One CTA of kThreads threads per (sequence, KV head), on `stream`.
  const unsigned blocks = static_cast<unsigned>(shape.B * shape.H_kv);
  if (dtype == DType::bf16) {
    append_kernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(params);
  } else {
    append_kernel<__half><<<blocks, kThreads, 0, stream>>>(params);
  }
  check_cuda(cudaGetLastError(), "append_kernel<<<...>>> launch");
  // END SOLUTION
}

}  // namespace course::lab6
