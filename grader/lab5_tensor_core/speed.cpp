#include "speed.hpp"

#include <cuda_runtime_api.h>

#include <Eigen/Core>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/data.hpp"

namespace lab5_speed {

namespace {
void check(cudaError_t st, const char* what) {
  if (st != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(st));
}

// Fills a bf16 device buffer with normal random values: one random block copied across it
// (timing needs realistic data, not fresh randomness for every element; never zeros).
void fill_random_bf16(void* dst, std::size_t elements) {
  reference::Rng rng(12345, "lab5 speed inputs");
  std::vector<Eigen::bfloat16> block(1 << 20);  // same bits as __nv_bfloat16
  for (auto& b : block) b = Eigen::bfloat16(float(rng.normal()));
  auto* out = static_cast<Eigen::bfloat16*>(dst);
  for (std::size_t at = 0; at < elements; at += block.size()) {
    const std::size_t n = std::min(block.size(), elements - at);
    check(cudaMemcpy(out + at, block.data(), n * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
}
}  // namespace

double SpeedConfig::flops() const {
  const double f = 4.0 * batch() * heads() * double(N) * N * d;
  return causal ? f / 2 : f;
}

double median_ms(const SpeedConfig& c) {
  const std::size_t elements = std::size_t(c.batch()) * c.heads() * c.N * c.d;
  void *q, *k, *v, *o;
  float* lse;
  check(cudaMalloc(&q, elements * 2), "cudaMalloc");
  check(cudaMalloc(&k, elements * 2), "cudaMalloc");
  check(cudaMalloc(&v, elements * 2), "cudaMalloc");
  check(cudaMalloc(&o, elements * 2), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&lse), std::size_t(c.batch()) * c.heads() * c.N * 4), "cudaMalloc");
  fill_random_bf16(q, elements);
  fill_random_bf16(k, elements);
  fill_random_bf16(v, elements);
  course::lab5::ForwardOptions options;
  options.causal = c.causal;
  const course::lab4::AttentionShape shape{c.batch(), c.heads(), c.N, c.N, c.d};
  auto launch = [&] {
    course::lab5::flash_attention_forward(q, k, v, o, lse, course::lab5::DType::bf16, shape, options);
  };
  for (int i = 0; i < 3; ++i) launch();
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> times;
  for (int i = 0; i < 20; ++i) {
    check(cudaEventRecord(start), "cudaEventRecord");
    launch();
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "timed launch");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  for (void* p : {q, k, v, o, static_cast<void*>(lse)}) cudaFree(p);
  std::nth_element(times.begin(), times.begin() + long(times.size() / 2), times.end());
  return times[times.size() / 2];
}

}  // namespace lab5_speed
