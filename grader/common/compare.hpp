// Comparing a lab's result with the fp64 reference inside a tolerance band: the step every
// numerical check of every CPU lab takes.
#pragma once

#include <Eigen/Core>

#include <cmath>

#include "convert.hpp"
#include "grading.hpp"
#include "tolerances.hpp"

namespace grading {

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
