// The lab process's side of the GPU backward checks (backward_gpu_checks.hpp), for any lab whose
// call is lab 7's flash_attention_backward (course/lab7_backward_gpu.hpp): lab 7 parts 2 and 3
// (serve_gpu.cpp) and lab 9 (grader/lab9_hopper_backward/serve.cpp). Runs the call on the inputs
// the grader sent, inside grader/gpu/device_run's harness (every input between NaN guard zones,
// dQ, dK and dV NaN-poisoned, a busy default stream, reads ordered on the lab's stream). The
// workspace starts as NaN too: a kernel that adds into its dQ accumulator without zeroing it
// first gets NaN. Lab 9 also answers the speed check's "time" request (add_time) and calls in its
// deterministic mode (add_deterministic).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "course/lab7_backward_gpu.hpp"
#include "device_run.hpp"
#include "gpu_wire.hpp"
#include "worker.hpp"

namespace backward_handlers {

using BackwardFn = void (*)(const void*, const void*, const void*, const void*, const void*, const float*, void*,
                            void*, void*, course::DType, const course::AttentionShape&,
                            const course::lab7::BackwardGpuOptions&);
using WorkspaceFn = std::size_t (*)(const course::AttentionShape&);

inline course::AttentionShape shape_of(const gpu_wire::KernelCall& c) { return {c.B, c.H, c.Nq, c.Nk, c.d}; }

// The call's `version` names the kernel (course/gpu_labs.def's COURSE_LAB7_KERNEL lines; -1
// automatic).
inline course::lab7::BackwardKernel kernel_of(const gpu_wire::KernelCall& c) {
  return gpu_wire::choice_of(c, course::lab7::BackwardKernel::automatic);
}

// The call's `step`: lab 9's step, -1 for its default (lab 7 ignores the field). Any other
// value is passed on as it is, for lab 9 to reject.
inline course::lab7::HopperBackwardStep step_of(const gpu_wire::KernelCall& c) {
  return c.step < 0 ? course::lab7::HopperBackwardStep::best : static_cast<course::lab7::HopperBackwardStep>(c.step);
}

// Request: the call, then Q, K, V, O, dO in the dtype's bits and lse as fp32 bytes. Reply: dQ, dK,
// dV in the dtype's bits, then "inputs unchanged" and "wrote only dQ, dK, dV" flags.
// The deterministic request (lab 9) adds, after lse, a gpu_wire::Beside byte (what runs beside
// the call) and calls with options.deterministic set.
template <BackwardFn kBackward, WorkspaceFn kWorkspaceBytes, bool kDeterministic = false>
void backward(isolation::Packet& args, isolation::Packet& out) {
  using course::check_cuda;
  using course::DeviceBuffer;
  const gpu_wire::KernelCall c = gpu_wire::get_call(args);
  std::vector<std::vector<std::uint8_t>> inputs;
  for (int i = 0; i < 6; ++i) inputs.push_back(gpu_wire::get_bytes(args));  // Q K V O dO lse
  using gpu_wire::Beside;
  const Beside beside = kDeterministic ? args.get<Beside>() : Beside::nothing;
  int sms_held = 0;
  if (beside != Beside::nothing) {
    const int sms = course::multiprocessor_count();
    sms_held = beside == Beside::half_the_sms ? sms / 2 : sms - 8;
  }
  std::optional<gpu_lab::OwnedStream> other;  // the holding kernel's stream
  if (sms_held > 0) other.emplace();
  const course::AttentionShape shape = shape_of(c);
  const std::size_t q_bytes = std::size_t(c.B) * c.H * c.Nq * c.d * course::dtype_bytes(c.dtype);
  const std::size_t k_bytes = std::size_t(c.B) * c.H * c.Nk * c.d * course::dtype_bytes(c.dtype);
  // Allocated and poisoned before the run (allocation synchronises the device, which would hide
  // a kernel launched on the wrong stream); all-ones bytes are NaN in fp32.
  const std::size_t workspace_bytes = kWorkspaceBytes(shape);
  DeviceBuffer workspace(workspace_bytes);
  check_cuda(cudaMemset(workspace.get(), 0xFF, workspace_bytes), "cudaMemset(workspace)");
  const gpu_lab::Run run = gpu_lab::run_guarded(
      {inputs[0], inputs[1], inputs[2], inputs[3], inputs[4], inputs[5]}, {q_bytes, k_bytes, k_bytes},
      [&](const std::vector<const void*>& in, const std::vector<void*>& o, cudaStream_t stream) {
        course::lab7::BackwardGpuOptions options;
        options.causal = c.causal;
        options.scale = c.scale;
        options.workspace = workspace.get();
        options.workspace_bytes = workspace_bytes;
        options.stream = stream;
        options.kernel = kernel_of(c);
        options.hopper_step = step_of(c);
        options.deterministic = kDeterministic;
        if (other) gpu_lab::hold_sms(sms_held, 2'000'000, other->get());
        kBackward(in[0], in[1], in[2], in[3], in[4], static_cast<const float*>(in[5]), o[0], o[1], o[2], c.dtype,
                  shape, options);
      });
  for (const auto& bytes : run.outputs) gpu_wire::put_bytes(out, bytes);
  out.put<std::uint8_t>(run.inputs_unchanged);
  out.put<std::uint8_t>(run.wrote_only_outputs);
}

// The call with arguments that must be rejected: a null Q, a too-small workspace, or the call's
// shape, d and dtype. Returns normally only if nothing was thrown.
template <BackwardFn kBackward>
void bad_arguments(isolation::Packet& args, isolation::Packet&) {
  const gpu_wire::KernelCall c = gpu_wire::get_call(args);
  const bool null_q = args.get<std::uint8_t>() != 0;
  const std::uint64_t workspace_bytes = args.get<std::uint64_t>();
  gpu_lab::call_with_dummy_buffers([&](void* buffer) {
    course::lab7::BackwardGpuOptions options;
    options.causal = c.causal;
    options.workspace = buffer;
    options.workspace_bytes = workspace_bytes;
    options.kernel = kernel_of(c);
    options.hopper_step = step_of(c);
    kBackward(null_q ? nullptr : buffer, buffer, buffer, buffer, buffer, static_cast<const float*>(buffer), buffer,
              buffer, buffer, c.dtype, shape_of(c), options);
  });
}

// The speed check's "time" request (lab 9; gpu_lab::time_backward): bf16, the default kernel and
// stream, the benchmark's shape.
template <BackwardFn kBackward, WorkspaceFn kWorkspaceBytes>
void time(isolation::Packet& args, isolation::Packet& out) {
  gpu_lab::time_backward(
      args, out,
      [](const void* q, const void* k, const void* v, const void* o, const void* dout, const float* lse, void* dq,
         void* dk, void* dv, void* workspace, std::size_t workspace_bytes, const course::AttentionShape& shape,
         bool causal) {
        course::lab7::BackwardGpuOptions options;
        options.causal = causal;
        options.workspace = workspace;
        options.workspace_bytes = workspace_bytes;
        kBackward(q, k, v, o, dout, lse, dq, dk, dv, course::DType::bf16, shape, options);
      },
      kWorkspaceBytes);
}

// Registers "flash_attention_backward" and "flash_attention_backward.bad_arguments".
template <BackwardFn kBackward, WorkspaceFn kWorkspaceBytes>
void add(isolation::Registry& r) {
  r.add("flash_attention_backward", backward<kBackward, kWorkspaceBytes>);
  r.add("flash_attention_backward.bad_arguments", bad_arguments<kBackward>);
}

// Registers "flash_attention_backward.deterministic", for a lab with the deterministic mode (lab 9).
template <BackwardFn kBackward, WorkspaceFn kWorkspaceBytes>
void add_deterministic(isolation::Registry& r) {
  r.add("flash_attention_backward.deterministic", backward<kBackward, kWorkspaceBytes, true>);
}

// Registers "time", for a lab with speed checks (lab 9).
template <BackwardFn kBackward, WorkspaceFn kWorkspaceBytes>
void add_time(isolation::Registry& r) {
  r.add("time", time<kBackward, kWorkspaceBytes>);
}

}  // namespace backward_handlers
