#include "device_run.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace gpu_lab {

namespace {

using course::check_cuda;
using course::DeviceBuffer;

// Spins one thread for `ns` nanoseconds of GPU time: keeps the legacy default stream busy.
__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// How long the default stream is kept busy: long enough that a kernel queued behind it cannot
// finish before the results are read on the lab's stream.
constexpr unsigned long long kBusyNanoseconds = 50'000'000;  // 50 ms

// A device buffer with a guard zone of NaN bytes on each side of the data. A kernel that reads
// past the end of Q, K or V (say, a whole last K/V tile where only part of it is valid) reads
// NaN, and any use of it, even multiplied by a zero weight, makes the output NaN: the grader
// sees it. Without the zones such a read returns whatever follows in the allocation (usually
// zeros) and goes unseen. A kernel that writes outside O or LSE changes a zone: guards_intact()
// says so. The zones are as large as the biggest tile a lab reads (128 rows of d = 128 fp32).
class GuardedBuffer {
 public:
  static constexpr std::size_t kGuardBytes = 128 * 128 * 4;

  explicit GuardedBuffer(std::size_t bytes) : bytes_(bytes), whole_(bytes + 2 * kGuardBytes) {
    // All-ones bytes are NaN in fp32, bf16 and fp16.
    check_cuda(cudaMemset(whole_.get(), 0xFF, bytes + 2 * kGuardBytes), "cudaMemset(guard zones)");
  }
  void* data() const { return static_cast<std::uint8_t*>(whole_.get()) + kGuardBytes; }
  void upload(const std::vector<std::uint8_t>& host) {
    check_cuda(cudaMemcpy(data(), host.data(), std::min(host.size(), bytes_), cudaMemcpyHostToDevice),
               "cudaMemcpy to device");
  }
  std::vector<std::uint8_t> download() const {
    std::vector<std::uint8_t> host(bytes_);
    check_cuda(cudaMemcpy(host.data(), data(), bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return host;
  }
  bool guards_intact() const {
    std::vector<std::uint8_t> zone(kGuardBytes);
    const auto* base = static_cast<const std::uint8_t*>(whole_.get());
    for (const std::uint8_t* at : {base, base + kGuardBytes + bytes_}) {
      check_cuda(cudaMemcpy(zone.data(), at, kGuardBytes, cudaMemcpyDeviceToHost), "cudaMemcpy(guard zone)");
      if (std::any_of(zone.begin(), zone.end(), [](std::uint8_t b) { return b != 0xFF; })) return false;
    }
    return true;
  }

 private:
  std::size_t bytes_;
  DeviceBuffer whole_;
};

}  // namespace

Result run_kernel(const gpu_wire::KernelCall& c, const std::vector<std::uint8_t>& q,
                  const std::vector<std::uint8_t>& k, const std::vector<std::uint8_t>& v, const Launch& launch) {
  const std::size_t o_bytes = c.o_elements() * course::dtype_bytes(c.dtype);
  // O and LSE start as NaN like their guard zones: an element the kernel never writes stays NaN.
  GuardedBuffer dq(q.size()), dk(k.size()), dv(v.size()), dout(o_bytes), dlse(c.lse_elements() * 4);
  dq.upload(q);
  dk.upload(k);
  dv.upload(v);
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before the launch");
  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  Result r;
  r.O.resize(o_bytes);
  r.lse.resize(c.lse_elements());
  try {
    spin_kernel<<<1, 1, 0, 0>>>(kBusyNanoseconds);  // the legacy default stream, busy
    check_cuda(cudaGetLastError(), "the busy kernel on the default stream");
    launch(dq.data(), dk.data(), dv.data(), dout.data(), static_cast<float*>(dlse.data()), stream);
    // Ordered on the lab's stream only: work the kernel put elsewhere is not waited for.
    check_cuda(cudaMemcpyAsync(r.O.data(), dout.data(), o_bytes, cudaMemcpyDeviceToHost, stream), "reading O on the lab's stream");
    check_cuda(cudaMemcpyAsync(r.lse.data(), dlse.data(), r.lse.size() * 4, cudaMemcpyDeviceToHost, stream),
               "reading lse on the lab's stream");
    check_cuda(cudaStreamSynchronize(stream), "the kernel (cudaStreamSynchronize on the lab's stream)");
    check_cuda(cudaDeviceSynchronize(), "the kernel (cudaDeviceSynchronize)");
    check_cuda(cudaGetLastError(), "the kernel (cudaGetLastError)");
  } catch (...) {
    cudaStreamDestroy(stream);
    throw;
  }
  cudaStreamDestroy(stream);
  r.inputs_unchanged = dq.download() == q && dk.download() == k && dv.download() == v;
  r.wrote_only_outputs = dq.guards_intact() && dk.guards_intact() && dv.guards_intact() &&
                         dout.guards_intact() && dlse.guards_intact();
  return r;
}

void call_with_dummy_buffers(const std::function<void(void* buffer)>& launch) {
  DeviceBuffer dummy(1 << 20);
  launch(dummy.get());
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

double median_ms(const std::function<void()>& launch, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) launch();
  check_cuda(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> times;
  for (int i = 0; i < repeats; ++i) {
    check_cuda(cudaEventRecord(start), "cudaEventRecord");
    launch();
    check_cuda(cudaEventRecord(stop), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop), "timed launch");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::nth_element(times.begin(), times.begin() + long(times.size() / 2), times.end());
  return times[times.size() / 2];
}

void fill_normal(void* x, std::size_t count, course::DType type, std::uint64_t seed) {
  const auto n = static_cast<std::int64_t>(count);
  switch (type) {
    case course::DType::fp32: course::fill_normal(static_cast<float*>(x), n, seed); break;
    case course::DType::bf16: course::fill_normal(static_cast<__nv_bfloat16*>(x), n, seed); break;
    case course::DType::fp16: course::fill_normal(static_cast<__half*>(x), n, seed); break;
  }
  check_cuda(cudaDeviceSynchronize(), "fill_normal");
}

}  // namespace gpu_lab
