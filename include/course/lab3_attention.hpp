// Lab 3 API: attention forward on the CPU, streaming over K/V tiles (FA1 Algorithm 1).
//
// Implemented by labs/lab3_attention/attention.cpp (you) and solutions/lab3_attention/attention.cpp.
#pragma once

#include <optional>

#include "course/cpu.hpp"
#include "course/softmax_scale.hpp"  // the scale's one rule: 1/sqrt(d) when not given

namespace course::lab3 {

struct AttentionOptions {
  int block_q = 64;              // B_r in the FA1 paper: query rows per tile
  int block_k = 64;              // B_c in the FA1 paper: key/value rows per tile
  bool causal = false;           // bottom-right aligned: query i sees keys j <= i + Nk - Nq
  std::optional<double> scale;   // softmax scale; 1/sqrt(d) when empty
};

template <class T>
struct AttentionOutput {
  Matrix<T> O;               // [Nq, d]
  Vector<accum_t<T>> lse;    // [Nq], log sum_j exp(scale * q_i . k_j) over the keys row i sees
};

// O = softmax(scale * Q K^T [masked]) V for one head, and the per-row LSE, without ever
// holding more than one block_q x block_k tile of scores. Q is [Nq, d], K and V are [Nk, d].
// A query row that sees no key gets O = 0 and LSE = -inf.
// All arithmetic is in Acc (accum_t<T> normally; the grader also uses CountedFloat to count
// multiplications), so use acc<Acc>(x), store<T>(a) and course::exp/log/max.
// Throws BadInput for mismatched shapes, d = 0, block sizes < 1, NaN/inf in Q, K or V, or a
// scale that is not finite and > 0.
template <class T, class Acc = accum_t<T>>
AttentionOutput<T> attention_forward(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                                     const AttentionOptions& options);

// The same for [B, H, N, d] tensors: every (b, h) head independently. Q has Nq rows per head,
// K and V have Nk. lse is [B, H, Nq] flattened.
template <class T>
struct BatchedOutput {
  Tensor4<T> O;
  std::vector<accum_t<T>> lse;
};
template <class T>
BatchedOutput<T> attention_forward_batched(const Tensor4<T>& Q, const Tensor4<T>& K,
                                           const Tensor4<T>& V, const AttentionOptions& options);

}  // namespace course::lab3
