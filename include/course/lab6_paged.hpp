// Lab 6 part 2 API: decoding as a server runs it. The KV cache is a pool of fixed-size pages and
// each sequence owns a list of them (its row of the block table), in any order; several query
// heads share one KV head (grouped-query attention, GQA; one KV head for all: MQA); each
// sequence has its own length, and 1 to 16 new query rows whose K and V rows are appended to
// the cache before they attend to it.
//
// Implemented by labs/lab6_decoding/paged.cu (you) and solutions/lab6_decoding/paged.cu. Plain
// C++ header (no Eigen, no device code): graders and benchmarks compiled by the host compiler
// call it. The input check, check_paged_decoding, is here so that the library and the grader's
// bad-input check speak of the same rules.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "course/attention.hpp"  // check_forward, Workspace, the scale's rule
#include "course/errors.hpp"
#include "course/gpu.hpp"        // DType

namespace course::lab6 {

struct PagedShape {
  int B = 1;          // sequences in the batch
  int H_q = 1;        // query heads
  int H_kv = 1;       // KV heads: H_q is a multiple of it; group = H_q / H_kv query heads share one
  int Nq = 1;         // new query rows per sequence, 1..16 (1: plain decoding; more: speculative)
  int d = 0;          // head dimension: 64 or 128
  int page_size = 0;  // keys per page: 16, 32, 64, 128 or 256 (a power of two)
  int num_pages = 0;  // pages in the pool
  int max_pages = 0;  // columns of the block table: the most pages one sequence can own
  int group() const { return H_kv > 0 ? H_q / H_kv : 0; }
  std::int64_t capacity() const { return std::int64_t(max_pages) * page_size; }  // keys per sequence at most
};

// The cache. Page p of the pool holds, for every KV head h, page_size consecutive rows of K
// (and of V): K_pages is [num_pages, H_kv, page_size, d], row-major, of the call's dtype, so that
// the rows of one page of one head are one contiguous block of page_size * d elements.
// Sequence b's key j lives in page block_table[b * max_pages + j / page_size], row j % page_size.
struct PagedCache {
  void* k_pages = nullptr;          // device [num_pages, H_kv, page_size, d]
  void* v_pages = nullptr;          // device, the same layout
  const int* block_table = nullptr; // device [B, max_pages]: page indices into the pool
  const int* seqlens = nullptr;     // device [B]: each sequence's length, its new rows included
  // Optional host copies of the two arrays above (what a server's scheduler holds anyway). When
  // given, the call checks them (the block table only together with the lengths, which say how
  // many of its pages are used): every length within [0, capacity], every page that a length
  // uses within [0, num_pages). The device arrays cannot be checked without a synchronisation;
  // on the device, lengths are clamped into [0, capacity] and page indices are trusted.
  const int* block_table_host = nullptr;
  const int* seqlens_host = nullptr;
};

struct PagedOptions {
  // Bottom-right aligned with each sequence's length: new query row i (0 <= i < Nq) of sequence
  // b sees key j iff j <= seqlens[b] - Nq + i, i.e. the cache before the new rows and the new
  // rows up to its own.
  bool causal = false;
  float scale = 0.0f;       // softmax scale; 0 means 1/sqrt(d)
  int num_splits = 0;       // >= 1, or 0: choose_paged_splits decides
  void* workspace = nullptr;  // >= paged_workspace_bytes(shape, dtype, num_splits), 16-byte aligned
  std::size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

// Q [B, H_q, Nq, d] and O [B, H_q, Nq, d]: device pointers of `dtype` (bf16 or fp16), row-major,
// 16-byte aligned; lse [B, H_q, Nq] device floats, natural log. Query head h reads KV head
// h / group. The query rows of the `group` heads that share a KV head are packed into one tile of
// group * Nq rows, so that every K/V row read from memory serves all of them (tiles of at most
// 64 rows, the m dimension of tensor-core mma tiles: a group with more rows reads its K/V once
// per 64 rows). The keys are cut into num_splits chunks per sequence, merged as in part 1.
// Q K^T and P V on tensor cores (bf16 or fp16 inputs, fp32 accumulation), the softmax in fp32;
// O rounded once. A row that sees no key gets O = 0 and lse = -inf. Launches on options.stream,
// returns without synchronising. Throws course::BadInput (check_paged_decoding) and std::runtime_error naming the
// call when a CUDA call fails.
void paged_decode(const void* Q, const PagedCache& cache, void* O, float* lse, DType dtype,
                  const PagedShape& shape, const PagedOptions& options);

// Appends the new rows: K_new and V_new [B, H_kv, Nq, d] (device, `dtype`) are written to
// positions seqlens[b] - Nq .. seqlens[b] - 1 of sequence b, i.e. into the pages that the block
// table names for those positions (positions below 0 are skipped). Run it before paged_decode
// on the same stream. Throws as paged_decode does.
void append_kv(const void* K_new, const void* V_new, const PagedCache& cache, DType dtype,
               const PagedShape& shape, cudaStream_t stream);

// The split count paged_decode uses when options.num_splits is 0, on a GPU with sm_count
// multiprocessors: part 1's rule on the CTAs that the call launches (B * H_kv * row tiles of 64).
int choose_paged_splits(const PagedShape& shape, DType dtype, int sm_count);

// Workspace bytes for num_splits splits (0: the count choose_paged_splits picks on the current
// device): num_splits * B * H_q * Nq * (d + 1) floats, the partial O_s then LSE_s as in part 1.
std::size_t paged_workspace_bytes(const PagedShape& shape, DType dtype, int num_splits);

// ---------------------------------------------------------------------------------------------
// The input checks (given): the rules of the call, and the call once checked.

inline constexpr ForwardRules kLab6PagedRules{"lab6::paged_decode", false, true, true, {64, 128, 0}};
inline constexpr int kPagedMaxQueryRows = 16;
inline constexpr int kPagedMinPage = 16, kPagedMaxPage = 256;

struct PagedCall : ForwardCall {  // q, o, lse, dtype, nq, d, causal, scale, scale_log2, stream
  const void* k_pages = nullptr;
  const void* v_pages = nullptr;
  const int* block_table = nullptr;
  const int* seqlens = nullptr;
  int B = 0, h_q = 0, h_kv = 0, group = 0;
  int page_size = 0, page_shift = 0;  // page_size = 1 << page_shift
  int num_pages = 0, max_pages = 0;
  int capacity = 0;                   // max_pages * page_size
  int num_splits = 0;
  int rows = 0;                       // B * H_q * Nq
  float* o_partial = nullptr;         // workspace: [num_splits, rows, d]
  float* lse_partial = nullptr;       // then [num_splits, rows]
};

inline std::size_t paged_partials_bytes(const PagedShape& s, int num_splits) {
  return static_cast<std::size_t>(num_splits) * std::size_t(s.B) * s.H_q * s.Nq *
         (static_cast<std::size_t>(s.d) + 1) * sizeof(float);
}

// The shape alone: d, B, H_q, H_kv, Nq, the page size and the pool. `where` names the function.
inline void check_paged_shape(const std::string& where, const PagedShape& s) {
  check_forward_shape(kLab6PagedRules, where, {s.B, s.H_q, s.Nq, 1, s.d});
  if (s.Nq > kPagedMaxQueryRows)
    throw BadInput(where + ": Nq = " + std::to_string(s.Nq) + " new query rows per sequence is more than " +
                   std::to_string(kPagedMaxQueryRows));
  if (s.H_kv < 1 || s.H_q % s.H_kv != 0)
    throw BadInput(where + ": H_q = " + std::to_string(s.H_q) + " query heads must be a multiple of H_kv = " +
                   std::to_string(s.H_kv) + " KV heads (>= 1)");
  if (s.page_size < kPagedMinPage || s.page_size > kPagedMaxPage || (s.page_size & (s.page_size - 1)) != 0)
    throw BadInput(where + ": page_size must be a power of two from " + std::to_string(kPagedMinPage) + " to " +
                   std::to_string(kPagedMaxPage) + " (16, 32, 64, 128 or 256), got " + std::to_string(s.page_size));
  if (s.num_pages < 1 || s.max_pages < 1)
    throw BadInput(where + ": num_pages and max_pages must be >= 1 (got num_pages=" + std::to_string(s.num_pages) +
                   " max_pages=" + std::to_string(s.max_pages) + ")");
  if (s.capacity() > (std::int64_t(1) << 30))
    throw BadInput(where + ": max_pages * page_size must be at most 2^30 keys per sequence");
  if (std::int64_t(s.B) * s.H_kv * ((std::int64_t(s.group()) * s.Nq + kPagedMaxQueryRows - 1) / kPagedMaxQueryRows) >
      65535)
    throw BadInput(where + ": B * H_kv * ceil(group * Nq / 16) must be <= 65535 (a kernel may give each sequence, KV "
                           "head and tile of 16 packed rows a row of one grid dimension, whose limit that is)");
}

// The optional host copies of the block table and the lengths.
inline void check_paged_metadata(const std::string& where, const PagedShape& s, const PagedCache& c) {
  if (c.seqlens_host == nullptr) return;
  for (int b = 0; b < s.B; ++b) {
    const int len = c.seqlens_host[b];
    if (len < 0 || len > s.capacity())
      throw BadInput(where + ": seqlens[" + std::to_string(b) + "] = " + std::to_string(len) +
                     " is outside [0, max_pages * page_size = " + std::to_string(s.capacity()) +
                     "]: the block table cannot hold it");
    if (c.block_table_host == nullptr) continue;
    const int used = (len + s.page_size - 1) / s.page_size;
    for (int j = 0; j < used; ++j) {
      const int page = c.block_table_host[std::size_t(b) * s.max_pages + j];
      if (page < 0 || page >= s.num_pages)
        throw BadInput(where + ": block_table[" + std::to_string(b) + "][" + std::to_string(j) + "] = " +
                       std::to_string(page) + " is not a page of the pool [0, " + std::to_string(s.num_pages) +
                       ") (sequence " + std::to_string(b) + " of length " + std::to_string(len) + " uses pages 0.." +
                       std::to_string(used - 1) + " of its row)");
    }
  }
}

// Every input check of paged_decode; choose_splits() gives the library's split count when
// num_splits is 0 (called after every check but the workspace's, which needs the count: it may
// query the device).
template <typename ChooseSplits>
PagedCall check_paged_decoding(const void* Q, const PagedCache& cache, void* O, float* lse, DType dtype,
                               const PagedShape& s, const PagedOptions& options, ChooseSplits choose_splits) {
  const std::string where = kLab6PagedRules.function;
  check_paged_shape(where, s);
  PagedCall call;
  // Q and O as a forward call's; K and V are checked as the pool (16-byte aligned, non-null).
  static_cast<ForwardCall&>(call) = check_forward(kLab6PagedRules, Q, cache.k_pages, cache.v_pages, O, lse, dtype,
                                                  {s.B, s.H_q, s.Nq, 1, s.d}, options.causal, options.scale,
                                                  options.stream);
  if (cache.block_table == nullptr || cache.seqlens == nullptr)
    throw BadInput(where + ": cache.block_table and cache.seqlens must be non-null device pointers");
  check_paged_metadata(where, s, cache);
  check_split_count(where, options.num_splits);
  call.k_pages = cache.k_pages, call.v_pages = cache.v_pages;
  call.block_table = cache.block_table, call.seqlens = cache.seqlens;
  call.B = s.B, call.h_q = s.H_q, call.h_kv = s.H_kv, call.group = s.group();
  call.page_size = s.page_size;
  while ((1 << call.page_shift) < s.page_size) ++call.page_shift;
  call.num_pages = s.num_pages, call.max_pages = s.max_pages;
  call.capacity = static_cast<int>(s.capacity());
  call.num_splits = options.num_splits > 0 ? options.num_splits : choose_splits();
  call.rows = s.B * s.H_q * s.Nq;
  detail::check_workspace(where, {options.workspace, options.workspace_bytes},
                          paged_partials_bytes(s, call.num_splits),
                          "for " + std::to_string(call.num_splits) + " splits", "lab6::paged_workspace_bytes");
  call.o_partial = static_cast<float*>(options.workspace);
  call.lse_partial = call.o_partial + static_cast<std::size_t>(call.num_splits) * call.rows * call.d;
  return call;
}

// The checks of append_kv: the shape, non-null 16-byte aligned rows and pool, the metadata.
inline void check_append(const void* K_new, const void* V_new, const PagedCache& cache, DType dtype,
                         const PagedShape& s) {
  const std::string where = "lab6::append_kv";
  check_paged_shape(where, s);
  if (!detail::accepts_dtype(kLab6PagedRules, dtype))
    throw BadInput(where + ": dtype must be " + detail::accepted_dtypes(kLab6PagedRules) + ", got " +
                   dtype_name(dtype));
  if (!K_new || !V_new || !cache.k_pages || !cache.v_pages || !cache.block_table || !cache.seqlens)
    throw BadInput(where + ": K_new, V_new, the pools, block_table and seqlens must be non-null device pointers");
  if (!(detail::is_aligned16(K_new) && detail::is_aligned16(V_new) && detail::is_aligned16(cache.k_pages) &&
        detail::is_aligned16(cache.v_pages)))
    throw BadInput(where + ": K_new, V_new and the pools must be 16-byte aligned");
  check_paged_metadata(where, s, cache);
}

}  // namespace course::lab6
