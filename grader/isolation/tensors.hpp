// Matrices and vectors of the CPU labs on the wire: shape, then the elements in their storage
// type's own bits (so a bf16 result arrives exactly as the lab rounded it).
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <string>

#include "course/cpu.hpp"
#include "lab_process.hpp"
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

// A result read back by the grader, checked against the shape the call must return before any
// check indexes it: a lab that returns another shape fails that call with a message, and never
// makes the trusted grader read past the end of a matrix.
inline void expect_result_shape(const std::string& what, std::int64_t rows, std::int64_t cols,
                                std::int64_t want_rows, std::int64_t want_cols) {
  if (rows != want_rows || cols != want_cols)
    throw LabError("returned " + what + " of shape [" + std::to_string(rows) + ", " + std::to_string(cols) +
                   "], but the call must return shape [" + std::to_string(want_rows) + ", " +
                   std::to_string(want_cols) + "]");
}

template <class T>
course::Matrix<T> get_result_matrix(Packet& p, const std::string& what, Eigen::Index rows, Eigen::Index cols) {
  course::Matrix<T> m = get_matrix<T>(p);
  expect_result_shape(what, m.rows(), m.cols(), rows, cols);
  return m;
}

template <class T>
course::Vector<T> get_result_vector(Packet& p, const std::string& what, Eigen::Index size) {
  course::Vector<T> v = get_vector<T>(p);
  if (v.size() != size)
    throw LabError("returned " + what + " with " + std::to_string(v.size()) + " element(s), but the call must return " +
                   std::to_string(size));
  return v;
}

// The dtype suffix of a call's name: "softmax_rows/fp32".
template <class T>
std::string call_name(const std::string& function) {
  return function + "/" + course::dtype_name<T>();
}

}  // namespace isolation
