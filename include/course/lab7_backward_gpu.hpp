// Lab 7 API, parts 2 and 3: the attention backward pass as CUDA kernels (FA2 Algorithm 2), on
// CUDA cores (part 2) and on tensor cores (part 3).
//
// Implemented by labs/lab7_backward/backward.cu and backward_tc.cu (you) and the same files in
// solutions/lab7_backward/.
// Plain C++ header (no Eigen, no device code): graders and benchmarks compiled by the host
// compiler call it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "course/gpu.hpp"  // DType, AttentionShape

namespace course::lab7 {

// Which kernel computes the products (kernels 1 and 3, D and dQ's conversion, are the same).
// The names, in this order, are also in course/gpu_labs.def, which the grader and the PyTorch
// bridge read; course/gpu_labs.hpp holds them to agree.
enum class BackwardKernel {
  automatic,     // tensor cores for bf16 and fp16, CUDA cores for fp32
  cuda_cores,    // part 2: fp32 arithmetic throughout; fp32 or bf16
  tensor_cores,  // part 3: mma.sync with P and dS rounded to the 16-bit type; bf16 or fp16
};

// Lab 9's staircase (course/lab9_hopper_backward.hpp says what each step adds; lab 7 has no
// steps and ignores the field). Here because lab 9's call takes lab 7's options.
enum class HopperBackwardStep {
  wgmma,             // 1: every product on wgmma, Q and dO by TMA, dQ by atomics
  warp_specialized,  // 2: + a producer warp, setmaxnreg, dQ added from shared memory by bulk reductions
  best = warp_specialized,
};

struct BackwardGpuOptions {
  bool causal = false;  // bottom-right aligned: query i sees keys j <= i + Nk - Nq
  float scale = 0.0f;   // softmax scale; 0 means 1/sqrt(d)
  // Device scratch of at least backward_workspace_bytes(shape) bytes, 16-byte aligned, owned
  // by the caller (the library never allocates, so a call never synchronises): it holds
  // D = rowsum(dO o O) and dQ accumulated in fp32.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
  BackwardKernel kernel = BackwardKernel::automatic;
  // dQ the same, bit for bit, in every run: the K/V tiles add their shares of dQ in a fixed order
  // instead of atomics in whatever order they come. Lab 9's mode (course/lab9_hopper_backward.hpp);
  // lab 7 rejects it with course::BadInput.
  bool deterministic = false;
  // Lab 9's step; the default is its fastest.
  HopperBackwardStep hopper_step = HopperBackwardStep::best;
};

// Workspace bytes flash_attention_backward needs: B * H * Nq * (d + 1) floats.
std::size_t backward_workspace_bytes(const AttentionShape& shape);

// Q, O, dO, dQ [B, H, Nq, d]; K, V, dK, dV [B, H, Nk, d]: device pointers of `dtype`
// (fp32 or bf16 on CUDA cores, bf16 or fp16 on tensor cores: see BackwardKernel), row-major,
// 16-byte aligned; d = 64 or 128. lse [B, H, Nq]: the forward's device floats, natural log, -inf
// for a row that sees no key. Arithmetic and accumulation in fp32 (the tensor cores' operands P
// and dS are rounded to the 16-bit type, as in FlashAttention-2); dQ, dK and dV are rounded to
// `dtype` once, at the end. A query row that sees no key adds
// nothing to any gradient and gets dQ = 0; a key that no query sees gets dK = dV = 0.
// Launches its kernels on options.stream and returns without synchronising. Throws
// course::BadInput for bad shapes (B, H, Nq or Nk < 1, B * H > 65535), an unsupported d, a dtype
// the kernel does not take, null or misaligned pointers, a scale that is negative or not finite,
// or a workspace that is missing, misaligned or too small, or options.deterministic (lab 9's; the
// checks are course::check_backward's, with kLab7Rules, in course/attention.hpp), and
// std::runtime_error (naming the call) when a CUDA call fails.
void flash_attention_backward(const void* Q, const void* K, const void* V, const void* O,
                              const void* dO, const float* lse, void* dQ, void* dK, void* dV,
                              DType dtype, const AttentionShape& shape,
                              const BackwardGpuOptions& options);

}  // namespace course::lab7
