#include "error_stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace grading {

std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string ErrorStats::index_string(long flat) const {
  if (flat < 0) return "[-]";
  long elements = 1;
  for (long n : shape) elements *= n;
  // A shape that cannot hold the index (a caller's mistake) must not divide by zero.
  if (shape.empty() || elements <= flat) return "[element " + std::to_string(flat) + "]";
  Shape idx(shape.size());
  for (std::size_t k = shape.size(); k-- > 0;) {
    idx[k] = flat % shape[k];
    flat /= shape[k];
  }
  return shape_string(idx);
}

std::string ErrorStats::summary() const {
  char buf[512];
  if (bad_count > 0 && measured == 0) {
    std::snprintf(buf, sizeof buf, "no element is finite in both result and reference, NaN/Inf %ld of %ld",
                  bad_count, count);
    return buf;
  }
  char over[96] = "";
  if (bad_count > 0)
    std::snprintf(over, sizeof over, "over the %ld of %ld elements both finite: ", measured, count);
  std::snprintf(buf, sizeof buf,
                "%smax abs %.3e (at %s: got %.17g, ref %.17g), max rel %.3e, p50 %.3e, p99 %.3e, "
                "NaN/Inf %ld of %ld",
                over, max_abs, index_string(worst).c_str(), worst_got, worst_ref, max_rel, p50_abs,
                p99_abs, bad_count, count);
  return buf;
}

std::string ErrorStats::nonfinite_summary() const {
  if (bad_count == 0) return "";
  std::string out;
  const auto add = [&out](long n, const char* what) {
    if (n) out += (out.empty() ? "" : " and ") + std::to_string(n) + what;
  };
  add(bad_count - missed_inf - wrong_inf - nan_ref, " NaN/Inf where the reference has none");
  add(missed_inf, " finite where the reference is -inf (e.g. LSE of a row that sees no key)");
  add(wrong_inf,
      " NaN or the other infinity where the reference is -inf (e.g. NaN for the LSE of a row that sees no key)");
  add(nan_ref, " NaN in the reference (the reference is wrong, not the result)");
  char values[96];
  std::snprintf(values, sizeof values, ": got %.17g, ref %.17g)", bad_got, bad_ref);
  return out + " (first at " + index_string(first_bad) + values;
}

ErrorStats compare(const double* got, const double* ref, std::size_t n, Shape shape,
                   double rel_floor) {
  ErrorStats s;
  s.shape = std::move(shape);
  s.count = long(n);
  std::vector<double> abs_errors;
  abs_errors.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double g = got[i], r = ref[i];
    if (!std::isfinite(g) || !std::isfinite(r)) {
      // Non-finite values must match exactly (-inf LSE for an empty row); NaN never matches.
      if (!(g == r)) {
        const bool ref_inf = std::isinf(r);
        s.missed_inf += ref_inf && std::isfinite(g);
        s.wrong_inf += ref_inf && !std::isfinite(g);
        s.nan_ref += std::isnan(r);
        if (s.bad_count++ == 0) {
          s.first_bad = long(i);
          s.bad_got = g;
          s.bad_ref = r;
        }
      }
      continue;
    }
    const double e = std::abs(g - r);
    abs_errors.push_back(e);
    s.max_rel = std::max(s.max_rel, e / std::max(std::abs(r), rel_floor));
    if (s.worst < 0 || e > s.max_abs) {
      s.worst = long(i);
      s.worst_got = g;
      s.worst_ref = r;
    }
    s.max_abs = std::max(s.max_abs, e);
  }
  s.measured = long(abs_errors.size());
  if (!abs_errors.empty()) {
    // The nearest-rank percentile: the smallest error that at least `percent`% of the errors do
    // not exceed (of 100 errors, p99 is the 99th smallest, not the largest).
    auto pct = [&](std::size_t percent) {
      const std::size_t k = (abs_errors.size() * percent + 99) / 100 - 1;
      std::nth_element(abs_errors.begin(), abs_errors.begin() + long(k), abs_errors.end());
      return abs_errors[k];
    };
    s.p50_abs = pct(50);
    s.p99_abs = pct(99);
  }
  return s;
}

}  // namespace grading
