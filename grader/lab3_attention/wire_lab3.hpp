// Lab 3's options and batched tensors on the wire (shared by proxy.cpp and serve.cpp).
#pragma once

#include <cstdint>

#include "course/lab3_attention.hpp"
#include "wire.hpp"

namespace isolation {

inline void put_options(Packet& p, const course::lab3::AttentionOptions& o) {
  p.put<std::int64_t>(o.block_q);
  p.put<std::int64_t>(o.block_k);
  p.put<std::uint8_t>(o.causal);
  p.put<std::uint8_t>(o.scale.has_value());
  p.put<double>(o.scale.value_or(0.0));
}

inline course::lab3::AttentionOptions get_options(Packet& p) {
  course::lab3::AttentionOptions o;
  o.block_q = int(p.get<std::int64_t>());
  o.block_k = int(p.get<std::int64_t>());
  o.causal = p.get<std::uint8_t>() != 0;
  const bool has_scale = p.get<std::uint8_t>() != 0;
  const double scale = p.get<double>();
  if (has_scale) o.scale = scale;
  return o;
}

template <class T>
void put_tensor4(Packet& p, const course::Tensor4<T>& t) {
  for (int v : {t.B, t.H, t.N, t.d}) p.put<std::int64_t>(v);
  p.put<std::uint64_t>(t.data.size());
  p.put_bytes(t.data.data(), sizeof(T) * t.data.size());
}

template <class T>
course::Tensor4<T> get_tensor4(Packet& p) {
  course::Tensor4<T> t;
  t.B = int(p.get<std::int64_t>());
  t.H = int(p.get<std::int64_t>());
  t.N = int(p.get<std::int64_t>());
  t.d = int(p.get<std::int64_t>());
  t.data.resize(p.get_count(sizeof(T)));
  p.get_bytes(t.data.data(), sizeof(T) * t.data.size());
  return t;
}

template <class T>
void put_values(Packet& p, const std::vector<T>& v) {
  p.put<std::uint64_t>(v.size());
  p.put_bytes(v.data(), sizeof(T) * v.size());
}

template <class T>
std::vector<T> get_values(Packet& p) {
  std::vector<T> v(p.get_count(sizeof(T)));
  p.get_bytes(v.data(), sizeof(T) * v.size());
  return v;
}

}  // namespace isolation
