// Comparing a lab's result with the fp64 reference inside a tolerance band: the step every
// numerical check of every CPU lab takes. Converts between the labs' storage types and double.
#pragma once

#include <Eigen/Core>

#include <cmath>

#include "course/cpu.hpp"
#include "error_stats.hpp"
#include "grading.hpp"
#include "tolerances.hpp"

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

// The whole numerical check: got vs ref in the band that the plain same-precision
// implementation `plain` sets on the same inputs. Fails the current check when out of band.
inline bool expect_close(const Case& c, Quantity q, const Md& got, const Md& ref, const Md& plain) {
  if (got.rows() != ref.rows() || got.cols() != ref.cols()) {
    return expect(false, c,
                  "result has shape [" + std::to_string(got.rows()) + ", " +
                      std::to_string(got.cols()) + "], expected [" + std::to_string(ref.rows()) +
                      ", " + std::to_string(ref.cols()) + "]");
  }
  const ErrorStats plain_stats = compare_matrices(plain, ref);
  const Tolerance tol = tolerance(q, c.dtype, plain_stats.max_abs, max_abs_finite(ref));
  return expect_within(c, compare_matrices(got, ref, c.shape), tol);
}

}  // namespace grading
