// The bf16 dense peak of the GPU as the benchmark reports it: one large cuBLAS GEMM, timed in the
// same process as the attention kernels, so that "lab 8 reaches X% of what the tensor cores do
// for a plain matrix product" compares like with like (same clocks, same run). Used by
// bench_attention (the row `cublas:gemm_peak`).
//
// C = A·Bᵀ with A, B and C bf16 row-major M×K, N×K, M×N and M = N = K = 8192 (1.1 TFLOP per
// call, ~1.4 ms on an H200: large enough that the tiles cover the GPU many times over and the
// launch cost is lost in the noise), accumulated in fp32 (CUBLAS_COMPUTE_32F), the same
// arithmetic as the attention kernels' GEMMs. A FLOP count of 2·M·N·K.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "course/gpu.hpp"
#include "event_timing.hpp"
#include "row_check.hpp"

namespace bench {

struct GemmPeak {
  int size = 0;         // M = N = K
  double ms = NAN;      // median of the timed calls
  double tflops = NAN;  // 2 M N K / time
  double max_err = NAN; // max |C - C_fp64| / sqrt(K) over the sampled entries (NaN: not finite)
  size_t bytes = 0;     // A, B and C
  int reps = 0;
};

inline void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(int(s)));
}

// Checks a handful of entries of C against an fp64 dot product of the same bf16 inputs, so that a
// broken call (wrong transposes, an unwritten C) cannot pass for a fast one. The error is given in
// units of sqrt(K), the typical size of an entry for inputs of standard deviation 1.
inline double gemm_sample_error(const void* A, const void* B, const void* C, int n, cudaStream_t stream) {
  constexpr int kSamples = 16;
  const auto* a_rows = static_cast<const __nv_bfloat16*>(A);
  const auto* b_rows = static_cast<const __nv_bfloat16*>(B);
  double worst = 0;
  for (int s = 0; s < kSamples; ++s) {
    const size_t i = (size_t(s) * 2654435761u) % size_t(n), j = (size_t(s) * 40503u + 7) % size_t(n);
    const std::vector<float> a = download_as_float(a_rows + i * n, size_t(n), true, stream);
    const std::vector<float> b = download_as_float(b_rows + j * n, size_t(n), true, stream);
    const double got = download_as_float(static_cast<const __nv_bfloat16*>(C) + i * n + j, 1, true, stream)[0];
    double ref = 0;
    for (int k = 0; k < n; ++k) ref += double(a[k]) * double(b[k]);
    if (!std::isfinite(got)) return NAN;
    worst = std::max(worst, std::fabs(got - ref) / std::sqrt(double(n)));
  }
  return worst;
}

// Measures the peak on `stream`: one untimed call (checked), then sized_median_ms's warm-up and reps.
inline GemmPeak measure_gemm_peak(cudaStream_t stream, int max_reps, int size = 8192) {
  GemmPeak r;
  r.size = size;
  const size_t elems = size_t(size) * size;
  r.bytes = 3 * elems * sizeof(__nv_bfloat16);
  course::DeviceBuffer A(elems * 2), B(elems * 2), C(elems * 2);
  course::fill_normal(A.as<__nv_bfloat16>(), int64_t(elems), 9001, stream);
  course::fill_normal(B.as<__nv_bfloat16>(), int64_t(elems), 9002, stream);
  course::check_cuda(cudaMemsetAsync(C.get(), 0xFF, elems * 2, stream), "poison C");  // NaN if unwritten

  cublasHandle_t handle = nullptr;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  try {
    check_cublas(cublasSetStream(handle, stream), "cublasSetStream");
    const float one = 1.0f, zero = 0.0f;
    // cuBLAS is column-major. Row-major C = A·Bᵀ (M×N) is, read column-major, Cᵀ = B·Aᵀ (N×M);
    // row-major B (N×K) read column-major is Bᵀ (K×N), hence op T; row-major A (M×K) read
    // column-major is Aᵀ (K×M), used as is (op N). The "TN" layout, cuBLAS's fastest.
    const auto call = [&] {
      check_cublas(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, size, size, size, &one,
                                B.get(), CUDA_R_16BF, size, A.get(), CUDA_R_16BF, size, &zero,
                                C.get(), CUDA_R_16BF, size, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx");
    };
    call();
    r.max_err = gemm_sample_error(A.get(), B.get(), C.get(), size, stream);
    r.ms = sized_median_ms(call, stream, max_reps, r.reps);
    r.tflops = 2.0 * double(size) * size * size / (r.ms * 1e-3) / 1e12;
  } catch (...) {
    cublasDestroy(handle);
    throw;
  }
  cublasDestroy(handle);
  return r;
}

}  // namespace bench
