#include "device_run.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "speed_rules.hpp"
#include "worker.hpp"

namespace gpu_lab {

namespace {

// After a call of the lab ended in an exception: is this process's CUDA context still usable
// (isolation::set_fit_after_error_check)? An ordinary error (a launch configuration the GPU
// refuses) is cleared by reading it; an error from a kernel (an illegal address, a trap, an
// assertion) is sticky: every later call returns it, cudaDeviceSynchronize included.
bool cuda_context_usable() {
  (void)cudaGetLastError();
  return cudaDeviceSynchronize() == cudaSuccess && cudaGetLastError() == cudaSuccess;
}

// Set while the lab process starts: this file is in every GPU lab's process (its server calls
// run_kernel or run_guarded), and only there.
[[maybe_unused]] const bool kFitCheckSet = (isolation::set_fit_after_error_check(&cuda_context_usable), true);

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

// One CTA of hold_sms: spins for `ns` nanoseconds of GPU time (its shared memory is only taken,
// never used).
__global__ void hold_sm_kernel(unsigned long long ns) {
  extern __shared__ unsigned char unused[];
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
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

void hold_sms(int sms, unsigned long long ns, cudaStream_t stream) {
  // 160 KiB of shared memory per CTA: one CTA per SM, and none of lab 9's (130-150 KiB) beside it.
  constexpr int kSharedBytes = 160 * 1024;
  check_cuda(cudaFuncSetAttribute(hold_sm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes),
             "cudaFuncSetAttribute(hold_sm_kernel)");
  hold_sm_kernel<<<sms, 32, kSharedBytes, stream>>>(ns);
  check_cuda(cudaGetLastError(), "hold_sm_kernel<<<...>>> launch");
}

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
  const OwnedStream lab_stream;
  const cudaStream_t stream = lab_stream.get();
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
    throw;
  }
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

namespace {

// The "time" request's configuration and check, read and held to the benchmark's shape.
gpu_grading::SpeedCheck read_speed_request(isolation::Packet& args, gpu_grading::SpeedConfig& c) {
  gpu_grading::SpeedCheck check;
  gpu_wire::get_speed_request(args, c, check);
  const int heads = c.batch() * c.heads();  // B * H
  const int last_first = c.N - gpu_grading::SpeedCheck::kRows;
  if (check.head < 0 || check.head >= heads || check.first_row < 0 || check.first_row > last_first ||
      check.first_key < 0 || check.first_key > last_first || check.checked_call < 0 ||
      check.checked_call >= gpu_grading::SpeedCheck::kRepeats)
    throw std::runtime_error("time: rows or call outside the benchmark shape");
  return check;
}

}  // namespace

TimedRows time_checked(const std::function<void()>& launch, const gpu_grading::SpeedCheck& check,
                       const std::vector<TimedOutput>& outputs) {
  // Every output is poisoned before every call (the launch is on the default stream, so is this);
  // after the checked call its rows are copied out, before the next call's poison.
  const auto poison = [&] {
    for (const TimedOutput& out : outputs)
      check_cuda(cudaMemsetAsync(out.device, 0xFF, out.bytes), "poison an output before a timed call");
  };
  TimedRows timed;
  for (const TimedOutput& out : outputs) timed.rows.emplace_back(out.checked_bytes);
  const auto copy_rows = [&](int call) {
    if (call != check.checked_call) return;
    for (std::size_t i = 0; i < outputs.size(); ++i)
      check_cuda(cudaMemcpy(timed.rows[i].data(), static_cast<const std::uint8_t*>(outputs[i].device) +
                                                      outputs[i].checked_offset,
                            outputs[i].checked_bytes, cudaMemcpyDeviceToHost),
                 "copy the checked rows of an output");
  };
  timed.ms = median_ms(launch, gpu_grading::SpeedCheck::kWarmup, gpu_grading::SpeedCheck::kRepeats, poison,
                       copy_rows);
  return timed;
}

void time_forward(isolation::Packet& args, isolation::Packet& out, const ForwardLaunch& launch) {
  gpu_grading::SpeedConfig c;
  const gpu_grading::SpeedCheck check = read_speed_request(args, c);
  const std::size_t elements = std::size_t(c.batch()) * c.heads() * c.N * c.d;
  DeviceBuffer q(elements * 2), k(elements * 2), v(elements * 2), o(elements * 2);
  DeviceBuffer lse(elements / c.d * 4);
  fill_normal(q.get(), elements, course::DType::bf16, check.seed);
  fill_normal(k.get(), elements, course::DType::bf16, check.seed + 1);
  fill_normal(v.get(), elements, course::DType::bf16, check.seed + 2);
  const course::AttentionShape shape{c.batch(), c.heads(), c.N, c.N, c.d};

  constexpr int kRows = gpu_grading::SpeedCheck::kRows;
  const std::size_t first = std::size_t(check.head) * c.N + check.first_row;  // row index in [B*H*N]
  const TimedRows timed = time_checked(
      [&] { launch(q.get(), k.get(), v.get(), o.get(), lse.as<float>(), shape, c.causal); }, check,
      {{o.get(), o.bytes(), first * c.d * 2, std::size_t(kRows) * c.d * 2},
       {lse.get(), lse.bytes(), first * 4, std::size_t(kRows) * 4}});
  out.put<double>(timed.ms);
  gpu_wire::put_bytes(out, timed.rows[0]);
  out.put_bytes(timed.rows[1].data(), timed.rows[1].size());
}

void time_backward(isolation::Packet& args, isolation::Packet& out, const BackwardLaunch& launch,
                   std::size_t workspace_bytes_for_shape(const course::AttentionShape&)) {
  gpu_grading::SpeedConfig c;
  c.backward = true;
  const gpu_grading::SpeedCheck check = read_speed_request(args, c);
  const std::size_t rows = std::size_t(c.batch()) * c.heads() * c.N, elements = rows * c.d;
  DeviceBuffer q(elements * 2), k(elements * 2), v(elements * 2), dout(elements * 2), o(elements * 2);
  DeviceBuffer dq(elements * 2), dk(elements * 2), dv(elements * 2), lse(rows * 4);
  fill_normal(q.get(), elements, course::DType::bf16, check.seed);
  fill_normal(k.get(), elements, course::DType::bf16, check.seed + 1);
  fill_normal(v.get(), elements, course::DType::bf16, check.seed + 2);
  fill_normal(dout.get(), elements, course::DType::bf16, check.seed + 3);
  fill_normal(o.get(), elements, course::DType::bf16, check.seed + 4);
  std::vector<float> lse_host(rows);
  for (std::size_t r = 0; r < rows; ++r) lse_host[r] = gpu_grading::synthetic_lse(int(r % c.N), c.N, c.causal);
  check_cuda(cudaMemcpy(lse.get(), lse_host.data(), rows * 4, cudaMemcpyHostToDevice), "copy the LSE");
  const course::AttentionShape shape{c.batch(), c.heads(), c.N, c.N, c.d};
  DeviceBuffer workspace(workspace_bytes_for_shape(shape));

  // The workspace is poisoned too, as in the correctness checks: a kernel that adds into its dQ
  // accumulator without zeroing it first gets NaN, not the last call's sums.
  constexpr int kRows = gpu_grading::SpeedCheck::kRows;
  const std::size_t row_bytes = std::size_t(c.d) * 2;
  const std::size_t query_at = (std::size_t(check.head) * c.N + check.first_row) * row_bytes;
  const std::size_t key_at = (std::size_t(check.head) * c.N + check.first_key) * row_bytes;
  const TimedRows timed = time_checked(
      [&] {
        launch(q.get(), k.get(), v.get(), o.get(), dout.get(), lse.as<float>(), dq.get(), dk.get(), dv.get(),
               workspace.get(), workspace.bytes(), shape, c.causal);
      },
      check,
      {{dq.get(), dq.bytes(), query_at, kRows * row_bytes},
       {dk.get(), dk.bytes(), key_at, kRows * row_bytes},
       {dv.get(), dv.bytes(), key_at, kRows * row_bytes},
       {workspace.get(), workspace.bytes(), 0, 0}});
  out.put<double>(timed.ms);
  for (int i = 0; i < 3; ++i) gpu_wire::put_bytes(out, timed.rows[std::size_t(i)]);
}

}  // namespace gpu_lab
