// Lab 1 grader: safe softmax and log-sum-exp against the fp64 reference.
//
// Every numerical check draws fresh inputs from the run's seed, rounds them to the lab's dtype,
// and compares the lab's result with the fp64 reference computed from those same rounded
// inputs, inside the band that grader/common/tolerances.cpp derives for the dtype.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "compare.hpp"
#include "course/lab1_softmax.hpp"
#include "reference/data.hpp"
#include "reference/reference.hpp"

using course::bf16;
using course::fp16;
using grading::Case;
using grading::Md;
using grading::Quantity;
using reference::Distribution;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

struct Shape2 {
  Eigen::Index rows, cols;
};
const std::vector<Shape2> kShapes = {{1, 1}, {3, 113}, {16, 1000}, {2, 4096}};

Md inputs(Shape2 s, Distribution dist, const std::string& label) {
  reference::Rng rng(grading::seed(), label);
  return reference::random_matrix(s.rows, s.cols, dist, rng);
}

Case make_case(const std::string& what, const std::string& dtype, Shape2 s, Distribution d) {
  return {what, dtype, {long(s.rows), long(s.cols)}, std::string(reference::to_string(d)) + " inputs"};
}

// How a check shapes its random inputs before they are rounded to the lab's dtype.
struct InputRule {
  double clamp = 0;                  // > 0: inputs clamped to [-clamp, clamp] (fp16's range)
  bool every_row_has_a_key = false;  // a row drawn all -inf gets one finite entry: the check is
                                     // about masked entries, and fully masked rows have their own
};

Md shaped(Md x, const InputRule& rule) {
  if (rule.clamp > 0) x = x.cwiseMax(-rule.clamp).cwiseMin(rule.clamp);
  if (rule.every_row_has_a_key)
    for (Eigen::Index r = 0; r < x.rows(); ++r)
      if (x.cols() > 0 && x.row(r).maxCoeff() == -kInf) x(r, r % x.cols()) = 0.5;
  return x;
}

// softmax_rows<T> against the reference on every shape, for the given input distributions.
template <class T>
void softmax_matches_reference(const std::vector<Distribution>& dists, const InputRule& rule = {}) {
  for (Distribution d : dists)
    for (Shape2 s : kShapes) {
      const Md x = shaped(inputs(s, d, std::string("softmax/") + course::dtype_name<T>()), rule);
      const Md xr = reference::round_to<T>(x);
      const Md got = grading::to_double(course::lab1::softmax_rows<T>(grading::to_storage<T>(x)));
      // 16-bit dtypes are also held to the per-element rounding band, whose fp32 term is set
      // by a plain fp32 softmax of the same rounded inputs.
      grading::expect_close(make_case("softmax_rows", course::dtype_name<T>(), s, d),
                            Quantity::probability, got, reference::softmax_rows<double>(xr),
                            reference::plain_softmax_rows<T>(xr),
                            reference::plain_softmax_rows<float>(xr));
    }
}

template <class T>
void lse_matches_reference(const std::vector<Distribution>& dists, const InputRule& rule = {}) {
  for (Distribution d : dists)
    for (Shape2 s : kShapes) {
      const Md x = shaped(inputs(s, d, std::string("lse/") + course::dtype_name<T>()), rule);
      const Md xr = reference::round_to<T>(x);
      const Md got = grading::to_double(course::lab1::logsumexp_rows<T>(grading::to_storage<T>(x)));
      Case c = make_case("logsumexp_rows", course::dtype_name<T>(), s, d);
      c.shape = {long(s.rows)};
      grading::expect_close(c, Quantity::lse, got, reference::logsumexp_rows<double>(xr),
                            reference::plain_logsumexp_rows<T>(xr));
    }
}

const char* kFp64Softmax = "softmax: fp64 matches reference";

}  // namespace

TEST_CASE("softmax: fp64 matches reference" * grading::points(2)) {
  softmax_matches_reference<double>({Distribution::normal, Distribution::outliers});
}

TEST_CASE("softmax: fp32 within band" * grading::points(2)) {
  softmax_matches_reference<float>({Distribution::normal, Distribution::outliers});
}

TEST_CASE("softmax: bf16 within band" * grading::points(1)) {
  softmax_matches_reference<bf16>({Distribution::normal, Distribution::outliers});
}

TEST_CASE("softmax: fp16 within band" * grading::points(1)) {
  softmax_matches_reference<fp16>({Distribution::normal, Distribution::outliers});
}

TEST_CASE("softmax: no overflow at logits of ±1e4" * grading::points(2)) {
  // Without the max shift exp(1e4) is +inf in every dtype and the row becomes inf/inf = NaN;
  // rows near -1e4 underflow to 0/0 when the max starts at 0; exp(x - lse) loses lse's ulp.
  const std::vector<Distribution> large = {Distribution::large_logits, Distribution::offset_logits};
  softmax_matches_reference<double>(large);
  softmax_matches_reference<float>(large);
  softmax_matches_reference<bf16>(large);
  softmax_matches_reference<fp16>(large, {.clamp = 6.0e4});  // fp16 max is 65504
}

TEST_CASE("softmax: -inf entries get weight 0" * grading::points(1)) {
  // About 30% of the entries masked, every row with at least one visible: a row of -inf alone
  // is the next check's, so that one mistake there does not cost this check too.
  softmax_matches_reference<double>({Distribution::masked}, {.every_row_has_a_key = true});
  softmax_matches_reference<float>({Distribution::masked}, {.every_row_has_a_key = true});
  const Md x = shaped(inputs({8, 64}, Distribution::masked, "softmax/masked-zeros"), {.every_row_has_a_key = true});
  const Md y = grading::to_double(course::lab1::softmax_rows<float>(grading::to_storage<float>(x)));
  long nonzero = 0;
  for (Eigen::Index i = 0; i < x.size(); ++i) nonzero += (x.data()[i] == -kInf && y.data()[i] != 0);
  grading::expect(nonzero == 0, make_case("softmax_rows", "fp32", {8, 64}, Distribution::masked),
                  std::to_string(nonzero) + " masked (-inf) entries got a non-zero weight");
}

TEST_CASE("softmax: fully masked row gives zeros, never NaN" * grading::points(2)) {
  Md x = Md::Constant(3, 17, -kInf);
  x(1, 4) = 2.0;  // one row with a single visible entry, between two fully masked rows
  auto check = [&](auto tag) {
    using T = decltype(tag);
    const Md y = grading::to_double(course::lab1::softmax_rows<T>(grading::to_storage<T>(x)));
    Md expected = Md::Zero(3, 17);
    expected(1, 4) = 1.0;
    grading::expect_close(make_case("softmax_rows", course::dtype_name<T>(), {3, 17}, Distribution::masked),
                          Quantity::probability, y, expected, expected);
  };
  check(double{});
  check(float{});
  check(bf16{});
  check(fp16{});
}

TEST_CASE("softmax: rejects NaN/+inf input" * grading::points(1, kFp64Softmax)) {
  Md x = Md::Zero(2, 5);
  x(1, 3) = std::nan("");
  CHECK_THROWS_AS(course::lab1::softmax_rows<float>(grading::to_storage<float>(x)), course::BadInput);
  x(1, 3) = kInf;
  CHECK_THROWS_AS(course::lab1::softmax_rows<double>(x), course::BadInput);
}

TEST_CASE("softmax: long rows (100000 columns) and single elements" * grading::points(1)) {
  for (Shape2 s : {Shape2{1, 100000}, Shape2{5, 1}}) {
    const Md x = inputs(s, Distribution::normal, "softmax/long");
    const Md got = grading::to_double(course::lab1::softmax_rows<float>(grading::to_storage<float>(x)));
    const Md xr = reference::round_to<float>(x);
    grading::expect_close(make_case("softmax_rows", "fp32", s, Distribution::normal),
                          Quantity::probability, got, reference::softmax_rows<double>(xr),
                          reference::plain_softmax_rows<float>(xr));
  }
}

TEST_CASE("lse: fp64 matches reference" * grading::points(2)) {
  lse_matches_reference<double>({Distribution::normal, Distribution::outliers});
}

TEST_CASE("lse: rejects NaN/+inf input" * grading::points(1, "lse: fp64 matches reference")) {
  Md x = Md::Zero(3, 4);
  x(2, 1) = std::nan("");
  CHECK_THROWS_AS(course::lab1::logsumexp_rows<double>(x), course::BadInput);
  CHECK_THROWS_AS(course::lab1::logsumexp_rows<bf16>(grading::to_storage<bf16>(x)), course::BadInput);
  x(2, 1) = kInf;
  CHECK_THROWS_AS(course::lab1::logsumexp_rows<float>(grading::to_storage<float>(x)), course::BadInput);
  x(2, 1) = -kInf;  // a masked entry is legal
  CHECK_NOTHROW(course::lab1::logsumexp_rows<float>(grading::to_storage<float>(x)));
}

TEST_CASE("lse: low precision within band" * grading::points(2)) {
  lse_matches_reference<float>({Distribution::normal, Distribution::outliers});
  lse_matches_reference<bf16>({Distribution::normal, Distribution::outliers});
  lse_matches_reference<fp16>({Distribution::normal, Distribution::outliers});
}

TEST_CASE("lse: no overflow at ±1e4" * grading::points(1)) {
  const std::vector<Distribution> large = {Distribution::large_logits, Distribution::offset_logits};
  lse_matches_reference<double>(large);
  lse_matches_reference<float>(large);
  lse_matches_reference<fp16>(large, {.clamp = 6.0e4});
}

// A child of the fp64 check: its middle row is an ordinary one, so an LSE that is wrong everywhere
// is reported there, under its own name, rather than here as a masking mistake.
TEST_CASE("lse: fully masked or empty row gives -inf" * grading::points(2, "lse: fp64 matches reference")) {
  Md x = Md::Constant(3, 9, -kInf);
  x(1, 0) = 0.5;
  Md expected(3, 1);
  expected << -kInf, 0.5, -kInf;
  const Md got = grading::to_double(course::lab1::logsumexp_rows<float>(grading::to_storage<float>(x)));
  Case c = make_case("logsumexp_rows", "fp32", {3, 9}, Distribution::masked);
  c.shape = {3};  // one LSE per row of the [3, 9] input
  grading::expect_close(c, Quantity::lse, got, expected, expected);
  const Md empty(4, 0);
  const Md got_empty = grading::to_double(course::lab1::logsumexp_rows<double>(empty));
  grading::expect_close({"logsumexp_rows", "fp64", {4}, "rows of length 0"}, Quantity::lse,
                        got_empty, Md::Constant(4, 1, -kInf), Md::Constant(4, 1, -kInf));
}
