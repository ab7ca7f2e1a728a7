// What a GPU lab process does around the student's kernel (lab process side; see
// grader/isolation/). The grader sends the inputs; this code
//   - copies them to the device between guard zones of NaN (a read past an input's end shows
//     up as NaN in the output; a write outside O and LSE changes a zone) and poisons O and LSE
//     with NaN (every element must be written);
//   - keeps the legacy default stream busy until the results are read and hands the kernel a
//     non-blocking stream: a kernel that ignores options.stream runs late, after the reads;
//   - reads O and LSE back with copies ordered on that stream, then waits for the whole device
//     and checks that Q, K and V are unchanged.
// The grader compares what comes back with the reference; nothing here judges.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "course/gpu.hpp"
#include "gpu_wire.hpp"
#include "speed_rules.hpp"

namespace gpu_lab {

// A non-blocking stream destroyed when it goes out of scope, also when a check on the way throws
// (a lab process answers many requests: a stream lost per failing call would pile up).
class OwnedStream {
 public:
  OwnedStream() { course::check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~OwnedStream() { cudaStreamDestroy(stream_); }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

struct Result {
  std::vector<std::uint8_t> O;  // [B, H, Nq, d] in the dtype's bits
  std::vector<float> lse;       // [B, H, Nq]
  bool inputs_unchanged = true;
  bool wrote_only_outputs = true;  // the guard zones around every buffer are untouched
};

using Launch = std::function<void(const void* q, const void* k, const void* v, void* o, float* lse,
                                  cudaStream_t stream)>;

// The general form, for any number of inputs and outputs: each input is copied to the device
// between guard zones, each output is a NaN-poisoned guarded buffer of the given size, and
// `launch` gets their device addresses (in the same order) and the lab's non-blocking stream.
// What comes back: every output's bytes, read on that stream after the default stream was kept
// busy, and the two flags.
struct Run {
  std::vector<std::vector<std::uint8_t>> outputs;
  bool inputs_unchanged = true;
  bool wrote_only_outputs = true;
};
using LaunchOnBuffers = std::function<void(const std::vector<const void*>& inputs,
                                           const std::vector<void*>& outputs, cudaStream_t stream)>;
Run run_guarded(const std::vector<std::span<const std::uint8_t>>& inputs,
                const std::vector<std::size_t>& output_bytes, const LaunchOnBuffers& launch);

// The bytes of a vector of floats, as an input of run_guarded.
inline std::span<const std::uint8_t> bytes_of(const std::vector<float>& x) {
  return {reinterpret_cast<const std::uint8_t*>(x.data()), x.size() * sizeof(float)};
}

// The forward labs' form: Q, K, V in, O and LSE out.
Result run_kernel(const gpu_wire::KernelCall& call, const std::vector<std::uint8_t>& q,
                  const std::vector<std::uint8_t>& k, const std::vector<std::uint8_t>& v,
                  const Launch& launch);

// Launches, on `stream`, a kernel that holds `sms` streaming multiprocessors for about `ns`
// nanoseconds (one CTA on each, with enough shared memory that no CTA of a lab's kernel fits
// beside it), and returns at once: a kernel launched next on another stream gets the other SMs
// first, and its CTAs run in other places and at other times than on an idle GPU (lab 9's
// deterministic-mode check).
void hold_sms(int sms, unsigned long long ns, cudaStream_t stream);

// Calls `launch` on a 1 MiB device buffer standing in for every pointer (null where asked), for
// the checks that bad arguments are rejected before anything runs.
void call_with_dummy_buffers(const std::function<void(void* buffer)>& launch);

// The median of `repeats` timed launches (CUDA events on the default stream) after `warmup`
// untimed ones, in ms. `before` (if set) runs before every launch, outside the timed interval;
// `after(i)` (if set) after timed launch i has finished.
double median_ms(const std::function<void()>& launch, int warmup = 3, int repeats = 20,
                 const std::function<void()>& before = {}, const std::function<void(int)>& after = {});

// Fills `count` elements of `type` in device memory with standard normal values drawn from
// `seed` (course::fill_normal), and waits for it: inputs for timing a kernel.
void fill_normal(void* x, std::size_t count, course::DType type, std::uint64_t seed);

// One output of a timed kernel: poisoned (NaN) before every call, outside the timed interval, so
// that the calls cannot be told apart, and `checked_bytes` of it from `checked_offset` copied out
// after the checked call (none: poisoned only).
struct TimedOutput {
  void* device = nullptr;
  std::size_t bytes = 0;
  std::size_t checked_offset = 0;
  std::size_t checked_bytes = 0;
};
struct TimedRows {
  double ms = 0;                                // the median of the timed calls
  std::vector<std::vector<std::uint8_t>> rows;  // per output, what the checked call left there
};
// The timing of every speed check (gpu_grading::SpeedCheck: kWarmup untimed calls, then kRepeats
// timed ones, the median kept), with each output poisoned before every call and the checked
// call's rows copied back.
TimedRows time_checked(const std::function<void()>& launch, const gpu_grading::SpeedCheck& check,
                       const std::vector<TimedOutput>& outputs);

// The "time" request of the forward labs (5 and 8): reads d, causal and a gpu_grading::SpeedCheck
// (gpu_wire::get_speed_request); fills Q, K and V of the speed benchmark's shape
// (gpu_grading::SpeedConfig) with course::fill_normal's values from seed, seed + 1 and seed + 2
// (bf16); times `launch` (the lab's shipped version, on the default stream) with O and LSE
// poisoned before every call; answers with the median milliseconds, then the checked call's kRows
// rows of O (bf16 bits) and of LSE (floats), which the grader compares with its reference.
using ForwardLaunch = std::function<void(const void* q, const void* k, const void* v, void* o, float* lse,
                                         const course::AttentionShape& shape, bool causal)>;
void time_forward(isolation::Packet& args, isolation::Packet& out, const ForwardLaunch& launch);

// The "time" request of the backward (lab 9), the same way: Q, K, V, dO and O from seed .. seed + 4,
// the LSE gpu_grading::synthetic_lse; dQ, dK, dV and the workspace (workspace_bytes(shape) of it)
// poisoned before every call; answers with the median milliseconds, then the checked call's kRows
// rows of dQ from first_row and of dK and dV from first_key (bf16 bits each).
using BackwardLaunch =
    std::function<void(const void* q, const void* k, const void* v, const void* o, const void* dout,
                       const float* lse, void* dq, void* dk, void* dv, void* workspace,
                       std::size_t workspace_bytes, const course::AttentionShape& shape, bool causal)>;
void time_backward(isolation::Packet& args, isolation::Packet& out, const BackwardLaunch& launch,
                   std::size_t workspace_bytes(const course::AttentionShape&));

// A run's results on the wire, as the grader reads them (gpu_harness.cpp, run_lab): O's bits,
// the LSE's bytes, whether the inputs were left unchanged, and whether the kernel wrote only O and
// LSE.
inline void put_result(isolation::Packet& out, const Result& r) {
  gpu_wire::put_bytes(out, r.O);
  out.put<std::uint64_t>(r.lse.size() * 4);
  out.put_bytes(r.lse.data(), r.lse.size() * 4);
  out.put<std::uint8_t>(r.inputs_unchanged);
  out.put<std::uint8_t>(r.wrote_only_outputs);
}

}  // namespace gpu_lab
