// The lab process's handlers of the forward-attention GPU labs (5 and 8): the same requests on
// the wire, each lab's own ForwardOptions and flash_attention_forward. A lab's serve.cpp is one
// line: gpu_lab::add_forward_handlers<course::labN::ForwardOptions,
// &course::labN::flash_attention_forward>(r). See grader/isolation/worker.hpp.
//   forward/bf16, forward/fp16   the student's kernel (any version) on the grader's inputs, inside
//                                gpu_lab::run_kernel (guard zones, poisoned outputs, a busy
//                                default stream)
//   bad_arguments                a call with a bad shape, dtype or scale, or a null Q, on dummy
//                                buffers: it must throw course::BadInput before launching
//   bad_arguments_misaligned     Q two bytes past a 256-byte aligned buffer, not 16-byte aligned
//                                (lab 8 asks for it: TMA needs 16-byte aligned addresses)
//   time                         the median time of the shipped version on the speed shape
#pragma once

#include <cstdint>

#include "course/gpu.hpp"
#include "device_run.hpp"
#include "gpu_wire.hpp"
#include "worker.hpp"

namespace gpu_lab {

// Options: the lab's ForwardOptions (causal, scale, stream, version). kForward: its
// flash_attention_forward(Q, K, V, O, lse, dtype, shape, options).
template <class Options, auto kForward>
struct ForwardHandlers {
  static Options options_of(const gpu_wire::KernelCall& c, cudaStream_t stream) {
    Options options;
    options.causal = c.causal;
    options.scale = c.scale;
    options.stream = stream;
    options.version = gpu_wire::choice_of(c, options.version);  // -1: the lab's default, best
    return options;
  }

  static void forward(isolation::Packet& args, isolation::Packet& out) {
    const gpu_wire::KernelCall c = gpu_wire::get_call(args);
    const auto q = gpu_wire::get_bytes(args), k = gpu_wire::get_bytes(args), v = gpu_wire::get_bytes(args);
    const Result result = run_kernel(c, q, k, v, [&](const void* dq, const void* dk, const void* dv, void* o,
                                                     float* lse, cudaStream_t stream) {
      kForward(dq, dk, dv, o, lse, c.dtype, {c.B, c.H, c.Nq, c.Nk, c.d}, options_of(c, stream));
    });
    put_result(out, result);
  }

  static void bad_arguments(isolation::Packet& args, isolation::Packet&) {
    const gpu_wire::KernelCall c = gpu_wire::get_call(args);
    const bool null_q = args.get<std::uint8_t>() != 0;
    call_with_dummy_buffers([&](void* buffer) {
      kForward(null_q ? nullptr : buffer, buffer, buffer, buffer, static_cast<float*>(buffer), c.dtype,
               {c.B, c.H, c.Nq, c.Nk, c.d}, options_of(c, nullptr));
    });
  }

  static void bad_arguments_misaligned(isolation::Packet& args, isolation::Packet&) {
    const gpu_wire::KernelCall c = gpu_wire::get_call(args);
    call_with_dummy_buffers([&](void* buffer) {
      const void* q = static_cast<const unsigned char*>(buffer) + 2;
      kForward(q, buffer, buffer, buffer, static_cast<float*>(buffer), c.dtype, {c.B, c.H, c.Nq, c.Nk, c.d},
               options_of(c, nullptr));
    });
  }

  // The shipped version (the default Options: best, not causal unless asked, default stream).
  static void time(isolation::Packet& args, isolation::Packet& out) {
    time_forward(args, out, [](const void* q, const void* k, const void* v, void* o, float* lse,
                               const course::AttentionShape& shape, bool causal) {
      Options options;
      options.causal = causal;
      kForward(q, k, v, o, lse, course::DType::bf16, shape, options);
    });
  }
};

template <class Options, auto kForward>
void add_forward_handlers(isolation::Registry& r) {
  using H = ForwardHandlers<Options, kForward>;
  r.add("forward/bf16", H::forward);
  r.add("forward/fp16", H::forward);
  r.add("bad_arguments", H::bad_arguments);
  r.add("bad_arguments_misaligned", H::bad_arguments_misaligned);
  r.add("time", H::time);
}

}  // namespace gpu_lab
