// Standard attention, the baseline that FlashAttention is measured against: it materialises the
// score matrix S = scale * Q K^T in device memory (one cuBLAS batched GEMM), applies a row
// softmax in place (one kernel, with the causal mask), and multiplies O = P V (a second GEMM).
// Memory is O(B * H * Nq * Nk); that is the point of comparing with it.
//
// fp32: S and P in fp32, plain fp32 GEMMs (cuBLAS default math mode, no TF32).
// bf16: S and P stored in bf16 like a framework's eager implementation; GEMMs on tensor cores
// with fp32 accumulation (CUBLAS_COMPUTE_32F); the softmax is computed in fp32.
// This is the "straightforward same-precision implementation" whose error sets the bf16 bands.
//
// Plain C++ header: callers need no CUDA compiler and no cuBLAS headers. Link with -lcublas.
#pragma once

#include "course/attention.hpp"  // ForwardRules, check_forward
#include "course/gpu.hpp"        // DType, AttentionShape

#include <cstddef>
#include <cuda_runtime_api.h>

namespace course::reference::gpu {

// What standard attention accepts, stated as the GPU labs state theirs (course/attention.hpp):
// fp32 and bf16 (the dtypes it is the plain baseline of) at the labs' head dimensions.
inline constexpr ForwardRules kStandardAttentionRules{"StandardAttention::forward", true, true, false,
                                                      {32, 64, 128}};

class StandardAttention {
 public:
  StandardAttention();  // creates the cuBLAS handle (throws std::runtime_error on failure)
  ~StandardAttention();
  StandardAttention(const StandardAttention&) = delete;
  StandardAttention& operator=(const StandardAttention&) = delete;

  // The GPU labs' forward call, with their layout and conventions (bottom-right causal, scale 0
  // means 1/sqrt(d), a row that sees no key gets O = 0 and lse = -inf), checked by
  // course::check_forward with kStandardAttentionRules. Runs on `stream`, without synchronising.
  // Returns cudaSuccess, or cudaErrorMemoryAllocation (nothing launched, no sticky error) when
  // the score matrix does not fit in device memory. Throws course::BadInput for bad arguments
  // and std::runtime_error naming the call for any other CUDA or cuBLAS failure.
  cudaError_t forward(const void* Q, const void* K, const void* V, void* O, float* lse,
                      DType dtype, const AttentionShape& shape, bool causal, float scale,
                      cudaStream_t stream);

  // Bytes of the score matrix for this shape (what forward allocates, and keeps for reuse).
  static std::size_t score_bytes(const AttentionShape& shape, DType dtype);

  // Frees the cached score buffer.
  void release();

 private:
  void* handle_ = nullptr;  // cublasHandle_t
  void* scores_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace course::reference::gpu
