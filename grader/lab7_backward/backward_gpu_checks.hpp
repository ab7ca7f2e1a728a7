// Lab 7's GPU backward checks, shared by lab 7's grader (parts 2 and 3) and lab 9's (the Hopper
// backward): a [B, H, N, d] problem run in the lab process by its "flash_attention_backward"
// handler inside the GPU harness (NaN guard zones, NaN-poisoned outputs and workspace, a busy
// default stream), and compared head by head with backward_bands.hpp's compare_gradients.
// Where COURSE_LAB7_GPU is 0 (no CUDA compiler), the checks skip.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "backward_bands.hpp"
#include "lab_process.hpp"
#if COURSE_LAB7_GPU
#include "compute_sanitizer.hpp"
#include "gpu_harness.hpp"  // require_device, to_doubles (grader/gpu/)
#include "gpu_wire.hpp"
#endif

namespace backward_grading {

using reference::Distribution;

// Which kernel a check grades: course::lab7::BackwardKernel, whose header this grader cannot include
// where CUDA is missing, so the same names from course/gpu_labs.def (an X-macro list: one
// enumerator per COURSE_LAB7_KERNEL line). static_cast<int>(kernel) is then the call's `version`
// on the wire, as course::gpu_labs::encode_choice writes it and serve_gpu.cpp reads it.
enum class Kernel {
#define COURSE_LAB7_KERNEL(name, python_name) name,
#include "course/gpu_labs.def"
};

// What a check grades: a Kernel, and for lab 9 the step of its staircase (-1: the lab's default,
// its best step; course::lab7::HopperBackwardStep's order otherwise). A Kernel alone converts.
struct KernelChoice {
  Kernel kernel;
  int step = -1;
  KernelChoice(Kernel k, int s = -1) : kernel(k), step(s) {}  // NOLINT: a Kernel alone is a choice
};

// How a run names what it graded: lab 7's kernel, or lab 9's step.
inline std::string describe_kernel(const KernelChoice& k) {
  if (k.step >= 0) return "step " + std::to_string(k.step + 1);
  return k.kernel == Kernel::tensor_cores ? "tensor cores" : "CUDA cores";
}

struct GpuProblem {
  int B = 1, H = 1, Nq = 1, Nk = 1, d = 64;
  bool causal = false;
  Distribution dist = Distribution::normal;
  std::optional<double> scale = std::nullopt;
};

// The Problem of one head (the kernel's tiles: 64 x 64).
inline Problem head_problem(const GpuProblem& g) { return {g.Nq, g.Nk, g.d, 64, 64, g.causal, g.scale, g.dist}; }

#if COURSE_LAB7_GPU
using course::DType;

template <class T>
constexpr DType gpu_dtype() {
  return std::is_same_v<T, float> ? DType::fp32 : std::is_same_v<T, bf16> ? DType::bf16 : DType::fp16;
}

// Appends the values of m (already rounded to T) in T's bits, row-major.
template <class T>
void append_bits(const Md& m, std::vector<std::uint8_t>& out) {
  for (Eigen::Index r = 0; r < m.rows(); ++r)
    for (Eigen::Index c = 0; c < m.cols(); ++c) {
      const T t = T(static_cast<float>(m(r, c)));
      const auto* b = reinterpret_cast<const std::uint8_t*>(&t);
      out.insert(out.end(), b, b + sizeof(T));
    }
}

// Rows [head * rows, (head + 1) * rows) of a [B * H * rows, d] buffer of doubles.
inline Md head_rows(const std::vector<double>& all, int head, int rows, int d) {
  Md m(rows, d);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < d; ++c) m(r, c) = all[(std::size_t(head) * rows + r) * d + c];
  return m;
}

// What one run of flash_attention_backward<T> computed, with its inputs.
struct GpuRun {
  std::vector<LabInputs> x;                // per head
  std::vector<std::vector<double>> grads;  // dQ, dK, dV: [B * H * rows, d] each
  std::string about;                       // the kernel, shape and inputs, for messages
};

// How a run is called: as every check does, or in lab 9's deterministic mode
// (options.deterministic) with something beside it on the GPU.
struct RunMode {
  bool deterministic = false;
  gpu_wire::Beside beside = gpu_wire::Beside::nothing;  // deterministic mode only
};

inline std::string describe_mode(const RunMode& mode) {
  if (!mode.deterministic) return "";
  using gpu_wire::Beside;
  return std::string(", deterministic mode, ") +
         (mode.beside == Beside::nothing        ? "nothing else on the GPU"
          : mode.beside == Beside::half_the_sms ? "half the SMs held by another kernel"
                                                : "all but 8 SMs held by another kernel");
}

// flash_attention_backward<T> with `kernel` on one problem, run in the lab process.
template <class T>
GpuRun run_gpu(const GpuProblem& g, std::uint64_t seed, KernelChoice kernel, const RunMode& mode = {}) {
  gpu_grading::require_device();
  const Problem p = head_problem(g);
  const DType dtype = gpu_dtype<T>();
  const int heads = g.B * g.H;
  std::vector<LabInputs> x;
  std::vector<std::vector<std::uint8_t>> bytes(6);  // Q K V O dO lse
  for (int h = 0; h < heads; ++h) {
    x.push_back(lab_inputs<T>(p, seed, std::string("gpu/") + course::dtype_name<T>() + "/head " + std::to_string(h)));
    append_bits<T>(x.back().Q, bytes[0]);
    append_bits<T>(x.back().K, bytes[1]);
    append_bits<T>(x.back().V, bytes[2]);
    append_bits<T>(x.back().O, bytes[3]);
    append_bits<T>(x.back().dO, bytes[4]);
    append_bits<float>(x.back().lse.transpose(), bytes[5]);
  }
  gpu_wire::KernelCall call;
  call.B = g.B, call.H = g.H, call.Nq = g.Nq, call.Nk = g.Nk, call.d = g.d;
  call.dtype = dtype;
  call.causal = g.causal;
  call.scale = g.scale ? float(*g.scale) : 0.0f;
  call.version = static_cast<int>(kernel.kernel);
  call.step = kernel.step;
  isolation::Packet args;
  gpu_wire::put_call(args, call);
  for (const auto& b : bytes) gpu_wire::put_bytes(args, b);
  if (mode.deterministic) args.put(mode.beside);
  auto reply = isolation::lab().call(
      mode.deterministic ? "flash_attention_backward.deterministic" : "flash_attention_backward", args);
  std::vector<std::vector<double>> out;  // dQ dK dV
  for (int i = 0; i < 3; ++i) out.push_back(gpu_grading::to_doubles(dtype, gpu_wire::get_bytes(reply.results)));
  const bool inputs_unchanged = reply.results.get<std::uint8_t>() != 0;
  const bool wrote_only_outputs = reply.results.get<std::uint8_t>() != 0;
  const std::string about = describe_kernel(kernel) + describe_mode(mode) + ", B=" + std::to_string(g.B) + " H=" + std::to_string(g.H) + ", " +
                            describe(p, seed);
  if (!wrote_only_outputs)
    throw std::runtime_error("flash_attention_backward wrote outside dQ, dK and dV (into the guard zone around a buffer; " +
                             about + ")");
  if (!inputs_unchanged) throw std::runtime_error("flash_attention_backward modified its inputs (" + about + ")");
  const std::size_t q_elems = std::size_t(heads) * g.Nq * g.d, k_elems = std::size_t(heads) * g.Nk * g.d;
  if (out[0].size() != q_elems || out[1].size() != k_elems || out[2].size() != k_elems)
    throw isolation::LabFailure("the lab process returned gradients of the wrong size");
  return {std::move(x), std::move(out), about};
}

// What one run computed against the fp64 reference, every head in its band.
template <class T>
bool check_run(const GpuProblem& g, std::uint64_t seed, const GpuRun& run, KernelChoice kernel) {
  const Problem p = head_problem(g);
  bool ok = true;
  for (int h = 0; h < g.B * g.H; ++h) {
    const LabInputs& x = run.x[h];
    const Grads got{head_rows(run.grads[0], h, g.Nq, g.d), head_rows(run.grads[1], h, g.Nk, g.d),
                    head_rows(run.grads[2], h, g.Nk, g.d)};
    const Grads ref = reference::attention_backward<double>(x.Q, x.K, x.V, x.dO, scale_of(p), p.causal);
    ok &= compare_gradients<T>(got, ref, x, p,
                               "flash_attention_backward, head " + std::to_string(h) + " of " + run.about,
                               kernel.kernel == Kernel::tensor_cores);
    if (!ok) break;  // one head's figures say enough
  }
  return ok;
}

// flash_attention_backward<T> with `kernel` on one problem against the fp64 reference, every head
// in its band.
template <class T>
bool check_gpu(const GpuProblem& g, std::uint64_t seed, KernelChoice kernel = Kernel::cuda_cores) {
  return check_run<T>(g, seed, run_gpu<T>(g, seed, kernel), kernel);
}

// Two runs on the same inputs give the same dK and dV, bit for bit, and are right. Each K/V tile's
// dK and dV are summed by one CTA in a fixed order, so any difference is a race (a missing
// barrier, or a tile read while another warp still writes it). dQ is left out: it is summed
// across CTAs with atomics, whose order changes from run to run.
template <class T>
void check_gpu_deterministic(const GpuProblem& g, std::uint64_t seed, KernelChoice kernel) {
  const GpuRun first = run_gpu<T>(g, seed, kernel), second = run_gpu<T>(g, seed, kernel);
  grading::expect(first.grads[1] == second.grads[1] && first.grads[2] == second.grads[2],
                  {"flash_attention_backward dK, dV", course::dtype_name<T>(), {g.B, g.H, g.Nk, g.d},
                   first.about, seed},
                  "two runs on the same inputs gave different dK or dV: a race (a missing "
                  "__syncthreads, or a read of shared memory another warp is still writing)");
  check_gpu<T>(g, seed, kernel);
}

// Lab 9's deterministic mode: four calls on the same inputs -- alone, with half the SMs held by
// another kernel, with all but 8 of them held, alone again -- give dQ, dK and dV equal bit for
// bit, and the first is right. Holding SMs changes where and when the CTAs run, so atomics in
// whatever order they come (the turn not waited for) add dQ's shares in another order, and fp32
// addition rounds differently: over many K/V tiles and many rows some dQ element changes its
// last bit after the rounding to 16 bits.
template <class T>
void check_gpu_deterministic_dq(const GpuProblem& g, std::uint64_t seed, KernelChoice kernel) {
  using gpu_wire::Beside;
  const GpuRun first = run_gpu<T>(g, seed, kernel, {true, Beside::nothing});
  const char* names[] = {"dQ", "dK", "dV"};
  for (Beside beside : {Beside::half_the_sms, Beside::all_but_8_sms, Beside::nothing}) {
    const RunMode mode{true, beside};
    const GpuRun again = run_gpu<T>(g, seed, kernel, mode);
    for (int i = 0; i < 3; ++i) {
      const std::vector<double>& a = first.grads[i];
      const std::vector<double>& b = again.grads[i];
      std::size_t differ = 0, at = a.size();
      for (std::size_t e = 0; e < a.size(); ++e)
        if (!(a[e] == b[e] || (a[e] != a[e] && b[e] != b[e]))) {  // NaN equals NaN here: bits are compared
          if (differ++ == 0) at = e;
        }
      if (differ == 0) continue;
      const int rows = i == 0 ? g.Nq : g.Nk;
      auto exact = [](double x) {  // enough digits to tell two 16-bit values apart
        char text[32];
        std::snprintf(text, sizeof text, "%.9g", x);
        return std::string(text);
      };
      grading::expect(false,
                      {std::string("flash_attention_backward ") + names[i], course::dtype_name<T>(),
                       {g.B, g.H, rows, g.d}, first.about, seed},
                      std::string("in deterministic mode two calls on the same inputs gave different ") + names[i] + " (" +
                          std::to_string(differ) + " elements differ; the first at row " +
                          std::to_string(at / g.d) + ", column " + std::to_string(at % g.d) + " of [B * H * " +
                          (i == 0 ? "Nq" : "Nk") + ", d]: " + exact(a[at]) + " then " + exact(b[at]) + describe_mode(mode) +
                          "): the K/V tiles' shares were added in another order (atomics in the order they "
                          "come, or a turn passed before the adds were done)");
      return;
    }
  }
  check_run<T>(g, seed, first, kernel);
}

// Rejected arguments must throw course::BadInput (the lab process reports it as such).
inline void bad_gpu_call(int d, DType dtype, int nq, bool null_q, std::uint64_t workspace_bytes,
                  KernelChoice kernel = Kernel::cuda_cores) {
  gpu_wire::KernelCall call;
  call.B = 1, call.H = 1, call.Nq = nq, call.Nk = 64, call.d = d, call.dtype = dtype;
  call.version = static_cast<int>(kernel.kernel);
  call.step = kernel.step;
  isolation::Packet args;
  gpu_wire::put_call(args, call);
  args.put<std::uint8_t>(null_q);
  args.put<std::uint64_t>(workspace_bytes);
  isolation::lab().call("flash_attention_backward.bad_arguments", args);
}
#else
template <class T>
bool check_gpu(const GpuProblem&, std::uint64_t, KernelChoice = Kernel::cuda_cores) {
  grading::skip("lab 7 part 2 (the GPU kernel) was not built: no CUDA compiler was found when the grader was configured");
  return false;
}
template <class T>
void check_gpu_deterministic(const GpuProblem& g, std::uint64_t seed, KernelChoice kernel) {
  check_gpu<T>(g, seed, kernel);
}
template <class T>
void check_gpu_deterministic_dq(const GpuProblem& g, std::uint64_t seed, KernelChoice kernel) {
  check_gpu<T>(g, seed, kernel);
}
#endif

// A few small problems under compute-sanitizer (racecheck, synccheck, memcheck): several K/V
// tiles and query tiles, partial last tiles, causal and not, with each of `kernels`. The kernels'
// barriers are what racecheck judges: a missing one rarely changes a result on the GPU it is
// graded on.
template <class T>
void check_gpu_sanitized(const std::vector<KernelChoice>& kernels) {
#if COURSE_LAB7_GPU
  const std::vector<GpuProblem> shapes = {{1, 2, 150, 150, 64, true}, {1, 1, 70, 200, 128, false}};
  std::string which;
  for (const KernelChoice& k : kernels) which += (which.empty() ? "" : " and ") + describe_kernel(k);
  gpu_grading::check_under_compute_sanitizer(
      {"flash_attention_backward", course::dtype_name<T>(), {1, 2, 150, 64},
       which + ", Nq = Nk = 150 causal (d 64) and Nq 70, Nk 200 (d 128)"},
      [&] {
        for (const KernelChoice& k : kernels)
          for (const GpuProblem& g : shapes) check_gpu<T>(g, grading::seed(), k);
      });
#else
  (void)kernels;
  grading::skip("lab 7's GPU parts were not built: no CUDA compiler was found when the grader was configured");
#endif
}
template <class T>
void check_gpu_sanitized(KernelChoice kernel) {
  check_gpu_sanitized<T>(std::vector<KernelChoice>{kernel});
}

// N not a multiple of 64 (partial last tiles of queries and keys), a single row, several K/V
// tiles adding into the same dQ rows; d = 64 and 128; B * H > 1.
inline const std::vector<GpuProblem> kGpuShapes = {
    {2, 2, 1, 1, 64},     {1, 2, 7, 7, 128},     {2, 1, 64, 64, 64},  {1, 2, 113, 113, 64},
    {2, 1, 130, 130, 128}, {1, 1, 300, 200, 64}, {1, 1, 200, 300, 128},
};

}  // namespace backward_grading
