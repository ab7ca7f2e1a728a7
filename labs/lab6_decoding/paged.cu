// Lab 6 part 2: decoding as served, with a paged, grouped KV cache, on tensor cores. Implements
// include/course/lab6_paged.hpp. Lecture: lectures/06-split-kv-decoding.md, "Part 2". As in part
// 1, the line numbers below are FA1 Algorithm 1's (not FA2's, which lab 5 follows).
//
// Reading guide. Part 1's kernel 1 read the keys of one (batch, head) from one contiguous array,
// with fp32 FMAs on CUDA cores. A server's cache differs in three ways, and the split kernel here
// answers each:
//   * Paging. The cache is a pool of pages of page_size rows; sequence b's key j is row
//     j % page_size of page block_table[b][j / page_size]. Every key row's address goes through
//     that lookup, one read of the block table per key row (page_of, then pool_offset). A tile of
//     kTileKeys = 64 keys may lie in several pages (a page of 16 rows is smaller than a tile, and
//     a split's first key need not start a page): the lookup is per row, never per tile. The
//     page indices of the next tile are read while the current one is copied (look_up_pages), so
//     the copies never wait for the table.
//   * Grouped heads (GQA, MQA). `group` query heads share one KV head. A CTA takes the Nq query
//     rows of every head of a group (R = group * Nq rows, packed head after head) against one KV
//     head, so each K/V row read from memory serves all of them: the bytes read fall by the
//     group size, and the FLOPs per byte rise to R (in bf16). At R = 64 that is 64 FLOP/byte,
//     more than fp32 CUDA cores can do at the memory's speed (their ridge is about 14) and far
//     below the tensor cores' (about 200). So the packed rows are the m dimension of mma.sync
//     m16n8k16 (lab 5's instruction and fragments, include/course/mma_sm80.cuh): 1 to 4 row
//     blocks of 16 rows per CTA (kTileRows = 64); a group with more rows is cut into tiles of 64
//     (grid dimension z), each of which reads the KV head once.
//   * Per-sequence lengths and several new rows. The length includes the Nq new rows; new row i
//     sees the keys j <= len - Nq + i (bottom-right causal masking, as in part 1).
// The new rows' K and V are written into their pages first, by append_kv's small kernel.
// The merge of the splits is part 1's kernel 2 (lab 2's combine), here for bf16 and fp16 output.
//
// The split kernel, one CTA per (split, sequence and KV head, tile of up to 64 packed rows), 4
// warps. K/V tiles of 64 keys stream through a ring of kStages shared-memory buffers with cp.async
// (lab 5's pipelining). Warp w computes the rows of row block w % kRowBlocks against its slice
// w / kRowBlocks of each tile's keys: with one row block (R <= 16, e.g. plain decoding) the four
// warps split the keys 16 each; with four (R > 32) each warp takes all 64 keys of its block. Each
// warp keeps its own (m, l, O) in registers; the warps of one row block are merged at the end
// through shared memory, with line 11's combine.
#include "course/attention.hpp"
#include "course/errors.hpp"
#include "course/lab6_paged.hpp"
#include "course/mma_sm80.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace course::lab6 {
namespace {

using course::sm80::cp_async_16;
using course::sm80::cp_async_commit;
using course::sm80::cp_async_wait;
using course::sm80::exp2_approx;
using course::sm80::load_b_fragments_k;
using course::sm80::load_b_fragments_v;
using course::sm80::mma_16x8x16;
using course::sm80::pack_pair;
using course::sm80::smem_address;
using course::sm80::tile_offset;

// ---------------------------------------------------------------------------------------------
// Configuration (given).

constexpr int kThreads = 128;       // the split kernel: 4 warps per CTA
constexpr int kMergeThreads = 512;  // the merge: one CTA per row (part 1's kernel 2)
constexpr int kWarps = kThreads / 32;
constexpr int kBlockRows = 16;                // m of mma.m16n8k16: the packed rows of one row block
constexpr int kTileRows = kWarps * kBlockRows;  // 64: the most packed rows one CTA holds
constexpr int kTileKeys = 64;                 // keys per K/V tile

// The ring of K/V tiles in shared memory: kRingStages tiles in flight (one read, the rest loading).
// At d = 128 a tile of K and V is 32 KB: 3 of them are 96 KB a CTA, within the 99 KB that every
// GPU from sm_80 on gives a block, and two CTAs fit on an H100's or H200's SM (228 KB); at
// d = 64, 4 tiles of 16 KB.
template <int D>
constexpr int kRingStages = D == 64 ? 4 : 3;
template <typename T, int D>
constexpr int kRingBytes = kRingStages<D> * 2 * kTileKeys * D * static_cast<int>(sizeof(T));

// kRowBlocks: row blocks of 16 packed rows in this CTA's tile (1, 2 or 4).
template <typename T, int D, int kRowBlocks>
struct PagedConfig {
  static_assert(D == 64 || D == 128, "head dimension must be 64 or 128");
  static_assert(sizeof(T) == 2, "bf16 or fp16");
  static_assert(kWarps % kRowBlocks == 0, "the warps split evenly over the row blocks");
  static constexpr int kSlices = kWarps / kRowBlocks;        // warps per row block: they split the keys
  static constexpr int kSliceKeys = kTileKeys / kSlices;     // 16, 32 or 64 keys per warp and tile
  static constexpr int kKeyBlocks = kSliceKeys / 8;          // n = 8 blocks of S per warp
  static constexpr int kDimBlocks = D / 8;                   // n = 8 blocks of O per warp
  static constexpr int kStages = kRingStages<D>;
  static constexpr int kPiecesPerRow = D / 8;                // 16-byte pieces of one K or V row
  static constexpr int kRowsPerPass = kThreads / kPiecesPerRow;     // rows the CTA copies at once
  static constexpr int kRowsPerThread = kTileKeys / kRowsPerPass;  // 4 (d = 64) or 8 (d = 128)
  static constexpr int kTileElems = kTileKeys * D;
  static constexpr int kSmemBytes = kRingBytes<T, D>;
  // After the key loop the ring is reused for the warps' O (fp32) before their merge.
  static_assert(kWarps * kBlockRows * D * 4 <= kSmemBytes, "the warps' O fits in the ring");
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
  int rows_per_cta;  // 1, 2 or 4 (launch_paged_merge): kMergeThreads / rows_per_cta threads a row
};

// ---------------------------------------------------------------------------------------------
// Device helpers (given). course/gpu.hpp has store_one; course/mma_sm80.cuh the fragment loads.

// Packed row r of a CTA's rows -> (which head of the CTA's heads, which new query row).
[[maybe_unused]] __device__ __forceinline__ void unpack_row(int r, int nq, int heads_per_cta, int& head, int& query) {
  (void)heads_per_cta;
  head = r / nq;
  query = r % nq;
}

// LSE_s of a row from its running max m (log2 units, as exp2f takes them) and its sum l:
// (m + log2 l) ln 2, natural log as the API's LSE; -inf for a row that saw no key (l = 0).
[[maybe_unused]] __device__ __forceinline__ float split_lse(float m, float l) {
  return (l > 0.0f) ? (m + log2f(l)) * kLn2F : -INFINITY;
}

// Where split `split` keeps packed row `packed` of the CTA whose heads start at h0 in sequence b:
// its row of the workspace, [num_splits][B, H_q, Nq], so that the merge writes O in the API's layout.
[[maybe_unused]] __device__ __forceinline__ std::int64_t partial_row(const PagedParams& p, int b, int h0, int packed,
                                                   int split) {
  int head, query;
  unpack_row(packed, p.nq, p.heads_per_cta, head, query);
  return static_cast<std::int64_t>(split) * p.rows + (static_cast<std::int64_t>(b) * p.h_q + h0 + head) * p.nq + query;
}

// The A fragments of Q for one row block (mma_sm80.cuh's layout: this lane holds rows g and g + 8,
// columns 2t, 2t + 1, 2t + 8 and 2t + 9 of every 16 columns). Q is read once per CTA, so it goes
// straight from global memory into registers. row_g and row_g8 point at the two rows; nullptr is
// a padding row of the block (past the packed rows), which is zeros.
template <int D, typename T>
__device__ __forceinline__ void load_q_fragments(uint32_t (&q)[D / 16][4], const T* row_g, const T* row_g8, int lane) {
  const int t = lane % 4;
  auto pair = [](const T* row, int col) -> uint32_t {
    return row != nullptr ? *reinterpret_cast<const uint32_t*>(row + col) : 0u;
  };
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    q[kk][0] = pair(row_g, 16 * kk + 2 * t);
    q[kk][1] = pair(row_g8, 16 * kk + 2 * t);
    q[kk][2] = pair(row_g, 16 * kk + 2 * t + 8);
    q[kk][3] = pair(row_g8, 16 * kk + 2 * t + 8);
  }
}

// ---------------------------------------------------------------------------------------------
// The page lookup, in two steps: the page of a key (one read of the block table), then the
// element offset, in the pool, of that key's row for KV head kvh. key_row does both.

[[maybe_unused]] __device__ __forceinline__ int page_of(const int* block_table, int max_pages, int page_shift, int b, int key) {
  int page = 0;
  // TODO: page_of (the page that holds key `key` of sequence b; see the lab README)
  // Column j / page_size of sequence b's row of the block table.
  return page;
}

[[maybe_unused]] __device__ __forceinline__ std::int64_t pool_offset(int page, int h_kv, int kvh, int page_shift, int key, int d) {
  std::int64_t offset = 0;
  // TODO: pool_offset (the element offset of the key's row in its page; see the lab README)
  // Row j % page_size of the page's block for KV head kvh. Everything in int64: a pool of a few
  // GB has more elements than an int counts.
  return offset;
}

[[maybe_unused]] __device__ __forceinline__ std::int64_t key_row(const int* block_table, int max_pages, int page_shift, int h_kv,
                                                int b, int kvh, int key, int d) {
  return pool_offset(page_of(block_table, max_pages, page_shift, b, key), h_kv, kvh, page_shift, key, d);
}

// ---------------------------------------------------------------------------------------------
// Loading K/V tiles: the copies of one tile, and the page indices they need one tile ahead.
// Thread `tid` copies the 16-byte piece tid % kPiecesPerRow of the rows tid / kPiecesPerRow +
// i * kRowsPerPass (i < kRowsPerThread) of the tile, in K and in V.

// The pool page of each row this thread copies in the tile that starts at key tile_key0 (0 for a
// key at or past key_end: it is not read).
template <class Cfg>
__device__ __forceinline__ void look_up_pages(int (&pages)[Cfg::kRowsPerThread], const PagedParams& p, int b,
                                              int tile_key0, int key_end) {
  // TODO: look_up_pages (one block-table read per key row; see the lab README)
}

// Starts the copy of the tile at key tile_key0 into the ring's buffers k_s and v_s (row-major,
// swizzled as lab 5's tiles, so that ldmatrix reads them without bank conflicts). Rows of keys at
// or past key_end are zero-filled and never read: past a sequence's length the cache holds stale
// rows (NaN in the grader), and 0 * NaN would be NaN in P V.
template <class Cfg, typename T, int D>
__device__ __forceinline__ void copy_kv_tile(T* k_s, T* v_s, const int (&pages)[Cfg::kRowsPerThread],
                                             const PagedParams& p, int kvh, int tile_key0, int key_end) {
  // TODO: copy_kv_tile (cp.async of this thread's pieces of K and V; see the lab README)
}

// Lines 12-13 for a warp that holds whole rows (its row block's only warp): this lane's two rows
// g and g + 8, its columns 8j + 2t and 8j + 2t + 1 of each n = 8 block of O, divided by l, go to
// the row's place in the workspace; lane t = 0 of each row writes LSE_s. Padding rows are not
// written.
template <int D>
__device__ __forceinline__ void write_partials_from_registers(const PagedParams& p, const float (&m)[2], float (&l)[2],
                                                              const float (&o)[D / 8][4], int b, int h0, int row0,
                                                              int block, int tile_rows, int split, int lane) {
  // TODO: write_partials_from_registers (lines 12-13 for a row block of one warp; see the lab README)
  // Sum each of the lane's two rows' l over the 4 lanes that hold the row, then write O / l and
  // LSE_s = (m + log2 l) ln 2 where the shared-memory path below writes them (the same row of the
  // workspace; 0 and -inf for a row with no key). Padding rows (r >= tile_rows) are not written.
}

// ---------------------------------------------------------------------------------------------
// The split kernel. Grid: x the split, y the (sequence, group of heads_per_cta query heads: one KV
// head), z the tile of up to 64 of those heads' packed rows (see launch_paged).

template <typename T, int D, int kRowBlocks>
__global__ void __launch_bounds__(kThreads, 2) paged_split_kernel(const PagedParams p) {
  let_next_grid_launch();  // the merge may be scheduled now; it waits for this grid's end (given)
  // TODO: paged_split_kernel (see the lab README)
  // This split's keys: the sequence's length clamped into [0, capacity], cut as in part 1.
  // New row i sees keys j <= i + diag (bottom-right: the last new row sees the whole length).
  // The two packed rows whose accumulators this lane holds (rows g and g + 8 of its row block,
  // mma_sm80.cuh's C layout): their Q rows (nullptr: a padding row) and new-row indices.
  // Algorithm 1 line 8, once: Q's A fragments, in registers for the whole loop.
  // Line 2: m = -inf, l = 0, O = 0 for this lane's two rows (l is this lane's share of the row
  // sum; the 4 lanes of a row add theirs at the end).
  // Lines 5-6, as a pipeline: tiles 0 .. kStages - 2 are started before the loop; iteration
  // `tile` starts tile + kStages - 1 into the buffer that tile - 1 used, then reads `tile`. Page
  // indices are looked up one tile ahead of the copies that need them.
    // Line 9: S = Q K^T for this warp's slice of the tile's keys, on tensor cores.
    // Lines 10-11 in FA2's form: S into log2 units (times scale * log2(e)); the masks (keys past
    // the split's end; causal: past the row's diagonal), tested only in a tile that reaches
    // past key_end or past diag, the diagonal of new row 0 (in every other tile no key is
    // masked; the test is the same for the whole CTA, so the branch does not diverge); then per
    // row h the new maximum over the 4 lanes of the row, l and O rescaled by exp2(m_old - m_new),
    // and P = exp2(S - m_new). A row that has seen no key yet keeps m = -inf and uses 0 as its
    // reference: exp2(-inf - 0) = 0, never -inf - (-inf).
    // Line 12: O += P V. The accumulators of S, exponentiated and rounded to T, are P's A
    // fragments (lab 5's "P in registers"); l adds P before rounding, in fp32.
  // With one warp per row block (kSlices == 1, R > 32) there is nothing to combine: lines 12-13
  // straight from the registers, without the round trip through shared memory below.
  // Line 11's combine across the warps of a row block (their slices of the keys): each warp
  // writes its (m, l, O) to shared memory, in the ring (no copy is in flight any more).
  // Lines 12-13 for this chunk: the partial O_s (divided by l once) and LSE_s of each packed
  // row, at that row's place in [B, H_q, Nq]: the merge then writes O in the API's layout.
  // Padding rows (r >= tile_rows) are not written.
}

// ---------------------------------------------------------------------------------------------
// The merge (given): part 1's kernel 2, for bf16 and fp16 output, with rows_per_cta rows to a CTA
// of kMergeThreads (1 as part 1: a row's loads spread over all 512 threads; more where there are
// so many rows that one per CTA would take several waves). Thread t of a row adds column t % d of
// every (threads_per_row / d)-th split, so that a row's loads are in flight together, and the
// classes of splits are summed in shared memory.

template <typename T>
__global__ void __launch_bounds__(kMergeThreads) paged_merge_kernel(const PagedMergeParams p) {
  constexpr float kNegInf = -INFINITY;
  __shared__ float class_sum[kMergeThreads];
  wait_for_previous_grid();  // the split kernel's partial results are complete and visible
  const int tid = static_cast<int>(threadIdx.x);
  const int threads_per_row = kMergeThreads / p.rows_per_cta;  // whole warps: a warp serves one row
  const int first = (tid / threads_per_row) * threads_per_row;  // this row's first thread
  const int rt = tid - first;                                   // this thread's place in its row
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * p.rows_per_cta + tid / threads_per_row;
  const bool valid = row < p.rows;  // the last CTA's rows past the end only take part in the barrier
  const int lane = tid % 32;
  const float* lse_s = p.lse_partial + (valid ? row : 0);
  float m = kNegInf;
  for (int s = lane; s < p.num_splits; s += 32) m = fmaxf(m, lse_s[std::int64_t(s) * p.rows]);
  m = group_max<32>(m);
  const float m_ref = (m == kNegInf) ? 0.0f : m;
  float sum = 0.0f;
  for (int s = lane; s < p.num_splits; s += 32) sum += expf(lse_s[std::int64_t(s) * p.rows] - m_ref);
  sum = group_sum<32>(sum);
  const float lse = (m == kNegInf) ? kNegInf : m_ref + logf(sum);
  const float inv_sum = (sum > 0.0f) ? 1.0f / sum : 0.0f;
  const int classes = threads_per_row / p.d;
  const int col = rt % p.d;
  float acc = 0.0f;
  if (valid && rt < classes * p.d) {
#pragma unroll 4
    for (int s = rt / p.d; s < p.num_splits; s += classes) {
      const float w = expf(lse_s[std::int64_t(s) * p.rows] - m_ref) * inv_sum;
      acc = fmaf(w, p.o_partial[(std::int64_t(s) * p.rows + row) * p.d + col], acc);
    }
  }
  class_sum[tid] = acc;
  __syncthreads();
  if (valid && rt < p.d) {
    for (int c = 1; c < classes; ++c) acc += class_sum[first + c * p.d + rt];
    store_one(static_cast<T*>(p.o) + row * p.d + rt, acc);
  }
  if (valid && rt == 0) p.lse[row] = lse;
}

// ---------------------------------------------------------------------------------------------
// The append kernel. Grid: B * H_kv CTAs; CTA (b, kvh) copies the Nq new rows of K and V of that
// KV head into their pages, 16 bytes per thread per step.

template <typename T>
__global__ void __launch_bounds__(kThreads) append_kernel(const AppendParams p) {
  // TODO: append_kernel (see the lab README)
    // New row i goes to position len - Nq + i; a position below 0 (a length shorter than Nq)
    // has no place in the cache.
}

// ---------------------------------------------------------------------------------------------
// Launchers (given).

// Query heads packed into one CTA: the whole group.
int heads_per_cta(const PagedCall& call) { return call.group; }

int row_tiles(int heads, int nq) { return (heads * nq + kTileRows - 1) / kTileRows; }

template <typename T, int D, int kRowBlocks>
void launch_paged(const PagedParams& params, int B, cudaStream_t stream) {
  constexpr int smem_bytes = kRingBytes<T, D>;
  const auto kernel = paged_split_kernel<T, D, kRowBlocks>;
  require_shared_memory(smem_bytes, "lab6::paged_split_kernel");
  // Above 48 KB a kernel must opt in to its dynamic shared memory.
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes),
             "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  const dim3 grid(static_cast<unsigned>(params.num_splits),
                  static_cast<unsigned>(B * (params.h_q / params.heads_per_cta)),
                  static_cast<unsigned>(row_tiles(params.heads_per_cta, params.nq)));
  kernel<<<grid, kThreads, smem_bytes, stream>>>(params);
  check_cuda(cudaGetLastError(), "paged_split_kernel<<<...>>> launch");
}

// Row blocks of 16 per CTA: the tile's packed rows rounded up to 16, 32 or 64.
int row_blocks(int rows) { return rows <= kBlockRows ? 1 : rows <= 2 * kBlockRows ? 2 : 4; }

template <typename T, int D>
void launch_paged_for_rows(const PagedParams& params, int B, cudaStream_t stream) {
  switch (row_blocks(std::min(kTileRows, params.heads_per_cta * params.nq))) {
    case 1: return launch_paged<T, D, 1>(params, B, stream);
    case 2: return launch_paged<T, D, 2>(params, B, stream);
    default: return launch_paged<T, D, 4>(params, B, stream);
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

// Rows per merge CTA: 1, unless the GPU cannot hold a CTA per row at once; then 2 or 4 (a row's
// threads must still cover its d columns), so that the merge runs in one wave where it can.
template <typename T>
int merge_rows_per_cta(int rows, int d) {
  int per_sm = 0;
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, paged_merge_kernel<T>, kMergeThreads, 0),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  const std::int64_t resident = std::int64_t(std::max(per_sm, 1)) * multiprocessor_count();
  int rows_per_cta = 1;
  while (rows_per_cta < 4 && kMergeThreads / (2 * rows_per_cta) >= d &&
         (rows + rows_per_cta - 1) / rows_per_cta > resident)
    rows_per_cta *= 2;
  return rows_per_cta;
}

template <typename T>
void launch_paged_merge(PagedMergeParams params, cudaStream_t stream) {
  // Scheduled while the split kernel's last CTAs run (sm_90 and up): its launch hides behind them.
  params.rows_per_cta = merge_rows_per_cta<T>(params.rows, params.d);
  const unsigned ctas = static_cast<unsigned>((params.rows + params.rows_per_cta - 1) / params.rows_per_cta);
  launch_after_previous(paged_merge_kernel<T>, dim3(ctas), dim3(kMergeThreads), stream, params,
                        "paged_merge_kernel launch");
}

// CTAs of the split kernel that fit on one SM (shared memory and registers decide).
template <typename T, int D, int kRowBlocks>
int resident_ctas_of() {
  constexpr int smem_bytes = kRingBytes<T, D>;
  const auto kernel = paged_split_kernel<T, D, kRowBlocks>;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes),
             "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  int n = 0;
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, smem_bytes),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  return std::max(n, 1);
}

template <typename T, int D>
int resident_ctas(int rows) {
  switch (row_blocks(rows)) {
    case 1: return resident_ctas_of<T, D, 1>();
    case 2: return resident_ctas_of<T, D, 2>();
    default: return resident_ctas_of<T, D, 4>();
  }
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
  const int s = num_splits > 0 ? num_splits : choose_paged_splits(shape, dtype, multiprocessor_count());
  return paged_partials_bytes(shape, s);
}

void paged_decode(const void* Q, const PagedCache& cache, void* O, float* lse, DType dtype, const PagedShape& shape,
                  const PagedOptions& options) {
  // Input checks (given, course/lab6_paged.hpp).
  const PagedCall call = check_paged_decoding(Q, cache, O, lse, dtype, shape, options,
                                              [&] { return choose_paged_splits(shape, dtype, multiprocessor_count()); });
  [[maybe_unused]] PagedParams params{};
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
  [[maybe_unused]] const PagedMergeParams merge{call.o_partial, call.lse_partial, call.o, call.lse, call.rows, call.num_splits, call.d, 1};

  // TODO: paged_decode (see the lab README)
  // The split kernel (launch_paged_for_dtype<__nv_bfloat16> or <__half>), then the merge
  // (launch_paged_merge), both on call.stream.
  throw course::NotImplemented("paged_decode", "labs/lab6_decoding/paged.cu");
}

void append_kv(const void* K_new, const void* V_new, const PagedCache& cache, DType dtype, const PagedShape& shape,
               cudaStream_t stream) {
  check_append(K_new, V_new, cache, dtype, shape);  // given, course/lab6_paged.hpp
  int shift = 0;
  while ((1 << shift) < shape.page_size) ++shift;
  [[maybe_unused]] const AppendParams params{K_new, V_new, cache.k_pages, cache.v_pages, cache.block_table, cache.seqlens, shape.H_kv,
                            shape.Nq, shape.d, shift, shape.max_pages, static_cast<int>(shape.capacity())};
  // TODO: append_kv (see the lab README)
  // One CTA of kThreads threads per (sequence, KV head), on `stream`.
  throw course::NotImplemented("append_kv", "labs/lab6_decoding/paged.cu");
}

}  // namespace course::lab6
