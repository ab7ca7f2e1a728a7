// The lab process's side of lab 6 part 2: paged_decode (and append_kv before it) on the inputs
// the grader sent, inside grader/gpu/device_run's harness (guard zones of NaN around every buffer,
// NaN-poisoned outputs, a busy default stream, reads ordered on the lab's stream); the bad-input
// calls; and the speed check's timing of paged_decode against part 1's split_kv_forward on the
// same data made contiguous.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <vector>

#include "course/lab6_decoding.hpp"
#include "course/lab6_paged.hpp"
#include "device_run.hpp"
#include "gpu_wire.hpp"
#include "paged_wire.hpp"
#include "worker.hpp"

namespace {

using course::check_cuda;
using course::DeviceBuffer;
using isolation::Packet;

std::span<const std::uint8_t> span_of(const std::vector<std::uint8_t>& b) { return {b.data(), b.size()}; }

// Inputs: Q, K pool, V pool, block table, lengths (and K_new, V_new when appending). Outputs: O,
// LSE (and the two pools after the append).
void paged(Packet& args, Packet& out) {
  const paged_wire::PagedCall c = paged_wire::get_call(args);
  const auto q = gpu_wire::get_bytes(args), k = gpu_wire::get_bytes(args), v = gpu_wire::get_bytes(args);
  const auto table = gpu_wire::get_bytes(args), lens = gpu_wire::get_bytes(args);
  std::vector<std::uint8_t> k_new, v_new;
  if (c.append) k_new = gpu_wire::get_bytes(args), v_new = gpu_wire::get_bytes(args);
  const auto table_host = paged_wire::ints_of_bytes(table), lens_host = paged_wire::ints_of_bytes(lens);
  const auto& s = c.shape;
  // The workspace, allocated before the run and poisoned with NaN (as part 1's).
  const std::size_t workspace_bytes = course::lab6::paged_workspace_bytes(s, c.dtype, c.num_splits);
  DeviceBuffer workspace(workspace_bytes);
  check_cuda(cudaMemset(workspace.get(), 0xFF, workspace_bytes), "cudaMemset(workspace)");
  const std::size_t o_bytes = std::size_t(s.B) * s.H_q * s.Nq * s.d * course::dtype_bytes(c.dtype);
  const std::size_t lse_bytes = std::size_t(s.B) * s.H_q * s.Nq * 4;
  std::vector<std::span<const std::uint8_t>> inputs = {span_of(q), span_of(k), span_of(v), span_of(table),
                                                       span_of(lens)};
  std::vector<std::size_t> outputs = {o_bytes, lse_bytes};
  if (c.append) {
    inputs.push_back(span_of(k_new));
    inputs.push_back(span_of(v_new));
    outputs.push_back(k.size());
    outputs.push_back(v.size());
  }
  gpu_lab::Run run = gpu_lab::run_guarded(
      inputs, outputs, [&](const std::vector<const void*>& in, const std::vector<void*>& o, cudaStream_t stream) {
        course::lab6::PagedCache cache;
        cache.k_pages = const_cast<void*>(in[1]);
        cache.v_pages = const_cast<void*>(in[2]);
        cache.block_table = static_cast<const int*>(in[3]);
        cache.seqlens = static_cast<const int*>(in[4]);
        if (c.host_copies) {
          cache.block_table_host = table_host.data();
          cache.seqlens_host = lens_host.data();
        }
        if (c.append) {
          // The pools are the grader's inputs; the append writes into copies of them (outputs).
          check_cuda(cudaMemcpyAsync(o[2], in[1], k.size(), cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
          check_cuda(cudaMemcpyAsync(o[3], in[2], v.size(), cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
          cache.k_pages = o[2];
          cache.v_pages = o[3];
          course::lab6::append_kv(in[5], in[6], cache, c.dtype, s, stream);
        }
        course::lab6::PagedOptions options;
        options.causal = c.causal;
        options.scale = c.scale;
        options.num_splits = c.num_splits;
        options.workspace = workspace.get();
        options.workspace_bytes = workspace_bytes;
        options.stream = stream;
        course::lab6::paged_decode(in[0], cache, o[0], static_cast<float*>(o[1]), c.dtype, s, options);
      });
  gpu_lab::Result result;
  result.O = run.outputs[0];
  result.lse.resize(std::size_t(s.B) * s.H_q * s.Nq);
  std::memcpy(result.lse.data(), run.outputs[1].data(), lse_bytes);
  result.inputs_unchanged = run.inputs_unchanged;
  result.wrote_only_outputs = run.wrote_only_outputs;
  gpu_lab::put_result(out, result);
  if (c.append) {
    gpu_wire::put_bytes(out, run.outputs[2]);
    gpu_wire::put_bytes(out, run.outputs[3]);
  }
}

// A call that must be rejected: the shape, the host copies of the metadata (always given here),
// which entry point (0 paged_decode, 1 append_kv, 2 paged_decode with the workspace 16 bytes too
// small), and whether Q is null. Returns normally only if nothing was thrown.
void paged_bad(Packet& args, Packet&) {
  const paged_wire::PagedCall c = paged_wire::get_call(args);
  const auto table_host = paged_wire::ints_of_bytes(gpu_wire::get_bytes(args));
  const auto lens_host = paged_wire::ints_of_bytes(gpu_wire::get_bytes(args));
  const std::uint8_t which = args.get<std::uint8_t>();
  const bool null_q = args.get<std::uint8_t>() != 0;
  gpu_lab::call_with_dummy_buffers([&](void* buffer) {
    course::lab6::PagedCache cache;
    cache.k_pages = cache.v_pages = buffer;
    cache.block_table = cache.seqlens = static_cast<const int*>(buffer);
    cache.block_table_host = table_host.data();
    cache.seqlens_host = lens_host.data();
    if (which == 1) {
      course::lab6::append_kv(null_q ? nullptr : buffer, buffer, cache, c.dtype, c.shape, nullptr);
      return;
    }
    course::lab6::PagedOptions options;
    options.num_splits = c.num_splits;
    options.workspace = buffer;
    options.workspace_bytes = std::size_t(1) << 20;
    if (which == 2) options.workspace_bytes = course::lab6::paged_partials_bytes(c.shape, c.num_splits) - 16;
    course::lab6::paged_decode(null_q ? nullptr : buffer, cache, buffer, static_cast<float*>(buffer), c.dtype,
                               c.shape, options);
  });
}

// The speed check: bf16, group of `group` query heads per KV head, Nq = 1, every sequence of
// `len` keys in pages of `page_size`, the pages of the pool shuffled (a permutation drawn from
// the seed). The same K and V are copied into part 1's contiguous layout [B, H_kv, len, d], and
// the group's query rows are part 1's Nq = group rows of one head (Q [B, H_q, 1, d] is that
// memory already). Both are timed on the default stream (median of 20 after 3 untimed), the
// library's own split counts, and a device-to-device copy of the same K and V bytes.
void time_paged(Packet& args, Packet& out) {
  const paged_wire::PagedCall c = paged_wire::get_call(args);
  const int len = args.get<std::int32_t>();
  const std::uint64_t seed = args.get<std::uint64_t>();
  const auto& s = c.shape;
  const int group = s.group(), d = s.d;
  const std::size_t row_bytes = std::size_t(d) * 2;
  const std::size_t page_bytes = std::size_t(s.page_size) * row_bytes;  // one page of one head
  const std::size_t pool_elems = std::size_t(s.num_pages) * s.H_kv * s.page_size * d;
  DeviceBuffer q(std::size_t(s.B) * s.H_q * d * 2), o_paged(std::size_t(s.B) * s.H_q * d * 2),
      o_cont(std::size_t(s.B) * s.H_q * d * 2), lse(std::size_t(s.B) * s.H_q * 4);
  DeviceBuffer k_pool(pool_elems * 2), v_pool(pool_elems * 2);
  DeviceBuffer k_cont(std::size_t(s.B) * s.H_kv * len * row_bytes), v_cont(std::size_t(s.B) * s.H_kv * len * row_bytes);
  gpu_lab::fill_normal(q.get(), std::size_t(s.B) * s.H_q * d, course::DType::bf16, seed);
  gpu_lab::fill_normal(k_pool.get(), pool_elems, course::DType::bf16, seed + 1);
  gpu_lab::fill_normal(v_pool.get(), pool_elems, course::DType::bf16, seed + 2);
  // The block table: a permutation of the pool's pages (a linear congruential shuffle from the seed).
  std::vector<int> perm(std::size_t(s.num_pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (std::size_t i = perm.size(); i > 1; --i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(perm[i - 1], perm[(x >> 33) % i]);
  }
  std::vector<int> table(std::size_t(s.B) * s.max_pages), lens(std::size_t(s.B), len);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = perm[i];
  DeviceBuffer d_table(table.size() * 4), d_lens(lens.size() * 4);
  check_cuda(cudaMemcpy(d_table.get(), table.data(), table.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  check_cuda(cudaMemcpy(d_lens.get(), lens.data(), lens.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  // The same keys, contiguous: page j of sequence b, head h -> rows j * page_size .. of [b, h].
  const int pages_per_seq = (len + s.page_size - 1) / s.page_size;
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H_kv; ++h)
      for (int j = 0; j < pages_per_seq; ++j) {
        const std::size_t rows = std::size_t(std::min(s.page_size, len - j * s.page_size));
        const std::size_t src = (std::size_t(table[std::size_t(b) * s.max_pages + j]) * s.H_kv + h) * page_bytes;
        const std::size_t dst = ((std::size_t(b) * s.H_kv + h) * len + std::size_t(j) * s.page_size) * row_bytes;
        for (auto [from, to] : {std::pair{&k_pool, &k_cont}, std::pair{&v_pool, &v_cont}})
          check_cuda(cudaMemcpy(static_cast<char*>(to->get()) + dst, static_cast<char*>(from->get()) + src,
                                rows * row_bytes, cudaMemcpyDeviceToDevice),
                     "cudaMemcpy");
      }

  course::lab6::PagedCache cache;
  cache.k_pages = k_pool.get();
  cache.v_pages = v_pool.get();
  cache.block_table = static_cast<const int*>(d_table.get());
  cache.seqlens = static_cast<const int*>(d_lens.get());
  const std::size_t paged_ws = course::lab6::paged_workspace_bytes(s, course::DType::bf16, 0);
  DeviceBuffer ws_paged(paged_ws);
  course::lab6::PagedOptions po;
  po.workspace = ws_paged.get();
  po.workspace_bytes = paged_ws;
  const course::lab6::DecodeShape cs{s.B, s.H_kv, group, len, d};
  const std::size_t cont_ws = course::lab6::split_kv_workspace_bytes(cs, course::DType::bf16, 0);
  DeviceBuffer ws_cont(cont_ws);
  course::lab6::DecodeOptions co;
  co.workspace = ws_cont.get();
  co.workspace_bytes = cont_ws;

  paged_wire::TimeAnswer a;
  a.paged_ms = gpu_lab::median_ms([&] {
    course::lab6::paged_decode(q.get(), cache, o_paged.get(), static_cast<float*>(lse.get()), course::DType::bf16, s, po);
  });
  a.contiguous_ms = gpu_lab::median_ms([&] {
    course::lab6::split_kv_forward(q.get(), k_cont.get(), v_cont.get(), o_cont.get(), static_cast<float*>(lse.get()),
                                   course::DType::bf16, cs, co);
  });
  const std::size_t kv_bytes = 2 * std::size_t(s.B) * s.H_kv * len * row_bytes;
  a.copy_ms = gpu_lab::median_ms([&] {
    check_cuda(cudaMemcpyAsync(k_pool.get(), k_cont.get(), kv_bytes / 2, cudaMemcpyDeviceToDevice, nullptr), "copy");
    check_cuda(cudaMemcpyAsync(v_pool.get(), v_cont.get(), kv_bytes / 2, cudaMemcpyDeviceToDevice, nullptr), "copy");
  });
  a.kv_bytes = double(kv_bytes);
  // What the timed calls computed (before the copies above overwrote the pools, the last timed
  // calls' outputs stand): the two results must agree.
  std::vector<std::uint16_t> hp(std::size_t(s.B) * s.H_q * d), hc(hp.size());
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  check_cuda(cudaMemcpy(hp.data(), o_paged.get(), hp.size() * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
  check_cuda(cudaMemcpy(hc.data(), o_cont.get(), hc.size() * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
  auto bf16 = [](std::uint16_t bits) {
    const std::uint32_t w = std::uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &w, 4);
    return double(f);
  };
  for (std::size_t i = 0; i < hp.size(); ++i) {
    const double p = bf16(hp[i]), cval = bf16(hc[i]);
    if (!std::isfinite(p) || !std::isfinite(cval)) a.finite = false;
    else {
      a.max_diff = std::max(a.max_diff, std::abs(p - cval));
      a.o_max = std::max(a.o_max, std::abs(cval));
    }
  }
  for (double v : {a.paged_ms, a.contiguous_ms, a.copy_ms, a.kv_bytes, a.max_diff, a.o_max}) out.put(v);
  out.put<std::uint8_t>(a.finite);
}

}  // namespace

void register_paged_handlers(isolation::Registry& r) {
  r.add("paged/bf16", paged);
  r.add("paged/fp16", paged);
  r.add("paged_bad", paged_bad);
  r.add("paged_time", time_paged);
}
