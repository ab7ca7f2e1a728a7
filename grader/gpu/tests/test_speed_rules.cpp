// The speed rules of the forward GPU labs (grader/gpu/speed_rules.hpp), on the CPU: the
// benchmark's FLOP count, the sliding scale, and lab 8's recorded cuDNN figures with the measured
// speeds of its own steps (bench/results/lab8_2026-12-01_nvidia-h200.md) against them.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <tuple>

#include "speed_rules.hpp"

using gpu_grading::SpeedConfig;

namespace {

SpeedConfig config(int d, bool causal) {
  SpeedConfig c;
  c.d = d;
  c.causal = causal;
  return c;
}

// Lab 8's rule applied to a TFLOP/s figure measured on the H200.
double lab8_fraction(int d, bool causal, double tflops) {
  const auto cudnn = gpu_grading::recorded_cudnn_tflops("NVIDIA H200", config(d, causal));
  REQUIRE(cudnn.has_value());
  return gpu_grading::speed_fraction(tflops / *cudnn, gpu_grading::kCudnnNoneAt, gpu_grading::kCudnnFullAt);
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

TEST_CASE("cuDNN is recorded for the H200 at every speed check's configuration, and nowhere else") {
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      CHECK(gpu_grading::recorded_cudnn_tflops("NVIDIA H200", config(d, causal)).has_value());
      CHECK_FALSE(gpu_grading::recorded_cudnn_tflops("NVIDIA H100 80GB HBM3", config(d, causal)).has_value());
    }
  CHECK(*gpu_grading::recorded_cudnn_tflops("NVIDIA H200", config(128, false)) == doctest::Approx(686.2));
}

TEST_CASE("lab 8's solution earns full speed points with a noise margin; its step 1 earns none") {
  // Step 7 (pingpong), the shipped version, at N = 4096: the worst of its four configurations is
  // 0.89x cuDNN, so a run 10% slower still earns every point.
  for (auto [d, causal, tflops] : {std::tuple{64, false, 432.5}, {64, true, 387.6}, {128, false, 627.9}, {128, true, 557.9}}) {
    CHECK(lab8_fraction(d, causal, tflops) == 1.0);
    CHECK(lab8_fraction(d, causal, 0.9 * tflops) == 1.0);
  }
  // Step 1 (wgmma with plain loads), the planted slow_version: no points.
  CHECK(lab8_fraction(64, false, 133.3) == 0.0);
  CHECK(lab8_fraction(64, true, 61.4) == 0.0);
  // Step 3 (pipelined) is in between when causal work is skipped nowhere: 0.78x non-causal at
  // d = 128, but 0.41x causal, which is what counts (the worse of the two).
  CHECK(lab8_fraction(128, false, 533.9) == doctest::Approx(0.945).epsilon(0.01));
  CHECK(lab8_fraction(128, true, 239.3) < 0.05);
}
