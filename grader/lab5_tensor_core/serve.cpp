// The lab process's side of lab 5: runs the student's kernel (any step of the staircase) on the
// inputs the grader sent, inside grader/gpu/device_run, and times it for the speed checks. See
// grader/isolation/worker.hpp.
#include <cstdint>

#include "course/gpu.hpp"
#include "course/lab5_tensor_core.hpp"
#include "device_run.hpp"
#include "gpu_wire.hpp"
#include "worker.hpp"

namespace {

using isolation::Packet;

course::lab5::ForwardOptions options_of(const gpu_wire::KernelCall& c, cudaStream_t stream) {
  course::lab5::ForwardOptions options;
  options.causal = c.causal;
  options.scale = c.scale;
  options.stream = stream;
  if (c.version >= 0) options.version = course::lab5::Version(c.version);
  return options;
}

void forward(Packet& args, Packet& out) {
  const gpu_wire::KernelCall c = gpu_wire::get_call(args);
  const auto q = gpu_wire::get_bytes(args), k = gpu_wire::get_bytes(args), v = gpu_wire::get_bytes(args);
  const auto result = gpu_lab::run_kernel(c, q, k, v, [&](const void* dq, const void* dk, const void* dv, void* o,
                                                        float* lse, cudaStream_t stream) {
    course::lab5::flash_attention_forward(dq, dk, dv, o, lse, c.dtype, {c.B, c.H, c.Nq, c.Nk, c.d},
                                          options_of(c, stream));
  });
  gpu_lab::put_result(out, result);
}

void bad_arguments(Packet& args, Packet&) {
  const gpu_wire::KernelCall c = gpu_wire::get_call(args);
  const bool null_q = args.get<std::uint8_t>() != 0;
  gpu_lab::call_with_dummy_buffers([&](void* buffer) {
    course::lab5::flash_attention_forward(null_q ? nullptr : buffer, buffer, buffer, buffer,
                                          static_cast<float*>(buffer), c.dtype,
                                          {c.B, c.H, c.Nq, c.Nk, c.d}, options_of(c, nullptr));
  });
}

// The median time of the shipped version on the speed benchmark's shape (gpu_lab::time_forward).
void time_kernel(Packet& args, Packet& out) {
  gpu_lab::time_forward(args, out, [](const void* q, const void* k, const void* v, void* o, float* lse,
                                      const course::AttentionShape& shape, bool causal) {
    course::lab5::ForwardOptions options;
    options.causal = causal;
    course::lab5::flash_attention_forward(q, k, v, o, lse, course::DType::bf16, shape, options);
  });
}

}  // namespace

void isolation::register_handlers(Registry& r) {
  r.add("forward/bf16", forward);
  r.add("forward/fp16", forward);
  r.add("bad_arguments", bad_arguments);
  r.add("time", time_kernel);
}
