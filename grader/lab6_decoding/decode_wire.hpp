// Lab 6's calls on the wire between the grader (grade_lab6.cpp) and the lab process
// (serve.cpp): a decoding call is a GPU lab call (gpu_wire::KernelCall, with Nk = Nk_max) plus
// the number of splits and the batch elements' KV lengths; a merge call is the partial results
// of the splits, as floats.
#pragma once

#include <cstdint>
#include <vector>

#include "gpu_wire.hpp"
#include "wire.hpp"

namespace decode_wire {

struct DecodeCall {
  gpu_wire::KernelCall base;          // B, H, Nq, Nk (= Nk_max), d, dtype, causal, scale
  int num_splits = 1;                 // 0: the lab's heuristic
  bool has_seqlens = false;           // false: seqlens_k = nullptr (every length is Nk_max)
  std::vector<std::int32_t> seqlens;  // [B] when has_seqlens
};

inline void put_decode(isolation::Packet& p, const DecodeCall& c) {
  gpu_wire::put_call(p, c.base);
  p.put<std::int32_t>(c.num_splits);
  p.put<std::uint8_t>(c.has_seqlens);
  p.put<std::uint64_t>(c.seqlens.size());
  for (std::int32_t s : c.seqlens) p.put<std::int32_t>(s);
}

inline DecodeCall get_decode(isolation::Packet& p) {
  DecodeCall c;
  c.base = gpu_wire::get_call(p);
  c.num_splits = p.get<std::int32_t>();
  c.has_seqlens = p.get<std::uint8_t>() != 0;
  c.seqlens.resize(p.get_count(4));
  for (auto& s : c.seqlens) s = p.get<std::int32_t>();
  return c;
}

struct MergeCall {
  course::DType dtype = course::DType::fp32;
  int rows = 1, num_splits = 1, d = 64;
};

inline void put_merge(isolation::Packet& p, const MergeCall& c) {
  p.put(c.dtype);
  for (int v : {c.rows, c.num_splits, c.d}) p.put<std::int32_t>(v);
}

inline MergeCall get_merge(isolation::Packet& p) {
  MergeCall c;
  c.dtype = p.get<course::DType>();
  c.rows = p.get<std::int32_t>();
  c.num_splits = p.get<std::int32_t>();
  c.d = p.get<std::int32_t>();
  return c;
}

inline void put_floats(isolation::Packet& p, const std::vector<float>& x) {
  p.put<std::uint64_t>(x.size());
  p.put_bytes(x.data(), x.size() * 4);
}

inline std::vector<float> get_floats(isolation::Packet& p) {
  std::vector<float> x(p.get_count(4));
  p.get_bytes(x.data(), x.size() * 4);
  return x;
}

}  // namespace decode_wire
