// Lab 1: safe softmax and log-sum-exp, one row at a time. Implements include/course/lab1_softmax.hpp.
//
// Storage is T, arithmetic is Acc = accum_t<T> (fp32 for bf16/fp16): read each element with
// acc<Acc>(x), round once with store<T>(a) when writing. Lecture: lectures/01-safe-softmax.md.
#include "course/lab1_softmax.hpp"

namespace course::lab1 {

namespace {

// The largest entry of row r, or -inf for an empty or fully masked row.
template <class T, class Acc = accum_t<T>>
Acc row_max(const Matrix<T>& x, Eigen::Index r) {
  // BEGIN SOLUTION row_max
  //! Start from -inf (the max of nothing) and keep the larger of it and each entry.
  Acc m = neg_inf<Acc>();
  for (Eigen::Index c = 0; c < x.cols(); ++c) m = course::max(m, acc<Acc>(x(r, c)));
  return m;
  // END SOLUTION
}

// sum_j exp(x[r, j] - m): every term is at most exp(0) = 1, so the sum cannot overflow.
template <class T, class Acc = accum_t<T>>
Acc row_sum_exp(const Matrix<T>& x, Eigen::Index r, Acc m) {
  // BEGIN SOLUTION row_sum_exp
  //! Subtract m before exponentiating; -inf entries contribute exp(-inf) = 0.
  Acc l = 0;
  for (Eigen::Index c = 0; c < x.cols(); ++c) l += course::exp(acc<Acc>(x(r, c)) - m);
  return l;
  // END SOLUTION
}

}  // namespace

template <class T>
Matrix<T> softmax_rows(const Matrix<T>& x) {
  require_no_nan_or_pos_inf<T>(x, "softmax_rows");
  Matrix<T> y(x.rows(), x.cols());
  // BEGIN SOLUTION softmax_rows
  //! For each row: m = row_max, l = row_sum_exp(m), y = exp(x - m) / l.
  //! A fully masked row has m = -inf: x - m would be -inf - (-inf) = NaN, so write zeros.
  using Acc = accum_t<T>;
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const Acc m = row_max(x, r);
    if (is_neg_inf(m)) {
      y.row(r).setConstant(T(0));
      continue;
    }
    const Acc l = row_sum_exp(x, r, m);  // >= 1: the max entry contributes exp(0)
    for (Eigen::Index c = 0; c < x.cols(); ++c)
      y(r, c) = store<T>(course::exp(acc<Acc>(x(r, c)) - m) / l);
  }
  // END SOLUTION
  return y;
}

template <class T>
Vector<accum_t<T>> logsumexp_rows(const Matrix<T>& x) {
  require_no_nan_or_pos_inf<T>(x, "logsumexp_rows");
  Vector<accum_t<T>> lse(x.rows());
  // BEGIN SOLUTION logsumexp_rows
  //! LSE = m + log(sum_j exp(x_j - m)): the shift is added back after the log.
  //! An empty or fully masked row has no terms: its LSE is log(0) = -inf.
  using Acc = accum_t<T>;
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const Acc m = row_max(x, r);
    lse(r) = is_neg_inf(m) ? m : m + course::log(row_sum_exp(x, r, m));
  }
  // END SOLUTION
  return lse;
}

// The four storage types every lab supports.
template Matrix<double> softmax_rows<double>(const Matrix<double>&);
template Matrix<float> softmax_rows<float>(const Matrix<float>&);
template Matrix<bf16> softmax_rows<bf16>(const Matrix<bf16>&);
template Matrix<fp16> softmax_rows<fp16>(const Matrix<fp16>&);
template Vector<double> logsumexp_rows<double>(const Matrix<double>&);
template Vector<float> logsumexp_rows<float>(const Matrix<float>&);
template Vector<float> logsumexp_rows<bf16>(const Matrix<bf16>&);
template Vector<float> logsumexp_rows<fp16>(const Matrix<fp16>&);

}  // namespace course::lab1
