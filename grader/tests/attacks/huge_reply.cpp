// what: returns a softmax 256 times taller than its input (200 MB for the widest input), so that the trusted grader would have to read and hold it
// expect: no points
// message: over the limit of
// --- whole
#include "course/lab1_softmax.hpp"
namespace course::lab1 {
template <class T>
Matrix<T> softmax_rows(const Matrix<T>& x) {
  return Matrix<T>::Zero(x.rows() * 256, x.cols());
}
template <class T>
Vector<accum_t<T>> logsumexp_rows(const Matrix<T>& x) {
  return Vector<accum_t<T>>::Zero(x.rows() * 256 * x.cols());
}
template Matrix<double> softmax_rows<double>(const Matrix<double>&);
template Matrix<float> softmax_rows<float>(const Matrix<float>&);
template Matrix<bf16> softmax_rows<bf16>(const Matrix<bf16>&);
template Matrix<fp16> softmax_rows<fp16>(const Matrix<fp16>&);
template Vector<double> logsumexp_rows<double>(const Matrix<double>&);
template Vector<float> logsumexp_rows<float>(const Matrix<float>&);
template Vector<float> logsumexp_rows<bf16>(const Matrix<bf16>&);
template Vector<float> logsumexp_rows<fp16>(const Matrix<fp16>&);
}  // namespace course::lab1
