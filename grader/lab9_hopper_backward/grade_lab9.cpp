// Lab 9 grader: the attention backward pass on Hopper (sm_90a: wgmma, TMA, mbarrier).
//
// Graded as lab 7's tensor-core backward (part 3), with the same checks' code
// (grader/lab7_backward/backward_gpu_checks.hpp and backward_bands.hpp): the inputs of a problem,
// the fp64 reference's gradients, and the bands derived from a plain backward that rounds P and
// dS to the 16-bit type as the tensor cores' operands are. Each [B, H, N, d] problem runs in the
// lab process inside the GPU harness (NaN guard zones, NaN-poisoned outputs and workspace, a
// busy default stream) and is compared head by head. The shapes add, to lab 7's, lengths that
// cross this lab's 128-key and 64- or 128-row tiles by one. Every check skips, saying why,
// without a GPU or on a GPU that is not compute capability 9.0.
//
// Lab 9 is a staircase of two steps (course::lab7::HopperBackwardStep); the checks grade the
// default step (step 2), and the staircase check, the deterministic-mode check and the
// compute-sanitizer check grade step 1 too.
//
// Speed points as lab 8's: the backward's time against the solution's, timed in the same run on
// the same GPU (grader/gpu/speed_rules.hpp: full points within 1.2x, none at 3x; the worse of
// causal and non-causal counts), on the benchmark's shape (bf16, B * N = 16384, H * d = 2048,
// N = 4096). What a random timed call computed is checked too (backward_speed_check.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include "backward_gpu_checks.hpp"
#include "backward_speed_check.hpp"
#include "course/errors.hpp"

using namespace backward_grading;
using grading::causal;

namespace {

// Skips the check unless a CUDA device of compute capability 9.0 is here (lab 8's rule: wgmma
// and TMA exist on sm_90a only, and the lab is compiled for nothing else).
void require_hopper() { gpu_grading::require_hopper("lab 9"); }

// Lab 9 is called with the tensor-core kernel's number on the wire (its only kind of kernel) and
// the step of its staircase: kHopper is the default step (the best, step 2), kSteps each one in
// course::lab7::HopperBackwardStep's order.
constexpr Kernel kHopper = Kernel::tensor_cores;
const KernelChoice kStep1{Kernel::tensor_cores, 0};  // one kind of warpgroup, dQ by atomics
const KernelChoice kStep2{Kernel::tensor_cores, 1};  // a producer warp, dQ by bulk reductions
const std::vector<KernelChoice> kSteps = {kStep1, kStep2};

template <class T>
bool check_hopper(const GpuProblem& g, std::uint64_t seed, KernelChoice kernel = kHopper) {
  require_hopper();
  return check_gpu<T>(g, seed, kernel);
}

// Lab 7's shapes and lengths around this lab's tiles: 128 keys per CTA, 128 query rows per step
// at d = 64 and 64 at d = 128 (N = 127, 129, 65, 257).
const std::vector<GpuProblem> kShapes = [] {
  std::vector<GpuProblem> shapes = kGpuShapes;
  for (const GpuProblem& g : std::vector<GpuProblem>{
           {1, 2, 129, 127, 64}, {2, 1, 65, 129, 128}, {1, 1, 257, 257, 128}, {1, 1, 127, 257, 64}})
    shapes.push_back(g);
  return shapes;
}();

const char* kHopperCheck = "hopper: bf16 and fp16 match the reference (d 64 and 128, N not a multiple of the tile)";

}  // namespace

TEST_CASE("hopper: bf16 and fp16 match the reference (d 64 and 128, N not a multiple of the tile)" *
          grading::points(3)) {
  for (const GpuProblem& g : kShapes) {
    check_hopper<bf16>(g, grading::seed());
    check_hopper<fp16>(g, grading::seed());
  }
}

TEST_CASE("hopper: causal, Nq != Nk aligned bottom-right, rows with no key give dQ = 0" *
          grading::points(3, kHopperCheck)) {
  for (const GpuProblem& g : causal(kShapes)) check_hopper<bf16>(g, grading::seed());
  // Nq > Nk: the first Nq - Nk rows see no key (LSE = -inf), inside tiles that also hold rows
  // that do; Nq < Nk: the first K/V tiles are seen by every query (bottom-right: the last query
  // sees every key, so no K/V tile is left out).
  for (const GpuProblem& g :
       causal<GpuProblem>({{1, 2, 150, 40, 64}, {2, 1, 70, 260, 128}, {1, 1, 5, 3, 64}, {1, 1, 300, 700, 64}}))
    check_hopper<fp16>(g, grading::seed());
}

TEST_CASE("hopper: large scores and outliers (P from the saved LSE, no NaN)" * grading::points(1, kHopperCheck)) {
  for (bool c : {false, true}) {
    check_hopper<bf16>({1, 2, 200, 200, 64, c, Distribution::negative_rows}, grading::seed());
    check_hopper<fp16>({1, 2, 200, 200, 128, c, Distribution::large_scores}, grading::seed());
    check_hopper<bf16>({1, 2, 130, 130, 128, c, Distribution::outliers}, grading::seed());
    check_hopper<fp16>({1, 1, 100, 150, 64, c, Distribution::normal, 30.0}, grading::seed());
  }
}

// Many query tiles through the two TMA stages (a stage refilled while it is read, or a barrier
// phase out of step, shows here), and many K/V tiles adding into the same dQ rows.
TEST_CASE("hopper: long sequences, every query tile through the pipeline (N = 1024 to 2000)" *
          grading::points(2, kHopperCheck)) {
  check_hopper<bf16>({1, 2, 1024, 1024, 128, true}, grading::seed());
  check_hopper<fp16>({1, 1, 2000, 1100, 64, false}, grading::seed());
  check_hopper<bf16>({2, 1, 777, 1024, 64, true}, grading::seed() + 1);
  check_hopper<fp16>({1, 1, 1100, 2000, 128, true}, grading::seed());
}

// Step 1 (the kernel of one kind of warpgroup, dQ by atomics) on its own: the checks above
// grade the default step, step 2, which shares step 1's products and tile but not its loads or
// its dQ accumulation. The first check's shapes, causal shapes and long sequences. No parent: a
// student who has finished step 1 and not step 2 earns these points.
TEST_CASE("staircase: step 1 (one kind of warpgroup, dQ by atomics) matches the reference" * grading::points(2)) {
  require_hopper();
  // A fresh lab process: a step 2 that is not written yet stops its kernel at the bounded wait,
  // and the CUDA context of the process that ran it stays broken ("unspecified launch failure"
  // at its next call); step 1's points must not depend on that.
  isolation::lab().restart();
  for (const GpuProblem& g : kShapes) check_hopper<bf16>(g, grading::seed(), kStep1);
  for (const GpuProblem& g : causal<GpuProblem>({{1, 2, 150, 40, 64}, {2, 1, 70, 260, 128}, {1, 1, 300, 700, 64}}))
    check_hopper<fp16>(g, grading::seed(), kStep1);
  check_hopper<bf16>({1, 2, 1024, 1024, 128, true}, grading::seed(), kStep1);
  check_hopper<fp16>({1, 1, 2000, 1100, 64, false}, grading::seed(), kStep1);
}

TEST_CASE("hopper: deterministic dK and dV, and right, for several seeds (no race)" *
          grading::points(1, kHopperCheck)) {
  require_hopper();
  const std::uint64_t s = grading::seed() * 1000;
  for (std::uint64_t seed : {s, s + 1}) {
    check_gpu_deterministic<bf16>({2, 2, 700, 700, 128, true}, seed, kHopper);
    check_gpu_deterministic<fp16>({1, 2, 700, 500, 64, false}, seed, kHopper);
  }
}

// The deterministic mode (options.deterministic): four calls per problem, one alone, one with
// half the SMs held by another kernel, one with all but 8 held (the CTAs then run in waves, in
// another order), one alone again; dQ, dK and dV must agree bit for bit, and be right. Many K/V
// tiles add into each dQ row (16 at Nk = 2000), so atomics in whatever order they come change some
// dQ element's bits; causal orders only the K/V tiles that see a query tile.
TEST_CASE("hopper: deterministic mode, dQ dK dV the same bits in every run whatever else runs, and right" *
          grading::points(2, kHopperCheck)) {
  require_hopper();
  const std::uint64_t s = grading::seed();
  for (const KernelChoice& step : kSteps) {  // step 1's turns wrap atomics, step 2's a bulk reduction
    check_gpu_deterministic_dq<bf16>({1, 4, 1000, 2000, 128, false}, s, step);
    check_gpu_deterministic_dq<fp16>({2, 2, 1500, 1500, 64, true}, s, step);
    check_gpu_deterministic_dq<bf16>({1, 2, 600, 1300, 128, true}, s + 1, step);
    check_gpu_deterministic_dq<fp16>({1, 1, 300, 150, 64, true}, s, step);  // rows that see no key
  }
}

TEST_CASE("hopper: compute-sanitizer finds no race, barrier misuse or bad access" *
          grading::points(2, kHopperCheck)) {
  require_hopper();
  check_gpu_sanitized<bf16>(kSteps);
}

TEST_CASE("hopper: bad input gets a clear error" * grading::points(1, kHopperCheck)) {
  require_hopper();
  const std::uint64_t enough = std::uint64_t(1) << 20;
  CHECK_THROWS_AS(bad_gpu_call(64, DType::fp32, 64, false, enough, kHopper), course::BadInput);   // fp32
  CHECK_THROWS_AS(bad_gpu_call(96, DType::bf16, 64, false, enough, kHopper), course::BadInput);   // d = 96
  CHECK_THROWS_AS(bad_gpu_call(64, DType::fp16, 0, false, enough, kHopper), course::BadInput);    // Nq = 0
  CHECK_THROWS_AS(bad_gpu_call(64, DType::bf16, 64, true, enough, kHopper), course::BadInput);    // null Q
  CHECK_THROWS_AS(bad_gpu_call(64, DType::fp16, 64, false, 16, kHopper), course::BadInput);       // workspace
  CHECK_THROWS_AS(bad_gpu_call(64, DType::bf16, 64, false, enough, Kernel::cuda_cores), course::BadInput);
  CHECK_THROWS_AS(bad_gpu_call(64, DType::bf16, 64, false, enough, KernelChoice{kHopper, 2}), course::BadInput);  // no step 3
  CHECK_NOTHROW(bad_gpu_call(64, DType::fp16, 64, false, enough, kHopper));  // the same call, valid, runs
}

TEST_CASE("speed: d=64 within 1.2x of the solution" * grading::points(4, kHopperCheck)) {
  require_hopper();
  gpu_grading::award_speed_against_solution(64, /*backward=*/true, time_backward_in_lab);
}

TEST_CASE("speed: d=128 within 1.2x of the solution" * grading::points(4, kHopperCheck)) {
  require_hopper();
  gpu_grading::award_speed_against_solution(128, /*backward=*/true, time_backward_in_lab);
}
