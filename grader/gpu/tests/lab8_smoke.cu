// A direct look at the lab 8 solution on a device, outside the grader: every version, bf16 and
// fp16, d = 64 and 128, a few small shapes (N < one tile, one more than a tile, Nq != Nk with
// rows that see no key, more K/V tiles than stages), causal and not, against a naive fp64
// attention on the CPU. Prints one line per case with the largest errors of O and LSE and the
// count of non-finite outputs; exit status 1 if a case is off by more than a loose limit (0.05 in O, 0.02 in LSE) or not finite.
//
// It exists for the device session (tools/lab8-device-run): it runs in seconds, names the
// failing version and shape directly, and is small enough to run under compute-sanitizer
// (memcheck, racecheck, synccheck). The grader (grader/lab8_hopper) is what decides the marks.
//
//   nvcc -std=c++20 -O2 -lineinfo -gencode=arch=compute_90a,code=sm_90a -Iinclude \
//        -Isolutions/lab8_hopper solutions/lab8_hopper/flash_h100.cu \
//        grader/gpu/tests/lab8_smoke.cu -o lab8_smoke && ./lab8_smoke [--small]
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "course/lab8_hopper.hpp"

namespace {

using course::DType;
using course::lab8::Version;

struct Case {
  Version version;
  DType dtype;
  int d, nq, nk;
  bool causal;
};

uint16_t to_bits(float x, DType t) {
  uint16_t b;
  if (t == DType::bf16) {
    const __nv_bfloat16 h = __float2bfloat16(x);
    std::memcpy(&b, &h, 2);
  } else {
    const __half h = __float2half(x);
    std::memcpy(&b, &h, 2);
  }
  return b;
}
float from_bits(uint16_t b, DType t) {
  if (t == DType::bf16) {
    __nv_bfloat16 h;
    std::memcpy(&h, &b, 2);
    return __bfloat162float(h);
  }
  __half h;
  std::memcpy(&h, &b, 2);
  return __half2float(h);
}

#define CHECK(x)                                                                              \
  do {                                                                                        \
    const cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                                  \
      std::printf("CUDA error %s (%s) at line %d\n", cudaGetErrorName(e_), cudaGetErrorString(e_), \
                  __LINE__);                                                                  \
      std::exit(2);                                                                           \
    }                                                                                         \
  } while (0)

// Runs one case with B = 1, H = 2; returns true if within the loose limits.
bool run(const Case& c, std::mt19937_64& rng) {
  const int B = 1, H = 2, d = c.d;
  const size_t nq_el = size_t(B) * H * c.nq * d, nk_el = size_t(B) * H * c.nk * d;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> q(nq_el), k(nk_el), v(nk_el);
  std::vector<double> qd(nq_el), kd(nk_el), vd(nk_el);
  for (size_t i = 0; i < nq_el; ++i) qd[i] = from_bits(q[i] = to_bits(normal(rng), c.dtype), c.dtype);
  for (size_t i = 0; i < nk_el; ++i) kd[i] = from_bits(k[i] = to_bits(normal(rng), c.dtype), c.dtype);
  for (size_t i = 0; i < nk_el; ++i) vd[i] = from_bits(v[i] = to_bits(normal(rng), c.dtype), c.dtype);

  uint16_t *dq, *dk, *dv, *dout;
  float* dlse;
  CHECK(cudaMalloc(&dq, nq_el * 2));
  CHECK(cudaMalloc(&dk, nk_el * 2));
  CHECK(cudaMalloc(&dv, nk_el * 2));
  CHECK(cudaMalloc(&dout, nq_el * 2));
  CHECK(cudaMalloc(&dlse, size_t(B) * H * c.nq * 4));
  CHECK(cudaMemcpy(dq, q.data(), nq_el * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dk, k.data(), nk_el * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dv, v.data(), nk_el * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dout, 0xFF, nq_el * 2));  // NaN: an unwritten element shows
  CHECK(cudaMemset(dlse, 0xFF, size_t(B) * H * c.nq * 4));
  // The copies and memsets above ran on the legacy default stream, which a non-blocking stream
  // does not wait for: without this the kernel could read inputs not yet copied, and the poison
  // could land on top of its output (seen when the GPU was shared with other processes).
  CHECK(cudaDeviceSynchronize());
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  course::lab8::ForwardOptions options;
  options.causal = c.causal;
  options.version = c.version;
  options.stream = stream;
  std::string error;
  try {
    course::lab8::flash_attention_forward(dq, dk, dv, dout, dlse, c.dtype, {B, H, c.nq, c.nk, d}, options);
  } catch (const std::exception& e) {
    error = e.what();
  }
  const cudaError_t sync = cudaStreamSynchronize(stream);
  std::vector<uint16_t> out(nq_el);
  std::vector<float> lse(size_t(B) * H * c.nq);
  if (sync == cudaSuccess) {
    CHECK(cudaMemcpy(out.data(), dout, nq_el * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(lse.data(), dlse, lse.size() * 4, cudaMemcpyDeviceToHost));
  }
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(dout);
  cudaFree(dlse);
  cudaStreamDestroy(stream);

  char head[160];
  std::snprintf(head, sizeof head, "%-9s %s d=%3d Nq=%4d Nk=%4d %-10s", course::lab8::version_name(c.version),
                c.dtype == DType::bf16 ? "bf16" : "fp16", d, c.nq, c.nk, c.causal ? "causal" : "non-causal");
  if (!error.empty() || sync != cudaSuccess) {
    std::printf("FAIL %s: %s\n", head, !error.empty() ? error.c_str() : cudaGetErrorString(sync));
    if (sync != cudaSuccess) std::exit(3);  // the context is gone
    return false;
  }

  // Naive fp64 attention, bottom-right causal.
  const double scale = 1.0 / std::sqrt(double(d));
  double err_o = 0, err_lse = 0;
  int nonfinite = 0, lse_wrong_inf = 0;
  std::vector<double> s(c.nk), p(c.nk);
  for (int h = 0; h < B * H; ++h)
    for (int i = 0; i < c.nq; ++i) {
      const double* qi = &qd[(size_t(h) * c.nq + i) * d];
      double m = -INFINITY;
      for (int j = 0; j < c.nk; ++j) {
        const bool visible = !c.causal || j <= i + c.nk - c.nq;
        double acc = 0;
        for (int x = 0; x < d; ++x) acc += qi[x] * kd[(size_t(h) * c.nk + j) * d + x];
        s[j] = visible ? acc * scale : -INFINITY;
        m = std::max(m, s[j]);
      }
      double l = 0;
      for (int j = 0; j < c.nk; ++j) l += p[j] = m == -INFINITY ? 0.0 : std::exp(s[j] - m);
      const double ref_lse = l > 0 ? m + std::log(l) : -INFINITY;
      const float got_lse = lse[size_t(h) * c.nq + i];
      if (std::isnan(got_lse)) ++nonfinite;
      else if (std::isinf(ref_lse) || std::isinf(got_lse)) lse_wrong_inf += !(std::isinf(ref_lse) && std::isinf(got_lse) && got_lse < 0);
      else err_lse = std::max(err_lse, std::fabs(got_lse - ref_lse));
      for (int x = 0; x < d; ++x) {
        double ref = 0;
        if (l > 0)
          for (int j = 0; j < c.nk; ++j) ref += p[j] / l * vd[(size_t(h) * c.nk + j) * d + x];
        const float got = from_bits(out[(size_t(h) * c.nq + i) * d + x], c.dtype);
        if (!std::isfinite(got)) ++nonfinite;
        else err_o = std::max(err_o, std::fabs(got - ref));
      }
    }
  const bool ok = nonfinite == 0 && lse_wrong_inf == 0 && err_o <= 0.05 && err_lse <= 0.02;
  std::printf("%s %s: max|dO| %.2e  max|dLSE| %.2e  non-finite %d  wrong -inf LSE %d\n", ok ? "ok  " : "FAIL", head,
              err_o, err_lse, nonfinite, lse_wrong_inf);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const bool small = argc > 1 && std::strcmp(argv[1], "--small") == 0;  // for the sanitizers
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, compute capability %d.%d\n", prop.name, prop.major, prop.minor);
  std::mt19937_64 rng(1);
  std::vector<std::pair<int, int>> lengths = {{7, 7}, {129, 129}, {7, 600}, {600, 7}, {600, 600}};
  if (!small) lengths.insert(lengths.end(), {{1, 1}, {64, 64}, {300, 113}, {113, 300}, {1000, 1500}});
  // {7, 600}: 5 K/V tiles for one query tile, so that every stage is refilled and step 4's empty
  // barriers complete phases. {600, 7} causal: the first query tiles see no key at all (step 5
  // on visits zero tiles there); {600, 600} causal: each query tile visits a different number of
  // tiles. Under the sanitizers (--small) only for the steps that have those paths, to keep them
  // short.
  const auto skip_small = [&](Version v, std::pair<int, int> len) {
    if (!small) return false;
    if (len == std::pair{7, 600}) return v < Version::warp_specialized;
    if (len == std::pair{600, 7} || len == std::pair{600, 600}) return v < Version::causal_skip;
    return false;
  };
  int failed = 0, total = 0;
  for (Version v : course::lab8::kAllVersions)
    for (DType t : {DType::bf16, DType::fp16})
      for (int d : {64, 128})
        for (auto [nq, nk] : lengths)
          for (bool causal : {false, true}) {
            if ((small && t == DType::fp16) || skip_small(v, {nq, nk})) continue;
            ++total;
            failed += !run({v, t, d, nq, nk, causal}, rng);
          }
  std::printf("%d passed, %d failed\n", total - failed, failed);
  return failed == 0 ? 0 : 1;
}
