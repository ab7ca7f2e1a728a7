// One attention call as the GPU forward labs (4, 5 and 8) receive it: what each lab accepts, and
// every input check made once here, so that a lab states only its rules and its code starts
// from a call already checked. The softmax scale's one rule is in course/softmax_scale.hpp.
//
// Plain C++ (no Eigen, no device code): host code compiled by nvcc or by the host compiler
// includes it, the graders and the references as well as the labs.
#pragma once

#include <cstdint>
#include <string>

#include "course/errors.hpp"
#include "course/gpu.hpp"  // DType, AttentionShape, cudaStream_t
#include "course/math_constants.hpp"
#include "course/softmax_scale.hpp"

namespace course {

// ---------------------------------------------------------------------------------------------
// The GPU forward labs' call: what a lab accepts, and the call once checked
// ---------------------------------------------------------------------------------------------

// What one lab's flash_attention_forward accepts. Every lab also requires non-null pointers,
// Q, K, V and O 16-byte aligned (their vector, cp.async or TMA loads), B, H, Nq, Nk >= 1 and
// B * H <= 65535 (one grid row per head).
struct ForwardRules {
  const char* function;        // for the messages: "lab5::flash_attention_forward"
  bool fp32 = false, bf16 = false, fp16 = false;  // the element types it accepts
  int head_dims[3] = {0, 0, 0};                   // the head dimensions it accepts (0: none)
};

inline constexpr ForwardRules kLab4Rules{"lab4::flash_attention_forward", true, true, false, {32, 64, 128}};
inline constexpr ForwardRules kLab5Rules{"lab5::flash_attention_forward", false, true, true, {64, 128, 0}};
inline constexpr ForwardRules kLab8Rules{"lab8::flash_attention_forward", false, true, true, {64, 128, 0}};

// A forward call after its checks: what every lab's kernel parameters are filled from.
struct ForwardCall {
  const void* q = nullptr;  // [B*H, Nq, d], row-major, of `dtype`
  const void* k = nullptr;  // [B*H, Nk, d]
  const void* v = nullptr;  // [B*H, Nk, d]
  void* o = nullptr;        // [B*H, Nq, d]
  float* lse = nullptr;     // [B*H, Nq]
  DType dtype = DType::fp32;
  int batch_heads = 0;      // B * H
  int nq = 0, nk = 0, d = 0;
  bool causal = false;
  float scale = 0.0f;       // tau, never 0 here
  float scale_log2 = 0.0f;  // tau * log2(e): exp(tau (s - m)) = exp2(s tau log2(e) - m tau log2(e))
  cudaStream_t stream = nullptr;
};

namespace detail {
inline bool accepts_dtype(const ForwardRules& r, DType t) {
  return (t == DType::fp32 && r.fp32) || (t == DType::bf16 && r.bf16) || (t == DType::fp16 && r.fp16);
}
inline std::string accepted_dtypes(const ForwardRules& r) {
  std::string s;
  for (DType t : {DType::fp32, DType::bf16, DType::fp16})
    if (accepts_dtype(r, t)) s += (s.empty() ? "" : " or ") + std::string(dtype_name(t));
  return s;
}
inline bool accepts_head_dim(const ForwardRules& r, int d) {
  for (int a : r.head_dims)
    if (a != 0 && a == d) return true;
  return false;
}
inline std::string accepted_head_dims(const ForwardRules& r) {  // "32, 64 or 128"
  std::string s, last;
  for (int a : r.head_dims) {
    if (a == 0) continue;
    if (!last.empty()) s += (s.empty() ? "" : ", ") + last;
    last = std::to_string(a);
  }
  return s.empty() ? last : s + " or " + last;
}
inline bool is_aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }
}  // namespace detail

// Every input check of a forward call, in one place; throws course::BadInput naming the function,
// the argument and the rule it broke.
inline ForwardCall check_forward(const ForwardRules& rules, const void* Q, const void* K,
                                 const void* V, void* O, float* lse, DType dtype,
                                 const AttentionShape& shape, bool causal, float scale,
                                 cudaStream_t stream) {
  const std::string where = rules.function;
  if (!Q || !K || !V || !O || !lse)
    throw BadInput(where + ": Q, K, V, O and lse must be non-null device pointers");
  if (!detail::accepts_dtype(rules, dtype))
    throw BadInput(where + ": dtype must be " + detail::accepted_dtypes(rules) + ", got " + dtype_name(dtype));
  if (!detail::accepts_head_dim(rules, shape.d))
    throw BadInput(where + ": head dimension d must be " + detail::accepted_head_dims(rules) + ", got " +
                   std::to_string(shape.d));
  if (shape.B < 1 || shape.H < 1 || shape.Nq < 1 || shape.Nk < 1)
    throw BadInput(where + ": B, H, Nq and Nk must be >= 1 (got B=" + std::to_string(shape.B) +
                   " H=" + std::to_string(shape.H) + " Nq=" + std::to_string(shape.Nq) +
                   " Nk=" + std::to_string(shape.Nk) + ")");
  const std::int64_t batch_heads = static_cast<std::int64_t>(shape.B) * shape.H;
  if (batch_heads > 65535) throw BadInput(where + ": B * H must be <= 65535 (one grid row per head)");
  if (!(detail::is_aligned16(Q) && detail::is_aligned16(K) && detail::is_aligned16(V) &&
        detail::is_aligned16(O)))
    throw BadInput(where + ": Q, K, V and O must be 16-byte aligned");

  ForwardCall call;
  call.q = Q, call.k = K, call.v = V, call.o = O, call.lse = lse;
  call.dtype = dtype;
  call.batch_heads = static_cast<int>(batch_heads);
  call.nq = shape.Nq, call.nk = shape.Nk, call.d = shape.d;
  call.causal = causal;
  call.scale = softmax_scale(scale, shape.d, where);
  call.scale_log2 = call.scale * kLog2eF;
  call.stream = stream;
  return call;
}

}  // namespace course
