// Matrices and vectors of the CPU labs on the wire: shape, then the elements in their storage
// type's own bits (so a bf16 result arrives exactly as the lab rounded it).
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <string>

#include "course/cpu.hpp"
#include "wire.hpp"

namespace isolation {

template <class T>
void put_matrix(Packet& p, const course::Matrix<T>& m) {  // row-major: one contiguous block
  p.put<std::int64_t>(m.rows());
  p.put<std::int64_t>(m.cols());
  p.put_bytes(m.data(), sizeof(T) * std::size_t(m.size()));
}

template <class T>
course::Matrix<T> get_matrix(Packet& p) {
  const auto rows = p.get<std::int64_t>(), cols = p.get<std::int64_t>();
  if (rows < 0 || cols < 0 || (cols > 0 && std::uint64_t(rows) > p.remaining() / sizeof(T) / std::uint64_t(cols)))
    throw Malformed("a matrix of shape [" + std::to_string(rows) + ", " + std::to_string(cols) +
                    "] does not fit the data that follows");
  course::Matrix<T> m(rows, cols);
  p.get_bytes(m.data(), sizeof(T) * std::size_t(rows * cols));
  return m;
}

template <class T>
void put_vector(Packet& p, const course::Vector<T>& v) {
  p.put<std::uint64_t>(std::uint64_t(v.size()));
  p.put_bytes(v.data(), sizeof(T) * std::size_t(v.size()));
}

template <class T>
course::Vector<T> get_vector(Packet& p) {
  const std::size_t n = p.get_count(sizeof(T));
  course::Vector<T> v(static_cast<Eigen::Index>(n));
  p.get_bytes(v.data(), sizeof(T) * n);
  return v;
}

// The dtype suffix of a call's name: "softmax_rows/fp32".
template <class T>
std::string call_name(const std::string& function) {
  return function + "/" + course::dtype_name<T>();
}

}  // namespace isolation
