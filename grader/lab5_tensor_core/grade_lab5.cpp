// Lab 5 grader: the tensor-core FlashAttention-2 forward kernel.
//
// Correctness exactly as lab 4 (NaN-poisoned outputs, a non-default stream, the fp64 reference,
// bands from the shared table, causal with Nq != Nk, odd N, LSE), for the shipped version and
// for every step of the staircase. Speed points are measured against the solution in the same
// run (full points within 1.2x of its time, a sliding scale to 0 at 3x), as CS149 does: both
// are timed in their own lab processes, one after the other.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "course/errors.hpp"
#include "course/lab5_tensor_core.hpp"
#include "compute_sanitizer.hpp"
#include "gpu_harness.hpp"
#include "lab_process.hpp"

using course::lab5::Version;
using course::lab5::version_name;
using gpu_grading::Config;
using course::DType;

namespace {

bool check(Config c, Version v = Version::best, std::uint64_t seed = grading::seed()) {
  c.version = int(v);
  return gpu_grading::check_config(c, std::string("flash_attention_forward[") + version_name(v) + "]", seed);
}

void small_shapes(DType dtype, Version v = Version::best) {
  for (int d : {64, 128})
    for (int n : {1, 7, 64, 113, 129})
      for (bool causal : {false, true}) {
        Config c;
        c.B = 2;
        c.H = 2;
        c.Nq = c.Nk = n;
        c.d = d;
        c.dtype = dtype;
        c.causal = causal;
        check(c, v);
      }
}

const char* kBf16 = "best: bf16 small shapes within band";

}  // namespace

TEST_CASE("best: bf16 small shapes within band" * grading::points(3)) {
  gpu_grading::require_device();
  small_shapes(DType::bf16);
}

TEST_CASE("best: fp16 small shapes within band" * grading::points(3)) {
  gpu_grading::require_device();
  small_shapes(DType::fp16);
}

TEST_CASE("best: causal with Nq != Nk, rows with no key" * grading::points(3)) {
  gpu_grading::require_device();
  for (auto [nq, nk] : {std::pair{113, 1}, std::pair{1, 113}, std::pair{64, 200}, std::pair{300, 113},
                        std::pair{129, 65}})
    for (DType dtype : {DType::bf16, DType::fp16}) {
      Config c;
      c.B = 1;
      c.H = 2;
      c.Nq = nq;
      c.Nk = nk;
      c.d = 64;
      c.dtype = dtype;
      c.causal = true;
      check(c);
    }
}

TEST_CASE("best: large shapes against the GPU fp64 reference" * grading::points(3)) {
  gpu_grading::require_device();
  for (const Config& c : gpu_grading::large_shape_configs({DType::bf16}, /*odd_heads=*/4)) check(c);
}

TEST_CASE("staircase: every version matches the reference" * grading::points(3)) {
  gpu_grading::require_device();
  for (Version v : course::lab5::kAllVersions) {
    small_shapes(DType::bf16, v);
    Config c;
    c.B = 1;
    c.H = 2;
    c.Nq = 1000;
    c.Nk = 1500;
    c.d = 128;
    c.dtype = DType::fp16;
    c.causal = true;
    check(c, v);
  }
}

TEST_CASE("numerics: large logits, and rows whose scores are all far below zero" * grading::points(2, kBf16)) {
  gpu_grading::require_device();
  // Scores of +-150 (exp overflows without the max shift; the running max jumps often), and
  // rows whose scores all lie near -1000 (a running max started at 0 instead of -inf makes
  // their weights underflow to 0). Not scores of 1e8 as in lab 4: there the exp2-with-FFMA of
  // FA2 leaves P off by up to 2x before it is rounded to bf16 for the tensor cores, which
  // costs a correct kernel an ulp of O that one-shot attention does not lose.
  using reference::Distribution;
  for (const Config& c : gpu_grading::numerics_configs({DType::bf16, DType::fp16},
                                                       {Distribution::large_scores, Distribution::negative_rows}))
    check(c);
}

TEST_CASE("best: deterministic and right for several seeds (no race)" * grading::points(2)) {
  gpu_grading::require_device();
  Config c;
  c.B = 2;
  c.H = 4;
  c.Nq = c.Nk = 1500;
  c.d = 64;
  c.dtype = DType::bf16;
  c.causal = true;
  const std::uint64_t s = grading::seed() * 1000;
  gpu_grading::check_deterministic(c, "flash_attention_forward[best]", {s, s + 1, s + 2});
}

TEST_CASE("races: compute-sanitizer finds no race, barrier misuse or bad access" * grading::points(2, kBf16)) {
  // Every version of the staircase on two small problems (several K/V tiles through the
  // shared-memory stages, partial last tiles, causal and not) under compute-sanitizer
  // (grader/gpu/compute_sanitizer.hpp): a missing barrier between cp.async stages or around
  // ldmatrix rarely changes a result on the GPU it is graded on.
  std::vector<Config> shapes(2);
  shapes[0].H = 2, shapes[0].Nq = shapes[0].Nk = 200, shapes[0].d = 64, shapes[0].causal = true;
  shapes[1].Nq = 70, shapes[1].Nk = 150, shapes[1].d = 128, shapes[1].dtype = DType::fp16;
  shapes[0].dtype = DType::bf16;
  gpu_grading::check_under_compute_sanitizer(
      {"flash_attention_forward", "bf16, fp16", {1, 2, 200, 64},
       "every version; " + shapes[0].describe() + "; " + shapes[1].describe()},
      [&] {
        for (Version v : course::lab5::kAllVersions)
          for (const Config& c : shapes) check(c, v);
      });
}

TEST_CASE("bad input gets a clear error" * grading::points(1, kBf16)) {
  gpu_grading::require_device();
  const auto shape = gpu_grading::bad_input_config;
  // d = 32 is not supported by the tensor-core kernel; Q null; H = 0.
  CHECK_THROWS_AS(gpu_grading::call_with_bad_arguments(shape(1, 32, DType::bf16), false), course::BadInput);
  CHECK_THROWS_AS(gpu_grading::call_with_bad_arguments(shape(1, 64, DType::bf16), true), course::BadInput);
  CHECK_THROWS_AS(gpu_grading::call_with_bad_arguments(shape(0, 64, DType::fp16), false), course::BadInput);
}

TEST_CASE("speed: d=64 within 1.2x of the solution" * grading::points(4, kBf16)) {
  gpu_grading::require_device();
  gpu_grading::award_speed_against_solution(64);
}

TEST_CASE("speed: d=128 within 1.2x of the solution" * grading::points(4, kBf16)) {
  gpu_grading::require_device();
  gpu_grading::award_speed_against_solution(128);
}
