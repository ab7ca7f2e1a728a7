// Lab 4: a tiled FlashAttention forward kernel on CUDA cores (FA1 Algorithm 1, no tensor cores).
//
// Reading guide. Dao et al. 2022, Algorithm 1, loops over K/V blocks outside (line 5) and Q
// blocks inside (line 7), and round-trips O, l and m through HBM on every step (lines 8, 12,
// 13). This kernel swaps the two loops, as FlashAttention-2 does: one CTA owns one query tile
// Q_i for its whole life and walks over every K/V tile. Then O_i, l_i and m_i never leave the
// chip: they live in registers, Q_i is loaded once, and the division by l (line 12) happens
// once, at the end. Every step below names the line of Algorithm 1 it implements.
//
// Work split inside a CTA (128 threads = 4 warps, query tile of kBr = 64 rows):
//   thread t = 16 * ty + tx, ty in [0, 8), tx in [0, 16).
//   * Thread (ty, tx) owns the 8 query rows  r = ty + 8 * i          (i in [0, 8)).
//   * For S = Q K^T it computes those rows against the keys  c = tx + 16 * j  (j < Bc / 16).
//   * For O += P V it owns those rows and the output columns  4 * tx .. 4 * tx + 3  (and the
//     same + 64 at d = 128; 2 * tx and 2 * tx + 1 at d = 32), read from V with float4/float2.
//   The 16 threads that share a row are the 16 lanes of one half-warp, so row maxima and row
//   sums are shuffles, and a warp only ever reads the P rows that it wrote itself: the P
//   hand-over needs __syncwarp, not __syncthreads.
//
// Numerics: fp32 everywhere on chip (bf16 is only a storage format, converted on load). Q is
// multiplied by scale * log2(e) as it is staged, so the scores come out in base-2 units and
// every exponential is one exp2f, which maps onto the hardware's base-2 exponential (MUFU.EX2);
// LSE is converted back to natural log at the end (times ln 2). The two constants are
// course::kLog2eF and course::kLn2F; check_cuda comes from course/gpu.hpp too.
//
// Speed, measured on an H200 (fp32 peak on CUDA cores about 67 TFLOP/s): about 38 TFLOP/s at
// d = 64 and 33 at d = 128, bf16 or fp32 storage alike. The next large factor comes from the
// tensor cores (lab 5).
#include "course/attention.hpp"
#include "course/errors.hpp"
#include "course/gpu.hpp"
#include "course/lab4_cuda.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

namespace course::lab4 {
namespace {

// ---------------------------------------------------------------------------------------------
// Tile configuration (given). Sizes are compile-time so that every per-thread array below is
// indexed by constants after unrolling and stays in registers.

constexpr int kThreads = 128;   // 4 warps per CTA
constexpr int kRowGroups = 8;   // ty
constexpr int kColGroups = 16;  // tx: the 16 lanes that share a query row
constexpr int kBr = 64;         // query rows per CTA (B_r in Algorithm 1)
[[maybe_unused]] constexpr int kRowsPerThread = kBr / kRowGroups;  // 8

template <int D>
struct TileConfig {
  static_assert(D == 32 || D == 64 || D == 128, "head dimension must be 32, 64 or 128");
  // Keys per K/V tile (B_c). At d = 128 a 64-key tile needs 118 KB of shared memory and leaves
  // one CTA per multiprocessor, with nothing to run while that CTA waits for its loads; 32 keys
  // keep two CTAs resident (measured on an H200: 33 against 31 TFLOP/s).
  static constexpr int kBc = (D == 128) ? 32 : 64;
  static constexpr int kKeysPerThread = kBc / kColGroups;      // 4 or 2
  static constexpr int kColsPerThread = D / kColGroups;        // 2, 4 or 8 output columns
  static constexpr int kVec = kColsPerThread < 4 ? kColsPerThread : 4;  // floats per V read
  static constexpr int kChunks = kColsPerThread / kVec;       // V reads per key
  // Row pitches of the shared-memory tiles, in floats. +4 floats (16 bytes) shifts each row by
  // four banks, so 8 consecutive rows read with float4 cover all 32 banks once: the K reads of
  // 16 lanes (16 different keys, same k) and the Q reads of a warp (2 rows) are conflict-free.
  static constexpr int kPitchQK = D + 4;
  static constexpr int kPitchV = D;  // V is read along rows: already conflict-free
  // P is written by scalar stores from two rows per warp (ty and ty+1); a pitch of 16 (mod 32)
  // puts those two rows in opposite halves of the banks.
  static constexpr int kPitchP = kBc + 16;
  static constexpr int kSmemFloats =
      kBr * kPitchQK + kBc * kPitchQK + kBc * kPitchV + kBr * kPitchP;
  static constexpr int kSmemBytes = kSmemFloats * static_cast<int>(sizeof(float));
  // CTAs we want resident per multiprocessor. Shared memory (228 KB) allows 4, 3 and 2;
  // __launch_bounds__ caps the registers per thread so that registers allow as many (at
  // d = 32, 4 CTAs would cap them at 128 and spill, so we settle for 3).
  static constexpr int kMinBlocks = (D == 128) ? 2 : 3;
};

struct KernelParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  int nq;
  int nk;
  int num_q_tiles;
  bool causal;
  float scale_log2;  // softmax scale * log2(e)
};

// ---------------------------------------------------------------------------------------------
// Device helpers (given): tile loads (course::load_rows_fp32, course/gpu.hpp), and stores back.

// Copies rows [0, ROWS) of a row-major [*, D] block in global memory into a shared fp32 tile
// with row pitch `pitch`, multiplying by `mul`. Rows at or past `valid_rows` are filled with
// zeros, so that a partial tile at the end of the sequence never reads out of bounds. (The CTA's
// 128 threads share the loads: course::load_rows_fp32 in course/gpu.hpp.)
template <int ROWS, int D, typename T>
__device__ __forceinline__ void load_tile(float* tile, int pitch, const T* src, int valid_rows,
                                          float mul) {
  load_rows_fp32<ROWS, D, kThreads>(tile, pitch, src, valid_rows, mul);
}

template <int N>
__device__ __forceinline__ void load_smem(const float* src, float* dst) {
  if constexpr (N == 4) {
    const float4 x = *reinterpret_cast<const float4*>(src);
    dst[0] = x.x;
    dst[1] = x.y;
    dst[2] = x.z;
    dst[3] = x.w;
  } else {
    static_assert(N == 2, "vector width 2 or 4");
    const float2 x = *reinterpret_cast<const float2*>(src);
    dst[0] = x.x;
    dst[1] = x.y;
  }
}

template <int N>
__device__ __forceinline__ void store_out(float* dst, const float* x) {
  if constexpr (N == 4) {
    *reinterpret_cast<float4*>(dst) = make_float4(x[0], x[1], x[2], x[3]);
  } else {
    *reinterpret_cast<float2*>(dst) = make_float2(x[0], x[1]);
  }
}

template <int N>
__device__ __forceinline__ void store_out(__nv_bfloat16* dst, const float* x) {
  __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(dst);
#pragma unroll
  for (int u = 0; u < N / 2; ++u) pairs[u] = __floats2bfloat162_rn(x[2 * u], x[2 * u + 1]);
}

// Max and sum over the 16 lanes of a half-warp (the 16 threads that share a query row).
[[maybe_unused]] __device__ __forceinline__ float half_warp_max(float x) {
#pragma unroll
  for (int offset = 8; offset > 0; offset /= 2) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  }
  return x;
}

[[maybe_unused]] __device__ __forceinline__ float half_warp_sum(float x) {
#pragma unroll
  for (int offset = 8; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// ---------------------------------------------------------------------------------------------
// The kernel. Grid: (query tiles, B * H). One CTA = one query tile Q_i of one (batch, head).

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, TileConfig<D>::kMinBlocks)
    flash_forward_kernel(const KernelParams p) {
  using Cfg = TileConfig<D>;
  constexpr int kBc = Cfg::kBc;
  constexpr int R = kRowsPerThread;
  constexpr int KJ = Cfg::kKeysPerThread;
  constexpr int VEC = Cfg::kVec;
  constexpr int CH = Cfg::kChunks;
  constexpr float kNegInf = -INFINITY;

  extern __shared__ float4 smem_raw[];  // float4: 16-byte alignment for vector accesses
  float* const q_s = reinterpret_cast<float*>(smem_raw);
  float* const k_s = q_s + kBr * Cfg::kPitchQK;
  float* const v_s = k_s + kBc * Cfg::kPitchQK;
  float* const p_s = v_s + kBc * Cfg::kPitchV;

  const int tx = static_cast<int>(threadIdx.x) % kColGroups;
  const int ty = static_cast<int>(threadIdx.x) / kColGroups;

  // TODO: load_q_tile (Algorithm 1 lines 2-4 and 8; see the lab README)
  // Lines 3-4: find this CTA's query tile Q_i and its (batch, head), and point at its rows
  // of Q, K, V, O and LSE. With causal masking the last query tiles have the most keys to
  // visit: launch them first (reverse the tile index) so that the long CTAs do not start last
  // and leave the GPU idle at the tail.
  // Bottom-right causal alignment: query i sees keys j <= i + (Nk - Nq). The last key that any
  // row of this tile sees bounds the K/V loop (kv_end): tiles entirely above the diagonal are
  // skipped.
  // Line 2, on chip: m = -inf, l = 0, O = 0 for each of this thread's rows, in registers.
  // Line 8 (once per CTA): stage Q_i in shared memory, pre-multiplied by scale * log2(e)
  // (p.scale_log2), so that the scores come out scaled and in base-2 units.

  // TODO: for_each_kv_tile (Algorithm 1 lines 5 and 15; see the lab README)
  // Line 5: for each K/V tile j, that is kv0 = 0, B_c, 2 B_c, ... below kv_end, do the steps
  // below in order, each inside the loop; line 15 ends the loop.
    // TODO: load_kv_tile (Algorithm 1 line 6; see the lab README)
    // Line 6: load K_j and V_j (rows kv0 .. kv0 + B_c - 1) into shared memory. The barrier
    // before it makes sure that no warp still reads the previous tile; the one after makes
    // the new tile visible to all.

    // TODO: scores (Algorithm 1 line 9; see the lab README)
    // Line 9: S_ij = Q_i K_j^T (already scaled: Q was staged times scale * log2(e)), an
    // R x KJ block of it per thread, 4 values of k at a time (float4 reads from shared
    // memory, R * KJ * 4 fused multiply-adds per R + KJ reads).

    // TODO: mask (the partial last tile and the causal diagonal; see the lab README)
    // Masking, only on the tiles that need it: the last tile when Nk is not a multiple of
    // B_c, and with causal masking the tiles that cross the diagonal. A masked score is -inf,
    // so that exp2 turns it into an exact 0.

    // TODO: row_max_and_sum (Algorithm 1 lines 10-11; see the lab README)
    // Lines 10-11 (online softmax), per row: m_new = max(m, rowmax(S_ij)). We exponentiate
    // directly against m_new (FA2's form of lines 10-12, the same numbers with one rescale
    // fewer): P = exp2(S - m_new), alpha = exp2(m - m_new), l = alpha * l + rowsum(P). A row
    // that has seen no key yet has m_new = -inf; subtracting 0 instead keeps -inf - (-inf) =
    // NaN out, and exp2(-inf) = 0 gives alpha = 0 and P = 0.
    // l is summed per thread over its own keys; the 16 lanes are added once, at the end.

    // TODO: rescale_o (Algorithm 1 line 12, first term; see the lab README)
    // Line 12's rescale of the running output: O = alpha * O, row by row.

    // TODO: p_times_v (Algorithm 1 line 12, second term; see the lab README)
    // Line 12 without the division: O_i += P_ij V_j, once this warp's P rows are complete
    // (__syncwarp: a warp reads only the P rows it wrote). Each thread reads P for its 8 rows
    // (4 keys at a time) and V for its columns, and does R * CH * VEC * 4 multiply-adds.

  // TODO: finalize (Algorithm 1 lines 12-13 and 16; see the lab README)
  // Lines 12-13 and 16, once, after the loop: O = O / l and LSE = m + log(l), back in natural
  // log (LSE = (m + log2(l)) * ln 2). The 16 lanes of a row add their partial l first
  // (half_warp_sum). A row that saw no key has l = 0: write O = 0 and LSE = -inf, never 0/0.
}

// Launches one instantiation (given).
template <typename T, int D>
void launch_flash_kernel(const KernelParams& params, int batch_heads, cudaStream_t stream) {
  using Cfg = TileConfig<D>;
  // Every GPU from sm_80 on gives a block at least 99 KB; these tiles take at most 77.5 KB (d = 128).
  static_assert(Cfg::kSmemBytes <= kSmallestSharedMemoryPerBlock, "the tiles must fit every GPU from sm_80 on");
  // More than 48 KB of dynamic shared memory must be asked for explicitly.
  check_cuda(cudaFuncSetAttribute(flash_forward_kernel<T, D>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes),
             "cudaFuncSetAttribute(flash_forward_kernel, MaxDynamicSharedMemorySize)");
  const dim3 grid(static_cast<unsigned>(params.num_q_tiles), static_cast<unsigned>(batch_heads));
  flash_forward_kernel<T, D><<<grid, kThreads, Cfg::kSmemBytes, stream>>>(params);
  check_cuda(cudaGetLastError(), "flash_forward_kernel<<<...>>> launch");
}

template <typename T>
void launch_for_dtype(const KernelParams& params, int d, int batch_heads, cudaStream_t stream) {
  switch (d) {
    case 32: launch_flash_kernel<T, 32>(params, batch_heads, stream); break;
    case 64: launch_flash_kernel<T, 64>(params, batch_heads, stream); break;
    case 128: launch_flash_kernel<T, 128>(params, batch_heads, stream); break;
    default: throw BadInput("head dimension d = " + std::to_string(d) + " is not supported");
  }
}

}  // namespace

void flash_attention_forward(const void* Q, const void* K, const void* V, void* O, float* lse,
                             DType dtype, const AttentionShape& shape,
                             const ForwardOptions& options) {
  // Input checks (given, course/attention.hpp): every message names the argument and the rule
  // it broke; the scale comes back resolved (0 means 1/sqrt(d)).
  const ForwardCall call = check_forward(kLab4Rules, Q, K, V, O, lse, dtype, shape,
      options.causal, options.scale, options.stream);

  [[maybe_unused]] KernelParams params{};
  params.q = call.q;
  params.k = call.k;
  params.v = call.v;
  params.o = call.o;
  params.lse = call.lse;
  params.nq = call.nq;
  params.nk = call.nk;
  params.num_q_tiles = (shape.Nq + kBr - 1) / kBr;
  params.causal = call.causal;
  params.scale_log2 = call.scale_log2;

  // TODO: flash_attention_forward (see the lab README)
  // Dispatch on dtype to launch_for_dtype<float> or launch_for_dtype<__nv_bfloat16>, which
  // picks the kernel for d and launches it on options.stream (grid: query tiles x B*H).
  throw course::NotImplemented("flash_attention_forward", "labs/lab4_cuda/flash_forward.cu");
}

}  // namespace course::lab4
