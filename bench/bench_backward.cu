// bench_backward: lab 7's GPU backward pass (and lab 9's Hopper backward, atomic and deterministic
// dQ, where it is built and the GPU is an H100 or H200), timed, next to lab 5's forward (and lab
// 8's, on an H100 or H200) on the same shapes (the FA1 paper's forward + backward view), in the
// configurations of bench_attention: bf16, B * N = 16k tokens, H * d = 2048, d in {64, 128}, N in
// {1k, 2k, 4k, 8k} (quick: 1k and 4k), causal and not.
//
//   bench_backward --out results.csv [--quick] [--budget-s 120] [--max-reps 20]
//                  [--impls lab5,lab8,lab7,lab7-cuda-cores,lab9,lab9-deterministic,lab9-wgmma] [--ds 64,128]
//                  [--ns 4096] [--causal 0,1]
//
// --impls, --ds, --ns and --causal keep only those rows (tools/profile runs one kernel so).
//
// FLOPs: the forward is 4 B H N^2 d (two products of 2 N^2 d), the backward 10 B H N^2 d (five:
// S recomputed, dP, dV, dQ, dK); both are halved with causal masking, the FlashAttention
// papers' convention. TFLOP/s = FLOPs / median time. Inputs are seeded normal values; O and LSE
// come from lab 5's and lab 8's forwards (or, without them, from seeded values: the backward's time
// does not depend on them). Correctness is the grader's business (grade_lab7), not this program's.
// Each row is written and flushed as soon as it is measured.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "course/errors.hpp"
#include "course/lab7_backward_gpu.hpp"
#include "cli.hpp"
#include "event_timing.hpp"
#if COURSE_HAVE_LAB5
#include "course/lab5_tensor_core.hpp"
#endif
#if COURSE_HAVE_LAB8
#include "course/lab8_hopper.hpp"
#endif
#if COURSE_HAVE_LAB9
#include "course/lab9_hopper_backward.hpp"
#endif

namespace {

using course::check_cuda;
using course::DeviceBuffer;

// "a,b,c" as its parts.
bool contains(const std::vector<std::string>& list, const std::string& x) {
  return std::find(list.begin(), list.end(), x) != list.end();
}

// The backward's workspace: lab 7's, or lab 9's where it is built (it adds the deterministic
// mode's turn counters).
std::size_t workspace_bytes(const course::AttentionShape& shape) {
#if COURSE_HAVE_LAB9
  return std::max(course::lab7::backward_workspace_bytes(shape), course::lab9::backward_workspace_bytes(shape));
#else
  return course::lab7::backward_workspace_bytes(shape);
#endif
}

// The first call (untimed), then bench::sized_median_ms.
float measure(const std::function<void()>& call, cudaStream_t stream, int max_reps, int& reps) {
  call();
  return bench::sized_median_ms(call, stream, max_reps, reps);
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  bool quick = false;
  double budget_s = 1e9;
  int max_reps = 20;
  std::vector<std::string> impls = {"lab5", "lab8", "lab7", "lab7-cuda-cores", "lab9", "lab9-deterministic", "lab9-wgmma"};
  std::vector<int> ds = {64, 128}, ns, causals = {0, 1};
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&] { return bench::option_value(argc, argv, i); };
      if (a == "--out") out_path = value();
      else if (a == "--quick") quick = true;
      else if (a == "--budget-s") budget_s = std::stod(value());
      else if (a == "--max-reps") max_reps = std::stoi(value());
      else if (a == "--impls") impls = bench::split_list(value());
      else if (a == "--ds") ds = bench::parse_choices(a, value(), {64, 128}, "the head dimensions are 64 and 128");
      else if (a == "--ns") ns = bench::parse_counts(a, value());
      else if (a == "--causal") causals = bench::parse_choices(a, value(), {0, 1}, "0 (non-causal) or 1 (causal)");
      else {
        std::fprintf(stderr, "bench_backward: unknown option %s\n", a.c_str());
        return 2;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_backward: %s\n", e.what());
    return 2;
  }
  if (out_path.empty()) {
    std::fprintf(stderr,
                 "usage: bench_backward --out results.csv [--quick] [--budget-s S] [--max-reps N] [--impls a,b]\n"
                 "                      [--ds 64,128] [--ns 1024,4096] [--causal 0,1]\n");
    return 2;
  }
  if (!bench::device_usable("bench_backward")) return 2;
  FILE* csv = std::fopen(out_path.c_str(), "w");
  if (!csv) {
    std::perror(out_path.c_str());
    return 2;
  }
  std::fprintf(csv, "impl,pass,dtype,d,N,B,H,causal,ms,tflops,status,reps\n");
  std::fflush(csv);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };

  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  if (ns.empty()) ns = quick ? std::vector<int>{1024, 4096} : std::vector<int>{1024, 2048, 4096, 8192};
  for (int d : ds)
    for (int n : ns)
      for (int causal_int : causals) {
        const bool causal = causal_int != 0;
        if (elapsed_s() > budget_s) {
          std::printf("bench_backward: time budget spent, stopping\n");
          break;
        }
        const course::AttentionShape shape{16384 / n, 2048 / d, n, n, d};
        const std::size_t elems = std::size_t(shape.B) * shape.H * n * d;
        const std::size_t rows = std::size_t(shape.B) * shape.H * n;
        const double fwd_flops = 4.0 * shape.B * shape.H * double(n) * n * d / (causal ? 2 : 1);
        const double bwd_flops = 2.5 * fwd_flops;
        auto row = [&](const char* impl, const char* pass, float ms, double flops, const std::string& status, int reps) {
          std::fprintf(csv, "%s,%s,bf16,%d,%d,%d,%d,%d,%.4f,%.1f,%s,%d\n", impl, pass, d, n, shape.B, shape.H,
                       int(causal), ms, status == "ok" ? flops / (ms * 1e-3) / 1e12 : 0.0, status.c_str(), reps);
          std::fflush(csv);
          std::printf("%-15s %-8s d=%-3d N=%-5d %-10s %8.3f ms %6.1f TFLOP/s %s\n", impl, pass, d, n,
                      causal ? "causal" : "non-causal", ms, status == "ok" ? flops / (ms * 1e-3) / 1e12 : 0.0,
                      status.c_str());
        };
        try {
          DeviceBuffer q(elems * 2), k(elems * 2), v(elems * 2), o(elems * 2), dout(elems * 2), dq(elems * 2),
              dk(elems * 2), dv(elems * 2), lse(rows * 4), workspace(workspace_bytes(shape));
          course::fill_normal(q.as<__nv_bfloat16>(), std::int64_t(elems), 1);
          course::fill_normal(k.as<__nv_bfloat16>(), std::int64_t(elems), 2);
          course::fill_normal(v.as<__nv_bfloat16>(), std::int64_t(elems), 3);
          course::fill_normal(dout.as<__nv_bfloat16>(), std::int64_t(elems), 4);
          course::fill_normal(o.as<__nv_bfloat16>(), std::int64_t(elems), 5);
          course::fill_normal(lse.as<float>(), std::int64_t(rows), 6);
          check_cuda(cudaDeviceSynchronize(), "inputs");
          // Times one implementation's call and writes its row. A lab that cannot run on this GPU
          // (labs 8 and 9 off Hopper) refuses with course::BadInput, and the row says so.
          auto time_row = [&](const char* impl, const char* pass, double flops, const std::function<void()>& call) {
            if (!contains(impls, impl)) return;
            try {
              int reps = 0;
              const float ms = measure(call, stream, max_reps, reps);
              row(impl, pass, ms, flops, "ok", reps);
            } catch (const course::BadInput& e) {
              std::string what = e.what();
              std::replace(what.begin(), what.end(), ',', ';');
              row(impl, pass, 0.0f, flops, "skipped: " + what.substr(0, 100), 0);
            }
          };
#if COURSE_HAVE_LAB5
          course::lab5::ForwardOptions fo5;
          fo5.causal = causal;
          fo5.stream = stream;
          time_row("lab5", "forward", fwd_flops, [&] {
            course::lab5::flash_attention_forward(q.get(), k.get(), v.get(), o.get(), lse.as<float>(),
                                                  course::DType::bf16, shape, fo5);
          });
#endif
#if COURSE_HAVE_LAB8
          // Lab 8's forward (sm_90a), the forward that goes with lab 9's backward on an H100 or
          // H200. It runs after lab 5's, so O and LSE are its own (the same values, up to rounding).
          course::lab8::ForwardOptions fo8;
          fo8.causal = causal;
          fo8.stream = stream;
          time_row("lab8", "forward", fwd_flops, [&] {
            course::lab8::flash_attention_forward(q.get(), k.get(), v.get(), o.get(), lse.as<float>(),
                                                  course::DType::bf16, shape, fo8);
          });
#endif
          course::lab7::BackwardGpuOptions bo;
          bo.causal = causal;
          bo.workspace = workspace.get();
          bo.workspace_bytes = workspace.bytes();
          bo.stream = stream;
          // Part 3 (tensor cores, what `automatic` picks for bf16) and part 2 (CUDA cores).
          for (auto [impl, kernel] : {std::pair{"lab7", course::lab7::BackwardKernel::tensor_cores},
                                      std::pair{"lab7-cuda-cores", course::lab7::BackwardKernel::cuda_cores}}) {
            course::lab7::BackwardGpuOptions options = bo;
            options.kernel = kernel;
            time_row(impl, "backward", bwd_flops, [&] {
              course::lab7::flash_attention_backward(q.get(), k.get(), v.get(), o.get(), dout.get(),
                                                     lse.as<float>(), dq.get(), dk.get(), dv.get(),
                                                     course::DType::bf16, shape, options);
            });
          }
#if COURSE_HAVE_LAB9
          // Lab 9, the Hopper backward (sm_90a), with dQ by atomics and with options.deterministic
          // (lab9-deterministic: the K/V tiles add into dQ in turn).
          // lab9-wgmma: step 1 of its staircase (lab9 is its best step).
          using Step = course::lab7::HopperBackwardStep;
          for (auto [impl, deterministic, step] : {std::tuple{"lab9", false, Step::best},
                                                   std::tuple{"lab9-deterministic", true, Step::best},
                                                   std::tuple{"lab9-wgmma", false, Step::wgmma}}) {
            course::lab7::BackwardGpuOptions options = bo;
            options.deterministic = deterministic;
            options.hopper_step = step;
            time_row(impl, "backward", bwd_flops, [&] {
              course::lab9::flash_attention_backward(q.get(), k.get(), v.get(), o.get(), dout.get(),
                                                     lse.as<float>(), dq.get(), dk.get(), dv.get(),
                                                     course::DType::bf16, shape, options);
            });
          }
#endif
        } catch (const std::exception& e) {
          std::string what = e.what();
          std::replace(what.begin(), what.end(), ',', ';');
          row("lab7", "backward", 0.0f, bwd_flops, "error: " + what.substr(0, 100), 0);
          cudaGetLastError();
        }
      }
  cudaStreamDestroy(stream);
  std::fclose(csv);
  return 0;
}
