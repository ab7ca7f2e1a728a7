#include "gpu_harness.hpp"

#include <cuda_runtime_api.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <unistd.h>

#include "attention_fp64.hpp"
#include "compare.hpp"
#include "course/gpu.hpp"
#include "course/softmax_scale.hpp"
#include "lab_process.hpp"
#include "reference/reference.hpp"
#include "speed_check.hpp"
#include "standard_attention.hpp"

// The grader of a GPU lab: its lab processes start the CUDA driver, so the isolation layer
// (lab_process.cpp) leaves their system-call filter to the lab process itself (sandbox.cpp).
extern "C" bool course_grader_of_gpu_lab() { return true; }

namespace gpu_grading {

namespace {

using course::check_cuda;
using course::DeviceBuffer;
using course::dtype_bytes;
using course::dtype_name;

// The value a double becomes when stored in the dtype, and its bits.
double round_to(DType s, double x) {
  switch (s) {
    case DType::fp32: return double(float(x));
    case DType::bf16: return double(float(Eigen::bfloat16(float(x))));
    case DType::fp16: return double(float(Eigen::half(float(x))));
  }
  return x;
}
void append_bits(DType s, double rounded, std::vector<std::uint8_t>& out) {
  const std::size_t at = out.size();
  out.resize(at + dtype_bytes(s));
  if (s == DType::fp32) {
    const float f = float(rounded);
    std::memcpy(out.data() + at, &f, 4);
  } else if (s == DType::bf16) {
    const Eigen::bfloat16 b{static_cast<float>(rounded)};
    std::memcpy(out.data() + at, &b, 2);
  } else {
    const Eigen::half h{static_cast<float>(rounded)};
    std::memcpy(out.data() + at, &h, 2);
  }
}
double from_bits(DType s, const std::uint8_t* p) {
  if (s == DType::fp32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (s == DType::bf16) {
    Eigen::bfloat16 b;
    std::memcpy(&b, p, 2);
    return double(float(b));
  }
  Eigen::half h;
  std::memcpy(&h, p, 2);
  return double(float(h));
}

// One tensor [B, H, rows, d] drawn from its own stream of the seed.
// Appends x, rounded to the dtype, to a flattened tensor (values and bits).
void append_rounded(const Config& c, const Eigen::MatrixXd& x, std::vector<double>& values,
                    std::vector<std::uint8_t>& bytes) {
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    for (Eigen::Index j = 0; j < x.cols(); ++j) {
      const double v = round_to(c.dtype, x(r, j));
      values.push_back(v);
      append_bits(c.dtype, v, bytes);
    }
}

// One tensor [B, H, rows, d] drawn from its own stream of the seed.
void generate(const Config& c, int rows, const std::string& label, std::uint64_t seed,
              std::vector<double>& values, std::vector<std::uint8_t>& bytes) {
  reference::Rng rng(seed, label + "/" + c.describe());
  values.clear();
  bytes.clear();
  append_rounded(c, reference::random_matrix(Eigen::Index(c.B) * c.H * rows, c.d, c.dist, rng), values, bytes);
}

// Distributions that shape Q and K together (reference::attention_inputs), one head at a time.
bool drawn_per_head(reference::Distribution d) {
  return d == reference::Distribution::negative_rows || d == reference::Distribution::increasing_scores ||
         d == reference::Distribution::large_scores;
}

std::size_t count_o(const Config& c) { return std::size_t(c.B) * c.H * c.Nq * c.d; }
std::size_t count_lse(const Config& c) { return std::size_t(c.B) * c.H * c.Nq; }

// A head of a flattened [B, H, N, d] tensor as an N x d matrix.
Eigen::MatrixXd head(const std::vector<double>& t, const Config& c, int rows, int bh) {
  Eigen::MatrixXd m(rows, c.d);
  const std::size_t base = std::size_t(bh) * rows * c.d;
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c.d; ++j) m(r, j) = t[base + std::size_t(r) * c.d + j];
  return m;
}
void put_head(const reference::Attention<double>& a, const Config& c, int bh, Outputs& out) {
  for (int r = 0; r < c.Nq; ++r) {
    out.lse[std::size_t(bh) * c.Nq + r] = a.lse(r);
    for (int j = 0; j < c.d; ++j) out.O[(std::size_t(bh) * c.Nq + r) * c.d + j] = a.O(r, j);
  }
}

Reference cpu_reference(const Config& c, const Inputs& in) {
  Reference ref;
  for (Outputs* o : {&ref.exact, &ref.plain}) {
    o->O.assign(count_o(c), 0.0);
    o->lse.assign(count_lse(c), 0.0);
  }
  for (int bh = 0; bh < c.B * c.H; ++bh) {
    const Eigen::MatrixXd q = head(in.q, c, c.Nq, bh), k = head(in.k, c, c.Nk, bh),
                          v = head(in.v, c, c.Nk, bh);
    put_head(reference::attention<double>(q, k, v, c.scale_value(), c.causal), c, bh, ref.exact);
    switch (c.dtype) {
      case DType::fp32:
        put_head(reference::plain_attention<float>(q, k, v, c.scale_value(), c.causal), c, bh, ref.plain);
        break;
      case DType::bf16:
        put_head(reference::plain_attention<Eigen::bfloat16>(q, k, v, c.scale_value(), c.causal), c, bh, ref.plain);
        break;
      case DType::fp16:
        put_head(reference::plain_attention<Eigen::half>(q, k, v, c.scale_value(), c.causal), c, bh, ref.plain);
        break;
    }
  }
  return ref;
}

Reference gpu_reference(const Config& c, const Inputs& in) {
  if (c.dtype == DType::fp16)
    throw std::invalid_argument("the GPU reference path takes fp32 or bf16 inputs; grade fp16 at CPU sizes");
  DeviceBuffer q(in.q_bytes.size()), k(in.k_bytes.size()), v(in.v_bytes.size());
  q.upload(in.q_bytes);
  k.upload(in.k_bytes);
  v.upload(in.v_bytes);
  DeviceBuffer o64(count_o(c) * 8), lse64(count_lse(c) * 8);
  course::reference::gpu::attention_fp64(q.get(), k.get(), v.get(), c.dtype, c.B, c.H, c.Nq, c.Nk, c.d,
                                         c.causal, c.scale_value(), static_cast<double*>(o64.get()),
                                         static_cast<double*>(lse64.get()));
  check_cuda(cudaDeviceSynchronize(), "GPU fp64 reference");
  Reference ref;
  auto as_doubles = [](const std::vector<std::uint8_t>& b) {
    std::vector<double> d(b.size() / 8);
    std::memcpy(d.data(), b.data(), b.size());
    return d;
  };
  ref.exact.O = as_doubles(o64.download());
  ref.exact.lse = as_doubles(lse64.download());

  // The same-dtype plain implementation: standard attention with S and P in the dtype.
  DeviceBuffer o(count_o(c) * dtype_bytes(c.dtype)), lse(count_lse(c) * 4);
  course::reference::gpu::StandardAttention standard;
  const cudaError_t st = standard.forward(q.get(), k.get(), v.get(), o.get(), static_cast<float*>(lse.get()), c.dtype,
                                          {c.B, c.H, c.Nq, c.Nk, c.d}, c.causal, c.scale, nullptr);
  check_cuda(st, "standard attention (the plain baseline)");
  check_cuda(cudaDeviceSynchronize(), "standard attention (the plain baseline)");
  ref.plain.O = to_doubles(c.dtype, o.download());
  const auto lse_bytes = lse.download();
  ref.plain.lse.resize(count_lse(c));
  for (std::size_t i = 0; i < ref.plain.lse.size(); ++i) {
    float f;
    std::memcpy(&f, lse_bytes.data() + 4 * i, 4);
    ref.plain.lse[i] = f;
  }
  return ref;
}

}  // namespace

namespace {

std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// Why no GPU lab can run here, in the words a student needs ("" when one can). The CUDA runtime
// says "CUDA driver version is insufficient" on a machine without any NVIDIA driver, which reads
// like a fault: a missing driver, no device, and a driver older than the toolkit are told apart.
std::string why_no_device() {
  int count = 0;
  const cudaError_t st = cudaGetDeviceCount(&count);
  if (st == cudaSuccess && count > 0) return "";
  if (access("/proc/driver/nvidia/version", R_OK) != 0)
    return "no NVIDIA GPU found (no NVIDIA driver is loaded on this machine)";
  if (st == cudaErrorInsufficientDriver) {
    int driver = 0;
    cudaDriverGetVersion(&driver);
    return "the NVIDIA driver (it supports CUDA " + cuda_version(driver) +
           ") is older than the CUDA toolkit the course was built with (" + cuda_version(CUDART_VERSION) +
           "): update the driver, or build with an older toolkit";
  }
  if (st == cudaSuccess || st == cudaErrorNoDevice)
    return "no NVIDIA GPU found (the driver sees none; is CUDA_VISIBLE_DEVICES empty?)";
  return std::string("the CUDA runtime could not start: ") + cudaGetErrorString(st);
}

}  // namespace

void require_device() {
  static const std::string why = why_no_device();
  if (!why.empty()) grading::skip(why + "; GPU labs are graded on a machine with an NVIDIA GPU");
}

void require_hopper(const std::string& lab) {
  require_device();
  static const std::string why = [] {
    try {
      const int cc = course::compute_capability();
      if (cc == 90) return std::string();
      return "this GPU is compute capability " + std::to_string(cc / 10) + "." + std::to_string(cc % 10);
    } catch (const std::runtime_error&) {
      return std::string("cannot read the device's compute capability");
    }
  }();
  if (!why.empty()) grading::skip(lab + " needs a compute capability 9.0 GPU (H100/H200: wgmma and TMA are sm_90a); " + why);
}

gpu_wire::KernelCall Config::call() const {
  gpu_wire::KernelCall k;
  k.B = B, k.H = H, k.Nq = Nq, k.Nk = Nk, k.d = d, k.dtype = dtype, k.causal = causal, k.scale = scale;
  k.version = version;
  return k;
}

double Config::scale_value() const { return scale != 0.0f ? double(scale) : course::default_softmax_scale(d); }

std::string Config::describe() const {
  return std::string(dtype_name(dtype)) + " B=" + std::to_string(B) + " H=" + std::to_string(H) +
         " Nq=" + std::to_string(Nq) + " Nk=" + std::to_string(Nk) + " d=" + std::to_string(d) +
         (causal ? " causal" : " non-causal") +
         (scale != 0.0f ? " scale=" + std::to_string(scale) : std::string(" scale=1/sqrt(d)")) + " " +
         reference::to_string(dist);
}

Inputs make_inputs(const Config& c, std::uint64_t seed) {
  Inputs in;
  in.seed = seed;
  if (drawn_per_head(c.dist)) {
    reference::Rng rng(seed, "qkv/" + c.describe());
    for (int bh = 0; bh < c.B * c.H; ++bh) {
      const auto head = reference::attention_inputs(c.Nq, c.Nk, c.d, c.dist, rng);
      append_rounded(c, head.Q, in.q, in.q_bytes);
      append_rounded(c, head.K, in.k, in.k_bytes);
      append_rounded(c, head.V, in.v, in.v_bytes);
    }
    return in;
  }
  generate(c, c.Nq, "q", seed, in.q, in.q_bytes);
  generate(c, c.Nk, "k", seed, in.k, in.k_bytes);
  generate(c, c.Nk, "v", seed, in.v, in.v_bytes);
  return in;
}

Outputs run_lab(const Config& c, const Inputs& in) {
  isolation::Packet args;
  gpu_wire::put_call(args, c.call());
  gpu_wire::put_bytes(args, in.q_bytes);
  gpu_wire::put_bytes(args, in.k_bytes);
  gpu_wire::put_bytes(args, in.v_bytes);
  auto reply = isolation::lab().call(std::string("forward/") + dtype_name(c.dtype), args);
  return read_outputs(reply.results, c, c.describe());
}

Outputs read_outputs(isolation::Packet& results, const Config& c, const std::string& call) {
  const auto o_bytes = gpu_wire::get_bytes(results);
  const auto lse_bytes = gpu_wire::get_bytes(results);
  Outputs out;
  out.inputs_unchanged = results.get<std::uint8_t>() != 0;
  if (results.get<std::uint8_t>() == 0)
    throw std::runtime_error("the kernel wrote outside O and LSE (into the guard zone around a buffer: " + call +
                             ")");
  if (o_bytes.size() != count_o(c) * dtype_bytes(c.dtype) || lse_bytes.size() != count_lse(c) * 4)
    throw isolation::LabFailure("the lab process returned outputs of the wrong size");
  out.O = to_doubles(c.dtype, o_bytes);
  out.lse.resize(count_lse(c));
  for (std::size_t i = 0; i < out.lse.size(); ++i) {
    float f;
    std::memcpy(&f, lse_bytes.data() + 4 * i, 4);
    out.lse[i] = f;
  }
  return out;
}

std::vector<double> to_doubles(DType s, const std::vector<std::uint8_t>& bytes) {
  const std::size_t n = bytes.size() / dtype_bytes(s);
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = from_bits(s, bytes.data() + i * dtype_bytes(s));
  return out;
}

double max_abs_finite(const std::vector<double>& x) {
  double m = 0;
  for (double v : x)
    if (std::isfinite(v)) m = std::max(m, std::abs(v));
  return m;
}

namespace {

// max_i |x_i| over the rows x_i (length d) of one head's [N, d] block.
double max_row_norm(const double* x, int n, int d) {
  double best = 0;
  for (int i = 0; i < n; ++i) {
    double sum = 0;
    for (int t = 0; t < d; ++t) sum += x[std::size_t(i) * d + t] * x[std::size_t(i) * d + t];
    best = std::max(best, sum);
  }
  return std::sqrt(best);
}

// |S_ij| = scale |q_i . k_j| <= scale |q_i| |k_j| (Cauchy-Schwarz), maximised head by head.
double score_bound(const Config& c, const Inputs& in) {
  double bound = 0;
  for (int bh = 0; bh < c.B * c.H; ++bh) {
    const double q = max_row_norm(in.q.data() + std::size_t(bh) * c.Nq * c.d, c.Nq, c.d);
    const double k = max_row_norm(in.k.data() + std::size_t(bh) * c.Nk * c.d, c.Nk, c.d);
    bound = std::max(bound, std::abs(c.scale_value()) * q * k);
  }
  return bound;
}

}  // namespace

Reference reference_for(const Config& c, const Inputs& in) {
  const double work = double(c.B) * c.H * c.Nq * c.Nk * c.d;
  Reference ref = (work <= 4e7 || c.dtype == DType::fp16) ? cpu_reference(c, in) : gpu_reference(c, in);
  ref.score_max = score_bound(c, in);
  for (double v : in.v) ref.value_max = std::max(ref.value_max, std::abs(v));
  return ref;
}

bool expect_matches(const Config& c, const Outputs& got, const Reference& ref, const std::string& what,
                    std::uint64_t seed) {
  const grading::Shape o_shape = {c.B, c.H, c.Nq, c.d}, lse_shape = {c.B, c.H, c.Nq};
  const std::string dtype = dtype_name(c.dtype);
  const auto o_plain = grading::compare(ref.plain.O, ref.exact.O, o_shape);
  const auto lse_plain = grading::compare(ref.plain.lse, ref.exact.lse, lse_shape);
  const grading::Case o_case{what + " O", dtype, o_shape, c.describe(), seed};
  const grading::Case lse_case{what + " lse", dtype, lse_shape, c.describe(), seed};
  const bool o_ok = grading::expect_within(
      o_case, grading::compare(got.O, ref.exact.O, o_shape),
      grading::with_score_rounding(grading::tolerance(grading::Quantity::output, dtype, o_plain.max_abs,
                                                      max_abs_finite(ref.exact.O)),
                                   dtype, ref.score_max, ref.value_max));
  // LSE is fp32 for every dtype: the fp32 band's factor and floor, times the plain baseline's LSE
  // error. That baseline keeps S in the dtype, so for bf16 and fp16 the band carries the scores'
  // rounding (looser than a plain fp32 LSE on the same inputs would make it).
  const bool lse_ok = grading::expect_within(
      lse_case, grading::compare(got.lse, ref.exact.lse, lse_shape),
      grading::tolerance(grading::Quantity::lse, "fp32", lse_plain.max_abs, max_abs_finite(ref.exact.lse)));
  return o_ok && lse_ok;
}

std::vector<Config> numerics_configs(const std::vector<DType>& dtypes,
                                     const std::vector<reference::Distribution>& dists) {
  std::vector<Config> out;
  for (DType dtype : dtypes)
    for (auto dist : dists)
      for (auto [nq, nk] : {std::pair{64, 1}, std::pair{64, 3}, std::pair{100, 70}, std::pair{130, 129}})
        for (bool causal : {false, true}) {
          Config c;
          c.B = 2;
          c.H = 2;
          c.Nq = nq;
          c.Nk = nk;
          c.d = 64;
          c.dtype = dtype;
          c.causal = causal;
          c.dist = dist;
          out.push_back(c);
        }
  return out;
}

std::vector<Config> large_shape_configs(const std::vector<DType>& dtypes, int odd_heads) {
  std::vector<Config> out;
  for (DType dtype : dtypes)
    for (int d : {64, 128})
      for (bool causal : {false, true}) {
        Config c;
        c.B = 2;
        c.H = 4;
        c.Nq = c.Nk = 4096;
        c.d = d;
        c.dtype = dtype;
        c.causal = causal;
        c.dist = reference::Distribution::outliers;
        out.push_back(c);
      }
  Config odd;
  odd.B = 1;
  odd.H = odd_heads;
  odd.Nq = odd.Nk = 3001;
  odd.d = 128;
  odd.dtype = dtypes.front();
  odd.causal = true;
  out.push_back(odd);
  return out;
}

Config bad_input_config(int H, int d, DType dtype) {
  Config c;
  c.H = H;
  c.Nq = c.Nk = 16;
  c.d = d;
  c.dtype = dtype;
  return c;
}

void call_with_bad_arguments(const Config& c, bool null_q) {
  isolation::Packet args;
  gpu_wire::put_call(args, c.call());
  args.put<std::uint8_t>(null_q);
  isolation::lab().call("bad_arguments", args);
}

bool check_config(const Config& c, const std::string& what, std::uint64_t seed) {
  const Inputs in = make_inputs(c, seed);
  const Outputs got = run_lab(c, in);
  return expect_matches(c, got, reference_for(c, in), what, seed);
}

void check_deterministic(const Config& c, const std::string& what, const std::vector<std::uint64_t>& seeds) {
  for (const std::uint64_t seed : seeds) {
    const grading::Case about{what, dtype_name(c.dtype), {c.B, c.H, c.Nq, c.d}, c.describe(), seed};
    const Inputs in = make_inputs(c, seed);
    const Outputs first = run_lab(c, in);
    const Outputs second = run_lab(c, in);
    grading::expect(first.O == second.O && first.lse == second.lse, about,
                    "two runs on the same inputs gave different results: a race (a missing "
                    "__syncthreads, or a read of shared memory another warp is still writing)");
    grading::expect(first.inputs_unchanged, about, "the kernel modified Q, K or V");
    expect_matches(c, first, reference_for(c, in), what, seed);
  }
}

SpeedCheck random_speed_check(const SpeedConfig& c) {
  std::random_device device;
  std::mt19937_64 rng((std::uint64_t(device()) << 32) ^ device());
  SpeedCheck check;
  check.seed = rng();
  check.head = int(rng() % std::uint64_t(c.batch() * c.heads()));
  check.first_row = int(rng() % std::uint64_t(c.N - SpeedCheck::kRows + 1));
  check.first_key = int(rng() % std::uint64_t(c.N - SpeedCheck::kRows + 1));
  check.checked_call = int(rng() % std::uint64_t(SpeedCheck::kRepeats));
  return check;
}

double time_in_lab(const SpeedConfig& c, bool solution) {
  const SpeedCheck check = random_speed_check(c);
  isolation::Packet args;
  gpu_wire::put_speed_request(args, c, check);
  auto reply = (solution ? isolation::solution_lab() : isolation::lab()).call("time", args);
  const double ms = reply.results.get<double>();
  const std::vector<std::uint8_t> o_bits = gpu_wire::get_bytes(reply.results);
  std::vector<float> lse(SpeedCheck::kRows);
  reply.results.get_bytes(lse.data(), lse.size() * 4);
  if (o_bits.size() != std::size_t(SpeedCheck::kRows) * c.d * 2)
    throw std::runtime_error("time: the lab process sent " + std::to_string(o_bits.size()) + " bytes of O rows");
  const TimedRowsError error = timed_rows_error(c, check, to_doubles(DType::bf16, o_bits), lse);
  if (!error.ok()) throw std::runtime_error(timed_rows_message(check, error, solution ? "the solution kernel's" : "your kernel's"));
  if (!(ms > 0) || !std::isfinite(ms)) throw std::runtime_error("a timing of " + std::to_string(ms) + " ms");
  return ms;
}

std::string device_name() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "unknown GPU";
  return prop.name;
}

namespace {

// "d=64 causal N=4096: "
std::string config_label(const SpeedConfig& c) {
  return "d=" + std::to_string(c.d) + (c.causal ? " causal" : " non-causal") + " N=" + std::to_string(c.N) + ": ";
}

// "yours 1.234 ms (456 TFLOP/s)"
std::string timing(const SpeedConfig& c, const char* who, double ms) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s %.3f ms (%.0f TFLOP/s)", who, ms, c.flops() / ms / 1e9);
  return buf;
}

// Lab 5's rule: returns the fraction of the points and appends the figures to `note`.
double fraction_against_solution(int d, bool backward, const TimeInLab& time_lab, std::string& note) {
  double worst = 0;  // the student's time over the solution's
  for (bool causal : {false, true}) {
    SpeedConfig c;
    c.d = d;
    c.causal = causal;
    c.backward = backward;
    const double student = time_lab(c, /*solution=*/false);
    // The student's lab process ends here, and its CUDA context with it: work it left running on
    // the GPU (a kernel on a stream of its own, launched by a thread of its own while it waits)
    // would otherwise slow the solution's timing and make the ratio look better. The next call
    // starts a fresh process.
    isolation::lab().restart();
    const double solution = time_lab(c, /*solution=*/true);
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, ", %.2fx; ", student / solution);
    note += config_label(c) + timing(c, "yours", student) + ", " + timing(c, "solution", solution) + ratio;
    worst = std::max(worst, student / solution);
  }
  char rule[80];
  std::snprintf(rule, sizeof rule, "full points within %.1fx of the solution, none at %.0fx", kSolutionFullWithin,
                kSolutionNoneAt);
  note += rule;
  return fraction_of_solution_time(worst);
}

}  // namespace

void award_speed_against_solution(int d) { award_speed_against_solution(d, false, time_in_lab); }

void award_speed_against_solution(int d, bool backward, const TimeInLab& time_lab) {
  std::string note = "timed on the " + device_name() + ": ";
  const double fraction = fraction_against_solution(d, backward, time_lab, note);
  grading::award_fraction(fraction, note);
}

}  // namespace gpu_grading
