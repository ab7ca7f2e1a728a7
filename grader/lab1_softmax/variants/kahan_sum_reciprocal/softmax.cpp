// Lab 1, correct variant "kahan_sum_reciprocal": the sum of exponentials with Kahan's
// compensated summation (error independent of the row length), and the division replaced by a
// multiplication with 1/l computed once per row (as GPU kernels do: one division per row).
//
// Storage is T, arithmetic is Acc = accum_t<T> (fp32 for bf16/fp16): read each element with
// acc<Acc>(x), round once with store<T>(a) when writing. Lecture: lectures/01-safe-softmax.md.
#include "course/lab1_softmax.hpp"

namespace course::lab1 {

namespace {

// The largest entry of row r, or -inf for an empty or fully masked row.
template <class T, class Acc = accum_t<T>>
Acc row_max(const Matrix<T>& x, Eigen::Index r) {
  Acc m = neg_inf<Acc>();
  for (Eigen::Index c = 0; c < x.cols(); ++c) m = course::max(m, acc<Acc>(x(r, c)));
  return m;
}

// sum_j exp(x[r, j] - m): every term is at most exp(0) = 1, so the sum cannot overflow.
template <class T, class Acc = accum_t<T>>
Acc row_sum_exp(const Matrix<T>& x, Eigen::Index r, Acc m) {
  Acc l = 0, lost = 0;  // lost: the low-order part of l that the last addition dropped
  for (Eigen::Index c = 0; c < x.cols(); ++c) {
    const Acc term = course::exp(acc<Acc>(x(r, c)) - m) - lost;
    const Acc sum = l + term;
    lost = (sum - l) - term;
    l = sum;
  }
  return l;
}

}  // namespace

template <class T>
Matrix<T> softmax_rows(const Matrix<T>& x) {
  require_no_nan_or_pos_inf<T>(x, "softmax_rows");
  Matrix<T> y(x.rows(), x.cols());
  using Acc = accum_t<T>;
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const Acc m = row_max(x, r);
    if (is_neg_inf(m)) {
      y.row(r).setConstant(T(0));
      continue;
    }
    const Acc inv_l = Acc(1) / row_sum_exp(x, r, m);  // l >= 1: the max contributes exp(0)
    for (Eigen::Index c = 0; c < x.cols(); ++c)
      y(r, c) = store<T>(course::exp(acc<Acc>(x(r, c)) - m) * inv_l);
  }
  return y;
}

template <class T>
Vector<accum_t<T>> logsumexp_rows(const Matrix<T>& x) {
  require_no_nan_or_pos_inf<T>(x, "logsumexp_rows");
  Vector<accum_t<T>> lse(x.rows());
  using Acc = accum_t<T>;
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const Acc m = row_max(x, r);
    lse(r) = is_neg_inf(m) ? m : m + course::log(row_sum_exp(x, r, m));
  }
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
