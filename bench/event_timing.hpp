// CUDA-event timing shared by the GPU benchmarks (bench_decoding.cu, bench_backward.cu, the GEMM
// peak of bench_attention.cu), and the check that there is a GPU to time on.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
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

// Reads a buffer of twice the L2's size, so that what a timed call left in L2 is gone before
// the next one starts: a cold L2, as a decoding step finds each layer's KV cache (the rest of the
// model ran in between). It only reads: a flush by writing (a memset) would leave dirty lines whose
// write-back lands inside the next timed call.
__global__ void read_to_evict_l2(const uint4* buffer, size_t n, unsigned* never_written) {
  uint4 acc{0, 0, 0, 0};
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 x = buffer[i];
    acc.x ^= x.x, acc.y ^= x.y, acc.z ^= x.z, acc.w ^= x.w;
  }
  // The buffer is zeros, so this store never happens; it keeps the compiler from dropping the loads.
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) *never_written = 1;
}

class L2Evictor {
 public:
  explicit L2Evictor(cudaStream_t stream) : stream_(stream) {
    int dev = 0, l2 = 0;
    course::check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
    course::check_cuda(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "L2 size");
    bytes_ = 2 * size_t(std::max(l2, 1 << 20));
    course::check_cuda(cudaMalloc(&buffer_, bytes_ + 16), "cudaMalloc (L2 eviction buffer)");
    course::check_cuda(cudaMemsetAsync(buffer_, 0, bytes_ + 16, stream_), "memset");
  }
  ~L2Evictor() { cudaFree(buffer_); }
  L2Evictor(const L2Evictor&) = delete;
  L2Evictor& operator=(const L2Evictor&) = delete;

  void operator()() const {
    read_to_evict_l2<<<1024, 256, 0, stream_>>>(static_cast<const uint4*>(buffer_), bytes_ / 16,
                                                 reinterpret_cast<unsigned*>(static_cast<char*>(buffer_) + bytes_));
    course::check_cuda(cudaGetLastError(), "L2 eviction");
  }

 private:
  cudaStream_t stream_;
  void* buffer_ = nullptr;
  size_t bytes_ = 0;
};

// Keeps the GPU busy for `ns` nanoseconds of its own clock (%globaltimer), so that the calls
// queued behind it start only once the host has queued them all.
__global__ void hold_stream(unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// Median time of `reps` calls on `stream`, each between its own pair of events. `before_each`,
// where given, runs before each call outside its events (an L2Evictor, for a cold L2).
//
// GPU time only: the calls are queued behind hold_stream, and the batch counts only if the hold
// was still running when the host had queued it all (else it is run again behind a hold four
// times as long). Without the hold, a call shorter than the host's cost of launching it (tens of
// microseconds for PyTorch's SDPA, a few for a kernel launch) is timed from an idle GPU waiting
// for its launch; a decoding engine hides that cost (CUDA graphs, a host running ahead).
inline float time_ms(const std::function<void()>& call, cudaStream_t stream, int reps,
                     const std::function<void()>& before_each = {}) {
  std::vector<cudaEvent_t> ev(2 * size_t(reps) + 1);
  for (auto& e : ev) course::check_cuda(cudaEventCreate(&e), "cudaEventCreate");
  cudaEvent_t held = ev.back();
  bool queued_in_time = false;
  for (double hold_ms = 1; !queued_in_time; hold_ms *= 4) {
    if (hold_ms > 1024)
      throw std::runtime_error("the host did not queue " + std::to_string(reps) + " calls within a second");
    hold_stream<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(hold_ms * 1e6));
    course::check_cuda(cudaGetLastError(), "hold_stream");
    course::check_cuda(cudaEventRecord(held, stream), "cudaEventRecord");
    for (int i = 0; i < reps; ++i) {
      if (before_each) before_each();
      course::check_cuda(cudaEventRecord(ev[2 * i], stream), "cudaEventRecord");
      call();
      course::check_cuda(cudaEventRecord(ev[2 * i + 1], stream), "cudaEventRecord");
    }
    const cudaError_t hold_state = cudaEventQuery(held);
    if (hold_state != cudaErrorNotReady) course::check_cuda(hold_state, "hold_stream");
    queued_in_time = hold_state == cudaErrorNotReady;
    course::check_cuda(cudaEventSynchronize(ev[2 * size_t(reps) - 1]), "timed calls");
  }
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i)
    course::check_cuda(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]), "elapsed");
  for (auto& e : ev) cudaEventDestroy(e);
  return median(ms);
}

// One timed call that sizes the repetitions (300 ms of calls, between 3 and max_reps), then the
// median of that many; `reps` says how many. Call it after a first, untimed call.
inline float sized_median_ms(const std::function<void()>& call, cudaStream_t stream, int max_reps, int& reps,
                             const std::function<void()>& before_each = {}) {
  const float warm = time_ms(call, stream, 1, before_each);
  reps = std::max(3, std::min(max_reps, warm > 0 ? int(300.0f / warm) : max_reps));
  return time_ms(call, stream, reps, before_each);
}

}  // namespace bench
