// Development check for Lab 4 on a GPU: correctness of course::lab4::flash_attention_forward
// against the fp64 GPU reference, then timing against standard attention (cuBLAS).
//
// Build (one command, from the repository root; shown on three lines):
//   nvcc -std=c++20 -O3 -gencode arch=compute_90,code=sm_90 -Iinclude -Ireference/gpu -Ibench
//     -o lab4_dev_check bench/lab4_dev_check.cu solutions/lab4_cuda/flash_forward.cu
//     reference/gpu/attention_fp64.cu bench/standard_attention.cu -lcublas
// Run: ./lab4_dev_check [--check-only | --bench-only] [--bench-d 64|128] [--seed N]
//
// Inputs are random normal (never zeros); outputs are poisoned with NaN before every call, so an
// element the kernel forgets to write shows up as NaN. Errors are of bf16/fp32 storage with fp32
// arithmetic on chip, measured against fp64 arithmetic on the same (upcast) inputs.
#include "attention_fp64.hpp"
#include "course/errors.hpp"
#include "course/lab4_cuda.hpp"
#include "standard_attention.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

using course::lab4::AttentionShape;
using course::lab4::DType;
using course::lab4::ForwardOptions;

namespace {

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorString(status));
  }
}
#define CHECK(call) check_cuda((call), #call)

// Counter-based normal generator (hash + Box-Muller): reproducible from (seed, index).
__device__ __forceinline__ std::uint32_t hash32(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<std::uint32_t>(x);
}

template <typename T>
__global__ void fill_normal(T* out, std::size_t n, std::uint64_t seed, float stddev) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float u1 = (hash32(seed * 0x9E3779B97F4A7C15ULL + 2 * i) + 1.0f) * 2.3283064e-10f;
    const float u2 = hash32(seed * 0x9E3779B97F4A7C15ULL + 2 * i + 1) * 2.3283064e-10f;
    const float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2) * stddev;
    if constexpr (sizeof(T) == 4) {
      out[i] = z;
    } else {
      out[i] = __float2bfloat16_rn(z);
    }
  }
}

void* dalloc(std::size_t bytes) {
  void* p = nullptr;
  CHECK(cudaMalloc(&p, bytes));
  return p;
}

std::size_t elem_size(DType t) { return t == DType::fp32 ? 4 : 2; }

// Runs on `stream`: the check's streams are non-blocking, so they do not wait for work on the
// legacy default stream, and inputs filled there could still be in flight when a kernel reads.
void fill(void* p, DType t, std::size_t n, std::uint64_t seed, float stddev, cudaStream_t stream) {
  if (t == DType::fp32) {
    fill_normal<<<1024, 256, 0, stream>>>(static_cast<float*>(p), n, seed, stddev);
  } else {
    fill_normal<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(p), n, seed, stddev);
  }
  CHECK(cudaGetLastError());
}

double bf16_to_double(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<double> download(const void* p, DType t, std::size_t n) {
  std::vector<double> out(n);
  if (t == DType::fp32) {
    std::vector<float> h(n);
    CHECK(cudaMemcpy(h.data(), p, n * 4, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < n; ++i) out[i] = h[i];
  } else {
    std::vector<std::uint16_t> h(n);
    CHECK(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_double(h[i]);
  }
  return out;
}

struct Err {
  double max_abs = 0.0;
  long bad = 0;  // NaN, or an infinity where the reference is finite (or the other way round)
};

Err compare(const std::vector<double>& got, const std::vector<double>& ref) {
  Err e;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i];
    const double r = ref[i];
    if (std::isnan(g)) {
      ++e.bad;
      continue;
    }
    if (std::isinf(r) || std::isinf(g)) {
      if (g != r) ++e.bad;
      continue;
    }
    e.max_abs = std::max(e.max_abs, std::fabs(g - r));
  }
  return e;
}

const char* name(DType t) { return t == DType::fp32 ? "fp32" : "bf16"; }

struct Case {
  int B, H, Nq, Nk, d;
  bool causal;
  DType dtype;
  float scale;
  float stddev;
};

int g_failures = 0;

// Worst figures per (dtype, d) for the summary table.
struct Worst {
  double o = 0, lse = 0, std_o = 0, std_lse = 0;
  long bad = 0;
  int cases = 0;
};
Worst g_worst[2][3];

int d_index(int d) { return d == 32 ? 0 : d == 64 ? 1 : 2; }

void run_case(const Case& c, std::uint64_t seed, cudaStream_t stream, FILE* log) {
  const std::size_t nq = static_cast<std::size_t>(c.B) * c.H * c.Nq;
  const std::size_t nk = static_cast<std::size_t>(c.B) * c.H * c.Nk;
  const std::size_t es = elem_size(c.dtype);
  void* q = dalloc(nq * c.d * es);
  void* k = dalloc(nk * c.d * es);
  void* v = dalloc(nk * c.d * es);
  void* o = dalloc(nq * c.d * es);
  float* lse = static_cast<float*>(dalloc(nq * 4));
  double* o_ref = static_cast<double*>(dalloc(nq * c.d * 8));
  double* lse_ref = static_cast<double*>(dalloc(nq * 8));
  fill(q, c.dtype, nq * c.d, seed, c.stddev, stream);
  fill(k, c.dtype, nk * c.d, seed + 1, c.stddev, stream);
  fill(v, c.dtype, nk * c.d, seed + 2, 1.0f, stream);

  course::reference::gpu::attention_fp64(
      q, k, v,
      c.dtype == DType::fp32 ? course::reference::gpu::InputType::fp32
                             : course::reference::gpu::InputType::bf16,
      c.B, c.H, c.Nq, c.Nk, c.d, c.causal, c.scale, o_ref, lse_ref, stream);

  AttentionShape shape{c.B, c.H, c.Nq, c.Nk, c.d};
  ForwardOptions opt;
  opt.causal = c.causal;
  opt.scale = c.scale;
  opt.stream = stream;

  // Poison (all bytes 0xFF: NaN in fp32 and in bf16), run, read back.
  CHECK(cudaMemsetAsync(o, 0xFF, nq * c.d * es, stream));
  CHECK(cudaMemsetAsync(lse, 0xFF, nq * 4, stream));
  course::lab4::flash_attention_forward(q, k, v, o, lse, c.dtype, shape, opt);
  CHECK(cudaStreamSynchronize(stream));
  std::vector<double> o_got = download(o, c.dtype, nq * c.d);
  std::vector<double> lse_got = download(lse, DType::fp32, nq);

  // Same inputs again: the result must be bit-identical (a race would show here).
  CHECK(cudaMemsetAsync(o, 0xFF, nq * c.d * es, stream));
  course::lab4::flash_attention_forward(q, k, v, o, lse, c.dtype, shape, opt);
  CHECK(cudaStreamSynchronize(stream));
  const bool deterministic = download(o, c.dtype, nq * c.d) == o_got;

  std::vector<double> o_ref_h(nq * c.d), lse_ref_h(nq);
  CHECK(cudaMemcpy(o_ref_h.data(), o_ref, nq * c.d * 8, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(lse_ref_h.data(), lse_ref, nq * 8, cudaMemcpyDeviceToHost));

  // Standard attention on the same inputs: the same-precision plain implementation.
  course::bench::StandardAttention standard;
  CHECK(cudaMemsetAsync(o, 0xFF, nq * c.d * es, stream));
  CHECK(cudaMemsetAsync(lse, 0xFF, nq * 4, stream));
  if (standard.forward(q, k, v, o, lse, c.dtype, shape, opt) != cudaSuccess) {
    throw std::runtime_error("standard attention out of memory in the check");
  }
  CHECK(cudaStreamSynchronize(stream));
  const Err std_o = compare(download(o, c.dtype, nq * c.d), o_ref_h);
  const Err std_lse = compare(download(lse, DType::fp32, nq), lse_ref_h);

  const Err eo = compare(o_got, o_ref_h);
  const Err el = compare(lse_got, lse_ref_h);
  // Bands for this check (FlashAttention's rule): at most 2x the error of standard attention in
  // the same dtype on the same inputs, plus a small floor. Both figures are printed.
  const double o_band = 2.0 * std_o.max_abs + (c.dtype == DType::fp32 ? 1e-5 : 2e-3);
  const double lse_band = 2.0 * std_lse.max_abs + 1e-5;
  const bool ok = eo.bad == 0 && el.bad == 0 && eo.max_abs <= o_band && el.max_abs <= lse_band &&
                  deterministic;
  if (!ok) ++g_failures;
  std::fprintf(log,
               "%s B=%d H=%d Nq=%5d Nk=%5d d=%3d causal=%d scale=%.3g std=%.1f | O max abs %.3e "
               "(band %.1e, standard %.3e) LSE max abs %.3e (standard %.3e) bad %ld/%ld det=%d%s\n",
               name(c.dtype), c.B, c.H, c.Nq, c.Nk, c.d, c.causal ? 1 : 0, c.scale, c.stddev,
               eo.max_abs, o_band, std_o.max_abs, el.max_abs, std_lse.max_abs, eo.bad, el.bad,
               deterministic ? 1 : 0, ok ? "" : "   <-- FAIL");
  if (!ok) {
    std::printf("FAIL: %s Nq=%d Nk=%d d=%d causal=%d: O %.3e LSE %.3e bad %ld/%ld det=%d\n",
                name(c.dtype), c.Nq, c.Nk, c.d, c.causal, eo.max_abs, el.max_abs, eo.bad, el.bad,
                deterministic);
  }
  Worst& w = g_worst[c.dtype == DType::fp32 ? 0 : 1][d_index(c.d)];
  w.o = std::max(w.o, eo.max_abs);
  w.lse = std::max(w.lse, el.max_abs);
  w.std_o = std::max(w.std_o, std_o.max_abs);
  w.std_lse = std::max(w.std_lse, std_lse.max_abs);
  w.bad += eo.bad + el.bad;
  ++w.cases;

  for (void* p : {q, k, v, o, static_cast<void*>(lse), static_cast<void*>(o_ref),
                  static_cast<void*>(lse_ref)}) {
    CHECK(cudaFree(p));
  }
}

template <typename F>
void expect_bad_input(const char* what, F&& f) {
  try {
    f();
    std::printf("FAIL: %s: no course::BadInput thrown\n", what);
    ++g_failures;
  } catch (const course::BadInput& e) {
    std::printf("ok   BadInput for %s: %s\n", what, e.what());
  }
}

void check_bad_inputs() {
  void* buf = dalloc(1 << 20);
  float* lse = static_cast<float*>(dalloc(1 << 16));
  ForwardOptions opt;
  expect_bad_input("null Q", [&] {
    course::lab4::flash_attention_forward(nullptr, buf, buf, buf, lse, DType::fp32,
                                          AttentionShape{1, 1, 4, 4, 64}, opt);
  });
  expect_bad_input("d = 48", [&] {
    course::lab4::flash_attention_forward(buf, buf, buf, buf, lse, DType::fp32,
                                          AttentionShape{1, 1, 4, 4, 48}, opt);
  });
  expect_bad_input("Nq = 0", [&] {
    course::lab4::flash_attention_forward(buf, buf, buf, buf, lse, DType::bf16,
                                          AttentionShape{1, 1, 0, 4, 64}, opt);
  });
  expect_bad_input("H = 0", [&] {
    course::lab4::flash_attention_forward(buf, buf, buf, buf, lse, DType::bf16,
                                          AttentionShape{1, 0, 4, 4, 64}, opt);
  });
  CHECK(cudaFree(buf));
  CHECK(cudaFree(lse));
}

void check_correctness(std::uint64_t seed, FILE* log) {
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));  // not the default stream
  const int lengths[] = {1, 2, 3, 7, 64, 113, 1000, 4096};
  const std::pair<int, int> uneven[] = {{1, 113},   {113, 1},    {7, 64},   {64, 7},
                                        {113, 1000}, {1000, 113}, {4096, 1000}, {3, 4096}};
  int n = 0;
  for (DType t : {DType::fp32, DType::bf16}) {
    for (int d : {32, 64, 128}) {
      for (bool causal : {false, true}) {
        for (int len : lengths) {
          const bool big = len >= 4096;
          // Every third case uses a non-default scale, every fourth larger logits.
          const float scale = (n % 5 == 1) ? 0.3f : 0.0f;
          const float stddev = (n % 3 == 2) ? 3.0f : 1.0f;
          run_case({big ? 1 : 2, big ? 2 : 3, len, len, d, causal, t, scale, stddev},
                   seed + 17 * n, stream, log);
          ++n;
        }
        for (auto [lq, lk] : uneven) {
          const bool big = std::max(lq, lk) >= 4096;
          const float scale = (n % 5 == 1) ? 0.3f : 0.0f;
          const float stddev = (n % 3 == 2) ? 3.0f : 1.0f;
          run_case({big ? 1 : 2, big ? 2 : 3, lq, lk, d, causal, t, scale, stddev},
                   seed + 17 * n, stream, log);
          ++n;
        }
      }
    }
  }
  CHECK(cudaStreamDestroy(stream));
  std::printf("\ncorrectness: %d cases (full list in the log)\n", n);
  std::printf("dtype  d    cases  max|O-ref|  max|LSE-ref|  std-attn max|O-ref| max|LSE-ref|  NaN/Inf\n");
  for (int t = 0; t < 2; ++t) {
    for (int di = 0; di < 3; ++di) {
      const Worst& w = g_worst[t][di];
      std::printf("%-5s %4d  %5d  %.3e   %.3e     %.3e  %.3e   %ld\n", t == 0 ? "fp32" : "bf16",
                  32 << di, w.cases, w.o, w.lse, w.std_o, w.std_lse, w.bad);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Timing.

template <typename F>
double median_ms(F&& f, cudaStream_t stream) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  f();  // warm-up (module load, cuBLAS heuristics, buffer allocation)
  CHECK(cudaEventRecord(start, stream));
  f();
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float first = 0.0f;
  CHECK(cudaEventElapsedTime(&first, start, stop));
  const int reps = std::clamp(static_cast<int>(200.0 / std::max(first, 0.01f)), 3, 25);
  std::vector<float> times;
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaEventRecord(start, stream));
    f();
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  return times[times.size() / 2];
}

void bench(std::uint64_t seed, FILE* log, int only_d) {
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::size_t tokens = 16384;
  const std::size_t width = 2048;  // H * d
  void* q = dalloc(tokens * width * 4);
  void* k = dalloc(tokens * width * 4);
  void* v = dalloc(tokens * width * 4);
  void* o = dalloc(tokens * width * 4);
  float* lse = static_cast<float*>(dalloc(tokens * 32 * 4));
  course::bench::StandardAttention standard;
  std::printf("\ntiming: B*N = 16384 tokens, H*d = 2048; TFLOP/s with FLOPs = 4 B H N^2 d "
              "(halved when causal); median of reps\n");
  std::printf("dtype   d  causal      N    flash ms  flash TF/s   standard ms  standard TF/s  "
              "speedup\n");
  for (DType t : {DType::fp32, DType::bf16}) {
    fill(q, t, tokens * width, seed + 100, 1.0f, stream);
    fill(k, t, tokens * width, seed + 101, 1.0f, stream);
    fill(v, t, tokens * width, seed + 102, 1.0f, stream);
    for (int d : {64, 128}) {
      if (only_d != 0 && d != only_d) continue;
      for (bool causal : {false, true}) {
        for (int n = 512; n <= 16384; n *= 2) {
          AttentionShape shape{static_cast<int>(tokens / n), static_cast<int>(width / d), n, n, d};
          ForwardOptions opt;
          opt.causal = causal;
          opt.stream = stream;
          const double flops = 4.0 * shape.B * shape.H * double(n) * n * d * (causal ? 0.5 : 1.0);
          const double t_flash = median_ms(
              [&] { course::lab4::flash_attention_forward(q, k, v, o, lse, t, shape, opt); },
              stream);
          double t_std = -1.0;
          bool oom = false;
          t_std = median_ms(
              [&] {
                if (standard.forward(q, k, v, o, lse, t, shape, opt) != cudaSuccess) oom = true;
              },
              stream);
          char line[256];
          if (oom) {
            std::snprintf(line, sizeof line, "%-5s %3d  %6d  %6d  %9.3f  %9.1f     (out of memory)\n",
                          name(t), d, causal, n, t_flash, flops / t_flash * 1e-9);
          } else {
            std::snprintf(line, sizeof line,
                          "%-5s %3d  %6d  %6d  %9.3f  %9.1f     %9.3f   %9.1f       %5.2fx\n",
                          name(t), d, causal, n, t_flash, flops / t_flash * 1e-9, t_std,
                          flops / t_std * 1e-9, t_std / t_flash);
          }
          std::fputs(line, stdout);
          std::fputs(line, log);
          std::fflush(stdout);
        }
      }
    }
  }
  standard.release();
  for (void* p : {q, k, v, o, static_cast<void*>(lse)}) CHECK(cudaFree(p));
  CHECK(cudaStreamDestroy(stream));
}

}  // namespace

int main(int argc, char** argv) {
  bool do_check = true;
  bool do_bench = true;
  std::uint64_t seed = 20240601;
  int only_d = 0;  // --bench-d 64|128: time one head dimension only
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--check-only") do_bench = false;
    if (a == "--bench-only") do_check = false;
    if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    if (a == "--bench-d" && i + 1 < argc) only_d = std::atoi(argv[++i]);
  }
  const char* out_dir = std::getenv("OUT");
  const std::string log_path = std::string(out_dir ? out_dir : ".") + "/lab4_dev_check.log";
  FILE* log = std::fopen(log_path.c_str(), "w");
  if (log == nullptr) log = stderr;
  try {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, seed %llu\n", prop.name, prop.multiProcessorCount,
                static_cast<unsigned long long>(seed));
    if (do_check) {
      check_bad_inputs();
      check_correctness(seed, log);
    }
    if (do_bench) bench(seed, log, only_d);
  } catch (const std::exception& e) {
    std::printf("ERROR: %s\n", e.what());
    return 2;
  }
  std::printf("%s: %d failure(s)\n", g_failures == 0 ? "PASS" : "FAIL", g_failures);
  if (log != stderr) std::fclose(log);
  return g_failures == 0 ? 0 : 1;
}
