// Lab 3's batched tensors on the wire (shared by proxy.cpp and serve.cpp); its options travel
// as tile_options.hpp writes them.
#pragma once

#include <cstdint>

#include "course/lab3_attention.hpp"
#include "tile_options.hpp"
#include "wire.hpp"

namespace isolation {

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
