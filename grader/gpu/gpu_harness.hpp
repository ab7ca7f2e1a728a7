// The grader's side of the GPU labs (4 and 5): finding a device, inputs generated from the
// run's seed and rounded to the kernel's dtype, running the lab's kernel in the lab process
// (grader/gpu/device_run.hpp says what that process does around it: NaN-poisoned outputs, a busy
// default stream, reads ordered on the lab's stream), and comparing its O and LSE with the fp64
// reference (on the CPU for small shapes, on the GPU for large ones) inside the bands of
// grader/common/tolerances.cpp.
//
// The band's baseline for large shapes is standard attention on the GPU in the same dtype
// (course::reference::gpu::StandardAttention: S and P stored in the dtype, as a framework's
// unfused path does), measured against the same fp64 reference.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpu_wire.hpp"
#include "grading.hpp"
#include "reference/data.hpp"
#include "speed_rules.hpp"

namespace gpu_grading {

using course::DType;

// Skips the current check (with the reason) when no CUDA device can be used.
void require_device();

// Skips the current check unless the GPU is compute capability 9.0 (H100, H200): labs 8 and 9
// run sm_90a code (wgmma, TMA) and are compiled for nothing else. `lab` ("lab 8") names the lab
// in the reason.
void require_hopper(const std::string& lab);

struct Config {
  int B = 1, H = 1, Nq = 1, Nk = 1, d = 64;
  DType dtype = DType::fp32;
  bool causal = false;
  float scale = 0.0f;  // 0: 1/sqrt(d)
  reference::Distribution dist = reference::Distribution::normal;
  int version = -1;    // lab 5: the staircase step (-1: the shipped version)
  double scale_value() const;
  std::string describe() const;  // "fp32 B=2 H=3 Nq=113 Nk=113 d=64 causal scale=default"
  gpu_wire::KernelCall call() const;
};

// Inputs of one configuration, as the kernel sees them (rounded to the dtype) and as doubles.
struct Inputs {
  std::uint64_t seed = 0;                        // the seed they were drawn with
  std::vector<double> q, k, v;                   // rounded values, [B, H, N, d]
  std::vector<std::uint8_t> q_bytes, k_bytes, v_bytes;  // the same in the dtype's bits
};
Inputs make_inputs(const Config& c, std::uint64_t seed);

struct Outputs {
  std::vector<double> O;    // [B, H, Nq, d]
  std::vector<double> lse;  // [B, H, Nq]
  bool inputs_unchanged = true;
};

// Runs the lab's kernel on these inputs in the lab process (isolation::lab()) and reads back
// what it wrote. Lab code errors arrive as exceptions (course::BadInput, isolation::LabError,
// isolation::LabFailure) and fail the check that called.
Outputs run_lab(const Config& c, const Inputs& in);

// Reads a kernel run's reply (what gpu_lab::put_result wrote: O's bits, LSE, the inputs-unchanged
// and wrote-only-outputs flags) for configuration c. Throws, naming `call`, when the kernel wrote
// outside O and LSE or the sizes do not match c. For labs whose calls carry more than a Config
// (lab 6's splits and KV lengths), so that every GPU lab reads its results one way.
Outputs read_outputs(isolation::Packet& results, const Config& c, const std::string& call);

// Values of a buffer in dtype `s` (fp32, bf16 or fp16 bits) as doubles.
std::vector<double> to_doubles(DType s, const std::vector<std::uint8_t>& bytes);

// The largest |x| over the finite entries (the scale of a band's floor).
double max_abs_finite(const std::vector<double>& x);

// The fp64 reference and the same-dtype plain implementation's outputs for these inputs.
struct Reference {
  Outputs exact;
  Outputs plain;
  double score_max = 0;  // a bound on |S| over the problem (scale * max|q_i| * max|k_j|)
  double value_max = 0;  // max |V|
};
// CPU fp64 reference (reference/) for small shapes; GPU fp64 reference plus GPU standard
// attention for large ones (chosen by size).
Reference reference_for(const Config& c, const Inputs& in);

// Compares O and LSE with the reference inside the bands; fails the current check otherwise.
bool expect_matches(const Config& c, const Outputs& got, const Reference& ref, const std::string& what,
                    std::uint64_t seed);

// Calls the lab's entry point with arguments it must reject (c's shape; Q null if null_q) in the
// lab process. Returns if the call went through; throws course::BadInput if it was rejected.
void call_with_bad_arguments(const Config& c, bool null_q);

// The small shape the forward labs' bad-input checks (labs 5 and 8) vary one field of:
// Nq = Nk = 16, H heads of dimension d, in dtype (B = 1).
Config bad_input_config(int H, int d, DType dtype);

// The numerics checks' configurations: for each dtype and input distribution, few keys (1, 3:
// with large scores, rows whose every score is far below zero) and partial tiles (70, 129),
// causal and not; B = H = 2, d = 64.
std::vector<Config> numerics_configs(const std::vector<DType>& dtypes,
                                     const std::vector<reference::Distribution>& dists);

// The large-shapes checks' configurations of the forward labs (4, 5, 8): N = 4096 (B = 2, H = 4)
// for each dtype, d = 64 and 128, causal and not, on inputs with outliers; then N = 3001 (many
// tiles, the last one partial), B = 1, H = odd_heads, d = 128, causal, in the first dtype.
std::vector<Config> large_shape_configs(const std::vector<DType>& dtypes, int odd_heads);

// The whole numerical check of one configuration.
bool check_config(const Config& c, const std::string& what, std::uint64_t seed);

// For each seed: runs the kernel twice on the same inputs. The two results must agree bit for
// bit (a race shows up as results that change from run to run), the inputs must be unchanged,
// and O and LSE must match the reference.
void check_deterministic(const Config& c, const std::string& what, const std::vector<std::uint64_t>& seeds);

// The speed checks (labs 5 and 8): the median milliseconds of the shipped kernel on the speed
// benchmark's shape, timed in the student's lab process (solution = false) or in the solution's
// (the lab process's "time" request, gpu_lab::time_forward). Throws, and so the check fails,
// when what one randomly chosen timed call computed is not attention (SpeedCheck in
// speed_rules.hpp: 16 random rows of a random head against the fp64 reference), or when the
// timing is not a positive finite number.
double time_in_lab(const SpeedConfig& c, bool solution);

// A fresh, unpredictable choice of inputs, rows and call for each timing (not the run's seed: a
// submission that knew it could work out which rows are checked). Printed when a check fails.
SpeedCheck random_speed_check(const SpeedConfig& c);

// The name of device 0 as CUDA reports it (cudaDeviceProp::name), e.g. "NVIDIA H200".
std::string device_name();

// The speed rule of labs 5 and 8, for head dimension d (causal and not, the worse counts): the
// student's time over the solution's, both timed in this run on this GPU, one after the other.
// Full points within 1.2x, none at 3x, linear between (speed_rules.hpp); the note gives both
// times and TFLOP/s.
void award_speed_against_solution(int d);

// The same rule for a lab whose "time" request is another (lab 9's backward: backward = true, and
// `time_lab` its checked timing, grader/lab7_backward/backward_speed_check.hpp).
using TimeInLab = std::function<double(const SpeedConfig& c, bool solution)>;
void award_speed_against_solution(int d, bool backward, const TimeInLab& time_lab);

}  // namespace gpu_grading
