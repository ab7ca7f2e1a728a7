// Lab 8 (beyond): host side of the Hopper FlashAttention forward kernel.
// The kernel and its device functions are in flash_h100_kernel.cuh (and the headers it
// includes); this file checks the input, builds the TMA tensor maps, picks the tile
// configuration and launches one instantiation per dtype, head dimension and version.
// Compiled for sm_90a only (grader/lab8_hopper/CMakeLists.txt): wgmma exists nowhere else.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

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

// Grid: x = query tiles, y = batch*head: the query tiles of one head are neighbours in launch
// order, so the CTAs running at one time share that head's K and V in L2.
template <class Cfg, class Step, class T>
void launch_forward(const KernelParams& params, const TensorMaps& maps, int batch_heads,
                    cudaStream_t stream) {
  const auto kernel = flash_h100_forward_kernel<Cfg, Step, T>;
  constexpr int smem_bytes = SmemLayout<Cfg, Step>::kBytes;
  // Above 48 KB a kernel must opt in to its dynamic shared memory.
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes),
             "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  const dim3 grid((params.nq + Cfg::kBlockM - 1) / Cfg::kBlockM, batch_heads);
  kernel<<<grid, kThreadsOf<Cfg, Step>, smem_bytes, stream>>>(maps.q, maps.k, maps.v, params);
  check_cuda(cudaGetLastError(), "flash_h100_forward_kernel<<<...>>>");
}

}  // namespace course::lab8::detail

namespace course::lab8 {
namespace {

using detail::KernelParams;
using detail::TensorMaps;
using detail::TileConfig;

// ------------------------------------------------------------------------------------------
// The shipped tile configurations
// ------------------------------------------------------------------------------------------

// TileConfig<d, query rows per CTA (64 per warpgroup), keys per K/V tile, K/V stages>.
// 2 warpgroups x 64 rows, 128 keys: S is 64 registers a thread, O d/2, P kBlockN/4 -- within
// the 255 of a 256-thread CTA at d = 128 (DESIGN.md section 6). Step 4 adds a producer
// warpgroup to the same tiles (384 threads; consumers at 240 registers after setmaxnreg).
// Starting points, to be measured on the device (steps 4-6 may change the shapes).
using Cfg64 = TileConfig<64, 128, 128, 2>;
using Cfg128 = TileConfig<128, 128, 128, 2>;

template <int kHeadDim>
using ShippedConfig = std::conditional_t<kHeadDim == 128, Cfg128, Cfg64>;

template <int kHeadDim, Version kVersion, class T>
void launch_shipped(const KernelParams& params, const TensorMaps& maps, int batch_heads,
                    cudaStream_t stream) {
  using Step = typename detail::StepOf<kVersion>::type;
  static_assert(Step::kVersion == kVersion, "StepOf maps each Version to its own step");
  detail::launch_forward<ShippedConfig<kHeadDim>, Step, T>(params, maps, batch_heads, stream);
}

template <int kHeadDim, class T>
void dispatch_version(Version version, const KernelParams& params, const TensorMaps& maps,
                      int batch_heads, cudaStream_t stream) {
  switch (version) {
    case Version::wgmma:
      return launch_shipped<kHeadDim, Version::wgmma, T>(params, maps, batch_heads, stream);
    case Version::tma:
      return launch_shipped<kHeadDim, Version::tma, T>(params, maps, batch_heads, stream);
    case Version::pipelined:
      return launch_shipped<kHeadDim, Version::pipelined, T>(params, maps, batch_heads, stream);
    case Version::warp_specialized:
      return launch_shipped<kHeadDim, Version::warp_specialized, T>(params, maps, batch_heads, stream);
    case Version::causal_skip:
      return launch_shipped<kHeadDim, Version::causal_skip, T>(params, maps, batch_heads, stream);
    case Version::intra_wg_overlap:
      return launch_shipped<kHeadDim, Version::intra_wg_overlap, T>(params, maps, batch_heads, stream);
    case Version::pingpong:
      return launch_shipped<kHeadDim, Version::pingpong, T>(params, maps, batch_heads, stream);
  }
  throw BadInput("lab8::flash_attention_forward: unknown Version value");
}

template <class T>
void dispatch_head_dim(int d, Version version, const KernelParams& params, const TensorMaps& maps,
                       int batch_heads, cudaStream_t stream) {
  if (d == 64) return dispatch_version<64, T>(version, params, maps, batch_heads, stream);
  return dispatch_version<128, T>(version, params, maps, batch_heads, stream);
}

[[maybe_unused]] bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// The compute capability of the current device, as major * 10 + minor.
[[maybe_unused]] int current_compute_capability() {
  int device = 0, major = 0, minor = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
             "cudaDeviceGetAttribute(ComputeCapabilityMajor)");
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
             "cudaDeviceGetAttribute(ComputeCapabilityMinor)");
  return 10 * major + minor;
}

// The maps of one call (versions 2-4; version 1 passes them zeroed and never reads them).
// Q's boxes have the query tile's rows, K's and V's the key tile's.
[[maybe_unused]] TensorMaps make_maps(const void* Q, const void* K, const void* V, bool bf16, const AttentionShape& shape) {
  TensorMaps maps;
  const uint64_t heads = uint64_t(shape.B) * shape.H;
  const uint32_t box_m = shape.d == 128 ? Cfg128::kBlockM : Cfg64::kBlockM;
  const uint32_t box_n = shape.d == 128 ? Cfg128::kBlockN : Cfg64::kBlockN;
  sm90::make_tensor_map_bhnd(&maps.q, Q, bf16, heads, shape.Nq, shape.d, box_m);
  sm90::make_tensor_map_bhnd(&maps.k, K, bf16, heads, shape.Nk, shape.d, box_n);
  sm90::make_tensor_map_bhnd(&maps.v, V, bf16, heads, shape.Nk, shape.d, box_n);
  return maps;
}

}  // namespace

void flash_attention_forward(const void* Q, const void* K, const void* V, void* O, float* lse,
                             DType dtype, const AttentionShape& shape,
                             const ForwardOptions& options) {
  // TODO: flash_attention_forward (see the lab README)
  // reject bad input with course::BadInput: null pointers, pointers not 16-byte aligned (TMA's
  // rule for a global address, and the 16-byte loads of version 1), dtype not bf16/fp16, d not
  // 64/128, B, H, Nq, Nk < 1, B*H over the grid's y limit, a scale that is negative or not
  // finite (0 means 1/sqrt(d)), a GPU that is not compute capability 9.0
  // fill KernelParams (scale_log2 = scale * log2(e)); versions 2-4 need the tensor maps
  // dispatch on dtype, d and version; launch on options.stream, do not synchronise
  throw course::NotImplemented("flash_attention_forward", "labs/lab8_hopper/flash_h100.cu");
}

}  // namespace course::lab8
