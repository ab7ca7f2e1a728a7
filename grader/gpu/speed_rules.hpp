// The speed checks of the GPU labs with speed points (the forward labs 5 and 8, the Hopper
// backward of lab 9): the benchmark shape, what a timed call's rows are checked on, and how a
// ratio to the yardstick (the solution, timed on the same GPU in the same run) becomes a
// fraction of the points.
// Plain C++ (no CUDA): the grader, the lab processes and a CPU unit test all include it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace gpu_grading {

// The benchmark shape of the speed checks: bf16, B * N = 16384 tokens, H * d = 2048 (the shape
// of `./course bench`, so a grade and a benchmark row speak of the same thing). The grader
// reports TFLOP/s; the lab process ("time" request) times the kernel on it.
struct SpeedConfig {
  int d = 64;
  bool causal = false;
  int N = 4096;  // sequence length (Nq = Nk)
  bool backward = false;  // the backward pass (lab 9) rather than the forward
  int batch() const { return 16384 / N; }
  int heads() const { return 2048 / d; }
  // The forward's 4 B H N^2 d (two products of N x N x d), halved for causal; the backward's five
  // products make it 2.5 times that (FlashAttention-2's count, as bench/bench_backward.cu).
  double flops() const {
    const double f = 4.0 * batch() * heads() * double(N) * N * d * (backward ? 2.5 : 1.0);
    return causal ? f / 2 : f;
  }
};

// A speed check also checks what it timed: a kernel that does less work on the benchmark's shape
// (returns early, writes zeros, computes a few rows) would otherwise earn the points of a fast
// one. The grader picks, at random for each request, the inputs' seed, one head, 16 consecutive
// query rows of it and one of the timed calls. The lab process poisons O and LSE (NaN) before
// every call, outside the timed interval, so the calls cannot be told apart, and sends back those
// rows of O and LSE as that call left them. The grader draws the same inputs on the CPU
// (course/seeded_normal.hpp: Q, K and V from seed, seed + 1 and seed + 2, element i of the
// [B, H, N, d] buffer from (seed, i)) and compares the rows with its fp64 reference.
//
// The backward (lab 9) is checked the same way: dO is drawn from seed + 3 and O from seed + 4, the
// LSE is synthetic_lse below, and dQ, dK and dV are poisoned before every call; what comes back
// is rows first_row .. of dQ and rows first_key .. of dK and dV (grader/lab7_backward/
// backward_speed_check.hpp holds them to the fp64 reference in lab 7's bf16 bands).
struct SpeedCheck {
  static constexpr int kRows = 16;     // query rows (and, for the backward, key rows) sent back
  static constexpr int kWarmup = 3;    // untimed calls first
  static constexpr int kRepeats = 20;  // timed calls; the median is the time
  std::uint64_t seed = 1;              // Q's; K's is seed + 1, V's seed + 2 (dO's seed + 3, O's seed + 4)
  int head = 0;                        // b * H + h
  int first_row = 0;                   // rows first_row .. first_row + kRows - 1 (of N)
  int first_key = 0;                   // the backward's dK and dV rows first_key .. + kRows - 1
  int checked_call = 0;                // 0 .. kRepeats - 1
};

// The LSE the backward's speed check gives the kernel for query row `row` (of N): the backward's
// arithmetic is defined for any given O and LSE (P = exp(scale S - LSE), D = rowsum(dO o O)), so
// the inputs need no forward pass, but P must stay bounded as a softmax's is. With unit-normal Q
// and K and scale = 1/sqrt(d) a score is about unit-normal, E[exp S] = e^0.5, and a row that sees n
// keys sums to about n e^0.5: its LSE is about log(n) + 0.5, and then P_ij = exp(S_ij) / (n e^0.5).
inline float synthetic_lse(int row, int N, bool causal) {
  const int keys_seen = causal ? row + 1 : N;  // Nq = Nk: row r sees keys 0..r
  return std::log(float(keys_seen)) + 0.5f;
}

// The fraction of a speed check's points for a ratio where higher is better: none at or below
// `none_at`, all at or above `full_at`, linear between.
inline double speed_fraction(double ratio, double none_at, double full_at) {
  if (!(ratio > none_at)) return 0.0;  // also NaN
  if (ratio >= full_at) return 1.0;
  return (ratio - none_at) / (full_at - none_at);
}

// The rule of labs 5, 8 and 9, on the student's time over the solution's (each the median of the timed
// calls, the worse of causal and non-causal): full points within 1.2x, none at 3x, linear between.
// The yardstick is measured in the same run on the same GPU, so an A100 is graded against an
// A100. On the H200 lab 8's solution runs at 0.93-1.04x cuDNN at this shape, so within 1.2x of it
// means about 0.8x cuDNN or better; lab 9's backward runs at 0.71-0.80x cuDNN's backward there.
constexpr double kSolutionFullWithin = 1.2;
constexpr double kSolutionNoneAt = 3.0;

// speed_fraction for a time ratio (lower is better: linear in its negative).
inline double fraction_of_solution_time(double ratio) {
  return speed_fraction(-ratio, -kSolutionNoneAt, -kSolutionFullWithin);
}

}  // namespace gpu_grading
