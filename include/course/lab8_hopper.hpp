// Lab 8 API (beyond): a Hopper (sm_90a) FlashAttention forward kernel -- wgmma, TMA, mbarrier.
//
// Implemented by labs/lab8_hopper/ (you) and solutions/lab8_hopper/. Plain C++ header:
// callable from host code compiled without nvcc. Same conventions as lab 5
// (course/lab5_tensor_core.hpp); labs/lab8_hopper/DESIGN.md section 2 is the specification.
#pragma once

#include <cuda_runtime_api.h>

#include "course/gpu.hpp"  // DType, AttentionShape

namespace course::lab8 {

// The staircase of lecture 8 (DESIGN.md section 3). Each version is a kernel that is kept,
// graded for correctness and benchmarked; `best` is the shipped one (the fastest measured on
// the H200, bench/results/lab8_*.md). The names, in this order, are also in
// course/gpu_labs.def, the one list of the GPU labs' names that the graders, `./course bench`
// and the PyTorch bridge read: a new step goes in both (course/gpu_labs.hpp checks that they
// agree).
enum class Version {
  wgmma,      // 1: wgmma with Q, K, V in 128B-swizzled shared memory, filled by 16-byte loads
  tma,        // 2: + TMA copies that complete on an mbarrier (one K/V stage)
  pipelined,  // 3: + several K/V stages, separate K and V barriers: loads run ahead of the math
  warp_specialized,  // 4: + a producer warpgroup issues the copies; full/empty barriers, setmaxnreg
  causal_skip,       // 5: + causal: visit only the K/V tiles a query tile can see, mask only the diagonal
  intra_wg_overlap,  // 6: + S_{j+1} = Q K^T and O += P_j V_j issued together; softmax under P V
  pingpong,          // 7: + the consumer warpgroups take turns on the tensor cores
  exp2_poly,         // 8: + 2 in 8 of the softmax's 2^x from a polynomial on the FMA pipes, not MUFU
  persistent,        // 9: step 7 with one CTA per SM taking work tiles: loads overlap the epilogue
  best = pingpong,   // steps 8 and 9 are not faster at every shape on the H200 (DESIGN.md section 3)
};

// Every version in staircase order, and its name (as the grader and `./course bench` print it:
// lab8:<name>), read from course/gpu_labs.def: each COURSE_LAB8_VERSION line there becomes one
// element here (that file explains how).
inline constexpr Version kAllVersions[] = {
#define COURSE_LAB8_VERSION(name) Version::name,
#include "course/gpu_labs.def"
};
inline constexpr const char* kVersionNames[] = {
#define COURSE_LAB8_VERSION(name) #name,
#include "course/gpu_labs.def"
};
constexpr const char* version_name(Version v) { return kVersionNames[static_cast<int>(v)]; }

struct ForwardOptions {
  bool causal = false;  // bottom-right aligned, as in labs 4 and 5
  float scale = 0.0f;   // 0 means 1/sqrt(d)
  Version version = Version::best;
  cudaStream_t stream = nullptr;
};

// Q [B, H, Nq, d], K, V [B, H, Nk, d], O [B, H, Nq, d] device pointers of dtype (DType::bf16
// or DType::fp16), lse [B, H, Nq] device floats (natural log). d = 64 or 128; any Nq, Nk >= 1.
// Launches on options.stream and returns without synchronising. Throws course::BadInput for bad
// input (as lab 5, and: a GPU that is not compute capability 9.0) and std::runtime_error for a
// failed CUDA call.
void flash_attention_forward(const void* Q, const void* K, const void* V, void* O, float* lse,
                             DType dtype, const AttentionShape& shape,
                             const ForwardOptions& options);

}  // namespace course::lab8
