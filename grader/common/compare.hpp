// Comparing a lab's result with the fp64 reference inside a tolerance band: the step every
// numerical check of every CPU lab takes.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "convert.hpp"
#include "grading.hpp"
#include "tolerances.hpp"

namespace grading {

// The band that the plain same-precision implementation `plain` sets for `ref` on the same inputs
// (FlashAttention's rule; tolerances.hpp).
inline Tolerance band_against_plain(Quantity q, const std::string& dtype, const Md& ref,
                                    const Md& plain) {
  return tolerance(q, dtype, compare_matrices(plain, ref).max_abs, max_abs_finite(ref));
}

// got vs ref within tol, after checking that the shapes agree. Fails the current check when not.
inline bool expect_close_within(const Case& c, const Md& got, const Md& ref, const Tolerance& tol) {
  if (got.rows() != ref.rows() || got.cols() != ref.cols()) {
    return expect(false, c,
                  "result has shape [" + std::to_string(got.rows()) + ", " +
                      std::to_string(got.cols()) + "], expected [" + std::to_string(ref.rows()) +
                      ", " + std::to_string(ref.cols()) + "]");
  }
  return expect_within(c, compare_matrices(got, ref, c.shape), tol);
}

// The whole numerical check: got vs ref in the band that the plain same-precision
// implementation `plain` sets on the same inputs. Fails the current check when out of band.
inline bool expect_close(const Case& c, Quantity q, const Md& got, const Md& ref, const Md& plain) {
  return expect_close_within(c, got, ref, band_against_plain(q, c.dtype, ref, plain));
}

// The worst element against its per-element band (ElementBand in tolerances.hpp): the ratio
// |got - ref| / allowed, where it is, and the allowed error there. ratio <= 1 passes.
struct ElementBandStats {
  double worst_ratio = 0;
  Eigen::Index row = -1, col = -1;
  double got = 0, ref = 0, allowed = 0;
};

inline ElementBandStats element_band_stats(const ElementBand& b, const Md& got, const Md& ref,
                                           double fp32_max_abs) {
  ElementBandStats s;
  const double noise = (1 + b.u) * b.fp32_factor * fp32_max_abs + b.abs_floor;
  for (Eigen::Index r = 0; r < ref.rows(); ++r) {
    double row_max = 0;
    for (Eigen::Index c = 0; c < ref.cols(); ++c)
      if (std::isfinite(ref(r, c))) row_max = std::max(row_max, std::abs(ref(r, c)));
    for (Eigen::Index c = 0; c < ref.cols(); ++c) {
      if (!std::isfinite(ref(r, c)) || !std::isfinite(got(r, c))) continue;  // the outer band's job
      const double allowed = b.u * std::max(std::abs(ref(r, c)), b.row_fraction * row_max) + noise;
      const double err = std::abs(got(r, c) - ref(r, c));
      const double ratio = allowed > 0 ? err / allowed : (err > 0 ? HUGE_VAL : 0);
      if (ratio > s.worst_ratio) s = {ratio, r, c, got(r, c), ref(r, c), allowed};
    }
  }
  return s;
}

// The per-element band of a 16-bit result (ElementBand), its fp32 term set by `fp32_error` (the
// max abs error of a plain fp32 implementation on the same inputs, or more; see
// tolerances.hpp). Other dtypes, which have no such band, pass.
inline bool expect_within_element_band(const Case& c, Quantity q, const Md& got, const Md& ref,
                                       double fp32_error) {
  const ElementBand* b = element_band_for(q, c.dtype);
  if (!b) return true;
  const ElementBandStats s = element_band_stats(*b, got, ref, fp32_error);
  if (s.worst_ratio <= 1) return true;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "per-element error exceeds the rounding band: at [%ld, %ld] got %.8g, ref %.8g, "
                "error %.3e = %.2f x its allowed %.3e",
                long(s.row), long(s.col), s.got, s.ref, std::abs(s.got - s.ref), s.worst_ratio,
                s.allowed);
  return expect(false, c,
                std::string(buf) + " [" + c.dtype + " " + to_string(q) + ", per element: " +
                    b->reason + "]");
}

// Both bands for a 16-bit result: FlashAttention's outer band against the plain same-dtype
// implementation `plain`, then the per-element band, whose fp32 term is set by `plain_fp32`,
// the plain fp32 implementation on the same (rounded) inputs. Other dtypes: the outer band only.
inline bool expect_close(const Case& c, Quantity q, const Md& got, const Md& ref, const Md& plain,
                         const Md& plain_fp32) {
  return expect_close(c, q, got, ref, plain) &&
         expect_within_element_band(c, q, got, ref, compare_matrices(plain_fp32, ref).max_abs);
}

}  // namespace grading
