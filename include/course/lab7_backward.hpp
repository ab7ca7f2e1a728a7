// Lab 7 API, part 1: the attention backward pass on the CPU, from the forward's saved LSE
// (FA2 Algorithm 2; FA1 Algorithm 4 / Appendix B), without ever holding an Nq x Nk matrix.
//
// Implemented by labs/lab7_backward/backward.cpp (you) and solutions/lab7_backward/backward.cpp.
// Part 2, the GPU kernel, is in course/lab7_backward_gpu.hpp.
#pragma once

#include <optional>

#include "course/cpu.hpp"
#include "course/softmax_scale.hpp"  // the scale's one rule: 1/sqrt(d) when not given

namespace course::lab7 {

struct BackwardOptions {
  int block_q = 64;              // B_r: query rows per tile
  int block_k = 64;              // B_c: key/value rows per tile
  bool causal = false;           // bottom-right aligned: query i sees keys j <= i + Nk - Nq
  std::optional<double> scale;   // softmax scale tau; 1/sqrt(d) when empty
};

template <class T>
struct Gradients {
  Matrix<T> dQ;  // [Nq, d]
  Matrix<T> dK;  // [Nk, d]
  Matrix<T> dV;  // [Nk, d]
};

// The gradients of L with respect to Q, K and V for one head, given dO = dL/dO, the forward's
// output O [Nq, d] and its per-row LSE [Nq] (natural log; -inf for a row that sees no key).
// With S = tau Q K^T (masked), P = exp(S - LSE) recomputed tile by tile, D = rowsum(dO o O):
//   dV = P^T dO,   dP = dO V^T,   dS = P o (dP - D),   dQ = tau dS K,   dK = tau dS^T Q.
// A row with LSE = -inf contributes nothing (its P row is 0, never NaN). Arithmetic in Acc
// (accum_t<T> normally; the grader also uses CountedFloat to count exponentials), so use
// acc<Acc>(x), store<T>(a) and course::exp/log/max; dQ, dK and dV are rounded to T once, at
// the end. Memory beyond the inputs and outputs: O(block_q * block_k + (Nq + Nk) * d).
// Throws BadInput for mismatched shapes, d = 0, block sizes < 1, NaN in any input (+-inf is
// allowed only in lse, and only -inf), or a scale that is not finite and > 0.
template <class T, class Acc = accum_t<T>>
Gradients<T> attention_backward(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                                const Matrix<T>& O, const Matrix<T>& dO,
                                const Vector<accum_t<T>>& lse, const BackwardOptions& options);

}  // namespace course::lab7
