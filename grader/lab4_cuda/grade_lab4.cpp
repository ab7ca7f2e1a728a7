// Lab 4 grader: the tiled CUDA FlashAttention forward kernel.
//
// Every launch gets NaN-poisoned O and LSE buffers (each element must be written), runs on a
// non-default stream, and is compared with the fp64 reference: the CPU reference for small
// shapes, the GPU fp64 reference for large ones, with bands from the shared table whose
// baseline is the same-dtype plain implementation. Without a CUDA device every check is
// skipped, and the scoreboard says so.
#include <string>
#include <vector>

#include "course/errors.hpp"
#include "course/lab4_cuda.hpp"
#include "compute_sanitizer.hpp"
#include "gpu_harness.hpp"

using gpu_grading::Config;
using course::DType;

namespace {

bool check(const Config& c, std::uint64_t seed = grading::seed()) {
  return gpu_grading::check_config(c, "flash_attention_forward", seed);
}

// Small shapes: N from 1 to 113 (1, 2, 3: fewer keys than a warp; 113: a partial tile), every
// head dimension, causal and not, several heads.
void small_shapes(DType dtype) {
  for (int d : {32, 64, 128})
    for (int n : {1, 2, 3, 7, 64, 113})
      for (bool causal : {false, true}) {
        Config c;
        c.B = 2;
        c.H = 3;
        c.Nq = c.Nk = n;
        c.d = d;
        c.dtype = dtype;
        c.causal = causal;
        check(c);
      }
}

const char* kSmallFp32 = "fp32: small shapes match the fp64 reference";

}  // namespace

TEST_CASE("fp32: small shapes match the fp64 reference" * grading::points(4)) {
  gpu_grading::require_device();
  small_shapes(DType::fp32);
}

TEST_CASE("bf16: small shapes within band" * grading::points(3)) {
  gpu_grading::require_device();
  small_shapes(DType::bf16);
}

TEST_CASE("causal: bottom-right alignment with Nq != Nk, rows with no key" * grading::points(3)) {
  gpu_grading::require_device();
  // Nq > Nk leaves the first Nq - Nk query rows with no key: O = 0, LSE = -inf.
  for (auto [nq, nk] : {std::pair{113, 1}, std::pair{1, 113}, std::pair{64, 200}, std::pair{200, 64},
                        std::pair{7, 3}, std::pair{65, 130}})
    for (DType dtype : {DType::fp32, DType::bf16}) {
      Config c;
      c.B = 1;
      c.H = 2;
      c.Nq = nq;
      c.Nk = nk;
      c.d = 64;
      c.dtype = dtype;
      c.causal = true;
      check(c);
      c.causal = false;
      check(c);
    }
}

TEST_CASE("every output element is written (NaN-poisoned outputs, N not a multiple of the tile)" *
          grading::points(2)) {
  gpu_grading::require_device();
  for (int n : {1000, 129, 65}) {
    Config c;
    c.B = 3;
    c.H = 2;
    c.Nq = c.Nk = n;
    c.d = 64;
    check(c);
  }
}

TEST_CASE("large shapes against the GPU fp64 reference" * grading::points(4)) {
  gpu_grading::require_device();
  for (const Config& c : gpu_grading::large_shape_configs({DType::fp32, DType::bf16}, /*odd_heads=*/8)) check(c);
}

TEST_CASE("numerics: large logits, and rows whose scores are all far below zero" * grading::points(2, kSmallFp32)) {
  gpu_grading::require_device();
  // Scores of about +-1e8: exp overflows without the max shift, and with few keys many rows
  // have only scores far below zero, where a running max started at 0 instead of -inf makes
  // every weight underflow to 0 (and O = 0 / 0).
  // Rows whose scores all lie near -1000 (reference::Distribution::negative_rows) show it with
  // ordinary values too. In fp32 there, folding log2(e) into Q rounds scores of ~1000 once more
  // than plain attention does; the fp32 band models that (grading::with_score_rounding).
  using reference::Distribution;
  for (const Config& c : gpu_grading::numerics_configs({DType::fp32, DType::bf16},
                                                       {Distribution::large_logits, Distribution::negative_rows}))
    check(c);
}

TEST_CASE("deterministic and right for several seeds (no race)" * grading::points(2)) {
  gpu_grading::require_device();
  // A missing barrier shows up as results that change from run to run, or with the seed.
  Config c;
  c.B = 2;
  c.H = 4;
  c.Nq = c.Nk = 1500;
  c.d = 64;
  c.causal = true;
  const std::uint64_t s = grading::seed() * 1000;
  gpu_grading::check_deterministic(c, "flash_attention_forward", {s, s + 1, s + 2});
}

TEST_CASE("races: compute-sanitizer finds no race, barrier misuse or bad access" * grading::points(2, kSmallFp32)) {
  // The check above compares outputs, and a missing barrier rarely changes them on the GPU it is
  // graded on; compute-sanitizer sees the hazard itself (grader/gpu/compute_sanitizer.hpp). Several
  // K/V tiles (the barrier before a tile is overwritten matters from the second on), partial
  // last tiles, causal and not, both dtypes and two head dimensions.
  std::vector<Config> shapes(2);
  shapes[0].H = 2, shapes[0].Nq = shapes[0].Nk = 200, shapes[0].d = 64, shapes[0].causal = true;
  shapes[1].Nq = 70, shapes[1].Nk = 150, shapes[1].d = 128, shapes[1].dtype = DType::bf16;
  gpu_grading::check_under_compute_sanitizer(
      {"flash_attention_forward", "fp32, bf16", {1, 2, 200, 64}, shapes[0].describe() + "; " + shapes[1].describe()},
      [&] {
        for (const Config& c : shapes) check(c);
      });
}

TEST_CASE("inputs unchanged and scale honoured" * grading::points(2)) {
  gpu_grading::require_device();
  for (float scale : {0.3f, 1.0f, 0.0f}) {
    Config c;
    c.B = 1;
    c.H = 2;
    c.Nq = 100;
    c.Nk = 150;
    c.d = 32;
    c.scale = scale;
    // Outliers (entries of +-30) at the default scale; at scale 1 they would make scores of
    // ~1000, where fp32's own rounding of the scores, not the scale, decides the error.
    c.dist = scale == 0.0f ? reference::Distribution::outliers : reference::Distribution::normal;
    const auto in = gpu_grading::make_inputs(c, grading::seed());
    const auto out = gpu_grading::run_lab(c, in);
    grading::expect(out.inputs_unchanged, {"flash_attention_forward", "fp32", {c.B, c.H, c.Nq, c.d}, c.describe()},
                    "the kernel modified Q, K or V");
    gpu_grading::expect_matches(c, out, gpu_grading::reference_for(c, in), "flash_attention_forward", grading::seed());
  }
}

TEST_CASE("bad input gets a clear error" * grading::points(2, kSmallFp32)) {
  gpu_grading::require_device();
  auto shape = [](int Nq, int d) {
    Config c;
    c.Nq = Nq;
    c.Nk = 16;
    c.d = d;
    return c;
  };
  CHECK_THROWS_AS(gpu_grading::call_with_bad_arguments(shape(16, 48), false), course::BadInput);  // d = 48
  CHECK_THROWS_AS(gpu_grading::call_with_bad_arguments(shape(16, 64), true), course::BadInput);   // Q null
  CHECK_THROWS_AS(gpu_grading::call_with_bad_arguments(shape(0, 64), false), course::BadInput);   // Nq = 0
}
