// The lab process's side of lab 4: runs the student's kernel on the inputs the grader sent,
// inside grader/gpu/device_run (poisoned outputs, a busy default stream, reads ordered on the
// lab's stream). See grader/isolation/worker.hpp.
#include "course/lab4_cuda.hpp"
#include "device_run.hpp"
#include "gpu_wire.hpp"
#include "worker.hpp"

namespace {

using isolation::Packet;

void forward(Packet& args, Packet& out) {
  const gpu_wire::KernelCall c = gpu_wire::get_call(args);
  const auto q = gpu_wire::get_bytes(args), k = gpu_wire::get_bytes(args), v = gpu_wire::get_bytes(args);
  const auto result = gpu_lab::run_kernel(c, q, k, v, [&](const void* dq, const void* dk, const void* dv, void* o,
                                                        float* lse, cudaStream_t stream) {
    course::lab4::ForwardOptions options;
    options.causal = c.causal;
    options.scale = c.scale;
    options.stream = stream;
    course::lab4::flash_attention_forward(dq, dk, dv, o, lse, c.dtype, {c.B, c.H, c.Nq, c.Nk, c.d}, options);
  });
  gpu_lab::put_result(out, result);
}

// The kernel's entry point with arguments that must be rejected: the shape sent, and Q null
// when asked. Returns normally only if nothing was thrown.
void bad_arguments(Packet& args, Packet&) {
  const gpu_wire::KernelCall c = gpu_wire::get_call(args);
  const bool null_q = args.get<std::uint8_t>() != 0;
  gpu_lab::call_with_dummy_buffers([&](void* buffer) {
    course::lab4::ForwardOptions options;
    course::lab4::flash_attention_forward(null_q ? nullptr : buffer, buffer, buffer, buffer, static_cast<float*>(buffer),
                                          c.dtype, {c.B, c.H, c.Nq, c.Nk, c.d}, options);
  });
}

}  // namespace

void isolation::register_handlers(Registry& r) {
  r.add("forward/fp32", forward);
  r.add("forward/bf16", forward);
  r.add("bad_arguments", bad_arguments);
}
