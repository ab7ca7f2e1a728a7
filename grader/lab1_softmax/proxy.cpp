// The grader's side of lab 1's API: each call is sent to the lab process (the student's code,
// grader/isolation/), and its result read back. The grader itself never links lab code.
#include "course/lab1_softmax.hpp"
#include "lab_process.hpp"
#include "tensors.hpp"

namespace course::lab1 {

template <class T>
Matrix<T> softmax_rows(const Matrix<T>& x) {
  isolation::Packet args;
  isolation::put_matrix<T>(args, x);
  auto reply = isolation::lab().call(isolation::call_name<T>("softmax_rows"), args);
  return isolation::get_result_matrix<T>(reply.results, "softmax_rows", x.rows(), x.cols());
}

template <class T>
Vector<accum_t<T>> logsumexp_rows(const Matrix<T>& x) {
  isolation::Packet args;
  isolation::put_matrix<T>(args, x);
  auto reply = isolation::lab().call(isolation::call_name<T>("logsumexp_rows"), args);
  return isolation::get_result_vector<accum_t<T>>(reply.results, "logsumexp_rows", x.rows());
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
