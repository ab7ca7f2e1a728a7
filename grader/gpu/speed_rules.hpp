// The speed checks of the forward GPU labs (5 and 8): the benchmark shape, how a ratio becomes a
// fraction of the points, and lab 8's yardstick, cuDNN's attention as recorded on named GPUs.
// Plain C++ (no CUDA): the grader, the lab processes and a CPU unit test all include it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

namespace gpu_grading {

// The benchmark shape of the speed checks: bf16, B * N = 16384 tokens, H * d = 2048 (the shape
// of `./course bench`, so a grade and a benchmark row speak of the same thing). The grader
// reports TFLOP/s; the lab process ("time" request) times the kernel on it.
struct SpeedConfig {
  int d = 64;
  bool causal = false;
  int N = 4096;  // sequence length (Nq = Nk)
  int batch() const { return 16384 / N; }
  int heads() const { return 2048 / d; }
  double flops() const {  // 4 B H N^2 d, halved for causal
    const double f = 4.0 * batch() * heads() * double(N) * N * d;
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
struct SpeedCheck {
  static constexpr int kRows = 16;     // query rows sent back
  static constexpr int kWarmup = 3;    // untimed calls first
  static constexpr int kRepeats = 20;  // timed calls; the median is the time
  std::uint64_t seed = 1;              // Q's; K's is seed + 1, V's seed + 2
  int head = 0;                        // b * H + h
  int first_row = 0;                   // rows first_row .. first_row + kRows - 1 (of N)
  int checked_call = 0;                // 0 .. kRepeats - 1
};

// The fraction of a speed check's points for a ratio where higher is better: none at or below
// `none_at`, all at or above `full_at`, linear between.
inline double speed_fraction(double ratio, double none_at, double full_at) {
  if (!(ratio > none_at)) return 0.0;  // also NaN
  if (ratio >= full_at) return 1.0;
  return (ratio - none_at) / (full_at - none_at);
}

// Lab 8's rule: the student's TFLOP/s over cuDNN's on the same GPU model, recorded by
// `./course bench` (bench/bench_torch.py, PyTorch SDPA's cuDNN backend). Full points at 0.8x,
// none at 0.4x. (The issue asked for full points at 0.9x; the shipped solution measures
// 0.93-1.04x at N = 4096, 0.93x at d = 128 (bench/results/lab8-tiles_2026-12-01_nvidia-h200.md),
// so 0.9x would take points from it on a run a few percent slow.)
constexpr double kCudnnNoneAt = 0.4;
constexpr double kCudnnFullAt = 0.8;

struct RecordedFigure {
  const char* gpu;  // cudaDeviceProp::name, exactly
  int d;
  bool causal;
  int N;
  double tflops;
};

// cuDNN's forward attention, bf16, B * N = 16384, H * d = 2048, N = 4096 (TFLOP/s, causal FLOPs
// halved), from bench/results/lab8_2026-12-01_nvidia-h200_torch.csv (PyTorch 2.11, cuDNN
// backend, CUDA 13.0, driver 580.159.04). Another GPU gets its line from a `./course bench` run
// on it, with the file named in the comment.
inline constexpr RecordedFigure kCudnnRecorded[] = {
    {"NVIDIA H200", 64, false, 4096, 482.8},
    {"NVIDIA H200", 64, true, 4096, 435.0},
    {"NVIDIA H200", 128, false, 4096, 686.2},
    {"NVIDIA H200", 128, true, 4096, 589.5},
};

// cuDNN's recorded TFLOP/s for this GPU and configuration, if there is one.
inline std::optional<double> recorded_cudnn_tflops(const std::string& gpu, const SpeedConfig& c) {
  for (const RecordedFigure& f : kCudnnRecorded)
    if (gpu == f.gpu && f.d == c.d && f.causal == c.causal && f.N == c.N) return f.tflops;
  return std::nullopt;
}

}  // namespace gpu_grading
