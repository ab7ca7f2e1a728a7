// The speed rules of the forward GPU labs (grader/gpu/speed_rules.hpp), on the CPU: the
// benchmark's FLOP count, the sliding scale, what the rule makes of lab 8's steps as measured on
// the H200 (bench/results/lab8_2026-12-01_nvidia-h200.md), and the check of what a timed call
// computed (speed_check.hpp) against the full fp64 reference.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "course/seeded_normal.hpp"
#include "course/softmax_scale.hpp"
#include "reference/reference.hpp"
#include "speed_check.hpp"
#include "speed_rules.hpp"

using gpu_grading::SpeedConfig;

namespace {

SpeedConfig config(int d, bool causal) {
  SpeedConfig c;
  c.d = d;
  c.causal = causal;
  return c;
}

// The fraction of the points for a kernel at `tflops` when the solution runs at `solution_tflops`
// on the same configuration (the time ratio is the inverse of the TFLOP/s ratio).
double fraction_against(double tflops, double solution_tflops) {
  return gpu_grading::fraction_of_solution_time(solution_tflops / tflops);
}

}  // namespace

TEST_CASE("the speed benchmark's shape and FLOP count") {
  const SpeedConfig c = config(64, false);
  CHECK(c.batch() == 4);
  CHECK(c.heads() == 32);
  CHECK(c.flops() == doctest::Approx(4.0 * 4 * 32 * 4096.0 * 4096 * 64));
  CHECK(config(128, true).flops() == doctest::Approx(config(128, false).flops() / 2));
}

TEST_CASE("speed_fraction: none below, all above, linear between") {
  CHECK(gpu_grading::speed_fraction(0.3, 0.4, 0.8) == 0.0);
  CHECK(gpu_grading::speed_fraction(0.4, 0.4, 0.8) == 0.0);
  CHECK(gpu_grading::speed_fraction(0.6, 0.4, 0.8) == doctest::Approx(0.5));
  CHECK(gpu_grading::speed_fraction(0.8, 0.4, 0.8) == 1.0);
  CHECK(gpu_grading::speed_fraction(1.3, 0.4, 0.8) == 1.0);
  CHECK(gpu_grading::speed_fraction(std::nan(""), 0.4, 0.8) == 0.0);
  // Lab 5's rule on a time ratio (lower is better): full within 1.2x, none at 3x.
  CHECK(gpu_grading::speed_fraction(-1.1, -3.0, -1.2) == 1.0);
  CHECK(gpu_grading::speed_fraction(-2.1, -3.0, -1.2) == doctest::Approx(0.5));
  CHECK(gpu_grading::speed_fraction(-3.5, -3.0, -1.2) == 0.0);
}

TEST_CASE("the rule on a time ratio: full within 1.2x of the solution, none at 3x") {
  CHECK(gpu_grading::fraction_of_solution_time(0.9) == 1.0);
  CHECK(gpu_grading::fraction_of_solution_time(1.2) == 1.0);
  CHECK(gpu_grading::fraction_of_solution_time(2.1) == doctest::Approx(0.5));
  CHECK(gpu_grading::fraction_of_solution_time(3.0) == 0.0);
  CHECK(gpu_grading::fraction_of_solution_time(std::nan("")) == 0.0);
}

TEST_CASE("lab 8's earlier steps against its shipped one, as measured on the H200") {
  // Step 7 (pingpong, the shipped version) at N = 4096, TFLOP/s (d, causal).
  const double shipped[2][2] = {{432.5, 387.6}, {627.9, 557.9}};
  // A run of the solution itself 15% slow (a busy GPU) keeps every point.
  CHECK(fraction_against(0.87 * shipped[0][0], shipped[0][0]) == 1.0);
  // Step 1 (wgmma with plain loads), the planted slow_version: no points (3.2x and 6.3x the time).
  CHECK(fraction_against(133.3, shipped[0][0]) == 0.0);
  CHECK(fraction_against(61.4, shipped[0][1]) == 0.0);
  // Step 3 (pipelined, no causal skipping): full points non-causal at d = 128 (1.18x the time),
  // about a third causal (2.33x), which is what counts (the worse of the two).
  CHECK(fraction_against(533.9, shipped[1][0]) == 1.0);
  CHECK(fraction_against(239.3, shipped[1][1]) == doctest::Approx(0.37).epsilon(0.02));
}

// ----------------------------------------------------------------------- what was timed

namespace {

// A short sequence so that the full reference (every query row of the head) is cheap; the check
// picks its rows out of N as on the GPU.
SpeedConfig short_config(int d, bool causal) {
  SpeedConfig c = config(d, causal);
  c.N = 256;
  return c;
}

// The rows a correct kernel sends back, computed the obvious way: the fp64 attention of the
// whole head (all N queries, all N keys, the usual bottom-right mask), its rows picked out and
// O rounded to bf16 as the kernel stores it.
void correct_rows(const SpeedConfig& c, const gpu_grading::SpeedCheck& check, std::vector<double>& o,
                  std::vector<float>& lse) {
  const Eigen::MatrixXd q = gpu_grading::seeded_rows(check.seed, c, check.head, 0, c.N);
  const Eigen::MatrixXd k = gpu_grading::seeded_rows(check.seed + 1, c, check.head, 0, c.N);
  const Eigen::MatrixXd v = gpu_grading::seeded_rows(check.seed + 2, c, check.head, 0, c.N);
  const auto full = reference::attention<double>(q, k, v, course::default_softmax_scale(c.d), c.causal);
  o.clear();
  lse.clear();
  for (int r = check.first_row; r < check.first_row + gpu_grading::SpeedCheck::kRows; ++r) {
    lse.push_back(float(full.lse(r)));
    for (int t = 0; t < c.d; ++t) o.push_back(double(float(Eigen::bfloat16(float(full.O(r, t))))));
  }
}

gpu_grading::SpeedCheck check_at(std::uint64_t seed, int head, int first_row) {
  gpu_grading::SpeedCheck check;
  check.seed = seed;
  check.head = head;
  check.first_row = first_row;
  return check;
}

}  // namespace

TEST_CASE("seeded_normal: the same value for the same (seed, index), standard normal, never zero") {
  CHECK(course::seeded_normal(7, 123) == course::seeded_normal(7, 123));
  CHECK(course::seeded_normal(7, 123) != course::seeded_normal(8, 123));
  double sum = 0, sum2 = 0;
  int zeros = 0;
  constexpr int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = course::seeded_normal(42, std::uint64_t(i));
    zeros += x == 0.0;
    sum += x;
    sum2 += x * x;
  }
  CHECK(zeros == 0);
  CHECK(std::fabs(sum / n) < 0.01);
  CHECK(std::fabs(sum2 / n - 1.0) < 0.02);
}

TEST_CASE("the timed rows: a correct kernel's pass, at any rows, causal or not, d = 64 and 128") {
  for (int d : {64, 128})
    for (bool causal : {false, true})
      for (auto [head, first_row] : {std::pair{0, 0}, {5, 100}, {31, 256 - 16}}) {
        const SpeedConfig c = short_config(d, causal);
        if (head >= c.batch() * c.heads()) continue;
        const auto check = check_at(1234 + d, head, first_row);
        std::vector<double> o;
        std::vector<float> lse;
        correct_rows(c, check, o, lse);
        const auto e = gpu_grading::timed_rows_error(c, check, o, lse);
        CAPTURE(d);
        CAPTURE(causal);
        CAPTURE(first_row);
        CHECK(e.ok());
        CHECK(e.o < 0.01);    // bf16 rounding of O only
        CHECK(e.lse < 1e-5);  // fp32 rounding of the LSE only
      }
}

TEST_CASE("the timed rows: zeros, another head's rows, rows one off, another seed's and NaN fail") {
  for (bool causal : {false, true}) {
    const SpeedConfig c = short_config(64, causal);
    const auto check = check_at(99, 3, 120);
    std::vector<double> o;
    std::vector<float> lse;
    correct_rows(c, check, o, lse);
    REQUIRE(gpu_grading::timed_rows_error(c, check, o, lse).ok());
    CAPTURE(causal);

    std::vector<double> zeros(o.size(), 0.0);
    std::vector<float> zero_lse(lse.size(), 0.0f);
    CHECK_FALSE(gpu_grading::timed_rows_error(c, check, zeros, zero_lse).ok());

    for (const auto& other : {check_at(99, 4, 120), check_at(99, 3, 121), check_at(100, 3, 120)}) {
      std::vector<double> o2;
      std::vector<float> lse2;
      correct_rows(c, other, o2, lse2);
      CHECK_FALSE(gpu_grading::timed_rows_error(c, check, o2, lse2).ok());
    }

    std::vector<double> one_nan = o;
    one_nan[17] = std::nan("");
    const auto e = gpu_grading::timed_rows_error(c, check, one_nan, lse);
    CHECK_FALSE(e.ok());
    CHECK_FALSE(e.finite);
    CHECK(gpu_grading::timed_rows_message(check, e, "your kernel's").find("does not match the reference") !=
          std::string::npos);
  }
}
