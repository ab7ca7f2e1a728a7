// CPU benchmark (not a test): lab 3's streaming attention against standard attention that
// materialises the N x N score matrix, in fp32, one head, d = 64, no mask.
//
//   streaming      course::lab3::attention_forward<float> (solutions/lab3_attention), tiles 64 x 64
//   materialising  reference::attention<float>: S = scale Q K^T (N x N), softmax(S), P V
//
// For each N it records the wall time (best of several runs for small N), the achieved GFLOP/s
// (4 N^2 d flops: the two matrix products), and the peak heap bytes during the call, measured by
// grader/common/heap_meter (malloc interposition), which also counts the returned O.
//
// Usage: bench_lab3_cpu [--out FILE.csv] [--max-n N] [--d D]
// Both implementations are built with the same compiler flags (the Release build's); neither is
// multi-threaded.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "course/lab3_attention.hpp"
#include "heap_meter.hpp"
#include "reference/data.hpp"
#include "reference/reference.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Result {
  double seconds = 0;
  long peak_bytes = 0;
  int runs = 0;
};

// Runs f until at least `min_total` seconds have passed (at most `max_runs` times, at least once)
// and keeps the fastest run; the heap peak is that of the first run.
template <class F>
Result measure(F&& f, double min_total, int max_runs) {
  Result r;
  r.seconds = 1e30;
  double total = 0;
  while (r.runs < max_runs && (r.runs == 0 || total < min_total)) {
    long peak = 0;
    const auto t0 = Clock::now();
    {
      grading::HeapMeter meter;
      f();
      peak = meter.peak_bytes();
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r.runs == 0) r.peak_bytes = peak;
    r.seconds = std::min(r.seconds, s);
    total += s;
    ++r.runs;
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path = "cpu_attention_bench.csv";
  int max_n = 16384, d = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out_path = argv[++i];
    else if (a == "--max-n" && i + 1 < argc) max_n = std::atoi(argv[++i]);
    else if (a == "--d" && i + 1 < argc) d = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_lab3_cpu [--out FILE.csv] [--max-n N] [--d D]\n");
      return 2;
    }
  }
  // The materialising baseline holds about three N x N fp32 matrices at once (S, exp(S), and a
  // temporary of the scaled product); it is skipped where that would pass 8 GB.
  const double kMaterialiseLimitBytes = 8e9;

  std::ofstream csv(out_path);
  csv << "impl,N,d,seconds,gflops,peak_heap_bytes,runs,note\n";
  std::printf("%-14s %6s %4s %10s %9s %14s  %s\n", "impl", "N", "d", "seconds", "GFLOP/s",
              "peak heap MiB", "note");
  auto report = [&](const char* impl, int N, const Result& r, const std::string& note) {
    const double flops = 4.0 * double(N) * N * d;
    const double gflops = r.seconds > 0 ? flops / r.seconds / 1e9 : 0;
    csv << impl << ',' << N << ',' << d << ',' << r.seconds << ',' << gflops << ','
        << r.peak_bytes << ',' << r.runs << ',' << note << '\n';
    std::printf("%-14s %6d %4d %10.4f %9.2f %14.2f  %s\n", impl, N, d, r.seconds, gflops,
                r.peak_bytes / 1048576.0, note.c_str());
    std::fflush(stdout);
  };

  for (int N = 1024; N <= max_n; N *= 2) {
    reference::Rng rng(1, "bench/cpu/" + std::to_string(N));
    const Eigen::MatrixXd Qd = reference::random_matrix(N, d, reference::Distribution::normal, rng);
    const Eigen::MatrixXd Kd = reference::random_matrix(N, d, reference::Distribution::normal, rng);
    const Eigen::MatrixXd Vd = reference::random_matrix(N, d, reference::Distribution::normal, rng);
    const float scale = float(course::default_softmax_scale(d));
    const double min_total = N <= 4096 ? 1.0 : 0.0;
    const int max_runs = N <= 4096 ? 5 : 1;

    {
      const course::Matrix<float> Q = Qd.cast<float>(), K = Kd.cast<float>(), V = Vd.cast<float>();
      course::lab3::AttentionOptions opt;  // block_q = block_k = 64, scale 1/sqrt(d)
      float sink = 0;
      const Result r = measure(
          [&] {
            const auto out = course::lab3::attention_forward<float>(Q, K, V, opt);
            sink += out.O(0, 0);
          },
          min_total, max_runs);
      report("streaming", N, r, "lab 3 solution; tiles 64x64" + std::string(sink == 12345 ? " " : ""));
    }
    {
      const double est = 3.0 * double(N) * N * sizeof(float);
      if (est > kMaterialiseLimitBytes) {
        report("materialising", N, Result{},
               "skipped: three N x N fp32 matrices would take " + std::to_string(est / 1e9) +
                   " GB");
        continue;
      }
      const reference::Mat<float> Q = Qd.cast<float>(), K = Kd.cast<float>(), V = Vd.cast<float>();
      float sink = 0;
      const Result r = measure(
          [&] {
            const auto out = reference::attention<float>(Q, K, V, scale, false);
            sink += out.O(0, 0);
          },
          min_total, max_runs);
      report("materialising", N, r,
             "reference::attention<float> (Eigen GEMM)" + std::string(sink == 12345 ? " " : ""));
    }
  }
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}
