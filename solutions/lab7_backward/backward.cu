// Lab 7, part 2: the attention backward pass on CUDA cores (FA2 Algorithm 2). Implements
// include/course/lab7_backward_gpu.hpp. Lecture: lectures/07-backward-pass.md.
//
// Reading guide. The forward saved O and, per query row, LSE = log sum_j exp(S_ij). With them the
// backward rebuilds every probability with one exponential, P_ij = exp(S_ij - LSE_i), and never
// needs the N x N matrix. Three kernels run on options.stream:
//   kernel 1 (dot_do_o_kernel), one warp per query row: D_i = rowsum(dO_i o O_i) (Algorithm 2,
//            line 4: the softmax gradient's correction term; computing it from dO and O costs
//            O(N d) instead of O(N^2)), and zeroes the fp32 dQ accumulator;
//   kernel 2 (backward_kernel), one CTA per K/V tile j of one (batch, head): loads K_j and V_j
//            once (line 6), keeps dK_j and dV_j in registers (line 7), and walks over the query
//            tiles i that can see the tile (line 8), recomputing S, P, dP and dS there (lines
//            9-14). dV_j and dK_j are sums over i and stay on chip (lines 12 and 16); dQ_i is a
//            sum over j, so every CTA adds its share into the fp32 accumulator with atomic adds
//            (line 15). At the end dK_j and dV_j are written once (line 18);
//   kernel 3 (convert_dq_kernel): dQ = scale * accumulator, rounded once to the dtype.
// The atomics make dQ's summation order depend on scheduling: dQ is correct but not bitwise
// reproducible from run to run (the lecture discusses the deterministic alternative).
// Line numbers are those of lecture 7's table of FA2 Algorithm 2.
//
// Work split inside a kernel-2 CTA (256 threads = 8 warps; tiles of kBr = 64 query rows and
// kBc = 64 keys, so kPer = 4; on GPUs with less shared memory 32 and 32, kPer = 2: see
// TileConfig): thread t = 16 * ty + tx, ty and tx in [0, 16).
//   * Scores S = Q_i K_j^T and dP = dO_i V_j^T: thread (ty, tx) computes rows ty + 16 a and
//     keys tx + 16 b (a, b in [0, kPer)), kPer^2 entries of each, and writes P and dS to shared memory.
//   * dV_j += P^T dO_i and dK_j += dS^T Q_i: the thread owns keys ty + 16 a and the columns
//     4 tx .. 4 tx + 3 (and the same + 64 at d = 128), 4 kPer or 8 kPer accumulators of each.
//   * dQ_i += dS K_j: the thread owns rows ty + 16 a and the same columns, and adds its 4 kPer or
//     8 kPer values to the accumulator 4 at a time (atomic_add_4: one 4-wide atomic on sm_90, four
//     scalar ones before).
//
// Numerics: fp32 on chip; bf16 is a storage format converted on load. The scores are formed in
// base 2 (times scale * log2(e)) and LSE is converted to base 2 once per row, so every
// probability is one exp2f. dQ, dK and dV are rounded to the dtype once, at the end.
//
// Conventions: a query row that sees no key has LSE = -inf; the row's base-2 "LSE" is set to
// +inf in shared memory instead, so that its P = exp2(S - inf) = 0 and it adds nothing. The same
// marker turns off the rows past the end of Q, and there it is essential: their scores are 0 and
// not masked, so with LSE = -inf they would get P = exp2(0 + inf) = inf, and inf * 0 = NaN.
#include "backward_gpu.cuh"
#include "course/attention.hpp"
#include "course/errors.hpp"
#include "course/lab7_backward_gpu.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace course::lab7 {
namespace {

// ---------------------------------------------------------------------------------------------
// Configuration (given).

constexpr int kThreads = 256;  // 8 warps per CTA of kernel 2
constexpr int kSide = 16;      // ty and tx both run over 16

// The tiles of kernel 2 are kBlock x kBlock: kBr = 64 query rows and kBc = 64 keys where the
// GPU's shared memory per block allows (102.5 KB at d = 64, 166.5 KB at d = 128: an H100 or
// H200, and an A100 at d = 64), 32 x 32 elsewhere (43 KB and 75 KB: an RTX 30 or 40, an L4,
// an A100 at d = 128). Smaller tiles load Q_i and dO_i twice as often per key and add into dQ
// twice as often; the algorithm is the same.
template <int D, int kBlock>
struct TileConfig {
  static_assert(D == 64 || D == 128, "head dimension must be 64 or 128");
  static_assert(kBlock == 64 || kBlock == 32, "tiles of 64 or 32 rows and keys");
  static constexpr int kBr = kBlock;  // query rows per tile (B_r)
  static constexpr int kBc = kBlock;  // keys per tile (B_c)
  static constexpr int kPer = kBlock / kSide;  // rows (or keys) per thread: 4 or 2
  static constexpr int kChunks = D / (4 * kSide);  // float4 column chunks per thread: 1 or 2
  // Row pitches in floats. +4 floats shifts consecutive rows by four banks, so the float4 reads
  // of 16 different rows (the rows of K_j and V_j, the B operands of S and dP) spread over all
  // 32 banks; kPitchP keeps the two rows of dS that a warp reads one float at a time in
  // different banks.
  static constexpr int kPitch = D + 4;
  static constexpr int kPitchP = kBc + 4;
  // Q_i, dO_i, K_j, V_j, P and dS as fp32 tiles, and two floats per query row (LSE, D).
  static constexpr int kSmemFloats = 4 * kBr * kPitch + 2 * kBr * kPitchP + 2 * kBr;
  static constexpr int kSmemBytes = kSmemFloats * static_cast<int>(sizeof(float));
};

using detail::Params;  // backward_gpu.cuh: shared with the tensor-core kernel (part 3)

// ---------------------------------------------------------------------------------------------
// Device helpers (given).

// Copies rows [0, kRows) of a row-major [*, D] block into a shared fp32 tile with row pitch
// `pitch`. Rows at or past `valid_rows` are zeros: a partial tile never reads out of bounds.
// (The CTA's 256 threads share the loads: course::load_rows_fp32 in course/gpu.hpp.)
template <int kRows, int D, typename T>
__device__ __forceinline__ void load_tile(float* tile, int pitch, const T* src, int valid_rows) {
  load_rows_fp32<kRows, D, kThreads>(tile, pitch, src, valid_rows);
}

__device__ __forceinline__ float4 load4(const float* src) { return *reinterpret_cast<const float4*>(src); }

// SKELETON: [[maybe_unused]]
__device__ __forceinline__ void store4(float* dst, const float* x) {
  *reinterpret_cast<float4*>(dst) = make_float4(x[0], x[1], x[2], x[3]);
}
// SKELETON: [[maybe_unused]]
__device__ __forceinline__ void store4(__nv_bfloat16* dst, const float* x) {
  __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(dst);
  pairs[0] = __floats2bfloat162_rn(x[0], x[1]);
  pairs[1] = __floats2bfloat162_rn(x[2], x[3]);
}
// SKELETON: [[maybe_unused]]
__device__ __forceinline__ void store4(__half* dst, const float* x) {
  __half2* pairs = reinterpret_cast<__half2*>(dst);
  pairs[0] = __floats2half2_rn(x[0], x[1]);
  pairs[1] = __floats2half2_rn(x[2], x[3]);
}

// SKELETON: [[maybe_unused]]
__device__ __forceinline__ float to_float(float x) { return x; }
// SKELETON: [[maybe_unused]]
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
// SKELETON: [[maybe_unused]]
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

// SKELETON: [[maybe_unused]]
__device__ __forceinline__ void load_row4(const float* src, float* dst) {
  const float4 x = load4(src);
  dst[0] = x.x;
  dst[1] = x.y;
  dst[2] = x.z;
  dst[3] = x.w;
}

// out[a][b] = dot(A row ty + 16 a, B row tx + 16 b) over D columns, for a, b in [0, kPer): a
// kPer x kPer block of A B^T, 4 columns at a time, so that (with kPer = 4) 8 float4 reads from
// shared memory feed 64 multiply-adds. (S = Q_i K_j^T with A = Q_i, B = K_j; dP = dO_i V_j^T
// with A = dO_i, B = V_j.) kPer comes from the size of `out`.
template <int D, int kPer>
__device__ __forceinline__ void products_block(const float* A, const float* B, int ty, int tx,
                                               float (&out)[kPer][kPer]) {
  constexpr int kPitch = D + 4;  // TileConfig's row pitch
#pragma unroll
  for (int a = 0; a < kPer; ++a) {
#pragma unroll
    for (int b = 0; b < kPer; ++b) out[a][b] = 0.0f;
  }
#pragma unroll 4
  for (int k = 0; k < D; k += 4) {
    float av[kPer][4], bv[kPer][4];
#pragma unroll
    for (int a = 0; a < kPer; ++a) load_row4(A + (ty + kSide * a) * kPitch + k, av[a]);
#pragma unroll
    for (int b = 0; b < kPer; ++b) load_row4(B + (tx + kSide * b) * kPitch + k, bv[b]);
#pragma unroll
    for (int a = 0; a < kPer; ++a) {
#pragma unroll
      for (int b = 0; b < kPer; ++b) {
#pragma unroll
        for (int u = 0; u < 4; ++u) out[a][b] = fmaf(av[a][u], bv[b][u], out[a][b]);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Kernel 1: D_i = rowsum(dO_i o O_i), and dQ's accumulator zeroed. One warp per query row.

template <typename T, int D>
__global__ void dot_do_o_kernel(const Params p, std::int64_t rows) {
  const std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= rows) return;
  // BEGIN SOLUTION delta device Algorithm 2 line 4
  //! Line 4: D_i = sum_c dO_ic * O_ic, read in the dtype and summed in fp32 (each lane of the
  //! warp takes columns lane, lane + 32, ...; then a warp sum). Also zero this row of
  //! p.dq_accum: kernel 2 only ever adds to it.
  const int lane = static_cast<int>(threadIdx.x) % 32;
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
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Kernel 2. Grid: (K/V tiles, B * H). One CTA = one K/V tile j of one (batch, head).

template <typename T, int D, int kBlock>
__global__ void __launch_bounds__(kThreads) backward_kernel(const Params p) {
  using Cfg = TileConfig<D, kBlock>;
  constexpr int kBr = Cfg::kBr;
  constexpr int kBc = Cfg::kBc;
  constexpr int kPer = Cfg::kPer;
  constexpr int CH = Cfg::kChunks;
  constexpr int kPitch = Cfg::kPitch;
  constexpr int kPitchP = Cfg::kPitchP;

  extern __shared__ float4 smem_raw[];  // float4: 16-byte alignment for vector accesses
  float* const q_s = reinterpret_cast<float*>(smem_raw);
  float* const do_s = q_s + kBr * kPitch;
  float* const k_s = do_s + kBr * kPitch;
  float* const v_s = k_s + kBc * kPitch;
  float* const p_s = v_s + kBc * kPitch;   // P_ij   [kBr, kBc]
  float* const ds_s = p_s + kBr * kPitchP;  // dS_ij  [kBr, kBc]
  float* const lse_s = ds_s + kBr * kPitchP;  // LSE_i in base 2, +inf where the row adds nothing
  float* const delta_s = lse_s + kBr;         // D_i

  const int tx = static_cast<int>(threadIdx.x) % kSide;
  const int ty = static_cast<int>(threadIdx.x) / kSide;
  const int bh = static_cast<int>(blockIdx.y);
  const int kv0 = static_cast<int>(blockIdx.x) * kBc;
  const int kv_rows = min(kBc, p.nk - kv0);
  const std::int64_t q_head = static_cast<std::int64_t>(bh) * p.nq;  // first row of this head
  const std::int64_t k_head = static_cast<std::int64_t>(bh) * p.nk;
  const int diag = p.nk - p.nq;  // bottom-right causal: query r sees key c iff c <= r + diag

  // BEGIN SOLUTION load_kv device Algorithm 2 lines 6-7
  //! Line 6: load K_j and V_j (rows kv0 .. kv0 + kBc - 1 of this head) into k_s and v_s, once.
  //! Line 7: dK_j = dV_j = 0, in registers: dk[a][c] and dv[a][c] for this thread's keys
  //! ty + 16 a and columns 4 tx + 64 ch + u (c = 4 ch + u).
  load_tile<kBc, D>(k_s, kPitch, static_cast<const T*>(p.k) + (k_head + kv0) * D, kv_rows);
  load_tile<kBc, D>(v_s, kPitch, static_cast<const T*>(p.v) + (k_head + kv0) * D, kv_rows);
  float dk[kPer][4 * CH], dv[kPer][4 * CH];
#pragma unroll
  for (int a = 0; a < kPer; ++a) {
#pragma unroll
    for (int c = 0; c < 4 * CH; ++c) dk[a][c] = dv[a][c] = 0.0f;
  }
  // END SOLUTION

  // BEGIN SOLUTION query_loop device Algorithm 2 line 8 and causal tile skipping
  //! Line 8: for each query tile i that can see this K/V tile. With causal masking, query r sees
  //! key kv0 only if r >= kv0 - diag: the tiles before the one holding that row see none of
  //! these keys and are skipped (q_begin). Each pass through the loop starts with a barrier (no
  //! warp may still read the previous tile) and ends with the steps below.
  const int q_begin = p.causal ? max(0, kv0 - diag) / kBr * kBr : 0;
  for (int q0 = q_begin; q0 < p.nq; q0 += kBr) {
    __syncthreads();
    // END SOLUTION

    // BEGIN SOLUTION load_q_do device Algorithm 2 line 9
    //! Line 9: load Q_i and dO_i into q_s and do_s, and for each row its LSE (in base 2:
    //! LSE * log2(e)) and D_i into lse_s and delta_s. A row past the end of Q, or whose
    //! LSE = -inf (it sees no key), gets +inf in lse_s: its P row becomes exp2(S - inf) = 0.
    const int q_rows = min(kBr, p.nq - q0);
    load_tile<kBr, D>(q_s, kPitch, static_cast<const T*>(p.q) + (q_head + q0) * D, q_rows);
    load_tile<kBr, D>(do_s, kPitch, static_cast<const T*>(p.dout) + (q_head + q0) * D, q_rows);
    if (threadIdx.x < kBr) {
      const int r = static_cast<int>(threadIdx.x);
      const float lse = r < q_rows ? p.lse[q_head + q0 + r] : -INFINITY;
      lse_s[r] = lse == -INFINITY ? INFINITY : lse * kLog2eF;
      delta_s[r] = r < q_rows ? p.delta[q_head + q0 + r] : 0.0f;
    }
    __syncthreads();
    // END SOLUTION

    // BEGIN SOLUTION p_and_ds device Algorithm 2 lines 10-11, 13 and 14
    //! Lines 10-11: S_ij = tau Q_i K_j^T (here in base 2: times p.scale_log2) and P_ij =
    //! exp2(S_ij - LSE_i), with masked scores (keys past Nk; with causal, key > row + diag)
    //! giving P = 0. Line 13: dP_ij = dO_i V_j^T. Line 14: dS_ij = P_ij (dP_ij - D_i).
    //! Thread (ty, tx) does rows ty + 16 a and keys tx + 16 b as a kPer x kPer block
    //! (products_block),
    //! and writes P and dS to p_s and ds_s for the products below.
    float s[kPer][kPer], dp[kPer][kPer];
    products_block<D>(q_s, k_s, ty, tx, s);
    products_block<D>(do_s, v_s, ty, tx, dp);
#pragma unroll
    for (int a = 0; a < kPer; ++a) {
      const int r = ty + kSide * a;
#pragma unroll
      for (int b = 0; b < kPer; ++b) {
        const int c = tx + kSide * b;
        const int key = kv0 + c;
        const bool visible = key < p.nk && (!p.causal || key <= q0 + r + diag);
        const float pij = visible ? exp2f(s[a][b] * p.scale_log2 - lse_s[r]) : 0.0f;
        p_s[r * kPitchP + c] = pij;
        ds_s[r * kPitchP + c] = pij * (dp[a][b] - delta_s[r]);
      }
    }
    __syncthreads();
    // END SOLUTION

    // BEGIN SOLUTION dv_dk device Algorithm 2 lines 12 and 16
    //! Line 12: dV_j += P_ij^T dO_i. Line 16 (without tau, applied once at the end):
    //! dK_j += dS_ij^T Q_i. For each query row r of the tile: this thread's keys ty + 16 a read
    //! P and dS at (r, key), its columns read dO and Q at (r, column).
    for (int r = 0; r < kBr; ++r) {
      float dor[4 * CH], qr[4 * CH];
#pragma unroll
      for (int ch = 0; ch < CH; ++ch) {
        const int col = 4 * tx + 4 * kSide * ch;
        load_row4(do_s + r * kPitch + col, dor + 4 * ch);
        load_row4(q_s + r * kPitch + col, qr + 4 * ch);
      }
#pragma unroll
      for (int a = 0; a < kPer; ++a) {
        const int c = ty + kSide * a;
        const float pij = p_s[r * kPitchP + c], dsij = ds_s[r * kPitchP + c];
#pragma unroll
        for (int u = 0; u < 4 * CH; ++u) {
          dv[a][u] = fmaf(pij, dor[u], dv[a][u]);
          dk[a][u] = fmaf(dsij, qr[u], dk[a][u]);
        }
      }
    }
    // END SOLUTION

    // BEGIN SOLUTION dq device Algorithm 2 line 15
    //! Line 15: dQ_i += dS_ij K_j (tau is applied by kernel 3), for this thread's rows
    //! ty + 16 a and columns: a sum over the tile's keys, then one atomic_add_4 per row and 4
    //! columns into p.dq_accum (course/gpu.hpp's atomic_add_4: one float4 atomicAdd on sm_90 built
    //! with CUDA 12.1 or later, four float ones otherwise, where the float4 overload does not
    //! exist; the CTAs of the other K/V tiles add their shares to the same rows). Rows past the
    //! end of Q add nothing.
    float dq[kPer][4 * CH] = {};
    for (int c = 0; c < kBc; ++c) {
      float kc[4 * CH], ds[kPer];
#pragma unroll
      for (int ch = 0; ch < CH; ++ch) load_row4(k_s + c * kPitch + 4 * tx + 4 * kSide * ch, kc + 4 * ch);
#pragma unroll
      for (int a = 0; a < kPer; ++a) ds[a] = ds_s[(ty + kSide * a) * kPitchP + c];
#pragma unroll
      for (int a = 0; a < kPer; ++a) {
#pragma unroll
        for (int u = 0; u < 4 * CH; ++u) dq[a][u] = fmaf(ds[a], kc[u], dq[a][u]);
      }
    }
#pragma unroll
    for (int a = 0; a < kPer; ++a) {
      const int r = ty + kSide * a;
      if (r >= q_rows) continue;
#pragma unroll
      for (int ch = 0; ch < CH; ++ch) {
        float* dst = p.dq_accum + (q_head + q0 + r) * D + 4 * tx + 4 * kSide * ch;
        const float* x = dq[a] + 4 * ch;
        atomic_add_4(dst, make_float4(x[0], x[1], x[2], x[3]));
      }
    }
  }  // line 17: end for (query tiles)
  // END SOLUTION

  // BEGIN SOLUTION write_dk_dv device Algorithm 2 line 18
  //! Line 18: write dK_j = tau * dk and dV_j = dv to global memory, rounded to T once, for the
  //! keys of this tile that exist (key < Nk). Keys that no query saw have zeros: write them too.
#pragma unroll
  for (int a = 0; a < kPer; ++a) {
    const int c = ty + kSide * a;
    if (c >= kv_rows) break;
    T* dk_row = static_cast<T*>(p.dk) + (k_head + kv0 + c) * D;
    T* dv_row = static_cast<T*>(p.dv) + (k_head + kv0 + c) * D;
#pragma unroll
    for (int ch = 0; ch < CH; ++ch) {
      const int col = 4 * tx + 4 * kSide * ch;
      float scaled[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) scaled[u] = p.scale * dk[a][4 * ch + u];
      store4(dk_row + col, scaled);
      store4(dv_row + col, dv[a] + 4 * ch);
    }
  }
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Kernel 3: dQ = tau * accumulator, rounded once to T. Four columns per thread.

template <typename T>
__global__ void convert_dq_kernel(const float* accum, T* dq, std::int64_t quads, float scale) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= quads) return;
  const float4 x = load4(accum + 4 * i);
  const float out[4] = {scale * x.x, scale * x.y, scale * x.z, scale * x.w};
  store4(dq + 4 * i, out);
}

// ---------------------------------------------------------------------------------------------
// Launches (given).

template <typename T, int D, int kBlock>
void launch_backward_kernel(const Params& p, const AttentionShape& shape, cudaStream_t stream) {
  using Cfg = TileConfig<D, kBlock>;
  require_shared_memory(Cfg::kSmemBytes, "lab 7's backward_kernel");
  // More than 48 KB of dynamic shared memory must be asked for explicitly.
  check_cuda(cudaFuncSetAttribute(backward_kernel<T, D, kBlock>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  Cfg::kSmemBytes),
             "cudaFuncSetAttribute(backward_kernel, MaxDynamicSharedMemorySize)");
  const dim3 grid(static_cast<unsigned>((shape.Nk + Cfg::kBc - 1) / Cfg::kBc), static_cast<unsigned>(shape.B * shape.H));
  backward_kernel<T, D, kBlock><<<grid, kThreads, Cfg::kSmemBytes, stream>>>(p);
  check_cuda(cudaGetLastError(), "backward_kernel<<<...>>> launch");
}

// Kernel 1, kernel 2 (on CUDA cores, or part 3's on tensor cores) and kernel 3, all on `stream`.
template <typename T, int D>
void launch_all(const Params& p, DType dtype, const AttentionShape& shape, bool tensor_cores, void* dq,
                cudaStream_t stream) {
  const std::int64_t q_rows = static_cast<std::int64_t>(shape.B) * shape.H * shape.Nq;

  constexpr int kRowsPerBlock = 8;  // 8 warps of kernel 1
  dot_do_o_kernel<T, D><<<static_cast<unsigned>((q_rows + kRowsPerBlock - 1) / kRowsPerBlock), 32 * kRowsPerBlock, 0,
                          stream>>>(p, q_rows);
  check_cuda(cudaGetLastError(), "dot_do_o_kernel<<<...>>> launch");

  if (tensor_cores) {
    detail::launch_tensor_core_kernel(p, dtype, shape, stream);  // backward_tc.cu
  } else if constexpr (!std::is_same_v<T, __half>) {  // (the CUDA-core kernel takes no fp16)
    // 64 x 64 tiles where this GPU has the shared memory for them, else 32 x 32 (TileConfig).
    constexpr int kSmallGpuBlock = 32;
    static_assert(TileConfig<D, kSmallGpuBlock>::kSmemBytes <= kSmallestSharedMemoryPerBlock,
                  "the tiles for GPUs with less shared memory must fit every GPU from sm_80 on");
    if (TileConfig<D, 64>::kSmemBytes <= shared_memory_per_block()) {
      launch_backward_kernel<T, D, 64>(p, shape, stream);
    } else {
      launch_backward_kernel<T, D, kSmallGpuBlock>(p, shape, stream);
    }
  }

  const std::int64_t quads = q_rows * D / 4;
  convert_dq_kernel<T><<<static_cast<unsigned>((quads + 255) / 256), 256, 0, stream>>>(p.dq_accum, static_cast<T*>(dq),
                                                                                        quads, p.scale);
  check_cuda(cudaGetLastError(), "convert_dq_kernel<<<...>>> launch");
}

template <typename T>
void launch_for_d(const Params& p, DType dtype, const AttentionShape& shape, bool tensor_cores, void* dq,
                  cudaStream_t stream) {
  if (shape.d == 64) launch_all<T, 64>(p, dtype, shape, tensor_cores, dq, stream);
  else launch_all<T, 128>(p, dtype, shape, tensor_cores, dq, stream);
}

// Which kernel computes the products: the one asked for, or for `automatic` tensor cores for the
// 16-bit types and CUDA cores for fp32.
bool uses_tensor_cores(BackwardKernel kernel, DType dtype) {
  return kernel == BackwardKernel::tensor_cores || (kernel == BackwardKernel::automatic && dtype != DType::fp32);
}

}  // namespace

// The workspace's size and layout are the front door's (course/attention.hpp), so that
// check_backward checks the size that this function gives.
std::size_t backward_workspace_bytes(const AttentionShape& shape) {
  return course::backward_workspace_bytes(kLab7Rules, shape);
}

void flash_attention_backward(const void* Q, const void* K, const void* V, const void* O, const void* dO,
                              const float* lse, void* dQ, void* dK, void* dV, DType dtype,
                              const AttentionShape& shape, const BackwardGpuOptions& options) {
  // Input checks (given, course/attention.hpp): the chosen kernel takes the dtype (fp32 or bf16
  // on CUDA cores, bf16 or fp16 on tensor cores) and options.deterministic is not asked for (lab
  // 9's mode), then check_forward's checks of Q, K, V, O and lse (non-null, 16-byte aligned,
  // d = 64 or 128, B, H, Nq, Nk >= 1, B * H within the grid, the scale: 0 means 1/sqrt(d)), then
  // dO, dQ, dK and dV and the workspace's size. The checked call carries the
  // workspace cut into the fp32 dQ accumulator and D.
  const bool tensor_cores = uses_tensor_cores(options.kernel, dtype);
  const BackwardCall call = check_backward(kLab7Rules, tensor_cores, Q, K, V, O, dO, lse, dQ, dK, dV, dtype, shape,
                                           options.causal, options.scale,
                                           {options.workspace, options.workspace_bytes}, options.stream,
                                           options.deterministic);

  // SKELETON: [[maybe_unused]]
  Params p{};
  p.q = call.q;
  p.k = call.k;
  p.v = call.v;
  p.o = call.o;
  p.dout = call.dout;
  p.lse = call.lse;
  p.dk = call.dk;
  p.dv = call.dv;
  p.dq_accum = call.dq_accum;
  p.delta = call.delta;
  p.nq = call.nq;
  p.nk = call.nk;
  p.causal = call.causal;
  p.scale = call.scale;
  p.scale_log2 = call.scale_log2;

  // BEGIN SOLUTION flash_attention_backward
  //! Dispatch on dtype to launch_for_d<float>, <__nv_bfloat16> or <__half>, which picks the
  //! kernels for d and launches all three on options.stream (kernel 2 on tensor cores when
  //! tensor_cores is true).
  if (dtype == DType::fp32) launch_for_d<float>(p, dtype, shape, tensor_cores, dQ, options.stream);
  else if (dtype == DType::bf16) launch_for_d<__nv_bfloat16>(p, dtype, shape, tensor_cores, dQ, options.stream);
  else launch_for_d<__half>(p, dtype, shape, tensor_cores, dQ, options.stream);
  // END SOLUTION
}

}  // namespace course::lab7
