// Lab 8 (beyond): host side of the Hopper FlashAttention forward kernel.
// The kernel and its device functions are in flash_h100_kernel.cuh (and the headers it
// includes); this file checks the input, picks the tile configuration, builds the TMA tensor
// maps for it and launches one instantiation per dtype, head dimension, version and tiles.
// Compiled for sm_90a only (grader/lab8_hopper/CMakeLists.txt): wgmma exists nowhere else.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "course/attention.hpp"
#include "course/errors.hpp"
#include "course/gpu.hpp"
#include "course/lab8_hopper.hpp"
#include "flash_h100_kernel.cuh"

// ------------------------------------------------------------------------------------------
// Launching one instantiation
// ------------------------------------------------------------------------------------------

namespace course::lab8::detail {

// The tensor maps of Q, K and V: 3-D [B*H][N][d] (so that a box hanging over the end of a head
// reads zeros, not the next head), boxes of 64 columns x the tile's rows, 128-byte swizzle.
struct TensorMaps {
  CUtensorMap q;  // 64-byte aligned by its own declaration (cuda.h)
  CUtensorMap k;  // 64-byte aligned by its own declaration (cuda.h)
  CUtensorMap v;  // 64-byte aligned by its own declaration (cuda.h)
};

// The maps of one launch, their boxes from the configuration launched: Q's boxes have the query
// tile's rows, K's and V's the key tile's. Step 1 reads with plain loads and gets them zeroed.
template <class Cfg, class Step, class T>
TensorMaps make_maps(const KernelParams& params) {
  TensorMaps maps;
  std::memset(static_cast<void*>(&maps), 0, sizeof maps);
  if constexpr (Step::tma) {
    constexpr bool bf16 = std::is_same_v<T, __nv_bfloat16>;
    sm90::make_tensor_map_bhnd(&maps.q, params.q, bf16, params.batch_heads, params.nq, Cfg::kHeadDim, Cfg::kBlockM);
    sm90::make_tensor_map_bhnd(&maps.k, params.k, bf16, params.batch_heads, params.nk, Cfg::kHeadDim, Cfg::kBlockN);
    sm90::make_tensor_map_bhnd(&maps.v, params.v, bf16, params.batch_heads, params.nk, Cfg::kHeadDim, Cfg::kBlockN);
  }
  return maps;
}

// Steps 1-8. Grid: x = query tiles, y = batch*head: the query tiles of one head are neighbours in
// launch order, so the CTAs running at one time share that head's K and V in L2.
// Step 9: one CTA per SM, or one per item of WorkSchedule where there are fewer.
template <class Cfg, class Step, class T>
void launch_forward(const KernelParams& params, cudaStream_t stream) {
  const TensorMaps maps = make_maps<Cfg, Step, T>(params);
  const auto kernel = flash_h100_forward_kernel<Cfg, Step, T>;
  constexpr int smem_bytes = SmemLayout<Cfg, Step>::kBytes;
  // Above 48 KB a kernel must opt in to its dynamic shared memory.
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes),
             "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  using Schedule = WorkSchedule<Cfg, Step>;
  const int q_blocks = Schedule::query_tiles(params.nq);
  dim3 grid(q_blocks, params.batch_heads);
  if constexpr (Step::persistent) {
    const int items = Schedule::items_per_head(q_blocks, params.causal) * params.batch_heads;
    grid = dim3(std::min(items, multiprocessor_count()));
  }
  kernel<<<grid, kThreadsOf<Cfg, Step>, smem_bytes, stream>>>(maps.q, maps.k, maps.v, params);
  check_cuda(cudaGetLastError(), "flash_h100_forward_kernel<<<...>>>");
}

}  // namespace course::lab8::detail

namespace course::lab8 {
namespace {

using detail::KernelParams;
using detail::TileConfig;

// ------------------------------------------------------------------------------------------
// The shipped tile configurations
// ------------------------------------------------------------------------------------------

// TileConfig<d, query rows per CTA (64 per warpgroup), keys per K/V tile, K/V stages>.
//
// Steps 1-3: 2 warpgroups x 64 rows, 128 keys. S is 64 registers a thread, O d/2, P kBlockN/4:
// within the 255 of a 256-thread CTA at d = 128 (DESIGN.md section 6).
template <int kHeadDim>
using OneRoleConfig = TileConfig<kHeadDim, 128, 128, 2>;

// Steps 4-9 add a producer warpgroup, and the consumers' registers come from setmaxnreg: 240
// each for two consumers, 160 for three (RegisterBudget). Per head dimension and causality:
//   d = 64: three consumers (192 query rows), 128 keys. At d = 64 the softmax is as long as at
//     d = 128 but the products are half as long, so a third warpgroup gives the tensor cores
//     more GEMMs to take while the others are in their softmax (FA3 does the same). 160
//     registers hold S (64), P (32) and O (32) of one warpgroup; 160 or 192 keys spill.
//   d = 128, not causal: 176 keys (S 88 registers): fewer, longer products per row.
//   d = 128, causal: 128 keys: the diagonal tile is masked work, and a longer one wastes more.
// Measured against 128 x 128 everywhere (bench/results/lab8-tiles_2026-12-01_nvidia-h200.md):
// step 7 at N = 4096 is 1.14x at d = 64, 1.08x causal, 1.09x at d = 128 non-causal.
// Steps 4-9 take their tiles from these four lines alone: edit them to try other shapes.
template <int kHeadDim, bool kCausal>
struct WarpSpecializedTiles;
template <> struct WarpSpecializedTiles<64, false> { using type = TileConfig<64, 192, 128, 2>; };
template <> struct WarpSpecializedTiles<64, true> { using type = TileConfig<64, 192, 128, 2>; };
template <> struct WarpSpecializedTiles<128, false> { using type = TileConfig<128, 128, 176, 2>; };
template <> struct WarpSpecializedTiles<128, true> { using type = TileConfig<128, 128, 128, 2>; };

template <int kHeadDim, class Step, bool kCausal>
using ShippedConfig = std::conditional_t<Step::warp_specialized, typename WarpSpecializedTiles<kHeadDim, kCausal>::type,
                                         OneRoleConfig<kHeadDim>>;

// One version at one head dimension: the causal and the non-causal tiles (one instantiation
// where they are the same).
template <int kHeadDim, Version kVersion, class T>
void launch_shipped(const KernelParams& params, cudaStream_t stream) {
  using Step = typename detail::StepOf<kVersion>::type;
  static_assert(Step::kVersion == kVersion, "StepOf maps each Version to its own step");
  if (params.causal)
    detail::launch_forward<ShippedConfig<kHeadDim, Step, true>, Step, T>(params, stream);
  else
    detail::launch_forward<ShippedConfig<kHeadDim, Step, false>, Step, T>(params, stream);
}

template <int kHeadDim, class T>
void dispatch_version(Version version, const KernelParams& params, cudaStream_t stream) {
  switch (version) {
    case Version::wgmma:
      return launch_shipped<kHeadDim, Version::wgmma, T>(params, stream);
    case Version::tma:
      return launch_shipped<kHeadDim, Version::tma, T>(params, stream);
    case Version::pipelined:
      return launch_shipped<kHeadDim, Version::pipelined, T>(params, stream);
    case Version::warp_specialized:
      return launch_shipped<kHeadDim, Version::warp_specialized, T>(params, stream);
    case Version::causal_skip:
      return launch_shipped<kHeadDim, Version::causal_skip, T>(params, stream);
    case Version::intra_wg_overlap:
      return launch_shipped<kHeadDim, Version::intra_wg_overlap, T>(params, stream);
    case Version::pingpong:
      return launch_shipped<kHeadDim, Version::pingpong, T>(params, stream);
    case Version::exp2_poly:
      return launch_shipped<kHeadDim, Version::exp2_poly, T>(params, stream);
    case Version::persistent:
      return launch_shipped<kHeadDim, Version::persistent, T>(params, stream);
  }
  throw BadInput("lab8::flash_attention_forward: unknown Version value");
}

template <class T>
void dispatch_head_dim(int d, Version version, const KernelParams& params, cudaStream_t stream) {
  if (d == 64) return dispatch_version<64, T>(version, params, stream);
  return dispatch_version<128, T>(version, params, stream);
}

}  // namespace

void flash_attention_forward(const void* Q, const void* K, const void* V, void* O, float* lse,
                             DType dtype, const AttentionShape& shape,
                             const ForwardOptions& options) {
  // Input checks (given, course/attention.hpp): null pointers, 16-byte alignment (TMA's rule for
  // a global address, and the 16-byte loads of step 1), dtype, d, B, H, Nq, Nk >= 1, B * H
  // within the grid, the scale (0 means 1/sqrt(d), resolved here); then this lab's own: the GPU.
  // SKELETON: [[maybe_unused]]
  const ForwardCall call = check_forward(kLab8Rules, Q, K, V, O, lse, dtype, shape,
      options.causal, options.scale, options.stream);
  const int cc = compute_capability();
  if (cc != 90)
    throw BadInput(std::string(kLab8Rules.function) +
                   ": this lab needs a compute capability 9.0 GPU (H100/H200: wgmma and TMA are "
                   "sm_90a); this one is " + std::to_string(cc / 10) + "." + std::to_string(cc % 10));

  // BEGIN SOLUTION flash_attention_forward
  //! fill KernelParams from the checked call (its scale is resolved, and scale_log2 = scale *
  //! log2(e) is there too), then dispatch on dtype (bf16 or fp16), d and version (the launch
  //! builds the tensor maps for the tiles it picks); launch on options.stream, do not synchronise
  KernelParams params{};
  params.q = call.q;
  params.k = call.k;
  params.v = call.v;
  params.o = call.o;
  params.lse = call.lse;
  params.nq = call.nq;
  params.nk = call.nk;
  params.causal = call.causal;
  params.scale = call.scale;
  params.scale_log2 = call.scale_log2;
  params.batch_heads = call.batch_heads;

  if (dtype == DType::bf16) {
    dispatch_head_dim<__nv_bfloat16>(shape.d, options.version, params, options.stream);
  } else {
    dispatch_head_dim<__half>(shape.d, options.version, params, options.stream);
  }
  // END SOLUTION
}

}  // namespace course::lab8
