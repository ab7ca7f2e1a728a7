// The lab process's side of lab 6: runs the student's split-KV decoding on the inputs the grader
// sent, inside grader/gpu/device_run (NaN guard zones around every buffer, NaN-poisoned O and
// LSE, a busy default stream, reads ordered on the lab's stream), and the merge alone. See
// grader/isolation/worker.hpp.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "course/lab6_decoding.hpp"
#include "decode_wire.hpp"
#include "device_run.hpp"
#include "gpu_wire.hpp"
#include "worker.hpp"

namespace {

using course::check_cuda;
using course::DeviceBuffer;
using isolation::Packet;

course::lab6::DecodeShape shape_of(const gpu_wire::KernelCall& c) { return {c.B, c.H, c.Nq, c.Nk, c.d}; }

void decode(Packet& args, Packet& out) {
  const decode_wire::DecodeCall c = decode_wire::get_decode(args);
  const auto q = gpu_wire::get_bytes(args), k = gpu_wire::get_bytes(args), v = gpu_wire::get_bytes(args);
  const course::lab6::DecodeShape shape = shape_of(c.base);
  const course::DType dtype = c.base.dtype;
  // Allocated before the run (freeing memory synchronises the device, which would hide a kernel
  // launched on the wrong stream). The workspace starts as NaN: a partial result that kernel 1
  // never wrote reaches the merge as NaN.
  DeviceBuffer seqlens(c.seqlens.size() * 4 + 4);
  if (c.has_seqlens)
    check_cuda(cudaMemcpy(seqlens.get(), c.seqlens.data(), c.seqlens.size() * 4, cudaMemcpyHostToDevice),
               "cudaMemcpy(seqlens_k)");
  const std::size_t workspace_bytes = course::lab6::split_kv_workspace_bytes(shape, dtype, c.num_splits);
  DeviceBuffer workspace(workspace_bytes);
  check_cuda(cudaMemset(workspace.get(), 0xFF, workspace_bytes), "cudaMemset(workspace)");
  const auto result = gpu_lab::run_kernel(c.base, q, k, v, [&](const void* dq, const void* dk, const void* dv,
                                                             void* o, float* lse, cudaStream_t stream) {
    course::lab6::DecodeOptions options;
    options.causal = c.base.causal;
    options.scale = c.base.scale;
    options.seqlens_k = c.has_seqlens ? static_cast<const int*>(seqlens.get()) : nullptr;
    options.num_splits = c.num_splits;
    options.workspace = workspace.get();
    options.workspace_bytes = workspace_bytes;
    options.stream = stream;
    course::lab6::split_kv_forward(dq, dk, dv, o, lse, dtype, shape, options);
  });
  gpu_lab::put_result(out, result);
}

// merge_partials alone, inside the same harness as the whole decode (guard zones, NaN-poisoned
// O and LSE, a busy default stream, reads ordered on the lab's stream).
void merge(Packet& args, Packet& out) {
  const decode_wire::MergeCall c = decode_wire::get_merge(args);
  const std::vector<float> o_partial = decode_wire::get_floats(args), lse_partial = decode_wire::get_floats(args);
  const std::size_t o_bytes = std::size_t(c.rows) * c.d * course::dtype_bytes(c.dtype);
  gpu_lab::Run run = gpu_lab::run_guarded(
      {gpu_lab::bytes_of(o_partial), gpu_lab::bytes_of(lse_partial)}, {o_bytes, std::size_t(c.rows) * 4},
      [&](const std::vector<const void*>& in, const std::vector<void*>& o, cudaStream_t stream) {
        course::lab6::merge_partials(static_cast<const float*>(in[0]), static_cast<const float*>(in[1]), o[0],
                                     static_cast<float*>(o[1]), c.dtype, c.rows, c.num_splits, c.d, stream);
      });
  std::vector<float> lse(std::size_t(c.rows));
  std::memcpy(lse.data(), run.outputs[1].data(), lse.size() * 4);
  gpu_wire::put_bytes(out, run.outputs[0]);
  decode_wire::put_floats(out, lse);
  out.put<std::uint8_t>(run.inputs_unchanged);
  out.put<std::uint8_t>(run.wrote_only_outputs);
}

// The entry points with arguments that must be rejected. `which`: 0 split_kv_forward, 1
// merge_partials. Returns normally only if nothing was thrown.
void bad_arguments(Packet& args, Packet&) {
  const decode_wire::DecodeCall c = decode_wire::get_decode(args);
  const bool null_q = args.get<std::uint8_t>() != 0;
  const std::uint64_t workspace_bytes = args.get<std::uint64_t>();
  const std::uint8_t which = args.get<std::uint8_t>();
  gpu_lab::call_with_dummy_buffers([&](void* buffer) {
    if (which == 1) {
      course::lab6::merge_partials(static_cast<const float*>(buffer), static_cast<const float*>(buffer), buffer,
                                   static_cast<float*>(buffer), (c.base.dtype), c.base.B, c.num_splits,
                                   c.base.d, nullptr);
      return;
    }
    course::lab6::DecodeOptions options;
    options.num_splits = c.num_splits;
    options.workspace = buffer;
    options.workspace_bytes = workspace_bytes;
    course::lab6::split_kv_forward(null_q ? nullptr : buffer, buffer, buffer, buffer, static_cast<float*>(buffer),
                                   (c.base.dtype), shape_of(c.base), options);
  });
}

}  // namespace

// Part 2's handlers (serve_paged.cpp).
void register_paged_handlers(isolation::Registry& r);

void isolation::register_handlers(Registry& r) {
  r.add("decode/fp32", decode);
  r.add("decode/bf16", decode);
  r.add("merge", merge);
  r.add("bad_arguments", bad_arguments);
  register_paged_handlers(r);
}
