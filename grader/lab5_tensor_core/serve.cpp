// The lab process's side of lab 5: runs the student's kernel (any step of the staircase) on the
// inputs the grader sent, inside grader/gpu/device_run, and times it for the speed checks. See
// grader/isolation/worker.hpp.
#include <cstdint>

#include "course/gpu.hpp"
#include "course/lab5_tensor_core.hpp"
#include "device_run.hpp"
#include "gpu_wire.hpp"
#include "speed.hpp"
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

// The median time of the shipped version on the speed benchmark's shape, in milliseconds, on
// seeded normal bf16 inputs (the same in the student's lab process and the solution's).
void time_kernel(Packet& args, Packet& out) {
  lab5_speed::SpeedConfig c;
  c.d = args.get<std::int32_t>();
  c.causal = args.get<std::uint8_t>() != 0;
  const std::size_t elements = std::size_t(c.batch()) * c.heads() * c.N * c.d;
  course::DeviceBuffer q(elements * 2), k(elements * 2), v(elements * 2), o(elements * 2);
  course::DeviceBuffer lse(std::size_t(c.batch()) * c.heads() * c.N * 4);
  std::uint64_t seed = 12345;
  for (const course::DeviceBuffer* b : {&q, &k, &v}) gpu_lab::fill_normal(b->get(), elements, course::DType::bf16, seed++);
  course::lab5::ForwardOptions options;
  options.causal = c.causal;
  const course::AttentionShape shape{c.batch(), c.heads(), c.N, c.N, c.d};
  const double ms = gpu_lab::median_ms([&] {
    course::lab5::flash_attention_forward(q.get(), k.get(), v.get(), o.get(), lse.as<float>(), course::DType::bf16,
                                          shape, options);
  });
  out.put<double>(ms);
}

}  // namespace

void isolation::register_handlers(Registry& r) {
  r.add("forward/bf16", forward);
  r.add("forward/fp16", forward);
  r.add("bad_arguments", bad_arguments);
  r.add("time", time_kernel);
}
