// The lab process's side of lab 5: runs the student's kernel (any step of the staircase) on the
// inputs the grader sent, inside grader/gpu/device_run, and times it for the speed checks. See
// grader/isolation/worker.hpp.
#include <Eigen/Core>

#include <cstdint>
#include <vector>

#include "course/lab5_tensor_core.hpp"
#include "device_run.hpp"
#include "gpu_wire.hpp"
#include "speed.hpp"
#include "worker.hpp"

namespace {

using isolation::Packet;

course::lab5::DType dtype_of(gpu_wire::Storage s) {
  return s == gpu_wire::Storage::fp16 ? course::lab5::DType::fp16 : course::lab5::DType::bf16;
}

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
    course::lab5::flash_attention_forward(dq, dk, dv, o, lse, dtype_of(c.dtype), {c.B, c.H, c.Nq, c.Nk, c.d},
                                          options_of(c, stream));
  });
  gpu_lab::put_result(out, result);
}

void bad_arguments(Packet& args, Packet&) {
  const gpu_wire::KernelCall c = gpu_wire::get_call(args);
  const bool null_q = args.get<std::uint8_t>() != 0;
  gpu_lab::call_with_dummy_buffers([&](void* buffer) {
    course::lab5::flash_attention_forward(null_q ? nullptr : buffer, buffer, buffer, buffer,
                                          static_cast<float*>(buffer), dtype_of(c.dtype),
                                          {c.B, c.H, c.Nq, c.Nk, c.d}, options_of(c, nullptr));
  });
}

// Fills a bf16 device buffer with normal-ish random values (one block copied across it: timing
// needs realistic data, not fresh randomness for every element; never zeros).
void fill_bf16(void* dst, std::size_t elements) {
  std::vector<Eigen::bfloat16> block(1 << 20);
  std::uint64_t state = 12345;
  for (auto& b : block) {
    float sum = 0;  // Irwin-Hall: the sum of 12 uniforms, minus 6, is close to N(0, 1)
    for (int i = 0; i < 12; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      sum += float(state >> 40) / float(1 << 24);
    }
    b = Eigen::bfloat16(sum - 6.0f);
  }
  auto* out = static_cast<Eigen::bfloat16*>(dst);
  for (std::size_t at = 0; at < elements; at += block.size()) {
    const std::size_t n = std::min(block.size(), elements - at);
    gpu_lab::check_cuda(cudaMemcpy(out + at, block.data(), n * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
}

// The median time of the shipped version on the speed benchmark's shape, in milliseconds.
void time_kernel(Packet& args, Packet& out) {
  lab5_speed::SpeedConfig c;
  c.d = args.get<std::int32_t>();
  c.causal = args.get<std::uint8_t>() != 0;
  const std::size_t elements = std::size_t(c.batch()) * c.heads() * c.N * c.d;
  void *q, *k, *v, *o, *lse;
  for (void** p : {&q, &k, &v, &o}) gpu_lab::check_cuda(cudaMalloc(p, elements * 2), "cudaMalloc");
  gpu_lab::check_cuda(cudaMalloc(&lse, std::size_t(c.batch()) * c.heads() * c.N * 4), "cudaMalloc");
  for (void* p : {q, k, v}) fill_bf16(p, elements);
  course::lab5::ForwardOptions options;
  options.causal = c.causal;
  const course::lab4::AttentionShape shape{c.batch(), c.heads(), c.N, c.N, c.d};
  const double ms = gpu_lab::median_ms([&] {
    course::lab5::flash_attention_forward(q, k, v, o, static_cast<float*>(lse), course::lab5::DType::bf16, shape,
                                          options);
  });
  for (void* p : {q, k, v, o, lse}) cudaFree(p);
  out.put<double>(ms);
}

}  // namespace

void isolation::register_handlers(Registry& r) {
  r.add("forward/bf16", forward);
  r.add("forward/fp16", forward);
  r.add("bad_arguments", bad_arguments);
  r.add("time", time_kernel);
}
