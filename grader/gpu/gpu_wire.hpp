// One kernel call of a GPU lab on the wire between the grader and the lab process: the shape and
// options, and the inputs in their dtype's bits. Shared by the grader (gpu_harness.cpp,
// grade_lab7.cpp) and the lab processes of the GPU labs (forward_handlers.hpp, serve_gpu.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "course/gpu.hpp"
#include "course/gpu_labs.hpp"  // the ints of lab 5's and 8's Version and lab 7's BackwardKernel
#include "speed_rules.hpp"
#include "wire.hpp"

namespace gpu_wire {

struct KernelCall {
  int B = 1, H = 1, Nq = 1, Nk = 1, d = 64;
  course::DType dtype = course::DType::fp32;
  bool causal = false;
  float scale = 0.0f;  // 0: 1/sqrt(d)
  // Which of the lab's kernels: lab 5's or lab 8's Version, lab 7's BackwardKernel, as
  // course::gpu_labs::encode_choice writes it (its position in course/gpu_labs.def); -1: the
  // lab's default (`best`, `automatic`). choice_of reads it back.
  int version = course::gpu_labs::kDefaultChoice;
  // Lab 9's step (course::lab7::HopperBackwardStep as an int); -1: the lab's default, its best.
  // Other labs leave it at -1.
  int step = -1;
  std::size_t o_elements() const { return std::size_t(B) * H * Nq * d; }
  std::size_t lse_elements() const { return std::size_t(B) * H * Nq; }
};

// What runs beside a call of lab 9's deterministic mode (the "flash_attention_backward.deterministic"
// request's last byte, grader/lab7_backward/backward_handlers.hpp): nothing but the harness's busy
// default stream, or a kernel launched just before it on another stream that holds half of the
// GPU's SMs, or all but 8, for 2 ms (gpu_lab::hold_sms).
enum class Beside : std::uint8_t { nothing, half_the_sms, all_but_8_sms };

inline void put_call(isolation::Packet& p, const KernelCall& c) {
  for (int v : {c.B, c.H, c.Nq, c.Nk, c.d, c.version, c.step}) p.put<std::int32_t>(v);
  p.put(c.dtype);
  p.put<std::uint8_t>(c.causal);
  p.put(c.scale);
}

inline KernelCall get_call(isolation::Packet& p) {
  KernelCall c;
  c.B = p.get<std::int32_t>();
  c.H = p.get<std::int32_t>();
  c.Nq = p.get<std::int32_t>();
  c.Nk = p.get<std::int32_t>();
  c.d = p.get<std::int32_t>();
  c.version = p.get<std::int32_t>();
  c.step = p.get<std::int32_t>();
  c.dtype = p.get<course::DType>();
  c.causal = p.get<std::uint8_t>() != 0;
  c.scale = p.get<float>();
  return c;
}

// The lab's choice that a call names: the lab process's one decoding of KernelCall::version.
// `fallback` is the lab's default (what -1 stands for); a version that stands for no choice
// throws std::invalid_argument.
template <class Choice>
Choice choice_of(const KernelCall& c, Choice fallback) {
  return course::gpu_labs::decode_choice(c.version, fallback, "gpu_wire::KernelCall::version");
}

// The "time" request of the speed checks (forward and backward alike): the configuration's d and
// causal flag, then the grader's random SpeedCheck (seed, head, rows, key rows, checked call).
inline void put_speed_request(isolation::Packet& p, const gpu_grading::SpeedConfig& c,
                              const gpu_grading::SpeedCheck& check) {
  p.put<std::int32_t>(c.d);
  p.put<std::uint8_t>(c.causal);
  p.put<std::uint64_t>(check.seed);
  for (int v : {check.head, check.first_row, check.first_key, check.checked_call}) p.put<std::int32_t>(v);
}

inline void get_speed_request(isolation::Packet& p, gpu_grading::SpeedConfig& c, gpu_grading::SpeedCheck& check) {
  c.d = p.get<std::int32_t>();
  c.causal = p.get<std::uint8_t>() != 0;
  check.seed = p.get<std::uint64_t>();
  check.head = p.get<std::int32_t>();
  check.first_row = p.get<std::int32_t>();
  check.first_key = p.get<std::int32_t>();
  check.checked_call = p.get<std::int32_t>();
}

inline void put_bytes(isolation::Packet& p, const std::vector<std::uint8_t>& b) {
  p.put<std::uint64_t>(b.size());
  p.put_bytes(b.data(), b.size());
}

inline std::vector<std::uint8_t> get_bytes(isolation::Packet& p) {
  std::vector<std::uint8_t> b(p.get_count(1));
  p.get_bytes(b.data(), b.size());
  return b;
}

}  // namespace gpu_wire
