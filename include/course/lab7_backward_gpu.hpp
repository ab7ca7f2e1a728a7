// Lab 7 API, part 2: the attention backward pass as CUDA kernels (FA2 Algorithm 2).
//
// Implemented by labs/lab7_backward/backward.cu (you) and solutions/lab7_backward/backward.cu.
// Plain C++ header (no Eigen, no device code): graders and benchmarks compiled by the host
// compiler call it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "course/gpu.hpp"  // DType, AttentionShape (lab 7's GPU part takes fp32 and bf16)

namespace course::lab7 {

struct BackwardGpuOptions {
  bool causal = false;  // bottom-right aligned: query i sees keys j <= i + Nk - Nq
  float scale = 0.0f;   // softmax scale; 0 means 1/sqrt(d)
  // Device scratch of at least backward_workspace_bytes(shape) bytes, 16-byte aligned, owned
  // by the caller (the library never allocates, so a call never synchronises): it holds
  // D = rowsum(dO o O) and dQ accumulated in fp32.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

// Workspace bytes flash_attention_backward needs: B * H * Nq * (d + 1) floats.
std::size_t backward_workspace_bytes(const AttentionShape& shape);

// Q, O, dO, dQ [B, H, Nq, d]; K, V, dK, dV [B, H, Nk, d]: device pointers of `dtype`
// (float or __nv_bfloat16), row-major, 16-byte aligned; d = 64 or 128. lse [B, H, Nq]: the
// forward's device floats, natural log, -inf for a row that sees no key. Arithmetic in fp32;
// dQ, dK and dV are rounded to `dtype` once, at the end. A query row that sees no key adds
// nothing to any gradient and gets dQ = 0; a key that no query sees gets dK = dV = 0.
// Launches its kernels on options.stream and returns without synchronising. Throws
// course::BadInput for bad shapes, an unsupported d or dtype, null pointers, or a workspace
// that is missing or too small, and std::runtime_error (naming the call) when a CUDA call fails.
void flash_attention_backward(const void* Q, const void* K, const void* V, const void* O,
                              const void* dO, const float* lse, void* dQ, void* dK, void* dV,
                              DType dtype, const AttentionShape& shape,
                              const BackwardGpuOptions& options);

}  // namespace course::lab7
