// Lab 8 grader: the Hopper (sm_90a) FlashAttention forward kernel.
//
// Correctness as lab 5 (the shared GPU harness, grader/gpu/: NaN-poisoned outputs and guard
// zones, a busy default stream, the fp64 reference, the bands of grader/common/tolerances.cpp),
// for the shipped version and for every step of the staircase, in bf16 and fp16, d = 64 and 128,
// causal and not, lengths that cross the 128-row and 128-key tiles by one, Nq != Nk with rows
// that see no key. Every check skips, saying why, without a GPU or on a GPU that is not sm_90.
// Speed points as lab 5's: the student's time against the solution's, timed in the same run on the
// same GPU (grader/gpu/speed_rules.hpp: full points within 1.2x, none at 3x; on the H200 the
// solution runs at 0.93-1.04x cuDNN, so full points mean about 0.8x cuDNN or better).
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attention_problem.hpp"
#include "course/errors.hpp"
#include "course/lab8_hopper.hpp"
#include "compute_sanitizer.hpp"
#include "gpu_harness.hpp"
#include "lab_process.hpp"

using course::DType;
using course::lab8::Version;
using course::lab8::version_name;
using gpu_grading::Config;

namespace {

// Skips the check unless a CUDA device of compute capability 9.0 is here: wgmma and TMA as this
// lab uses them exist on sm_90a only (H100, H200), and the lab is compiled for nothing else.
void require_hopper() { gpu_grading::require_hopper("lab 8"); }

bool check(Config c, Version v = Version::best, std::uint64_t seed = grading::seed()) {
  c.version = int(v);
  return gpu_grading::check_config(c, std::string("flash_attention_forward[") + version_name(v) + "]", seed);
}

// N = 1, 7 (a sliver of a tile), 64 (half a tile), 113, 129 (a 128-row/-key tile and one more),
// 177, 193 (cross the 176- and 192-key tiles of the later steps by one).
void small_shapes(DType dtype, Version v = Version::best) {
  for (int d : {64, 128})
    for (int n : {1, 7, 64, 113, 129, 177, 193})
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

// Causal with Nq != Nk: the (Nq, Nk) of the CPU labs' list (grading::causal_unequal_lengths:
// with Nq > Nk the first Nq - Nk rows see no key) and two that cross this kernel's 128-row query
// tile, so that a tile holds rows with and without keys; at d = 64 and 128, in `dtype`.
void causal_unequal(DType dtype, Version v = Version::best) {
  std::vector<std::pair<int, int>> lengths;
  for (const grading::AttentionProblem& p : grading::causal_unequal_lengths()) lengths.emplace_back(p.Nq, p.Nk);
  lengths.emplace_back(300, 113);
  lengths.emplace_back(129, 257);
  for (auto [nq, nk] : lengths)
    for (int d : {64, 128}) {
      Config c;
      c.B = 1;
      c.H = 2;
      c.Nq = nq;
      c.Nk = nk;
      c.d = d;
      c.dtype = dtype;
      c.causal = true;
      check(c, v);
    }
}

// Many work tiles: 128 heads of a few query tiles each, 384-640 work tiles in all, so that step 9's
// persistent CTAs (one per SM: 132 on an H100 or H200) each take several, one after another, with
// the barrier phases carried from one to the next. In bf16 (the GPU fp64 reference).
std::vector<Config> many_work_tiles() {
  std::vector<Config> out;
  // (Nq, Nk, d, causal): full tiles and partial ones; causal with Nq > Nk, where whole work
  // tiles see no key (no K/V tile at all), between work tiles that do.
  for (auto [nq, nk, d, causal] : {std::tuple{520, 520, 128, true}, std::tuple{700, 300, 64, true},
                                   std::tuple{600, 1100, 128, false}, std::tuple{400, 400, 64, false}}) {
    Config c;
    c.B = 4;
    c.H = 32;
    c.Nq = nq;
    c.Nk = nk;
    c.d = d;
    c.dtype = DType::bf16;
    c.causal = causal;
    out.push_back(c);
  }
  return out;
}

// Bad arguments in the lab process: a Q pointer 2 bytes past a 16-byte boundary.
void call_with_misaligned_q(const Config& c) {
  isolation::Packet args;
  gpu_wire::put_call(args, c.call());
  isolation::lab().call("bad_arguments_misaligned", args);
}

const char* kBf16 = "best: bf16 small shapes within band";

}  // namespace

TEST_CASE("best: bf16 small shapes within band" * grading::points(3)) {
  require_hopper();
  small_shapes(DType::bf16);
}

TEST_CASE("best: fp16 small shapes within band" * grading::points(3)) {
  require_hopper();
  small_shapes(DType::fp16);
}

TEST_CASE("best: causal with Nq != Nk, rows with no key" * grading::points(3)) {
  require_hopper();
  for (DType dtype : {DType::bf16, DType::fp16}) causal_unequal(dtype);
}

TEST_CASE("best: large shapes against the GPU fp64 reference" * grading::points(3)) {
  require_hopper();
  for (const Config& c : gpu_grading::large_shape_configs({DType::bf16}, /*odd_heads=*/4)) check(c);
}

TEST_CASE("staircase: every version matches the reference" * grading::points(3)) {
  require_hopper();
  for (Version v : course::lab8::kAllVersions) {
    small_shapes(DType::bf16, v);
    // Both dtypes: a weight of 2^-125 given to a masked score (step 8's polynomial without its
    // floor) rounds to 0 in fp16's P but not in bf16's, which shares fp32's exponent range.
    causal_unequal(DType::bf16, v);
    causal_unequal(DType::fp16, v);
    Config c;  // several tiles of both kinds, so that every stage is refilled and wraps its phase
    c.B = 1;
    c.H = 2;
    c.Nq = 1000;
    c.Nk = 1500;
    c.d = 128;
    c.dtype = DType::fp16;
    c.causal = true;
    check(c, v);
    for (const Config& many : many_work_tiles()) check(many, v);
  }
}

TEST_CASE("numerics: large logits, and rows whose scores are all far below zero" * grading::points(2, kBf16)) {
  require_hopper();
  // Lab 5's numerics problems (gpu_grading::numerics_configs): scores of +-150 and rows whose
  // scores all lie near -1000, few keys and partial tiles, causal and not.
  using reference::Distribution;
  for (const Config& c : gpu_grading::numerics_configs({DType::bf16, DType::fp16},
                                                       {Distribution::large_scores, Distribution::negative_rows}))
    check(c);
}

TEST_CASE("best: deterministic and right for several seeds (no race)" * grading::points(2)) {
  require_hopper();
  // Many K/V tiles per CTA (stages refilled while the other warpgroup may still read them, if
  // the protocol is wrong), both head dimensions.
  const std::uint64_t s = grading::seed() * 1000;
  for (int d : {64, 128}) {
    Config c;
    c.B = 2;
    c.H = 4;
    c.Nq = c.Nk = 1500;
    c.d = d;
    c.dtype = DType::bf16;
    c.causal = true;
    gpu_grading::check_deterministic(c, "flash_attention_forward[best]", {s, s + 1, s + 2});
  }
}

TEST_CASE("races: compute-sanitizer finds no race, barrier misuse or bad access" * grading::points(2, kBf16)) {
  require_hopper();
  // Every version on two small problems (several K/V tiles through the stages, so that every
  // barrier's phase wraps; partial last tiles; causal and not) under compute-sanitizer
  // (grader/gpu/compute_sanitizer.hpp).
  std::vector<Config> shapes(2);
  shapes[0].H = 2, shapes[0].Nq = shapes[0].Nk = 300, shapes[0].d = 64, shapes[0].causal = true;
  shapes[0].dtype = DType::bf16;
  shapes[1].Nq = 130, shapes[1].Nk = 520, shapes[1].d = 128, shapes[1].dtype = DType::fp16;
  // Step 9 also on more work tiles than SMs (one K/V tile each, to stay quick under the tools),
  // so that some persistent CTAs take a second work tile.
  Config persistent;
  persistent.H = 150, persistent.Nq = persistent.Nk = 100, persistent.d = 128;
  persistent.dtype = DType::bf16;
  gpu_grading::check_under_compute_sanitizer(
      {"flash_attention_forward", "bf16, fp16", {1, 2, 300, 64},
       "every version; " + shapes[0].describe() + "; " + shapes[1].describe() + "; persistent also " +
           persistent.describe()},
      [&] {
        for (Version v : course::lab8::kAllVersions)
          for (const Config& c : shapes) check(c, v);
        check(persistent, Version::persistent);
      });
}

TEST_CASE("bad input gets a clear error" * grading::points(1, kBf16)) {
  require_hopper();
  const auto shape = gpu_grading::bad_input_config;
  // d = 32 is not supported; Q null; H = 0; fp32 (wgmma takes 16-bit inputs here); a Q pointer
  // that is not 16-byte aligned (TMA's rule for a global address).
  CHECK_THROWS_AS(gpu_grading::call_with_bad_arguments(shape(1, 32, DType::bf16), false), course::BadInput);
  CHECK_THROWS_AS(gpu_grading::call_with_bad_arguments(shape(1, 64, DType::bf16), true), course::BadInput);
  CHECK_THROWS_AS(gpu_grading::call_with_bad_arguments(shape(0, 64, DType::fp16), false), course::BadInput);
  CHECK_THROWS_AS(gpu_grading::call_with_bad_arguments(shape(1, 64, DType::fp32), false), course::BadInput);
  CHECK_THROWS_AS(call_with_misaligned_q(shape(1, 64, DType::bf16)), course::BadInput);
}

// bf16, N = 4096, B * N = 16k tokens, H * d = 2048, causal and not (the worse counts).
TEST_CASE("speed: d=64 within 1.2x of the solution" * grading::points(4, kBf16)) {
  require_hopper();
  gpu_grading::award_speed_against_solution(64);
}

TEST_CASE("speed: d=128 within 1.2x of the solution" * grading::points(4, kBf16)) {
  require_hopper();
  gpu_grading::award_speed_against_solution(128);
}
