// Lab 1 API: safe softmax and log-sum-exp, row by row.
//
// Implemented by labs/lab1_softmax/softmax.cpp (you) and solutions/lab1_softmax/softmax.cpp.
// Instantiated for T = double, float, bf16, fp16; arithmetic in accum_t<T>.
#pragma once

#include "course/cpu.hpp"

namespace course::lab1 {

// y[r, :] = softmax(x[r, :]) = exp(x[r, j] - m_r) / sum_k exp(x[r, k] - m_r), m_r = max_k x[r, k].
// Entries may be -inf (masked). A row whose entries are all -inf gives a row of zeros.
// Throws BadInput if x holds NaN or +inf.
template <class T>
Matrix<T> softmax_rows(const Matrix<T>& x);

// lse[r] = log sum_j exp(x[r, j]), computed as m_r + log sum_j exp(x[r, j] - m_r) so that it
// never overflows. A row of all -inf (or a row of length 0) gives -inf.
// Throws BadInput if x holds NaN or +inf.
template <class T>
Vector<accum_t<T>> logsumexp_rows(const Matrix<T>& x);

}  // namespace course::lab1
