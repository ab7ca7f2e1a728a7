// what: answers every call with a result of the wrong shape (an empty matrix, a vector of one element), which the grader must check before it reads them
// expect: no points
// message: shape
// --- whole
#include "course/lab1_softmax.hpp"
namespace course::lab1 {
template <class T>
Matrix<T> softmax_rows(const Matrix<T>& x) {
  return Matrix<T>::Zero(x.rows() > 1 ? 1 : 0, 0);
}
template <class T>
Vector<accum_t<T>> logsumexp_rows(const Matrix<T>&) {
  return Vector<accum_t<T>>::Zero(1);
}
template Matrix<double> softmax_rows<double>(const Matrix<double>&);
template Matrix<float> softmax_rows<float>(const Matrix<float>&);
template Matrix<bf16> softmax_rows<bf16>(const Matrix<bf16>&);
template Matrix<fp16> softmax_rows<fp16>(const Matrix<fp16>&);
template Vector<accum_t<double>> logsumexp_rows<double>(const Matrix<double>&);
template Vector<accum_t<float>> logsumexp_rows<float>(const Matrix<float>&);
template Vector<accum_t<bf16>> logsumexp_rows<bf16>(const Matrix<bf16>&);
template Vector<accum_t<fp16>> logsumexp_rows<fp16>(const Matrix<fp16>&);
}  // namespace course::lab1
