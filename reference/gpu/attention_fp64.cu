// fp64 reference attention on the GPU. Deliberately naive: one CTA per query row, two passes
// over the keys (the exact row maximum first, then the sum and the output), every product and
// sum in double. It shares no arithmetic with the course kernels.
#include "attention_fp64.hpp"

#include "course/errors.hpp"
#include "course/softmax_scale.hpp"
#include "course/gpu.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace course::reference::gpu {
namespace {

__device__ __forceinline__ double to_double(float x) { return static_cast<double>(x); }
__device__ __forceinline__ double to_double(__nv_bfloat16 x) {
  return static_cast<double>(__bfloat162float(x));  // bf16 -> fp32 is exact
}

// Block-wide reduction through shared memory; every thread gets the result.
template <bool kMax>
__device__ double block_reduce(double x, double* scratch) {
  scratch[threadIdx.x] = x;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const double other = scratch[threadIdx.x + stride];
      const double mine = scratch[threadIdx.x];
      scratch[threadIdx.x] = kMax ? fmax(mine, other) : mine + other;
    }
    __syncthreads();
  }
  const double result = scratch[0];
  __syncthreads();
  return result;
}

// Shared memory: q[d] | p[blockDim] | scratch[blockDim], all double. blockDim is a power of two
// and at least d, so thread c owns output column c.
template <typename T>
__global__ void attention_fp64_kernel(const T* Q, const T* K, const T* V, long long rows, int Nq,
                                      int Nk, int d, bool causal, double scale, double* O,
                                      double* lse) {
  extern __shared__ double shared[];
  double* q = shared;
  double* p = q + d;
  double* scratch = p + blockDim.x;
  const int t = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);

  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const long long bh = row / Nq;
    const int i = static_cast<int>(row % Nq);
    const T* k_head = K + bh * Nk * static_cast<long long>(d);
    const T* v_head = V + bh * Nk * static_cast<long long>(d);
    // Keys 0 .. visible-1 are visible to this row.
    long long last = causal ? static_cast<long long>(i) + Nk - Nq : Nk - 1;
    if (last > Nk - 1) last = Nk - 1;
    const int visible = last < 0 ? 0 : static_cast<int>(last + 1);

    for (int c = t; c < d; c += threads) q[c] = to_double(Q[row * d + c]) * scale;
    __syncthreads();

    // Pass 1: the exact row maximum.
    double m = -INFINITY;
    for (int j = t; j < visible; j += threads) {
      double s = 0.0;
      const T* k_row = k_head + static_cast<long long>(j) * d;
      for (int c = 0; c < d; ++c) s += q[c] * to_double(k_row[c]);
      m = fmax(m, s);
    }
    m = block_reduce<true>(m, scratch);

    // Pass 2: p_j = exp(s_j - m), l = sum p_j, o = sum p_j v_j, keys in chunks of blockDim.
    double l_part = 0.0;
    double o = 0.0;  // column t of the output (t < d)
    for (int j0 = 0; j0 < visible; j0 += threads) {
      const int j = j0 + t;
      double pj = 0.0;
      if (j < visible) {
        double s = 0.0;
        const T* k_row = k_head + static_cast<long long>(j) * d;
        for (int c = 0; c < d; ++c) s += q[c] * to_double(k_row[c]);
        pj = exp(s - m);
      }
      p[t] = pj;
      l_part += pj;
      __syncthreads();
      const int count = min(threads, visible - j0);
      if (t < d) {
        for (int u = 0; u < count; ++u) {
          o += p[u] * to_double(v_head[static_cast<long long>(j0 + u) * d + t]);
        }
      }
      __syncthreads();
    }
    const double l = block_reduce<false>(l_part, scratch);

    if (t < d) O[row * d + t] = (visible > 0) ? o / l : 0.0;
    if (t == 0) lse[row] = (visible > 0) ? m + log(l) : -INFINITY;
    __syncthreads();  // q is rewritten for the next row
  }
}

}  // namespace

void attention_fp64(const void* Q, const void* K, const void* V, DType type, int B, int H,
                    int Nq, int Nk, int d, bool causal, double scale, double* O, double* lse,
                    cudaStream_t stream) {
  if (Q == nullptr || K == nullptr || V == nullptr || O == nullptr || lse == nullptr) {
    throw course::BadInput("attention_fp64: Q, K, V, O and lse must be non-null device pointers");
  }
  if (B < 1 || H < 1 || Nq < 1 || Nk < 1) {
    throw course::BadInput("attention_fp64: B, H, Nq and Nk must be >= 1");
  }
  if (d < 1 || d > 1024) throw course::BadInput("attention_fp64: d must be in [1, 1024]");
  // The course's scale rule (course/softmax_scale.hpp), in double: 0 means 1/sqrt(d).
  scale = scale == 0.0 ? course::default_softmax_scale(d)
                       : course::softmax_scale(std::optional<double>(scale), d, "attention_fp64");

  int threads = 128;
  while (threads < d) threads *= 2;
  const long long rows = static_cast<long long>(B) * H * Nq;
  const unsigned grid = static_cast<unsigned>(rows < 65536 * 8 ? rows : 65536 * 8);
  const size_t smem = sizeof(double) * (static_cast<size_t>(d) + 2 * static_cast<size_t>(threads));
  if (type == DType::fp32) {
    attention_fp64_kernel<float><<<grid, threads, smem, stream>>>(
        static_cast<const float*>(Q), static_cast<const float*>(K), static_cast<const float*>(V),
        rows, Nq, Nk, d, causal, scale, O, lse);
  } else if (type == DType::bf16) {
    attention_fp64_kernel<__nv_bfloat16><<<grid, threads, smem, stream>>>(
        static_cast<const __nv_bfloat16*>(Q), static_cast<const __nv_bfloat16*>(K),
        static_cast<const __nv_bfloat16*>(V), rows, Nq, Nk, d, causal, scale, O, lse);
  } else {
    throw course::BadInput("attention_fp64: type must be fp32 or bf16");
  }
  check_cuda(cudaGetLastError(), "attention_fp64_kernel<<<...>>> launch");
}

}  // namespace course::reference::gpu
