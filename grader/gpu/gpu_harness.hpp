// What the GPU graders (labs 4 and 5) share: finding a device, device buffers, inputs generated
// from the run's seed and rounded to the kernel's dtype, NaN-poisoned outputs, and comparing a
// kernel's O and LSE with the fp64 reference (on the CPU for small shapes, on the GPU for large
// ones) inside the bands of grader/common/tolerances.cpp.
//
// The band's baseline for large shapes is standard attention on the GPU in the same dtype
// (course::bench::StandardAttention: S and P stored in the dtype, as a framework's unfused path
// does), measured against the same fp64 reference.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "course/lab4_cuda.hpp"
#include "grading.hpp"
#include "reference/data.hpp"

namespace gpu_grading {

enum class Storage { fp32, bf16, fp16 };
const char* name(Storage s);
std::size_t bytes_per_element(Storage s);

// Skips the current check (with the reason) when no CUDA device can be used.
void require_device();

struct Config {
  int B = 1, H = 1, Nq = 1, Nk = 1, d = 64;
  Storage dtype = Storage::fp32;
  bool causal = false;
  float scale = 0.0f;  // 0: 1/sqrt(d)
  reference::Distribution dist = reference::Distribution::normal;
  double scale_value() const;
  std::string describe() const;  // "fp32 B=2 H=3 Nq=113 Nk=113 d=64 causal scale=default"
};

// Inputs of one configuration, as the kernel sees them (rounded to the dtype) and as doubles.
struct Inputs {
  std::vector<double> q, k, v;                   // rounded values, [B, H, N, d]
  std::vector<std::uint8_t> q_bytes, k_bytes, v_bytes;  // the same in the dtype's bits
};
Inputs make_inputs(const Config& c, std::uint64_t seed);

struct Outputs {
  std::vector<double> O;    // [B, H, Nq, d]
  std::vector<double> lse;  // [B, H, Nq]
  bool inputs_unchanged = true;
};

// Runs a kernel on device copies of the inputs, with O and lse poisoned with NaN beforehand so
// that every element must be written, on a non-default stream. `launch` gets device pointers.
using Launch = std::function<void(const void* q, const void* k, const void* v, void* o,
                                  float* lse, void* stream)>;
Outputs run_on_device(const Config& c, const Inputs& in, const Launch& launch);

// The fp64 reference and the same-dtype plain implementation's outputs for these inputs.
struct Reference {
  Outputs exact;
  Outputs plain;
};
// CPU fp64 reference (reference/) for small shapes; GPU fp64 reference plus GPU standard
// attention for large ones (chosen by size).
Reference reference_for(const Config& c, const Inputs& in);

// Compares O and LSE with the reference inside the bands; fails the current check otherwise.
bool expect_matches(const Config& c, const Outputs& got, const Reference& ref,
                    const std::string& what);

// The whole numerical check of one configuration.
bool check_config(const Config& c, const Launch& launch, const std::string& what,
                  std::uint64_t seed);

// For each seed: runs the kernel twice on the same inputs. The two results must agree bit for
// bit (a race shows up as results that change from run to run), the inputs must be unchanged,
// and O and LSE must match the reference.
void check_deterministic(const Config& c, const Launch& launch, const std::string& what,
                         const std::vector<std::uint64_t>& seeds);

}  // namespace gpu_grading
