// Lab 5 (beyond): host side of the tensor-core FlashAttention-2 forward kernel.
// The kernel and its device functions are in flash_tc_kernel.cuh (and the headers it includes);
// this file launches one instantiation, picks the tile configuration for the head dimension and
// version, and dispatches the checked call (course/attention.hpp) on dtype, head dimension and
// version.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "course/attention.hpp"
#include "course/errors.hpp"
#include "course/gpu.hpp"
#include "course/lab5_tensor_core.hpp"
#include "flash_tc_kernel.cuh"

// ------------------------------------------------------------------------------------------
// Launching one instantiation
// ------------------------------------------------------------------------------------------

namespace course::lab5::detail {

// Step is a step of the staircase (flash_tc_config.cuh); any other mix of its flags launches too.
template <class Cfg, class Step, class T>
constexpr int smem_bytes_of() {
  return smem_elements<Cfg, Step>() * static_cast<int>(sizeof(T));
}

// Grid: x = query tiles, y = batch*head. Query tiles of one head are neighbours in launch order,
// so the CTAs running at one time share that head's K and V in L2.
template <class Cfg, class Step, class T>
void launch_forward(const KernelParams& params, int batch_heads, cudaStream_t stream) {
  const auto kernel = flash_tc_forward_kernel<Cfg, Step, T>;
  constexpr int smem_bytes = smem_bytes_of<Cfg, Step, T>();
  require_shared_memory(smem_bytes, "lab 5's flash_tc_forward_kernel");
  // Above 48 KB a kernel must opt in to its dynamic shared memory.
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes),
             "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  const dim3 grid((params.nq + Cfg::kBlockM - 1) / Cfg::kBlockM, batch_heads);
  kernel<<<grid, Cfg::kThreads, smem_bytes, stream>>>(params);
  check_cuda(cudaGetLastError(), "flash_tc_forward_kernel<<<...>>>");
}

}  // namespace course::lab5::detail

namespace course::lab5 {
namespace {

using detail::KernelParams;
using detail::TileConfig;

// ------------------------------------------------------------------------------------------
// The shipped tile configurations (lecture 5, "The shipped tile configurations")
// ------------------------------------------------------------------------------------------

// TileConfig<d, query rows per CTA, keys per K/V tile, warps, min CTAs per SM>. Each compiles
// with 0 bytes of spills (nvcc -Xptxas -v) and fits 2 CTAs per SM.

// d = 64, versions 1-4: 4 warps of 32 rows, so every K/V fragment feeds two mmas; 2 CTAs/SM
// (64-row CTAs measured 10-20% slower, 8 warps of 16 rows 25-30%, 32-key tiles 2-13%).
using Cfg64 = TileConfig<64, 128, 64, 4, 2>;
// d = 64 with P in registers (versions 5-7): the registers P no longer needs hold 128-key
// tiles: half the barriers and softmax bookkeeping per key, 1-6% faster than 128 x 64.
using Cfg64PInRegisters = TileConfig<64, 128, 128, 4, 2>;
// d = 128, every version: O takes 128 registers a thread, so it sits at 255 and no larger key
// tile fits (48-key tiles measured as fast as 64; 64 keeps one shape across the staircase).
using Cfg128 = TileConfig<128, 128, 64, 4, 2>;

template <int kHeadDim, class Step>
using ShippedConfig =
    std::conditional_t<kHeadDim == 128, Cfg128,
                       std::conditional_t<Step::p_in_registers, Cfg64PInRegisters, Cfg64>>;

// d = 128 on a GPU with less shared memory per block (an RTX 30 or 40 or an L4: 99 KB). At step 4
// the 128-row Q tile, two stages of 64-key K and V tiles and the P slices take 112 KB; with 64
// query rows per CTA (16 per warp) they take 88 KB. (Fewer keys per tile would not do: the
// swizzled P slice needs rows of 64 keys.) Each K/V fragment then feeds one mma instead of two.
using Cfg128SmallGpu = TileConfig<128, 64, 64, 4, 2>;

template <int kHeadDim, Version kVersion, class T>
void launch_shipped(const KernelParams& params, int batch_heads, cudaStream_t stream) {
  using Step = typename detail::StepOf<kVersion>::type;
  static_assert(Step::kVersion == kVersion, "StepOf maps each Version to its own step");
  using Cfg = ShippedConfig<kHeadDim, Step>;
  // Every step runs on every GPU from sm_80 on: a configuration that needs more shared memory
  // than the smallest of them has a smaller one to fall back to, chosen at launch.
  if constexpr (detail::smem_bytes_of<Cfg, Step, T>() > kSmallestSharedMemoryPerBlock) {
    static_assert(Cfg128SmallGpu::kHeadDim == kHeadDim,
                  "the only fallback is for d = 128: a larger shape at another d needs its own");
    static_assert(detail::smem_bytes_of<Cfg128SmallGpu, Step, T>() <= kSmallestSharedMemoryPerBlock,
                  "the tiles for GPUs with less shared memory must fit every GPU from sm_80 on");
    if (detail::smem_bytes_of<Cfg, Step, T>() > shared_memory_per_block()) {
      return detail::launch_forward<Cfg128SmallGpu, Step, T>(params, batch_heads, stream);
    }
  }
  detail::launch_forward<Cfg, Step, T>(params, batch_heads, stream);
}

template <int kHeadDim, class T>
void dispatch_version(Version version, const KernelParams& params, int batch_heads,
                      cudaStream_t stream) {
  switch (version) {
    case Version::mma_only:
      return launch_shipped<kHeadDim, Version::mma_only, T>(params, batch_heads, stream);
    case Version::ldmatrix:
      return launch_shipped<kHeadDim, Version::ldmatrix, T>(params, batch_heads, stream);
    case Version::swizzle:
      return launch_shipped<kHeadDim, Version::swizzle, T>(params, batch_heads, stream);
    case Version::pipelined:
      return launch_shipped<kHeadDim, Version::pipelined, T>(params, batch_heads, stream);
    case Version::register_p:
      return launch_shipped<kHeadDim, Version::register_p, T>(params, batch_heads, stream);
    case Version::exp2_fma:
      return launch_shipped<kHeadDim, Version::exp2_fma, T>(params, batch_heads, stream);
    case Version::lazy_rescale:
      return launch_shipped<kHeadDim, Version::lazy_rescale, T>(params, batch_heads, stream);
  }
  throw BadInput("lab5::flash_attention_forward: unknown Version value");
}

template <class T>
void dispatch_head_dim(int d, Version version, const KernelParams& params, int batch_heads,
                       cudaStream_t stream) {
  if (d == 64) return dispatch_version<64, T>(version, params, batch_heads, stream);
  return dispatch_version<128, T>(version, params, batch_heads, stream);
}

}  // namespace

void flash_attention_forward(const void* Q, const void* K, const void* V, void* O, float* lse,
                             DType dtype, const AttentionShape& shape,
                             const ForwardOptions& options) {
  // Input checks (given, course/attention.hpp): null pointers, 16-byte alignment, dtype, d,
  // B, H, Nq, Nk >= 1, B * H within the grid, the scale (0 means 1/sqrt(d), resolved here).
  [[maybe_unused]] const ForwardCall call = check_forward(kLab5Rules, Q, K, V, O, lse, dtype, shape,
      options.causal, options.scale, options.stream);

  // TODO: flash_attention_forward (see the lab README)
  // fill KernelParams from the checked call (its scale is resolved, and scale_log2 = scale *
  // log2(e) is there too), then dispatch on dtype (bf16 or fp16), d and version
  throw course::NotImplemented("flash_attention_forward", "labs/lab5_tensor_core/flash_tc.cu");
}

}  // namespace course::lab5
