// Lab 5 development check and benchmark: one program, one device call.
//
//   nvcc -std=c++20 -O3 -gencode arch=compute_90,code=sm_90 -Iinclude -Isolutions/lab5_tensor_core \
//        -o /tmp/lab5_dev_check bench/lab5_dev_check.cu solutions/lab5_tensor_core/flash_tc.cu
//   /tmp/lab5_dev_check [--quick]
//
// 1. Bad input must throw course::BadInput.
// 2. Correctness of every Version, bf16 and fp16, d = 64 and 128, causal or not, odd and unequal
//    lengths, against an fp64 GPU reference (one warp per query row). Inputs are random normal
//    (never zeros), outputs poisoned with NaN before each call, a non-default stream is used.
// 3. Timing: B*N = 16384 tokens, H*d = 2048, cudaEvents around each launch, median of many reps,
//    inputs rotated over 3 sets (each set is larger than L2). FLOPs = 4*B*H*Nq*Nk*d, halved
//    for causal. Also a few alternative tile configurations of the register_p kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "course/errors.hpp"
#include "course/lab5_tensor_core.hpp"
#include "flash_tc_kernel.cuh"

using course::lab5::DType;
using course::lab5::Version;
using course::lab5::detail::check_cuda;

namespace {

// ---------------------------------------------------------------- inputs and reference

__device__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Standard normal values (Box-Muller on a counter-based hash), times `stddev`.
template <class T>
__global__ void fill_normal(T* x, int64_t n, uint64_t seed, float stddev) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t h = splitmix64(seed * 0x100000001B3ull + uint64_t(i));
    const double u1 = (double((h >> 11) & ((1ull << 26) - 1)) + 0.5) / double(1ull << 26);
    const double u2 = double(h >> 38) / double(1ull << 26);
    const double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    x[i] = T(float(z) * stddev);
  }
}

template <class T>
__device__ double to_double(T x) { return double(float(x)); }

// fp64 attention, one warp per (head, query row); lane owns dims lane, lane+32, ...
template <class T>
__global__ void reference_attention(const T* q, const T* k, const T* v, double* o, double* lse,
                                    int heads, int nq, int nk, int d, double scale, bool causal) {
  const int64_t warp_id = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp_id >= int64_t(heads) * nq) return;
  const int head = int(warp_id / nq), row = int(warp_id % nq);
  const T* qr = q + (int64_t(head) * nq + row) * d;
  const T* kh = k + int64_t(head) * nk * d;
  const T* vh = v + int64_t(head) * nk * d;
  const int per_lane = d / 32;
  double qv[4];
  for (int i = 0; i < per_lane; ++i) qv[i] = to_double(qr[lane + 32 * i]);
  const int last = causal ? min(nk - 1, row + nk - nq) : nk - 1;
  const auto score = [&](int j) {
    double s = 0;
    for (int i = 0; i < per_lane; ++i) s += qv[i] * to_double(kh[int64_t(j) * d + lane + 32 * i]);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    return s * scale;
  };
  double m = -INFINITY;
  for (int j = 0; j <= last; ++j) m = fmax(m, score(j));
  double l = 0, acc[4] = {0, 0, 0, 0};
  for (int j = 0; j <= last; ++j) {
    const double p = exp(score(j) - m);
    l += p;
    for (int i = 0; i < per_lane; ++i) acc[i] += p * to_double(vh[int64_t(j) * d + lane + 32 * i]);
  }
  double* orow = o + (int64_t(head) * nq + row) * d;
  for (int i = 0; i < per_lane; ++i) orow[lane + 32 * i] = last >= 0 ? acc[i] / l : 0.0;
  if (lane == 0) lse[int64_t(head) * nq + row] = last >= 0 ? m + log(l) : -INFINITY;
}

template <class T>
float host_to_float(uint16_t bits) {
  T x;
  std::memcpy(&x, &bits, 2);
  return float(x);
}

// ---------------------------------------------------------------- device buffers

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { check_cuda(cudaMalloc(&p, std::max<size_t>(bytes, 16)), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class U> U* as() const { return static_cast<U*>(p); }
};

template <class T>
void fill(void* x, int64_t n, uint64_t seed, float stddev = 1.0f) {
  fill_normal<T><<<1024, 256>>>(static_cast<T*>(x), n, seed, stddev);
  check_cuda(cudaGetLastError(), "fill_normal");
}

const char* version_name(Version v) {
  switch (v) {
    case Version::mma_only: return "mma_only";
    case Version::ldmatrix: return "ldmatrix";
    case Version::swizzle: return "swizzle";
    case Version::pipelined: return "pipelined";
    case Version::register_p: return "register_p";
  }
  return "?";
}
const Version kVersions[] = {Version::mma_only, Version::ldmatrix, Version::swizzle,
                             Version::pipelined, Version::register_p};

// ---------------------------------------------------------------- correctness

struct Shape {
  int B, H, Nq, Nk, d;
};

int g_failures = 0;
int g_checks = 0;
// Worst figures seen over all passing and failing checks, per dtype (0 = bf16, 1 = fp16).
double g_worst_rel[2] = {0, 0}, g_worst_lse[2] = {0, 0};

using Launcher = std::function<void(const void*, const void*, const void*, void*, float*,
                                    cudaStream_t)>;

// Runs `launch` on fresh random inputs and compares the first `check_heads` heads with fp64.
template <class T>
void check_case(const char* label, DType dtype, const Shape& s, bool causal, uint64_t seed,
                const Launcher& launch, int check_heads = 1 << 30, float input_scale = 1.0f,
                double softmax_scale = 0.0) {
  const int heads = s.B * s.H;
  check_heads = std::min(check_heads, heads);
  const int64_t nq_elems = int64_t(heads) * s.Nq * s.d, nk_elems = int64_t(heads) * s.Nk * s.d;
  DeviceBuffer q(nq_elems * 2), k(nk_elems * 2), v(nk_elems * 2), o(nq_elems * 2);
  DeviceBuffer lse(int64_t(heads) * s.Nq * 4);
  fill<T>(q.p, nq_elems, seed * 3 + 0, input_scale);
  fill<T>(k.p, nk_elems, seed * 3 + 1, input_scale);
  fill<T>(v.p, nk_elems, seed * 3 + 2);
  check_cuda(cudaMemset(o.p, 0xFF, nq_elems * 2), "cudaMemset(O poison)");  // NaN in bf16/fp16
  check_cuda(cudaMemset(lse.p, 0xFF, int64_t(heads) * s.Nq * 4), "cudaMemset(lse poison)");
  // The fills and poison ran on the legacy stream, which a non-blocking stream does not wait for.
  check_cuda(cudaDeviceSynchronize(), "fill inputs");
  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  launch(q.p, k.p, v.p, o.p, lse.as<float>(), stream);
  check_cuda(cudaStreamSynchronize(stream), "kernel under test");
  check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");

  const int64_t ref_q = int64_t(check_heads) * s.Nq;
  DeviceBuffer o_ref(ref_q * s.d * 8), lse_ref(ref_q * 8);
  reference_attention<T><<<(ref_q * 32 + 255) / 256, 256>>>(
      q.as<T>(), k.as<T>(), v.as<T>(), o_ref.as<double>(), lse_ref.as<double>(), check_heads, s.Nq,
      s.Nk, s.d, softmax_scale > 0 ? softmax_scale : 1.0 / std::sqrt(double(s.d)), causal);
  check_cuda(cudaGetLastError(), "reference_attention");
  check_cuda(cudaDeviceSynchronize(), "reference_attention sync");

  std::vector<uint16_t> h_o(ref_q * s.d);
  std::vector<float> h_lse(ref_q);
  std::vector<double> h_oref(ref_q * s.d), h_lref(ref_q);
  check_cuda(cudaMemcpy(h_o.data(), o.p, h_o.size() * 2, cudaMemcpyDeviceToHost), "memcpy O");
  check_cuda(cudaMemcpy(h_lse.data(), lse.p, h_lse.size() * 4, cudaMemcpyDeviceToHost), "memcpy lse");
  check_cuda(cudaMemcpy(h_oref.data(), o_ref.p, h_oref.size() * 8, cudaMemcpyDeviceToHost), "memcpy Oref");
  check_cuda(cudaMemcpy(h_lref.data(), lse_ref.p, h_lref.size() * 8, cudaMemcpyDeviceToHost), "memcpy lref");

  double err2 = 0, ref2 = 0, max_abs = 0, lse_max = 0;
  int64_t bad = 0, worst = -1;
  for (size_t i = 0; i < h_o.size(); ++i) {
    const float x = host_to_float<T>(h_o[i]);
    const double r = h_oref[i];
    if (!std::isfinite(x)) { ++bad; continue; }
    const double e = std::fabs(x - r);
    err2 += e * e;
    ref2 += r * r;
    if (e > max_abs) { max_abs = e; worst = int64_t(i); }
  }
  for (size_t i = 0; i < h_lse.size(); ++i) {
    if (std::isinf(h_lref[i])) {
      if (!(std::isinf(h_lse[i]) && h_lse[i] < 0)) ++bad;
      // a row that sees no key must have O exactly 0
      for (int c = 0; c < s.d; ++c)
        if (host_to_float<T>(h_o[i * s.d + c]) != 0.0f) { ++bad; break; }
      continue;
    }
    if (!std::isfinite(h_lse[i])) { ++bad; continue; }
    lse_max = std::max(lse_max, std::fabs(h_lse[i] - h_lref[i]) / std::max(1.0, std::fabs(h_lref[i])));
  }
  const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  // bf16 keeps 8 significant bits (P and O are rounded to it): ~4e-3 relative is expected;
  // fp16 keeps 11: ~5e-4.
  const double rel_band = dtype == DType::bf16 ? 1.5e-2 : 2.5e-3;
  const bool ok = bad == 0 && rel <= rel_band && lse_max <= 1e-4;
  const int di = dtype == DType::bf16 ? 0 : 1;
  g_worst_rel[di] = std::max(g_worst_rel[di], rel);
  g_worst_lse[di] = std::max(g_worst_lse[di], lse_max);
  ++g_checks;
  if (!ok) ++g_failures;
  if (!ok || std::getenv("LAB5_VERBOSE"))
    std::printf("%s %-10s %s B=%d H=%d Nq=%d Nk=%d d=%d causal=%d: rel_l2=%.2e max_abs=%.2e "
                "(at %lld) lse_rel=%.2e nonfinite/unwritten=%lld\n",
                ok ? "  ok  " : "FAIL  ", label, dtype == DType::bf16 ? "bf16" : "fp16", s.B, s.H,
                s.Nq, s.Nk, s.d, int(causal), rel, max_abs, (long long)worst, lse_max,
                (long long)bad);
}

Launcher api_launcher(DType dtype, const Shape& s, bool causal, Version version,
                      float scale = 0.0f) {
  return [=](const void* q, const void* k, const void* v, void* o, float* lse, cudaStream_t st) {
    course::lab5::ForwardOptions opt;
    opt.causal = causal;
    opt.scale = scale;
    opt.version = version;
    opt.stream = st;
    course::lab4::AttentionShape shape{s.B, s.H, s.Nq, s.Nk, s.d};
    course::lab5::flash_attention_forward(q, k, v, o, lse, dtype, shape, opt);
  };
}

// An alternative tile configuration or feature mix of the kernel, launched directly.
using course::lab5::detail::Features;
using course::lab5::detail::features_of;
constexpr Features kBest = features_of(Version::register_p);
constexpr Features kNoLazy = {true, true, true, true, false};
template <class Cfg, Features kF, class T>
Launcher config_launcher(const Shape& s, bool causal) {
  return [=](const void* q, const void* k, const void* v, void* o, float* lse, cudaStream_t st) {
    course::lab5::detail::KernelParams p{};
    p.q = q; p.k = k; p.v = v; p.o = o; p.lse = lse;
    p.nq = s.Nq; p.nk = s.Nk; p.causal = causal;
    p.scale = 1.0f / std::sqrt(float(s.d));
    p.scale_log2 = p.scale * 1.4426950408889634f;
    course::lab5::detail::launch_features<Cfg, kF, T>(p, s.B * s.H, st);
  };
}

template <class E>
void expect_throw(const char* what, const std::function<void()>& f) {
  ++g_checks;
  try {
    f();
  } catch (const E&) {
    return;
  } catch (const std::exception& e) {
    std::printf("FAIL  bad input '%s': wrong exception: %s\n", what, e.what());
    ++g_failures;
    return;
  }
  std::printf("FAIL  bad input '%s': no exception\n", what);
  ++g_failures;
}

void check_bad_input() {
  DeviceBuffer buf(1 << 20);
  float* lse = buf.as<float>();
  const auto call = [&](const void* q, course::lab4::AttentionShape sh, float scale = 0.0f) {
    course::lab5::ForwardOptions opt;
    opt.scale = scale;
    course::lab5::flash_attention_forward(q, buf.p, buf.p, buf.p, lse, DType::bf16, sh, opt);
  };
  using course::BadInput;
  expect_throw<BadInput>("null Q", [&] { call(nullptr, {1, 1, 4, 4, 64}); });
  expect_throw<BadInput>("d = 96", [&] { call(buf.p, {1, 1, 4, 4, 96}); });
  expect_throw<BadInput>("d = 32", [&] { call(buf.p, {1, 1, 4, 4, 32}); });
  expect_throw<BadInput>("Nq = 0", [&] { call(buf.p, {1, 1, 0, 4, 64}); });
  expect_throw<BadInput>("Nk = 0", [&] { call(buf.p, {1, 1, 4, 0, 64}); });
  expect_throw<BadInput>("B = 0", [&] { call(buf.p, {0, 1, 4, 4, 64}); });
  expect_throw<BadInput>("H = -1", [&] { call(buf.p, {1, -1, 4, 4, 64}); });
  expect_throw<BadInput>("scale NaN", [&] { call(buf.p, {1, 1, 4, 4, 64}, NAN); });
  expect_throw<BadInput>("misaligned Q",
                         [&] { call(static_cast<char*>(buf.p) + 2, {1, 1, 4, 4, 64}); });
}

void check_all() {
  const Shape shapes[] = {
      {1, 1, 1, 1, 0},       {2, 3, 7, 7, 0},       {1, 2, 113, 113, 0},  {1, 1, 1000, 1000, 0},
      {1, 2, 1, 1000, 0},    {2, 1, 113, 300, 0},   {1, 2, 300, 113, 0},  {1, 1, 128, 128, 0},
      {1, 1, 129, 65, 0},    {1, 1, 64, 200, 0},
  };
  uint64_t seed = 1;
  for (Version ver : kVersions)
    for (DType dt : {DType::bf16, DType::fp16})
      for (int d : {64, 128})
        for (bool causal : {false, true})
          for (Shape s : shapes) {
            s.d = d;
            if (dt == DType::bf16)
              check_case<__nv_bfloat16>(version_name(ver), dt, s, causal, ++seed,
                                        api_launcher(dt, s, causal, ver));
            else
              check_case<__half>(version_name(ver), dt, s, causal, ++seed,
                                 api_launcher(dt, s, causal, ver));
          }
  // Large logits (input std 3 -> scores of std ~9*sqrt(d)/sqrt(d) ~ 9 after scaling): the
  // online max must keep exp from overflowing.
  for (Version ver : kVersions)
    for (int d : {64, 128}) {
      Shape s{1, 2, 333, 517, d};
      check_case<__nv_bfloat16>(version_name(ver), DType::bf16, s, true, ++seed,
                                api_launcher(DType::bf16, s, true, ver), 1 << 30, 3.0f);
    }
  // Large logits without the causal mask, and an explicit softmax scale.
  for (Version ver : kVersions)
    for (int d : {64, 128}) {
      Shape s{2, 1, 257, 1111, d};
      check_case<__half>(version_name(ver), DType::fp16, s, false, ++seed,
                         api_launcher(DType::fp16, s, false, ver), 1 << 30, 3.0f);
      check_case<__nv_bfloat16>(version_name(ver), DType::bf16, s, false, ++seed,
                                api_launcher(DType::bf16, s, false, ver, 0.3f), 1 << 30, 1.0f,
                                double(0.3f));
    }
  std::printf("correctness (small shapes): %d checks, %d failures\n", g_checks, g_failures);
}

// ---------------------------------------------------------------- timing

struct BenchInputs {
  std::vector<DeviceBuffer*> q, k, v;
  DeviceBuffer* o;
  DeviceBuffer* lse;
  static constexpr int kSets = 3;
  static constexpr int64_t kTokens = 16384, kHidden = 2048;
  BenchInputs() {
    const int64_t bytes = kTokens * kHidden * 2;
    for (int i = 0; i < kSets; ++i) {
      q.push_back(new DeviceBuffer(bytes));
      k.push_back(new DeviceBuffer(bytes));
      v.push_back(new DeviceBuffer(bytes));
    }
    o = new DeviceBuffer(bytes);
    lse = new DeviceBuffer(kTokens * 64 * 4);
  }
  template <class T>
  void randomize(uint64_t seed) {
    for (int i = 0; i < kSets; ++i) {
      fill<T>(q[i]->p, kTokens * kHidden, seed + 10 * i + 1);
      fill<T>(k[i]->p, kTokens * kHidden, seed + 10 * i + 2);
      fill<T>(v[i]->p, kTokens * kHidden, seed + 10 * i + 3);
    }
    check_cuda(cudaDeviceSynchronize(), "randomize");
  }
};

// Median time in ms of `reps` launches, rotating over the input sets.
double time_median(BenchInputs& in, const Launcher& launch, int reps) {
  for (int i = 0; i < 3; ++i)
    launch(in.q[i % 3]->p, in.k[i % 3]->p, in.v[i % 3]->p, in.o->p, in.lse->as<float>(), nullptr);
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) check_cuda(cudaEventCreate(&e), "cudaEventCreate");
  for (int r = 0; r < reps; ++r) {
    const int set = r % BenchInputs::kSets;
    check_cuda(cudaEventRecord(ev[2 * r]), "cudaEventRecord");
    launch(in.q[set]->p, in.k[set]->p, in.v[set]->p, in.o->p, in.lse->as<float>(), nullptr);
    check_cuda(cudaEventRecord(ev[2 * r + 1]), "cudaEventRecord");
  }
  check_cuda(cudaEventSynchronize(ev.back()), "cudaEventSynchronize");
  std::vector<float> ms(reps);
  for (int r = 0; r < reps; ++r)
    check_cuda(cudaEventElapsedTime(&ms[r], ev[2 * r], ev[2 * r + 1]), "cudaEventElapsedTime");
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2];
}

double tflops(const Shape& s, bool causal, double ms) {
  double flop = 4.0 * s.B * s.H * double(s.Nq) * s.Nk * s.d;
  if (causal) flop /= 2;
  return flop / (ms * 1e-3) / 1e12;
}

Shape bench_shape(int n, int d) {
  return {int(BenchInputs::kTokens / n), int(BenchInputs::kHidden / d), n, n, d};
}

template <class T>
void bench_row(BenchInputs& in, const char* label, DType dt, const Shape& s, bool causal,
               const Launcher& launch, int reps) {
  const double ms = time_median(in, launch, reps);
  std::printf("BENCH %-22s %s d=%3d N=%5d B=%2d H=%2d causal=%d  %8.3f ms  %6.1f TFLOP/s\n", label,
              dt == DType::bf16 ? "bf16" : "fp16", s.d, s.Nq, s.B, s.H, int(causal), ms,
              tflops(s, causal, ms));
}

// Tile-configuration alternatives for the register_p kernel.
namespace cfg = course::lab5::detail;
template <class T>
void alt_configs(BenchInputs* in, DType dt, int n, bool causal, bool check, int reps) {
  struct Alt { const char* name; int d; Launcher (*make)(const Shape&, bool); };
  // Rows that split the pipelined -> register_p step into its parts, and a repeat of the shipped
  // register_p configuration (the spread between the two is the run's timing noise).
  const Alt alts[] = {
      {"v5-lazy 128x64", 64, &config_launcher<cfg::TileConfig<64, 128, 64, 4, 2>, kNoLazy, T>},
      {"v5 128x64", 64, &config_launcher<cfg::TileConfig<64, 128, 64, 4, 2>, kBest, T>},
      {"v5 128x128 (shipped)", 64, &config_launcher<cfg::TileConfig<64, 128, 128, 4, 2>, kBest, T>},
      {"v5-lazy 128x64", 128, &config_launcher<cfg::TileConfig<128, 128, 64, 4, 2>, kNoLazy, T>},
      {"v5 128x64 (shipped)", 128, &config_launcher<cfg::TileConfig<128, 128, 64, 4, 2>, kBest, T>},
      {"v5 128x48", 128, &config_launcher<cfg::TileConfig<128, 128, 48, 4, 2>, kBest, T>},
  };

  for (const Alt& a : alts) {
    const Shape s = bench_shape(n, a.d);
    if (check) {
      check_case<T>(a.name, dt, s, causal, 777 + n, a.make(s, causal), 2);
      Shape odd{1, 2, 1000, 1000, a.d};
      check_case<T>(a.name, dt, odd, causal, 778, a.make(odd, causal));
    } else {
      bench_row<T>(*in, a.name, dt, s, causal, a.make(s, causal), reps);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("device: %s, %d SMs, sm_%d%d\n", prop.name, prop.multiProcessorCount, prop.major,
              prop.minor);
  if (argc > 1 && std::strcmp(argv[1], "--probe") == 0) return 0;
  try {
    check_bad_input();
    check_all();
    // Correctness at the benchmark shapes (first 2 heads against fp64), every version.
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (Version ver : kVersions) {
          const Shape s = bench_shape(2048, d);
          check_case<__nv_bfloat16>(version_name(ver), DType::bf16, s, causal, 99,
                                    api_launcher(DType::bf16, s, causal, ver), 2);
        }
    for (bool causal : {false, true}) alt_configs<__nv_bfloat16>(nullptr, DType::bf16, 2048, causal, true, 0);
    std::printf("correctness (all): %d checks, %d failures\n", g_checks, g_failures);
    if (quick) return g_failures == 0 ? 0 : 1;

    BenchInputs in;
    in.randomize<__nv_bfloat16>(1234);
    const int reps = 30;
    for (int d : {64, 128})
      for (bool causal : {false, true}) {
        for (int n : {2048, 8192})
          for (Version ver : kVersions) {
            const Shape s = bench_shape(n, d);
            bench_row<__nv_bfloat16>(in, version_name(ver), DType::bf16, s, causal,
                                     api_launcher(DType::bf16, s, causal, ver), reps);
          }
        for (int n : {1024, 4096, 16384}) {
          const Shape s = bench_shape(n, d);
          bench_row<__nv_bfloat16>(in, "register_p", DType::bf16, s, causal,
                                   api_launcher(DType::bf16, s, causal, Version::register_p), reps);
        }
      }
    for (bool causal : {false, true})
      for (int n : {2048, 8192}) alt_configs<__nv_bfloat16>(&in, DType::bf16, n, causal, false, reps);
    in.randomize<__half>(4321);
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (int n : {2048, 8192}) {
          const Shape s = bench_shape(n, d);
          bench_row<__half>(in, "register_p", DType::fp16, s, causal,
                            api_launcher(DType::fp16, s, causal, Version::register_p), reps);
        }
  } catch (const std::exception& e) {
    std::printf("FATAL: %s\n", e.what());
    return 2;
  }
  std::printf("correctness (all): %d checks, %d failures\n", g_checks, g_failures);
  std::printf("worst O rel-L2 error: bf16 %.2e, fp16 %.2e; worst LSE rel error: bf16 %.2e, "
              "fp16 %.2e (fp32 accumulation, P rounded to the input type)\n",
              g_worst_rel[0], g_worst_rel[1], g_worst_lse[0], g_worst_lse[1]);
  return g_failures == 0 ? 0 : 1;
}
