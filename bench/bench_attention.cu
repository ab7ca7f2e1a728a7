// bench_attention: time, TFLOP/s, memory and a correctness figure of the course's attention
// kernels against standard attention, over the grid of the FlashAttention paper's Figure 3.
//
//   bench_attention --out results.csv [--quick] [--impls lab4,standard,lab5,lab8]
//                   [--dtypes bf16,fp32] [--ns 1024,4096] [--budget-s 120] [--max-reps 20]
//                   [--seed 1]
//
// Configurations: d in {64, 128}, causal in {false, true}, N in {512, ..., 16384} (or --ns);
// B * N = 16384 tokens and H * d = 2048 (H = 32 at d = 64, 16 at d = 128), B = 16384 / N.
// Implementations (those built):
//   lab4              course::lab4::flash_attention_forward (CUDA cores, FA1), bf16 and fp32
//   lab5:<version>    course::lab5::flash_attention_forward, every Version, bf16
//   lab8:<version>    course::lab8::flash_attention_forward (Hopper, sm_90a), every Version, bf16
//   standard          course::reference::gpu::StandardAttention (cuBLAS, materialises S), bf16 and fp32
//   cublas:gemm_peak  not attention: one bf16 cuBLAS GEMM, 8192^3 (gemm_peak.hpp), the dense peak
//                     the report divides by; one row, d = 0, N = the GEMM's size, B = H = 1
//   ("lab5" in --impls means every lab 5 version, "lab8" every lab 8 version.)
//
// Method (see bench/README.md):
//   * inputs: random normal (std 1), never zeros; two input sets, rotated between timed calls.
//     One set (Q, K, V) is 192 MiB in bf16 at every configuration (B*N*H*d is fixed), far over
//     the 50-60 MB L2, so rotation only keeps the tail of one call's reads out of the next.
//   * per (impl, config): call 1 on set 0 with O poisoned (NaN), measuring device memory with
//     cudaMemGetInfo before and after (synchronised); its output is checked against an fp64
//     reference (course::reference::gpu::attention_fp64) on the last min(N, 1024) query rows of
//     head (0, 0) -- the rows that see the most keys when causal. Call 2 is a timed warm-up that
//     sizes the repetition count: reps = clamp(300 ms / t, 3, max-reps), so a measurement costs
//     at most ~0.3 s of GPU time and fast kernels get max-reps (>= 10 unless slower than 30 ms).
//     Each rep is bracketed by its own cudaEvent pair; the median is reported.
//   * TFLOP/s = 4 B H N^2 d / time, halved when causal.
//   * peak_mem_bytes = what the implementation needs allocated: Q, K, V, O (dtype) + lse (fp32)
//     + workspace (standard: the score matrix, StandardAttention::score_bytes).
//     measured_mem_bytes = Q, K, V, O, lse + the drop in cudaMemGetInfo's free memory across the
//     first call (standard's cached score buffer is released before it, so it is re-allocated).
//   * status: ok | OOM (standard attention's S does not fit) | wrong (finite but max_abs_err over
//     grading::benchmark_sanity_limit: 1e-3 fp32, 5e-2 bf16) | nonfinite (NaN/Inf or an unwritten output) |
//     error:<message> | skipped:<reason> (time budget spent, or the CUDA context was lost).
// Each row is written and flushed as soon as it is measured, so a killed run keeps its rows.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "course/gpu.hpp"
#include "course/lab4_cuda.hpp"
#include "attention_fp64.hpp"  // reference/gpu/
#include "tolerances.hpp"       // grader/common: the sanity limit of a benchmark row
#include "standard_attention.hpp"
#include "gemm_peak.hpp"
#include "cli.hpp"
#include "row_check.hpp"
#if COURSE_HAVE_LAB5
#include "course/lab5_tensor_core.hpp"
#endif
#if COURSE_HAVE_LAB8
#include "course/lab8_hopper.hpp"
#endif

namespace {

using course::check_cuda;
using course::DeviceBuffer;
using course::DType;
using course::dtype_bytes;
using course::dtype_name;

constexpr int64_t kTokens = 16384;  // B * N
constexpr int64_t kHidden = 2048;   // H * d
constexpr int kSets = 2;            // input sets rotated between timed calls
constexpr int kRefRows = 1024;      // rows of head (0, 0) checked against fp64

// ---------------------------------------------------------------- options and rows

enum class Kind { lab4, lab5, lab8, standard, gemm_peak };

struct Impl {
  std::string name;
  Kind kind;
  int version = 0;  // lab 5 or lab 8 Version, as an int (its place in kAllVersions: course/gpu_labs.def)
};

struct Options {
  std::string out;
  bool quick = false;
  std::vector<std::string> impls;  // empty: all
  std::vector<std::string> dtypes = {"bf16", "fp32"};
  std::vector<int> ns;  // empty: the default grid (or --quick's)
  std::vector<int> ds = {64, 128};
  std::vector<bool> causals = {false, true};
  double budget_s = 1e9;
  int max_reps = 20;
  uint64_t seed = 1;
};

bool wanted(const Options& o, const std::string& name) {
  if (o.impls.empty()) return true;
  for (const std::string& w : o.impls) {
    if (w == name) return true;
    if (w == "lab5" && name.rfind("lab5:", 0) == 0) return true;
    if (w == "lab8" && name.rfind("lab8:", 0) == 0) return true;
  }
  return false;
}

std::string csv_safe(std::string s) {
  for (char& c : s)
    if (c == ',' || c == '\n' || c == '\r' || c == '"') c = ' ';
  if (s.size() > 160) s.resize(160);
  return s;
}

struct Row {
  std::string impl;
  DType dtype;
  int d, causal, N, B, H;
  double ms = NAN, tflops = NAN;
  size_t peak_mem = 0, measured_mem = 0;
  std::string status = "ok";
  double max_abs_err = NAN;
  int reps = 0;
};

FILE* g_csv = nullptr;

void write_header() {
  std::fprintf(g_csv,
               "impl,dtype,d,causal,N,B,H,ms,tflops,peak_mem_bytes,status,max_abs_err,"
               "measured_mem_bytes,reps\n");
  std::fflush(g_csv);
}

void emit(const Row& r) {
  std::fprintf(g_csv, "%s,%s,%d,%d,%d,%d,%d,%.6g,%.6g,%zu,%s,%.6g,%zu,%d\n", r.impl.c_str(),
               dtype_name(r.dtype), r.d, r.causal, r.N, r.B, r.H, r.ms, r.tflops, r.peak_mem,
               csv_safe(r.status).c_str(), r.max_abs_err, r.measured_mem, r.reps);
  std::fflush(g_csv);
  std::printf("%-16s %s d=%3d causal=%d N=%5d B=%2d H=%2d  %9.3f ms %7.1f TFLOP/s  mem %7.3f GiB"
              " (measured %7.3f)  err %.2e  reps %2d  %s\n",
              r.impl.c_str(), dtype_name(r.dtype), r.d, r.causal, r.N, r.B, r.H, r.ms, r.tflops,
              double(r.peak_mem) / (1 << 30), double(r.measured_mem) / (1 << 30), r.max_abs_err,
              r.reps, r.status.c_str());
  std::fflush(stdout);
}

// ---------------------------------------------------------------- the benchmark

// A call of one implementation on one input set. Returns false when it could not run because
// memory ran out (standard attention's S), having launched nothing.
using Call = std::function<bool(int set)>;

struct Bench {
  Options opt;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  bool context_lost = false;
  std::vector<std::unique_ptr<DeviceBuffer>> q, k, v;
  std::unique_ptr<DeviceBuffer> o, lse, ref_o, ref_lse;
  std::unique_ptr<course::reference::gpu::StandardAttention> standard;
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;

  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  void setup() {
    const size_t bytes = size_t(kTokens) * kHidden * 4;  // room for fp32
    for (int s = 0; s < kSets; ++s) {
      q.emplace_back(new DeviceBuffer(bytes));
      k.emplace_back(new DeviceBuffer(bytes));
      v.emplace_back(new DeviceBuffer(bytes));
    }
    o.reset(new DeviceBuffer(bytes));
    lse.reset(new DeviceBuffer(size_t(kTokens) * 32 * 4));  // B*H*N floats, H <= 32
    ref_o.reset(new DeviceBuffer(size_t(kRefRows) * 128 * 8));
    ref_lse.reset(new DeviceBuffer(size_t(kRefRows) * 8));
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    events.resize(2 * 64);
    for (auto& e : events) check_cuda(cudaEventCreate(&e), "cudaEventCreate");
  }

  void fill_inputs(DType t) {
    const int64_t n = kTokens * kHidden;
    for (int s = 0; s < kSets; ++s) {
      uint64_t seed = opt.seed * 1000 + 10 * s + (t == DType::fp32 ? 500 : 0);
      for (DeviceBuffer* b : {q[s].get(), k[s].get(), v[s].get()}) {
        if (t == DType::bf16)
          course::fill_normal(b->as<__nv_bfloat16>(), n, ++seed, stream);
        else
          course::fill_normal(b->as<float>(), n, ++seed, stream);
      }
    }
    check_cuda(cudaStreamSynchronize(stream), "fill inputs");
  }

  // fp64 O of the last R query rows of head (0, 0) of input set 0, on the host.
  std::vector<double> reference(DType t, int n, int d, bool causal) {
    const int rows = std::min(n, kRefRows);
    const size_t elem = dtype_bytes(t);
    const char* q0 = static_cast<const char*>(q[0]->get()) + size_t(n - rows) * d * elem;
    course::reference::gpu::attention_fp64(
        q0, k[0]->get(), v[0]->get(),
        t,
        1, 1, rows, n, d, causal, 0.0, static_cast<double*>(ref_o->get()),
        static_cast<double*>(ref_lse->get()), stream);
    std::vector<double> h(size_t(rows) * d);
    check_cuda(cudaMemcpyAsync(h.data(), ref_o->get(), h.size() * 8, cudaMemcpyDeviceToHost, stream),
               "memcpy reference");
    check_cuda(cudaStreamSynchronize(stream), "reference");
    return h;
  }

  // max |O - ref| over the reference rows; NaN when any of them is not finite.
  double max_abs_err(DType t, int n, int d, const std::vector<double>& ref) {
    const int rows = std::min(n, kRefRows);
    const size_t count = size_t(rows) * d;
    const size_t offset = size_t(n - rows) * d * dtype_bytes(t);
    const std::vector<float> h = bench::download_as_float(static_cast<const char*>(o->get()) + offset, count,
                                                          t == DType::bf16, stream);
    double worst = 0;
    for (size_t i = 0; i < count; ++i) {
      if (!std::isfinite(h[i])) return NAN;
      worst = std::max(worst, std::fabs(double(h[i]) - ref[i]));
    }
    return worst;
  }

  float timed(const Call& call, int set, int slot) {
    check_cuda(cudaEventRecord(events[2 * slot], stream), "cudaEventRecord");
    call(set);
    check_cuda(cudaEventRecord(events[2 * slot + 1], stream), "cudaEventRecord");
    return 0;
  }

  // One (impl, config) row: memory + correctness call, warm-up, timed reps.
  void measure(Row& r, DType t, const Call& call, size_t workspace_bytes,
               const std::vector<double>& ref) {
    const size_t elems = size_t(kTokens) * kHidden;
    const size_t io_bytes = 4 * elems * dtype_bytes(t) + size_t(r.B) * r.H * r.N * 4;
    r.peak_mem = io_bytes + workspace_bytes;
    // Call 1: poisoned output, memory measured around it, checked against fp64.
    check_cuda(cudaMemsetAsync(o->get(), 0xFF, elems * dtype_bytes(t), stream), "poison O");
    check_cuda(cudaStreamSynchronize(stream), "poison O");
    check_cuda(cudaDeviceSynchronize(), "sync");
    size_t free0 = 0, free1 = 0, total = 0;
    check_cuda(cudaMemGetInfo(&free0, &total), "cudaMemGetInfo");
    if (!call(0)) {
      cudaGetLastError();  // the failed cudaMalloc's (non-sticky) error
      r.status = "OOM";
      r.measured_mem = 0;
      return;
    }
    check_cuda(cudaGetLastError(), "launch");
    check_cuda(cudaStreamSynchronize(stream), "first call");
    check_cuda(cudaMemGetInfo(&free1, &total), "cudaMemGetInfo");
    r.measured_mem = io_bytes + (free0 > free1 ? free0 - free1 : 0);
    r.max_abs_err = max_abs_err(t, r.N, r.d, ref);
    r.status = bench::error_status(r.max_abs_err, course::dtype_name(t));
    // Call 2: timed warm-up, sizes the repetitions.
    timed(call, 1, 0);
    check_cuda(cudaEventSynchronize(events[1]), "warm-up");
    float warm_ms = 0;
    check_cuda(cudaEventElapsedTime(&warm_ms, events[0], events[1]), "cudaEventElapsedTime");
    int reps = warm_ms > 0 ? int(300.0 / warm_ms) : opt.max_reps;
    reps = std::max(3, std::min(reps, std::min(opt.max_reps, int(events.size() / 2))));
    for (int i = 0; i < reps; ++i) timed(call, i % kSets, i);
    check_cuda(cudaGetLastError(), "launch");
    check_cuda(cudaEventSynchronize(events[2 * reps - 1]), "timed calls");
    std::vector<float> ms(reps);
    for (int i = 0; i < reps; ++i)
      check_cuda(cudaEventElapsedTime(&ms[i], events[2 * i], events[2 * i + 1]),
                 "cudaEventElapsedTime");
    std::sort(ms.begin(), ms.end());
    r.ms = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
    r.reps = reps;
    const double flop = 4.0 * r.B * r.H * double(r.N) * r.N * r.d * (r.causal ? 0.5 : 1.0);
    r.tflops = flop / (r.ms * 1e-3) / 1e12;
  }

  Call make_call(const Impl& impl, DType t, const course::AttentionShape& shape, bool causal) {
    void* O = o->get();
    float* L = static_cast<float*>(lse->get());
    switch (impl.kind) {
      case Kind::lab4:
        return [this, O, L, causal, t, shape, impl](int s) {
          course::lab4::ForwardOptions fo;
          fo.causal = causal;
          fo.stream = stream;
          course::lab4::flash_attention_forward(
              q[s]->get(), k[s]->get(), v[s]->get(), O, L,
              t, shape, fo);
          return true;
        };
      case Kind::standard:
        return [this, O, L, causal, t, shape, impl](int s) {
          const cudaError_t e = standard->forward(
              q[s]->get(), k[s]->get(), v[s]->get(), O, L,
              t, shape, causal, 0.0f, stream);
          if (e == cudaErrorMemoryAllocation) return false;
          check_cuda(e, "StandardAttention::forward");
          return true;
        };
      case Kind::lab5:
#if COURSE_HAVE_LAB5
        return [this, O, L, causal, t, shape, impl](int s) {
          course::lab5::ForwardOptions fo;
          fo.causal = causal;
          fo.stream = stream;
          fo.version = course::lab5::kAllVersions[impl.version];
          course::lab5::flash_attention_forward(q[s]->get(), k[s]->get(), v[s]->get(), O, L,
                                                DType::bf16, shape, fo);
          return true;
        };
#else
        break;
#endif
      case Kind::gemm_peak:
        break;  // not attention: measure_gemm_peak_row()
      case Kind::lab8:
#if COURSE_HAVE_LAB8
        return [this, O, L, causal, t, shape, impl](int s) {
          course::lab8::ForwardOptions fo;
          fo.causal = causal;
          fo.stream = stream;
          fo.version = course::lab8::kAllVersions[impl.version];
          course::lab8::flash_attention_forward(q[s]->get(), k[s]->get(), v[s]->get(), O, L,
                                                DType::bf16, shape, fo);
          return true;
        };
#else
        break;
#endif
    }
    throw std::runtime_error("implementation not built: " + impl.name);
  }

  // A row whose measurement threw: its error, no time, and whether the CUDA context survived
  // (after a sticky error every later row is skipped).
  void record_error(Row& r, const std::exception& e) {
    r.status = std::string("error:") + e.what();
    r.ms = r.tflops = NAN;
    cudaGetLastError();  // clear a non-sticky error
    context_lost = cudaDeviceSynchronize() != cudaSuccess;
  }

  // The row of cublas:gemm_peak (see the top of this file and gemm_peak.hpp).
  void measure_gemm_peak_row(const std::string& name) {
    Row r{name, DType::bf16, 0, 0, 8192, 1, 1};
    if (context_lost) {
      r.status = "skipped:CUDA context lost after an earlier error";
    } else if (elapsed_s() >= opt.budget_s) {
      r.status = "skipped:time budget spent";
    } else {
      try {
        const bench::GemmPeak g = bench::measure_gemm_peak(stream, opt.max_reps, r.N);
        r.ms = g.ms;
        r.tflops = g.tflops;
        r.peak_mem = r.measured_mem = g.bytes;
        r.max_abs_err = g.max_err;
        r.reps = g.reps;
        r.status = bench::error_status(g.max_err, "bf16");
      } catch (const std::exception& e) {
        record_error(r, e);
      }
    }
    emit(r);
  }

  void run(const std::vector<Impl>& impls) {
    const std::vector<int> ns = !opt.ns.empty() ? opt.ns
                                : opt.quick ? std::vector<int>{512, 2048}
                                            : std::vector<int>{512, 1024, 2048, 4096, 8192, 16384};
    for (const std::string& dname : opt.dtypes) {
      const DType t = dname == "fp32" ? DType::fp32 : DType::bf16;
      std::vector<const Impl*> todo;
      for (const Impl& im : impls) {
        if (im.kind == Kind::gemm_peak) {
          if (t == DType::bf16) measure_gemm_peak_row(im.name);  // once, before the attention rows
          continue;
        }
        if (t == DType::bf16 || (im.kind != Kind::lab5 && im.kind != Kind::lab8)) todo.push_back(&im);
      }
      if (todo.empty()) continue;
      bool inputs_ok = false;
      std::string input_error;
      if (!context_lost) {
        try {
          fill_inputs(t);
          inputs_ok = true;
        } catch (const std::exception& e) {
          input_error = e.what();
          context_lost = cudaDeviceSynchronize() != cudaSuccess;
        }
      }
      for (int d : opt.ds)
        for (bool causal : opt.causals)
          for (int n : ns) {
            const course::AttentionShape shape{int(kTokens / n), int(kHidden / d), n, n, d};
            std::vector<double> ref;
            std::string ref_error;
            if (inputs_ok && !context_lost && elapsed_s() < opt.budget_s) {
              try {
                ref = reference(t, n, d, causal);
              } catch (const std::exception& e) {
                ref_error = e.what();
                context_lost = cudaDeviceSynchronize() != cudaSuccess;
              }
            }
            for (const Impl* im : todo) {
              Row r{im->name, t, d, int(causal), n, shape.B, shape.H};
              if (context_lost) {
                r.status = "skipped:CUDA context lost after an earlier error";
              } else if (!inputs_ok) {
                r.status = "error:" + input_error;
              } else if (elapsed_s() >= opt.budget_s) {
                r.status = "skipped:time budget spent";
              } else if (!ref_error.empty()) {
                r.status = "error:reference: " + ref_error;
              } else {
                try {
                  size_t ws = 0;
                  if (im->kind == Kind::standard) {
                    standard->release();  // so that the first call allocates S and is measured
                    ws = course::reference::gpu::StandardAttention::score_bytes(
                        shape, t);
                  }
                  measure(r, t, make_call(*im, t, shape, causal), ws, ref);
                } catch (const std::exception& e) {
                  record_error(r, e);
                }
              }
              emit(r);
            }
            if (standard) standard->release();
          }
    }
  }
};

void usage() {
  std::printf(
      "usage: bench_attention --out FILE.csv [--quick] [--impls a,b,...] [--dtypes bf16,fp32]\n"
      "                       [--ns N1,N2,...] [--ds 64,128] [--causal 0,1] [--budget-s SECONDS]\n"
      "                       [--max-reps N] [--seed S] [--list]\n"
      "  impls: lab4, standard, lab5 (every version), lab5:<version>, lab8 (every version),\n"
      "         lab8:<version> or cublas:gemm_peak (the bf16 GEMM peak: one row)\n"
      "  ns: sequence lengths dividing 16384 (B = 16384 / N)\n"
      "  ds, causal: a subset of the head dimensions and maskings (e.g. one shape for ncu)\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  bool list = false;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      const auto next = [&] { return bench::option_value(argc, argv, i); };
      if (a == "--out") opt.out = next();
      else if (a == "--quick") opt.quick = true;
      else if (a == "--impls") opt.impls = bench::split_list(next());
      else if (a == "--dtypes") opt.dtypes = bench::split_list(next());
      else if (a == "--ns") {
        for (const std::string& n : bench::split_list(next())) {
          const int v = std::atoi(n.c_str());
          if (v < 1 || 16384 % v != 0) {
            std::fprintf(stderr, "bench_attention: --ns %s: each N must divide 16384\n", n.c_str());
            return 2;
          }
          opt.ns.push_back(v);
        }
      }
      else if (a == "--ds") opt.ds = bench::parse_choices(a, next(), {64, 128}, "the head dimensions are 64 and 128");
      else if (a == "--causal") {
        opt.causals.clear();
        for (int c : bench::parse_choices(a, next(), {0, 1}, "0 (non-causal) or 1 (causal)"))
          opt.causals.push_back(c == 1);
      }
      else if (a == "--budget-s") opt.budget_s = std::atof(next().c_str());
      else if (a == "--max-reps") opt.max_reps = std::max(3, std::min(64, std::atoi(next().c_str())));
      else if (a == "--seed") opt.seed = std::strtoull(next().c_str(), nullptr, 10);
      else if (a == "--list") list = true;
      else if (a == "--help" || a == "-h") { usage(); return 0; }
      else { std::fprintf(stderr, "bench_attention: unknown option %s\n", a.c_str()); usage(); return 2; }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_attention: %s\n", e.what());
    return 2;
  }

  std::vector<Impl> all;
  all.push_back({"lab4", Kind::lab4});
#if COURSE_HAVE_LAB5
  for (course::lab5::Version v : course::lab5::kAllVersions)
    all.push_back({std::string("lab5:") + course::lab5::version_name(v), Kind::lab5, int(v)});
#endif
#if COURSE_HAVE_LAB8
  for (course::lab8::Version v : course::lab8::kAllVersions)
    all.push_back({std::string("lab8:") + course::lab8::version_name(v), Kind::lab8, int(v)});
#endif
  all.push_back({"standard", Kind::standard});
  all.push_back({"cublas:gemm_peak", Kind::gemm_peak});
  if (list) {
    for (const Impl& im : all) std::printf("%s\n", im.name.c_str());
    return 0;
  }
  std::vector<Impl> impls;
  for (const Impl& im : all)
    if (wanted(opt, im.name)) impls.push_back(im);
  for (const std::string& w : opt.impls) {
    bool known = w == "lab5" || w == "lab8";
    for (const Impl& im : all) known = known || im.name == w;
    if (!known) std::fprintf(stderr, "bench_attention: '%s' is not built here; skipped\n", w.c_str());
  }
  if (opt.out.empty()) { usage(); return 2; }
  g_csv = std::fopen(opt.out.c_str(), "w");
  if (g_csv == nullptr) { std::perror(opt.out.c_str()); return 2; }
  write_header();
  if (impls.empty()) {
    std::fprintf(stderr, "bench_attention: nothing to run\n");
    return 0;
  }

  Bench bench;
  bench.opt = opt;
  try {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    std::printf("device: %s, %d SMs, %.1f GiB, L2 %.1f MB; impls:", prop.name,
                prop.multiProcessorCount, double(prop.totalGlobalMem) / (1 << 30),
                prop.l2CacheSize / 1e6);
    for (const Impl& im : impls) std::printf(" %s", im.name.c_str());
    std::printf("\n");
    bench.setup();
    for (const Impl& im : impls)
      if (im.kind == Kind::standard) bench.standard.reset(new course::reference::gpu::StandardAttention());
  } catch (const std::exception& e) {
    std::printf("FATAL during setup: %s\n", e.what());
    std::fclose(g_csv);
    return 2;
  }
  bench.run(impls);
  std::fclose(g_csv);
  std::printf("bench_attention: done in %.1f s%s\n", bench.elapsed_s(),
              bench.context_lost ? " (CUDA context lost: later rows skipped)" : "");
  return bench.context_lost ? 1 : 0;
}
