// Lab 6 part 2's calls on the wire between the grader (grade_lab6_paged.cpp) and the lab process
// (serve_paged.cpp): the paged shape and options, then the buffers in their bits.
#pragma once

#include <cstdint>
#include <vector>

#include "course/gpu.hpp"
#include "course/lab6_paged.hpp"
#include "gpu_wire.hpp"
#include "wire.hpp"

namespace paged_wire {

struct PagedCall {
  course::lab6::PagedShape shape;
  course::DType dtype = course::DType::bf16;
  bool causal = false;
  float scale = 0.0f;
  int num_splits = 0;
  bool append = false;      // append_kv(K_new, V_new) into a copy of the pools first, then decode
  bool host_copies = false; // pass the host copies of the block table and the lengths
};

inline void put_call(isolation::Packet& p, const PagedCall& c) {
  const auto& s = c.shape;
  for (int v : {s.B, s.H_q, s.H_kv, s.Nq, s.d, s.page_size, s.num_pages, s.max_pages, c.num_splits})
    p.put<std::int32_t>(v);
  p.put(c.dtype);
  p.put<std::uint8_t>(c.causal);
  p.put(c.scale);
  p.put<std::uint8_t>(c.append);
  p.put<std::uint8_t>(c.host_copies);
}

inline PagedCall get_call(isolation::Packet& p) {
  PagedCall c;
  auto& s = c.shape;
  for (int* v : {&s.B, &s.H_q, &s.H_kv, &s.Nq, &s.d, &s.page_size, &s.num_pages, &s.max_pages, &c.num_splits})
    *v = p.get<std::int32_t>();
  c.dtype = p.get<course::DType>();
  c.causal = p.get<std::uint8_t>() != 0;
  c.scale = p.get<float>();
  c.append = p.get<std::uint8_t>() != 0;
  c.host_copies = p.get<std::uint8_t>() != 0;
  return c;
}

inline std::vector<std::uint8_t> bytes_of_ints(const std::vector<std::int32_t>& x) {
  std::vector<std::uint8_t> b(x.size() * 4);
  if (!x.empty()) std::memcpy(b.data(), x.data(), b.size());
  return b;
}

inline std::vector<std::int32_t> ints_of_bytes(const std::vector<std::uint8_t>& b) {
  std::vector<std::int32_t> x(b.size() / 4);
  if (!x.empty()) std::memcpy(x.data(), b.data(), x.size() * 4);
  return x;
}

// The speed check's request and answer (serve_paged.cpp, time_paged).
struct TimeAnswer {
  double paged_ms = 0;       // paged_decode, pages shuffled
  double contiguous_ms = 0;  // part 1's split_kv_forward on the same data made contiguous
  double copy_ms = 0;        // cudaMemcpy of the K and V bytes (device to device), for GB/s
  double kv_bytes = 0;       // bytes of K and V that one decoding step reads
  double max_diff = 0;       // max |O_paged - O_contiguous|
  double o_max = 0;          // max |O_contiguous|: the scale max_diff is judged against
  bool finite = true;        // both outputs finite
};

}  // namespace paged_wire
