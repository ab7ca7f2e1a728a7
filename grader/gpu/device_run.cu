#include "device_run.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "speed_rules.hpp"

namespace gpu_lab {

namespace {

using course::check_cuda;
using course::DeviceBuffer;

// Keeps the legacy default stream busy: one thread spins until the host raises `release` (after
// it has read the results on the lab's stream) or `ns` nanoseconds of GPU time have passed. A
// kernel launched on the default stream instead of options.stream is queued behind it, so it
// runs only after the results were read, and they show its outputs as NaN poison.
__global__ void spin_kernel(const volatile int* release, unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (*release == 0 && now - start < ns);
}

// The longest the default stream is kept busy: longer than any correct kernel of the graders'
// shapes plus the reads. The host releases it as soon as it has the results, so a run costs
// this much only when something is wrong.
constexpr unsigned long long kBusyNanoseconds = 500'000'000;  // 0.5 s

// A flag in pinned host memory that the spinning kernel reads through the bus.
class ReleaseFlag {
 public:
  ReleaseFlag() {
    void* pinned = nullptr;
    check_cuda(cudaHostAlloc(&pinned, sizeof(int), cudaHostAllocMapped), "cudaHostAlloc(flag)");
    host_ = static_cast<volatile int*>(pinned);
    *host_ = 0;
    void* on_device = nullptr;
    check_cuda(cudaHostGetDevicePointer(&on_device, pinned, 0), "cudaHostGetDevicePointer(flag)");
    device_ = static_cast<int*>(on_device);
  }
  ~ReleaseFlag() { cudaFreeHost(const_cast<int*>(host_)); }
  ReleaseFlag(const ReleaseFlag&) = delete;
  ReleaseFlag& operator=(const ReleaseFlag&) = delete;
  const volatile int* device() const { return device_; }
  void raise() { *host_ = 1; }

 private:
  volatile int* host_ = nullptr;
  int* device_ = nullptr;
};

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
  void upload(std::span<const std::uint8_t> host) {
    check_cuda(cudaMemcpy(data(), host.data(), std::min(host.size(), bytes_), cudaMemcpyHostToDevice),
               "cudaMemcpy to device");
  }
  bool download_equals(std::span<const std::uint8_t> host) const {
    std::vector<std::uint8_t> now(bytes_);
    check_cuda(cudaMemcpy(now.data(), data(), bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return std::equal(now.begin(), now.end(), host.begin(), host.end());
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

Run run_guarded(const std::vector<std::span<const std::uint8_t>>& inputs,
                const std::vector<std::size_t>& output_bytes, const LaunchOnBuffers& launch) {
  // Every buffer is allocated and poisoned before the launch (freeing or allocating memory
  // synchronises the device, which would hide a kernel launched on the wrong stream). Outputs
  // start as NaN like their guard zones: an element the kernel never writes stays NaN.
  std::vector<std::unique_ptr<GuardedBuffer>> in, out;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  for (const auto& host : inputs) {
    in.push_back(std::make_unique<GuardedBuffer>(host.size()));
    in.back()->upload(host);
    in_ptrs.push_back(in.back()->data());
  }
  for (std::size_t bytes : output_bytes) {
    out.push_back(std::make_unique<GuardedBuffer>(bytes));
    out_ptrs.push_back(out.back()->data());
  }
  ReleaseFlag release;
  // cudaMemset and cudaMemcpy run on the legacy default stream, which the lab's non-blocking
  // stream does not wait for: all of it must have landed before the launch.
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before the launch");
  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  Run r;
  for (std::size_t bytes : output_bytes) r.outputs.emplace_back(bytes);
  try {
    spin_kernel<<<1, 1, 0, 0>>>(release.device(), kBusyNanoseconds);  // the legacy default stream, busy
    check_cuda(cudaGetLastError(), "the busy kernel on the default stream");
    launch(in_ptrs, out_ptrs, stream);
    // Ordered on the lab's stream only: work the kernel put elsewhere is not waited for.
    for (std::size_t i = 0; i < out.size(); ++i)
      check_cuda(cudaMemcpyAsync(r.outputs[i].data(), out_ptrs[i], output_bytes[i], cudaMemcpyDeviceToHost, stream),
                 "reading an output on the lab's stream");
    check_cuda(cudaStreamSynchronize(stream), "the kernel (cudaStreamSynchronize on the lab's stream)");
    release.raise();  // the results are in: whatever waits behind the busy kernel may run now
    check_cuda(cudaDeviceSynchronize(), "the kernel (cudaDeviceSynchronize)");
    check_cuda(cudaGetLastError(), "the kernel (cudaGetLastError)");
  } catch (...) {
    release.raise();
    cudaStreamDestroy(stream);
    throw;
  }
  cudaStreamDestroy(stream);
  for (std::size_t i = 0; i < in.size(); ++i) {
    r.inputs_unchanged = r.inputs_unchanged && in[i]->download_equals(inputs[i]);
    r.wrote_only_outputs = r.wrote_only_outputs && in[i]->guards_intact();
  }
  for (const auto& buffer : out) r.wrote_only_outputs = r.wrote_only_outputs && buffer->guards_intact();
  return r;
}

Result run_kernel(const gpu_wire::KernelCall& c, const std::vector<std::uint8_t>& q,
                  const std::vector<std::uint8_t>& k, const std::vector<std::uint8_t>& v, const Launch& launch) {
  const std::size_t o_bytes = c.o_elements() * course::dtype_bytes(c.dtype);
  Run run = run_guarded({q, k, v}, {o_bytes, c.lse_elements() * 4},
                        [&](const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t stream) {
                          launch(in[0], in[1], in[2], out[0], static_cast<float*>(out[1]), stream);
                        });
  Result r;
  r.O = std::move(run.outputs[0]);
  r.lse.resize(c.lse_elements());
  std::memcpy(r.lse.data(), run.outputs[1].data(), run.outputs[1].size());
  r.inputs_unchanged = run.inputs_unchanged;
  r.wrote_only_outputs = run.wrote_only_outputs;
  return r;
}

void call_with_dummy_buffers(const std::function<void(void* buffer)>& launch) {
  DeviceBuffer dummy(1 << 20);
  launch(dummy.get());
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

double median_ms(const std::function<void()>& launch, int warmup, int repeats,
                 const std::function<void()>& before, const std::function<void(int)>& after) {
  for (int i = 0; i < warmup; ++i) {
    if (before) before();
    launch();
  }
  check_cuda(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> times;
  for (int i = 0; i < repeats; ++i) {
    if (before) before();
    check_cuda(cudaEventRecord(start), "cudaEventRecord");
    launch();
    check_cuda(cudaEventRecord(stop), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop), "timed launch");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms);
    if (after) after(i);
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

void time_forward(isolation::Packet& args, isolation::Packet& out, const ForwardLaunch& launch) {
  gpu_grading::SpeedConfig c;
  c.d = args.get<std::int32_t>();
  c.causal = args.get<std::uint8_t>() != 0;
  gpu_grading::SpeedCheck check;
  check.seed = args.get<std::uint64_t>();
  check.head = args.get<std::int32_t>();
  check.first_row = args.get<std::int32_t>();
  check.checked_call = args.get<std::int32_t>();
  const int heads = c.batch() * c.heads();  // B * H
  if (check.head < 0 || check.head >= heads || check.first_row < 0 ||
      check.first_row + gpu_grading::SpeedCheck::kRows > c.N)
    throw std::runtime_error("time: rows outside the benchmark shape");

  const std::size_t elements = std::size_t(heads) * c.N * c.d;
  DeviceBuffer q(elements * 2), k(elements * 2), v(elements * 2), o(elements * 2);
  DeviceBuffer lse(std::size_t(heads) * c.N * 4);
  fill_normal(q.get(), elements, course::DType::bf16, check.seed);
  fill_normal(k.get(), elements, course::DType::bf16, check.seed + 1);
  fill_normal(v.get(), elements, course::DType::bf16, check.seed + 2);
  const course::AttentionShape shape{c.batch(), c.heads(), c.N, c.N, c.d};

  // O and LSE are poisoned before every call (the launch is on the default stream, so is this);
  // after the checked call, its rows are copied out, before the next call's poison.
  const auto poison = [&] {
    check_cuda(cudaMemsetAsync(o.get(), 0xFF, o.bytes()), "poison O");
    check_cuda(cudaMemsetAsync(lse.get(), 0xFF, lse.bytes()), "poison LSE");
  };
  constexpr int kRows = gpu_grading::SpeedCheck::kRows;
  const std::size_t first = std::size_t(check.head) * c.N + check.first_row;  // row index in [B*H*N]
  std::vector<std::uint8_t> o_rows(std::size_t(kRows) * c.d * 2);
  std::vector<float> lse_rows(kRows);
  const auto copy_rows = [&](int call) {
    if (call != check.checked_call) return;
    check_cuda(cudaMemcpy(o_rows.data(), o.as<std::uint8_t>() + first * c.d * 2, o_rows.size(),
                          cudaMemcpyDeviceToHost), "copy the checked rows of O");
    check_cuda(cudaMemcpy(lse_rows.data(), lse.as<float>() + first, kRows * 4, cudaMemcpyDeviceToHost),
               "copy the checked rows of LSE");
  };
  const double ms = median_ms([&] { launch(q.get(), k.get(), v.get(), o.get(), lse.as<float>(), shape, c.causal); },
                              gpu_grading::SpeedCheck::kWarmup, gpu_grading::SpeedCheck::kRepeats, poison,
                              copy_rows);
  out.put<double>(ms);
  gpu_wire::put_bytes(out, o_rows);
  out.put_bytes(lse_rows.data(), lse_rows.size() * 4);
}

}  // namespace gpu_lab
