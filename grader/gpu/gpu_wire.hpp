// One kernel call of a GPU lab on the wire between the grader and the lab process: the shape and
// options, and the inputs in their dtype's bits. Shared by the grader (gpu_harness.cpp) and the
// lab processes of labs 4 and 5 (their serve.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "course/gpu.hpp"
#include "wire.hpp"

namespace gpu_wire {

struct KernelCall {
  int B = 1, H = 1, Nq = 1, Nk = 1, d = 64;
  course::DType dtype = course::DType::fp32;
  bool causal = false;
  float scale = 0.0f;  // 0: 1/sqrt(d)
  int version = -1;    // lab 5's staircase step; -1: the shipped version
  std::size_t o_elements() const { return std::size_t(B) * H * Nq * d; }
  std::size_t lse_elements() const { return std::size_t(B) * H * Nq; }
};

inline void put_call(isolation::Packet& p, const KernelCall& c) {
  for (int v : {c.B, c.H, c.Nq, c.Nk, c.d, c.version}) p.put<std::int32_t>(v);
  p.put(c.dtype);
  p.put<std::uint8_t>(c.causal);
  p.put(c.scale);
}

inline KernelCall get_call(isolation::Packet& p) {
  KernelCall c;
  c.B = p.get<std::int32_t>();
  c.H = p.get<std::int32_t>();
  c.Nq = p.get<std::int32_t>();
  c.Nk = p.get<std::int32_t>();
  c.d = p.get<std::int32_t>();
  c.version = p.get<std::int32_t>();
  c.dtype = p.get<course::DType>();
  c.causal = p.get<std::uint8_t>() != 0;
  c.scale = p.get<float>();
  return c;
}

inline void put_bytes(isolation::Packet& p, const std::vector<std::uint8_t>& b) {
  p.put<std::uint64_t>(b.size());
  p.put_bytes(b.data(), b.size());
}

inline std::vector<std::uint8_t> get_bytes(isolation::Packet& p) {
  std::vector<std::uint8_t> b(p.get_count(1));
  p.get_bytes(b.data(), b.size());
  return b;
}

}  // namespace gpu_wire
