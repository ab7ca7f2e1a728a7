// Tests of the grading harness's own pieces: the error statistics and the tolerance table.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "error_stats.hpp"
#include "tolerances.hpp"

using namespace grading;

TEST_CASE("error statistics: max abs, max rel, percentiles and the worst index") {
  std::vector<double> ref(100), got(100);
  for (int i = 0; i < 100; ++i) {
    ref[i] = 1.0 + i;
    got[i] = ref[i] + (i == 37 ? 0.5 : 1e-3 * (i % 10));
  }
  const ErrorStats s = compare(got, ref, {10, 10});
  CHECK(s.max_abs == doctest::Approx(0.5));
  CHECK(s.worst == 37);
  CHECK(s.index_string(s.worst) == "[3, 7]");
  CHECK(s.max_rel == doctest::Approx(0.5 / 38));
  // The errors are 0, 1e-3, ..., 9e-3 ten times each, one 7e-3 replaced by 0.5: the 50th smallest
  // is 4e-3, the 99th 9e-3 (the largest, 0.5, is max_abs, not p99).
  CHECK(s.p50_abs == doctest::Approx(4e-3));
  CHECK(s.p99_abs == doctest::Approx(9e-3));
  CHECK(s.bad_count == 0);
  CHECK(s.summary().find("[3, 7]") != std::string::npos);
}

TEST_CASE("error statistics: NaN is always bad, a matching -inf is not") {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> ref = {-inf, 1.0, 2.0, -inf};
  std::vector<double> got = {-inf, 1.0, std::nan(""), 0.0};
  const ErrorStats s = compare(got, ref, {4});
  CHECK(s.bad_count == 2);
  CHECK(s.missed_inf == 1);  // 0.0 where the reference is -inf
  CHECK(s.first_bad == 2);   // the first bad element
  CHECK(s.worst == 1);       // the largest error among the finite ones (all 0 here: the first)
  CHECK(s.measured == 1);
  CHECK(s.max_abs == 0.0);
  CHECK(s.nonfinite_summary().find("1 NaN/Inf where the reference has none") != std::string::npos);
  CHECK(s.nonfinite_summary().find("1 finite where the reference is -inf") != std::string::npos);
  CHECK(s.nonfinite_summary().find("first at [2]: got nan") != std::string::npos);
}

TEST_CASE("error statistics: with NaN in the result, the figures say they cover the finite elements") {
  // A softmax without the max shift: NaN at [0, 0], a finite error of 0.25 at [1, 1]. The max abs
  // must point at [1, 1] and say it covers 3 of 4 elements, never read "max abs 0 at a NaN".
  const std::vector<double> ref = {0.5, 0.5, 0.25, 0.75};
  const std::vector<double> got = {std::nan(""), 0.5, 0.25, 0.5};
  const ErrorStats s = compare(got, ref, {2, 2});
  CHECK(s.first_bad == 0);
  CHECK(s.worst == 3);
  CHECK(s.max_abs == doctest::Approx(0.25));
  const std::string text = s.summary();
  CHECK(text.find("over the 3 of 4 elements both finite: max abs 2.500e-01 (at [1, 1]") == 0);
  CHECK(s.nonfinite_summary().find("(first at [0, 0]: got nan, ref 0.5)") != std::string::npos);
  // Every element bad: no figure at all rather than zeros.
  const std::vector<double> all_nan = {std::nan(""), std::nan(""), std::nan(""), std::nan("")};
  const std::string none = compare(all_nan, ref, {2, 2}).summary();
  CHECK(none == "no element is finite in both result and reference, NaN/Inf 4 of 4");
}

TEST_CASE("error statistics: a NaN where the reference is -inf is named as such, not as 'has none'") {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> ref = {-inf, -inf, 1.0, std::nan("")};
  std::vector<double> got = {std::nan(""), inf, 1.0, 1.0};
  const ErrorStats s = compare(got, ref, {4});
  CHECK(s.bad_count == 3);
  CHECK(s.wrong_inf == 2);
  CHECK(s.nan_ref == 1);
  CHECK(s.missed_inf == 0);
  const std::string why = s.nonfinite_summary();
  CHECK(why.find("where the reference has none") == std::string::npos);
  CHECK(why.find("2 NaN or the other infinity where the reference is -inf") != std::string::npos);
  CHECK(why.find("1 NaN in the reference") != std::string::npos);
  CHECK(why.find("first at [0]") != std::string::npos);
}

TEST_CASE("tolerance bands: every dtype and quantity has one, with a reason") {
  for (auto q : {Quantity::probability, Quantity::lse, Quantity::output, Quantity::gradient})
    for (const char* dt : {"fp64", "fp32", "bf16", "fp16"}) {
      const Band& b = band_for(q, dt);
      CHECK(std::string(b.reason).size() > 20);
      CHECK(b.floor > 0);
    }
  CHECK_THROWS(band_for(Quantity::output, "fp8"));
  const Tolerance t = tolerance(Quantity::output, "bf16", 1e-2, 4.0);
  CHECK(t.limit == doctest::Approx(2 * 1e-2 + 0x1p-8 * 4.0));
  CHECK(t.explain.find("bf16") != std::string::npos);
  // fp64 ignores the plain baseline: its band is rounding noise only.
  CHECK(tolerance(Quantity::output, "fp64", 1.0, 1.0).limit == doctest::Approx(1e-12));
}

TEST_CASE("a shape that cannot hold the worst element is reported, not divided by") {
  using namespace grading;
  const std::vector<double> got = {1, 2, 3, 5}, ref = {1, 2, 3, 4};
  const ErrorStats s = compare(got, ref, {4, 0});  // a caller's mistake: [4, 0] holds nothing
  CHECK(s.max_abs == 1.0);
  CHECK(s.summary().find("[element 3]") != std::string::npos);
  CHECK(compare(got, ref, {2, 2}).summary().find("[1, 1]") != std::string::npos);
}

TEST_CASE("the folded-scale allowance widens fp32 output bands only, by 2 u32 max|S| max|V|") {
  const Tolerance base{1e-6, "band 1e-6 [fp32 output: reason]"};
  const Tolerance fp32 = with_score_rounding(base, "fp32", 1000.0, 3.0);
  CHECK(fp32.limit == doctest::Approx(1e-6 + 2 * 0x1p-24 * 1000.0 * 3.0));
  CHECK(fp32.explain.find("folded-scale rounding") < fp32.explain.find(" ["));  // before the reason
  const Tolerance bf16 = with_score_rounding(base, "bf16", 1000.0, 3.0);
  CHECK(bf16.limit == base.limit);
  CHECK(bf16.explain == base.explain);
}

TEST_CASE("the score-rounding allowance widens fp32 gradient bands only, by 2 sqrt(d) u32 sensitivity") {
  const Tolerance base{1e-6, "band 1e-6 [fp32 gradient: reason]"};
  const Tolerance fp32 = with_gradient_score_rounding(base, "fp32", 500.0, 16);
  CHECK(fp32.limit == doctest::Approx(1e-6 + 8 * 0x1p-24 * 500.0));
  CHECK(score_rounding_walk(500.0, 16) == doctest::Approx(4 * 0x1p-24 * 500.0));
  CHECK(fp32.explain.find("score rounding") < fp32.explain.find(" ["));  // before the reason
  const Tolerance fp16 = with_gradient_score_rounding(base, "fp16", 500.0, 16);
  CHECK(fp16.limit == base.limit);
  CHECK(fp16.explain == base.explain);
}

TEST_CASE("the fp32-error allowance widens bf16 and fp16 bands only, by twice that error") {
  const Tolerance base{4e-3, "band 4e-3 [bf16 gradient: reason]"};
  const Tolerance bf16 = with_fp32_error(base, "bf16", 1e-3);
  CHECK(bf16.limit == doctest::Approx(6e-3));
  CHECK(bf16.explain.find("fp32 error") < bf16.explain.find(" ["));
  CHECK(with_fp32_error(base, "fp32", 1e-3).limit == base.limit);
}
