// Lab 5 API (beyond): a tensor-core FlashAttention-2 forward kernel (mma.sync m16n8k16).
//
// Implemented by labs/lab5_tensor_core/ (you) and solutions/lab5_tensor_core/.
// Plain C++ header: callable from host code compiled without nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include "course/gpu.hpp"  // DType, AttentionShape

namespace course::lab5 {

// The staircase of versions that lecture 5 walks through; each is a kernel that is kept,
// graded for correctness and benchmarked. `best` is the shipped one. The names, in this order,
// are also in course/gpu_labs.def, the one list of the GPU labs' names that the graders,
// `./course bench` and the PyTorch bridge read: a new step goes in both (course/gpu_labs.hpp
// checks that they agree).
enum class Version {
  mma_only,        // 1: mma.sync, fragments loaded 32 bits at a time from shared memory
  ldmatrix,        // 2: + ldmatrix (and ldmatrix.trans for V)
  swizzle,         // 3: + XOR-swizzled shared memory, no bank conflicts
  pipelined,       // 4: + cp.async, two shared-memory stages
  register_p,      // 5: + P kept in registers as the A operand of P.V
  exp2_fma,        // 6: + exp2 with scale * log2(e) folded into one FFMA
  lazy_rescale,    // 7: beyond FA2: O rescaled only when exp(scale * growth of a row max) exceeds 2^8 (exact)
  best = lazy_rescale,
};

// Every version in staircase order, and its name (as the grader and `./course bench` print it:
// lab5:<name>), read from course/gpu_labs.def: each COURSE_LAB5_VERSION line there becomes one
// element here (that file explains how).
inline constexpr Version kAllVersions[] = {
#define COURSE_LAB5_VERSION(name) Version::name,
#include "course/gpu_labs.def"
};
inline constexpr const char* kVersionNames[] = {
#define COURSE_LAB5_VERSION(name) #name,
#include "course/gpu_labs.def"
};
constexpr const char* version_name(Version v) { return kVersionNames[static_cast<int>(v)]; }

struct ForwardOptions {
  bool causal = false;   // bottom-right aligned, as in lab 4
  float scale = 0.0f;    // 0 means 1/sqrt(d)
  Version version = Version::best;
  cudaStream_t stream = nullptr;
};

// Q [B, H, Nq, d], K, V [B, H, Nk, d], O [B, H, Nq, d] device pointers of dtype (DType::bf16
// or DType::fp16), lse [B, H, Nq] device floats. d = 64 or 128; any N >= 1. Throws
// course::BadInput for bad input (fp32 included) and std::runtime_error for a failed CUDA call.
void flash_attention_forward(const void* Q, const void* K, const void* V, void* O, float* lse,
                             DType dtype, const AttentionShape& shape,
                             const ForwardOptions& options);

}  // namespace course::lab5
