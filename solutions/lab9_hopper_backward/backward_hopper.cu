// Lab 9 (beyond): host side of the Hopper backward pass, and its two small kernels. Implements
// include/course/lab9_hopper_backward.hpp. Lecture: lectures/09-hopper-backward.md.
//
// Three kernels on options.stream, as in lab 7 (course/lab7_backward_gpu.hpp):
//   kernel 1 (dot_do_o_kernel): D_i = rowsum(dO_i o O_i) (Algorithm 2, line 4), and the fp32 dQ
//            accumulator and the deterministic mode's turn counters zeroed;
//   kernel 2 (backward_hopper_kernel.cuh: backward_hopper_kernel for step 1,
//            backward_warp_specialized_kernel for step 2, options.hopper_step): dK and dV
//            written, every K/V tile's share of dQ added into the accumulator;
//   kernel 3 (convert_dq_kernel): dQ = tau * accumulator, rounded once to the dtype (step 2's
//            accumulator is read with its column groups permuted back).
// Compiled for sm_90a only (grader/lab9_hopper_backward/CMakeLists.txt): wgmma exists nowhere else.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "backward_hopper_kernel.cuh"
#include "course/attention.hpp"
#include "course/errors.hpp"
#include "course/gpu.hpp"
#include "course/lab9_hopper_backward.hpp"

namespace course::lab9::detail {

// ------------------------------------------------------------------------------------------
// Kernels 1 and 3 (given)
// ------------------------------------------------------------------------------------------

template <class T>
__device__ __forceinline__ float to_float(T x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(x);
  else return __half2float(x);
}

// One warp per query row: D_i = sum_c dO_ic O_ic in fp32, and the row of the dQ accumulator
// zeroed (kernel 2 only adds to it). The first row of each of kernel 2's query tiles also zeroes
// the tile's turn counter (deterministic mode), at every call: counters left at the last call's
// counts would never say "K/V tile 0" again.
template <class T, int D>
__global__ void dot_do_o_kernel(const Params p, std::int64_t rows) {
  const std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= rows) return;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int bh = static_cast<int>(row / p.nq), query = static_cast<int>(row % p.nq);
  if (lane == 0 && query % Tiles<D>::kBr == 0) *dq_turn_counter<Tiles<D>>(p, bh, query) = 0;
  const T* o = static_cast<const T*>(p.o) + row * D;
  const T* dout = static_cast<const T*>(p.dout) + row * D;
  float sum = 0.0f;
  for (int c = lane; c < D; c += 32) {
    sum = fmaf(to_float(dout[c]), to_float(o[c]), sum);
    p.dq_accum[row * D + c] = 0.0f;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (lane == 0) p.delta[row] = sum;
}

// dQ = tau * accumulator, rounded once; 2 elements a thread. kPermuted: step 2's accumulator,
// whose rows hold their 8-column groups permuted (dq_accum_column).
template <class T, bool kPermuted>
__global__ void convert_dq_kernel(const float* accum, T* dq, std::int64_t pairs, int d, float scale) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= pairs) return;
  std::int64_t at = 2 * i;
  if constexpr (kPermuted) {
    const std::int64_t row = at / d;
    at = row * d + dq_accum_column(row, static_cast<int>(at % d));
  }
  const float2 x = *reinterpret_cast<const float2*>(accum + at);
  reinterpret_cast<uint32_t*>(dq)[i] = pack_pair<T>(scale * x.x, scale * x.y);
}

// ------------------------------------------------------------------------------------------
// Launches (given)
// ------------------------------------------------------------------------------------------

// Kernel 2 of a step, with the deterministic mode compiled in or not (the default), launched.
template <int D, class T, bool kDeterministic>
void launch_kernel_2(const Params& p, const CUtensorMap& map_q, const CUtensorMap& map_k, const CUtensorMap& map_v,
                     const CUtensorMap& map_do, int batch_heads, bool warp_specialized, cudaStream_t stream) {
  const auto kernel = warp_specialized ? backward_warp_specialized_kernel<D, T, kDeterministic>
                                       : backward_hopper_kernel<D, T, kDeterministic>;
  const int threads = warp_specialized ? WarpSpecializedTiles<D>::kThreads : Tiles<D>::kThreads;
  const int bytes = warp_specialized ? WarpSpecializedTiles<D>::kAllocBytes : Tiles<D>::kAllocBytes;
  require_shared_memory(bytes, "lab 9's kernel 2");
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
             "cudaFuncSetAttribute(kernel 2, MaxDynamicSharedMemorySize)");
  const dim3 grid(static_cast<unsigned>((p.nk + Tiles<D>::kBc - 1) / Tiles<D>::kBc), static_cast<unsigned>(batch_heads));
  kernel<<<grid, threads, bytes, stream>>>(map_q, map_k, map_v, map_do, p);
  check_cuda(cudaGetLastError(), "lab 9 kernel 2 <<<...>>> launch");
}

template <int D, class T>
void launch_all(const Params& p, const void* q, const void* k, const void* v, void* dq, int batch_heads,
                bool deterministic, lab7::HopperBackwardStep step, cudaStream_t stream) {
  using Cfg = Tiles<D>;
  const std::int64_t q_rows = static_cast<std::int64_t>(batch_heads) * p.nq;

  constexpr int kRowsPerBlock = 8;
  dot_do_o_kernel<T, D><<<static_cast<unsigned>((q_rows + kRowsPerBlock - 1) / kRowsPerBlock), 32 * kRowsPerBlock,
                          0, stream>>>(p, q_rows);
  check_cuda(cudaGetLastError(), "dot_do_o_kernel<<<...>>> launch");

  // Tensor maps [B*H][N][d], boxes of 64 columns x the tile's rows, 128-byte swizzle.
  constexpr bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  CUtensorMap map_q, map_k, map_v, map_do;
  std::memset(&map_q, 0, sizeof map_q);
  std::memset(&map_k, 0, sizeof map_k);
  std::memset(&map_v, 0, sizeof map_v);
  std::memset(&map_do, 0, sizeof map_do);
  sm90::make_tensor_map_bhnd(&map_q, q, bf16, batch_heads, p.nq, D, Cfg::kBr);
  sm90::make_tensor_map_bhnd(&map_do, p.dout, bf16, batch_heads, p.nq, D, Cfg::kBr);
  sm90::make_tensor_map_bhnd(&map_k, k, bf16, batch_heads, p.nk, D, Cfg::kBc);
  sm90::make_tensor_map_bhnd(&map_v, v, bf16, batch_heads, p.nk, D, Cfg::kBc);

  // Step 2's kernel 2 stores the dQ accumulator permuted, and kernel 3 reads it so.
  const bool warp_specialized = step == lab7::HopperBackwardStep::warp_specialized;
  if (deterministic)
    launch_kernel_2<D, T, true>(p, map_q, map_k, map_v, map_do, batch_heads, warp_specialized, stream);
  else
    launch_kernel_2<D, T, false>(p, map_q, map_k, map_v, map_do, batch_heads, warp_specialized, stream);

  const std::int64_t pairs = q_rows * D / 2;
  const auto convert = warp_specialized ? convert_dq_kernel<T, true> : convert_dq_kernel<T, false>;
  convert<<<static_cast<unsigned>((pairs + 255) / 256), 256, 0, stream>>>(p.dq_accum, static_cast<T*>(dq), pairs, D,
                                                                          p.scale);
  check_cuda(cudaGetLastError(), "convert_dq_kernel<<<...>>> launch");
}

template <class T>
void launch_for_d(const Params& p, const void* q, const void* k, const void* v, void* dq, int d, int batch_heads,
                  bool deterministic, lab7::HopperBackwardStep step, cudaStream_t stream) {
  if (d == 64) launch_all<64, T>(p, q, k, v, dq, batch_heads, deterministic, step, stream);
  else launch_all<128, T>(p, q, k, v, dq, batch_heads, deterministic, step, stream);
}

}  // namespace course::lab9::detail

namespace course::lab9 {

std::size_t backward_workspace_bytes(const AttentionShape& shape) {
  return course::backward_workspace_bytes(kLab9Rules, shape);
}

void flash_attention_backward(const void* Q, const void* K, const void* V, const void* O, const void* dO,
                              const float* lse, void* dQ, void* dK, void* dV, DType dtype,
                              const AttentionShape& shape, const BackwardGpuOptions& options) {
  // Input checks (given, course/attention.hpp): bf16 or fp16, d = 64 or 128, the shapes, the
  // pointers, the scale and the workspace, with lab 9's rules; then the kernel choice and the GPU.
  if (options.kernel == lab7::BackwardKernel::cuda_cores)
    throw BadInput(std::string(kLab9Rules.tensor_cores.function) +
                   ": the Hopper backward runs on tensor cores only (BackwardKernel::automatic or tensor_cores)");
  if (options.hopper_step != lab7::HopperBackwardStep::wgmma &&
      options.hopper_step != lab7::HopperBackwardStep::warp_specialized)
    throw BadInput(std::string(kLab9Rules.tensor_cores.function) + ": options.hopper_step is not one of lab 9's steps");
  // SKELETON: [[maybe_unused]]
  const BackwardCall call = check_backward(kLab9Rules, /*tensor_cores=*/true, Q, K, V, O, dO, lse, dQ, dK, dV, dtype,
                                           shape, options.causal, options.scale,
                                           {options.workspace, options.workspace_bytes}, options.stream,
                                           options.deterministic);
  if (compute_capability() != 90)
    throw BadInput(std::string(kLab9Rules.tensor_cores.function) +
                   ": this lab needs a compute capability 9.0 GPU (H100/H200: wgmma and TMA are sm_90a "
                   "instructions)");

  // BEGIN SOLUTION flash_attention_backward
  //! fill detail::Params from the checked call (its scale is resolved; scale_log2 = scale *
  //! log2(e) is there too), then detail::launch_for_d<__nv_bfloat16> or <__half> (the launches
  //! above are given: kernel 1, the tensor maps, kernel 2, kernel 3) with call.deterministic and
  //! options.hopper_step, on options.stream
  detail::Params p{};
  p.o = call.o;
  p.dout = call.dout;
  p.lse = call.lse;
  p.dk = call.dk;
  p.dv = call.dv;
  p.dq_accum = call.dq_accum;
  p.delta = call.delta;
  p.dq_turns = call.dq_turns;
  p.nq = call.nq;
  p.nk = call.nk;
  p.causal = call.causal;
  p.scale = call.scale;
  p.scale_log2 = call.scale_log2;
  if (dtype == DType::bf16)
    detail::launch_for_d<__nv_bfloat16>(p, call.q, call.k, call.v, dQ, call.d, call.batch_heads, call.deterministic,
                                        options.hopper_step, options.stream);
  else
    detail::launch_for_d<__half>(p, call.q, call.k, call.v, dQ, call.d, call.batch_heads, call.deterministic,
                                 options.hopper_step, options.stream);
  // END SOLUTION
}

}  // namespace course::lab9
