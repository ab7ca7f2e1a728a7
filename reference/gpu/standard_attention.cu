// Standard attention: S = scale * Q K^T (cuBLAS), P = softmax(S) row by row (in place), O = P V
// (cuBLAS). See standard_attention.hpp.
#include "standard_attention.hpp"

#include "course/attention.hpp"
#include "course/errors.hpp"
#include "course/gpu.hpp"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace course::reference::gpu {
namespace {

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(call) + " failed: " + cublasGetStatusString(status));
  }
}

__device__ __forceinline__ float load_f(const float* p) { return *p; }
__device__ __forceinline__ float load_f(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_f(float* p, float x) { *p = x; }
__device__ __forceinline__ void store_f(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

// Combine two online-softmax states (m, l): the result describes the union of both sets.
__device__ __forceinline__ void combine(float& m, float& l, float m2, float l2) {
  const float m_new = fmaxf(m, m2);
  if (m_new == -INFINITY) return;  // both empty
  l = l * __expf(m - m_new) + l2 * __expf(m2 - m_new);
  m = m_new;
}

constexpr int kSoftmaxThreads = 256;

// One CTA per score row. Pass 1: per-thread online (max, sum) over the visible entries, then a
// CTA-wide combine. Pass 2: P = exp(S - m) / l, and 0 for masked entries.
template <typename T>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_rows_kernel(T* S, float* lse, int Nq, int Nk, bool causal) {
  __shared__ float shared_m[kSoftmaxThreads / 32];
  __shared__ float shared_l[kSoftmaxThreads / 32];
  const long long row = blockIdx.x;
  const int i = static_cast<int>(row % Nq);
  T* s = S + row * static_cast<long long>(Nk);
  long long last = causal ? static_cast<long long>(i) + Nk - Nq : Nk - 1;
  if (last > Nk - 1) last = Nk - 1;
  const int visible = last < 0 ? 0 : static_cast<int>(last + 1);

  float m = -INFINITY;
  float l = 0.0f;
  for (int j = threadIdx.x; j < visible; j += kSoftmaxThreads) {
    const float x = load_f(s + j);
    if (x > m) {
      l = l * __expf(m - x) + 1.0f;
      m = x;
    } else {
      l += __expf(x - m);
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float m_other = __shfl_xor_sync(0xffffffffu, m, offset);
    const float l_other = __shfl_xor_sync(0xffffffffu, l, offset);
    combine(m, l, m_other, l_other);
  }
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (lane == 0) {
    shared_m[warp] = m;
    shared_l[warp] = l;
  }
  __syncthreads();
  m = shared_m[0];
  l = shared_l[0];
  for (int w = 1; w < kSoftmaxThreads / 32; ++w) combine(m, l, shared_m[w], shared_l[w]);

  const float inv_l = visible > 0 ? 1.0f / l : 0.0f;
  for (int j = threadIdx.x; j < Nk; j += kSoftmaxThreads) {
    const float p = j < visible ? __expf(load_f(s + j) - m) * inv_l : 0.0f;
    store_f(s + j, p);
  }
  if (lse != nullptr && threadIdx.x == 0) lse[row] = visible > 0 ? m + logf(l) : -INFINITY;
}

}  // namespace

StandardAttention::StandardAttention() {
  cublasHandle_t handle = nullptr;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  handle_ = handle;
}

StandardAttention::~StandardAttention() {
  release();
  if (handle_ != nullptr) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

void StandardAttention::release() {
  if (scores_ != nullptr) cudaFree(scores_);
  scores_ = nullptr;
  capacity_ = 0;
}

std::size_t StandardAttention::score_bytes(const AttentionShape& shape, DType dtype) {
  return static_cast<std::size_t>(shape.B) * static_cast<std::size_t>(shape.H) *
         static_cast<std::size_t>(shape.Nq) * static_cast<std::size_t>(shape.Nk) *
         dtype_bytes(dtype);
}

cudaError_t StandardAttention::forward(const void* Q, const void* K, const void* V, void* O,
                                       float* lse, DType dtype, const AttentionShape& shape,
                                       bool causal, float scale_given, cudaStream_t stream) {
  // The GPU labs' checks (course/attention.hpp); the scale comes back resolved.
  const ForwardCall call = check_forward(kStandardAttentionRules, Q, K, V, O, lse, dtype, shape, causal,
                                         scale_given, stream);
  // One softmax CTA per row of S: the grid's x dimension counts B * H * Nq rows.
  const long long batch = call.batch_heads;
  if (static_cast<long long>(call.nq) * batch > (1LL << 31) - 1) {
    throw BadInput("StandardAttention::forward: B * H * Nq must fit in an int");
  }

  // The score matrix: grow the cached buffer if needed. Out of memory is an expected outcome at
  // long sequences, so it is returned, not thrown, and the runtime's error state is cleared.
  const std::size_t bytes = score_bytes(shape, dtype);
  if (bytes > capacity_) {
    release();
    void* buffer = nullptr;
    const cudaError_t status = cudaMalloc(&buffer, bytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return cudaErrorMemoryAllocation;
    }
    check_cuda(status, "cudaMalloc(score matrix)");
    scores_ = buffer;
    capacity_ = bytes;
  }

  auto handle = static_cast<cublasHandle_t>(handle_);
  check_cublas(cublasSetStream(handle, call.stream), "cublasSetStream");
  const float scale = call.scale;
  const float zero = 0.0f;
  const float one = 1.0f;
  const int nq = call.nq;
  const int nk = call.nk;
  const int d = call.d;
  const long long stride_q = static_cast<long long>(nq) * d;
  const long long stride_kv = static_cast<long long>(nk) * d;
  const long long stride_s = static_cast<long long>(nq) * nk;

  // cuBLAS is column-major. A row-major [rows, cols] matrix is a column-major [cols, rows] one,
  // so row-major S = Q K^T is column-major S^T = K Q^T:
  //   (Nk x Nq) = op_T(K^T as d x Nk) * (Q^T as d x Nq).
  // And row-major O = P V is column-major O^T = V^T P^T:
  //   (d x Nq) = (V^T as d x Nk) * (P^T as Nk x Nq).
  if (dtype == DType::fp32) {
    check_cublas(cublasSgemmStridedBatched(handle, CUBLAS_OP_T, CUBLAS_OP_N, nk, nq, d, &scale,
                                           static_cast<const float*>(K), d, stride_kv,
                                           static_cast<const float*>(Q), d, stride_q, &zero,
                                           static_cast<float*>(scores_), nk, stride_s,
                                           static_cast<int>(batch)),
                 "cublasSgemmStridedBatched(S = scale * Q K^T)");
    softmax_rows_kernel<float>
        <<<static_cast<unsigned>(batch * nq), kSoftmaxThreads, 0, call.stream>>>(
            static_cast<float*>(scores_), lse, nq, nk, call.causal);
    check_cuda(cudaGetLastError(), "softmax_rows_kernel<float><<<...>>> launch");
    check_cublas(cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, nq, nk, &one,
                                           static_cast<const float*>(V), d, stride_kv,
                                           static_cast<const float*>(scores_), nk, stride_s, &zero,
                                           static_cast<float*>(O), d, stride_q,
                                           static_cast<int>(batch)),
                 "cublasSgemmStridedBatched(O = P V)");
  } else {
    check_cublas(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, nk, nq, d, &scale,
                                            K, CUDA_R_16BF, d, stride_kv, Q, CUDA_R_16BF, d,
                                            stride_q, &zero, scores_, CUDA_R_16BF, nk, stride_s,
                                            static_cast<int>(batch), CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx(S = scale * Q K^T, bf16)");
    softmax_rows_kernel<__nv_bfloat16>
        <<<static_cast<unsigned>(batch * nq), kSoftmaxThreads, 0, call.stream>>>(
            static_cast<__nv_bfloat16*>(scores_), lse, nq, nk, call.causal);
    check_cuda(cudaGetLastError(), "softmax_rows_kernel<bf16><<<...>>> launch");
    check_cublas(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, nq, nk, &one, V,
                                            CUDA_R_16BF, d, stride_kv, scores_, CUDA_R_16BF, nk,
                                            stride_s, &zero, O, CUDA_R_16BF, d, stride_q,
                                            static_cast<int>(batch), CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx(O = P V, bf16)");
  }
  return cudaSuccess;
}

}  // namespace course::reference::gpu
