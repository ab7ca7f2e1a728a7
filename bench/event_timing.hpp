// CUDA-event timing shared by the GPU benchmarks (bench_decoding.cu, bench_backward.cu), and the
// check that there is a GPU to time on.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "course/gpu.hpp"  // check_cuda

namespace bench {

// True where this process can use a CUDA device. Otherwise it says why on stderr ("<program>: no
// usable CUDA device (<CUDA's reason>)") and returns false, and the program exits with status 2,
// instead of aborting at its first CUDA call with an uncaught exception.
inline bool device_usable(const char* program) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess && count > 0) return true;
  std::fprintf(stderr, "%s: no usable CUDA device (%s)\n", program,
               err == cudaSuccess ? "none found" : cudaGetErrorString(err));
  return false;
}

inline float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5f * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Median time of `reps` calls on `stream`, each between its own pair of events.
inline float time_ms(const std::function<void()>& call, cudaStream_t stream, int reps) {
  std::vector<cudaEvent_t> ev(2 * size_t(reps));
  for (auto& e : ev) course::check_cuda(cudaEventCreate(&e), "cudaEventCreate");
  for (int i = 0; i < reps; ++i) {
    course::check_cuda(cudaEventRecord(ev[2 * i], stream), "cudaEventRecord");
    call();
    course::check_cuda(cudaEventRecord(ev[2 * i + 1], stream), "cudaEventRecord");
  }
  course::check_cuda(cudaEventSynchronize(ev.back()), "timed calls");
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i)
    course::check_cuda(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]), "elapsed");
  for (auto& e : ev) cudaEventDestroy(e);
  return median(ms);
}

// One timed call that sizes the repetitions (300 ms of calls, between 3 and max_reps), then the
// median of that many; `reps` says how many. Call it after a first, untimed call.
inline float sized_median_ms(const std::function<void()>& call, cudaStream_t stream, int max_reps, int& reps) {
  const float warm = time_ms(call, stream, 1);
  reps = std::max(3, std::min(max_reps, warm > 0 ? int(300.0f / warm) : max_reps));
  return time_ms(call, stream, reps);
}

}  // namespace bench
