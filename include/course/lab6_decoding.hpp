// Lab 6 API: split-KV decoding on the GPU (flash-decoding): a few query rows per head against a
// long KV cache, the keys cut into splits that run in parallel, and lab 2's combine to merge them.
//
// Implemented by labs/lab6_decoding/split_kv.cu (you) and solutions/lab6_decoding/split_kv.cu.
// Plain C++ header (no Eigen, no device code): graders and benchmarks compiled by the host
// compiler call it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "course/gpu.hpp"  // DType (lab 6 takes fp32 and bf16)

namespace course::lab6 {

struct DecodeShape {
  int B = 1;       // batch
  int H = 1;       // heads
  int Nq = 1;      // query rows per head: 1 (plain decoding) to 16 (speculative decoding, GQA groups)
  int Nk_max = 0;  // KV cache capacity per head: K and V hold Nk_max rows per (batch, head)
  int d = 0;       // head dimension: 64 or 128
};

struct DecodeOptions {
  // Bottom-right aligned with each batch element's own length: query i of Nq sees key j iff
  // j <= i + len - Nq, len = that batch element's KV length.
  bool causal = false;
  float scale = 0.0f;              // softmax scale; 0 means 1/sqrt(d)
  // Device array [B] of KV lengths (0 <= len <= Nk_max), or null: every length is Nk_max.
  // Values outside [0, Nk_max] are clamped into it on the device (they cannot be checked on
  // the host without a synchronisation).
  const int* seqlens_k = nullptr;
  // How many contiguous chunks each head's keys are cut into (>= 1); 0 lets the library choose
  // from the shape and the number of multiprocessors (choose_num_splits).
  int num_splits = 0;
  // Device memory for the partial results of the splits, at least
  // split_kv_workspace_bytes(shape, dtype, num_splits) bytes, 16-byte aligned. The caller owns it
  // (allocated once, reused by every decoding step): the library never allocates, so it holds
  // no memory pool of its own, a call never waits for a cudaMalloc, and the memory a call uses
  // is known before it runs. CUDA graphs do not need this (a cudaMallocAsync captured in a
  // graph keeps its address across replays); FlashAttention-2 and 3 allocate this workspace
  // inside the call, with torch::empty.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

// Q [B, H, Nq, d], K and V [B, H, Nk_max, d], O [B, H, Nq, d]: device pointers of `dtype`
// (float or __nv_bfloat16), row-major, 16-byte aligned. lse [B, H, Nq]: device floats, natural
// log. Arithmetic in fp32 (bf16 is converted once on load and O rounded once at the end).
// A query row that sees no key (len = 0, or causal with len < Nq for the first rows) gets O = 0
// and lse = -inf, never NaN. Launches two kernels on options.stream (the splits, then the
// merge) and returns without synchronising. Throws course::BadInput for bad shapes (Nq outside
// 1..16, B, H or Nk_max < 1, B * H > 65535), an unsupported d or dtype, null or misaligned
// pointers, a scale that is negative or not finite, num_splits < 0, or a workspace that is
// missing, misaligned or too small (the checks are course::check_decoding's, with kLab6Rules, in
// course/attention.hpp), and std::runtime_error (naming the call) when a CUDA call fails.
void split_kv_forward(const void* Q, const void* K, const void* V, void* O, float* lse,
                      DType dtype, const DecodeShape& shape, const DecodeOptions& options);

// The number of splits split_kv_forward uses when options.num_splits is 0, on a GPU with
// `sm_count` multiprocessors.
int choose_num_splits(const DecodeShape& shape, DType dtype, int sm_count);

// Workspace bytes that split_kv_forward needs for `num_splits` splits (0: the count that
// choose_num_splits picks on the current device): num_splits * B * H * Nq * (d + 1) floats.
std::size_t split_kv_workspace_bytes(const DecodeShape& shape, DType dtype, int num_splits);

// The merge alone (kernel 2 of split_kv_forward): for each of `rows` rows,
//   LSE = M + log sum_s exp(LSE_s - M),  M = max_s LSE_s,     O = sum_s exp(LSE_s - LSE) O_s,
// lab 2's combine of the splits' statistics. O_partial [num_splits, rows, d] and
// lse_partial [num_splits, rows] are device floats; a split with LSE_s = -inf contributes
// nothing, and a row whose every split is -inf gets O = 0 and LSE = -inf. O [rows, d] is
// written in `dtype`, lse [rows] in fp32. 1 <= d <= 128, num_splits >= 1. Launches on `stream`.
void merge_partials(const float* O_partial, const float* lse_partial, void* O, float* lse,
                    DType dtype, int rows, int num_splits, int d, cudaStream_t stream);

}  // namespace course::lab6
