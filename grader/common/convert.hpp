// Converting between the labs' storage types and double, and error statistics of whole
// matrices. Free of doctest, so that reports and benchmarks can use it as well as graders.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cmath>

#include "course/cpu.hpp"
#include "error_stats.hpp"

namespace grading {

using Md = Eigen::MatrixXd;

// Round a double matrix to storage type T (what the lab is given) and back.
template <class T>
course::Matrix<T> to_storage(const Md& x) {
  return x.cast<T>();
}
template <class M>
Md to_double(const M& x) {
  Md out(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    for (Eigen::Index c = 0; c < x.cols(); ++c) out(r, c) = static_cast<double>(x(r, c));
  return out;
}

// Largest |x| over the finite entries (the scale of a tolerance floor).
inline double max_abs_finite(const Md& x) {
  double m = 0;
  for (Eigen::Index i = 0; i < x.size(); ++i)
    if (std::isfinite(x.data()[i])) m = std::max(m, std::abs(x.data()[i]));
  return m;
}

// Error statistics of `got` against `ref`, with both viewed in row-major order so that the
// worst element's index reads [row, col] like the lab's own matrices.
inline ErrorStats compare_matrices(const Md& got, const Md& ref, Shape shape = {}) {
  using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const RowMajor g = got, r = ref;
  if (shape.empty()) shape = {long(ref.rows()), long(ref.cols())};
  return compare(g.data(), r.data(), std::size_t(r.size()), shape);
}

}  // namespace grading
