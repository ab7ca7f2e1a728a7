// The one error-statistics helper of the course: every grader, test and report uses it.
//
// Compares a result against a reference element by element and summarises the error the way
// the lectures talk about it: max abs, max rel, p50 and p99 of the abs error, how many NaN or
// Inf the result holds where the reference has none, and where the worst element is.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace grading {

// A tensor's shape, outermost first, e.g. {B, H, N, d} or {rows, cols}.
using Shape = std::vector<long>;

struct ErrorStats {
  double max_abs = 0;      // max |got - ref| over elements where both are finite
  double max_rel = 0;      // max |got - ref| / max(|ref|, rel_floor)
  double p50_abs = 0;      // median of |got - ref| (nearest rank: the lower middle of an even count)
  double p99_abs = 0;      // 99th percentile of |got - ref| (nearest rank: of 100, the 99th smallest)
  long bad_count = 0;      // elements where got and ref disagree about being finite: a NaN
                           // anywhere, an inf the reference lacks, or a finite value where the
                           // reference is -inf (a row that sees no key). -inf matched is fine.
  long missed_inf = 0;     // of those, the ones where ref is -inf but got is finite
  long wrong_inf = 0;      // of those, the ones where ref is -inf but got is NaN or +inf
  long nan_ref = 0;        // of those, the ones where ref itself is NaN (a reference's bug)
  long count = 0;          // elements compared
  long measured = 0;       // of those, the ones where both are finite: what the figures above cover
  long worst = -1;         // flat index of the finite element with the largest abs error (-1: none)
  double worst_got = 0, worst_ref = 0;
  long first_bad = -1;     // flat index of the first of the bad_count elements (-1: none)
  double bad_got = 0, bad_ref = 0;
  Shape shape;

  // "max abs 1.2e-03 (at [0, 3, 17]: got 0.51000..., ref 0.50880...), max rel ..., p50 ..., p99 ..."
  // (got and ref with 17 significant digits: enough to tell any two doubles apart). Where some
  // elements are bad, the figures say they cover only the finite ones ("over the 5 of 8 elements
  // both finite: max abs ..."), so that a NaN result never reads as "max abs 0".
  std::string summary() const;
  // Why the non-finite elements are wrong, e.g. "3 NaN/Inf where the reference has none
  // (first at [0, 5]: ...)", each kind counted apart (NaN/Inf where ref is finite, finite where
  // ref is -inf, NaN or the other infinity where ref is -inf, NaN in ref); empty when bad_count
  // is 0.
  std::string nonfinite_summary() const;
  // The multi-index of a flat index in `shape`, as "[i, j, ...]".
  std::string index_string(long flat) const;
};

// rel_floor keeps the relative error meaningful near zero (|ref| below it counts as it).
ErrorStats compare(const double* got, const double* ref, std::size_t n, Shape shape,
                   double rel_floor = 1e-6);

template <class Container>
ErrorStats compare(const Container& got, const Container& ref, Shape shape,
                   double rel_floor = 1e-6) {
  return compare(got.data(), ref.data(), std::size_t(ref.size()), std::move(shape), rel_floor);
}

std::string shape_string(const Shape& shape);

}  // namespace grading
