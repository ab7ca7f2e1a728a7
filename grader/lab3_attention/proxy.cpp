// The grader's side of lab 3's API: each call is sent to the lab process (the student's code,
// grader/isolation/), and its result read back. The grader itself never links lab code.
//
// attention_forward<float, CountedFloat> runs in the lab process too; the multiplications and
// exponentials it counted there come back with the reply and are added to this process's
// counters, so that a check reads CountedFloat's counts as if the code had run here. The heap peak of the
// call comes back the same way, for grading::HeapMeter (common/remote_heap_meter.cpp).
#include "course/lab3_attention.hpp"
#include "lab_process.hpp"
#include "remote_heap_meter.hpp"
#include "tensors.hpp"
#include "wire_lab3.hpp"

namespace course::lab3 {

template <class T, class Acc>
AttentionOutput<T> attention_forward(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                                     const AttentionOptions& options) {
  constexpr bool counted = std::is_same_v<Acc, CountedFloat>;
  isolation::Packet args;
  isolation::put_matrix<T>(args, Q);
  isolation::put_matrix<T>(args, K);
  isolation::put_matrix<T>(args, V);
  isolation::put_tile_options(args, options);
  auto reply = isolation::lab().call(
      isolation::call_name<T>(counted ? "attention_forward_counted" : "attention_forward"), args);
  if (counted) {
    CountedFloat::multiplications() += reply.counters["multiplications"];
    CountedFloat::exponentials() += reply.counters["exponentials"];
  }
  grading::record_lab_heap_peak(reply);
  AttentionOutput<T> out;
  out.O = isolation::get_result_matrix<T>(reply.results, "O", Q.rows(), V.cols());
  out.lse = isolation::get_result_vector<accum_t<T>>(reply.results, "lse", Q.rows());
  return out;
}

template <class T>
BatchedOutput<T> attention_forward_batched(const Tensor4<T>& Q, const Tensor4<T>& K,
                                           const Tensor4<T>& V, const AttentionOptions& options) {
  isolation::Packet args;
  isolation::put_tensor4(args, Q);
  isolation::put_tensor4(args, K);
  isolation::put_tensor4(args, V);
  isolation::put_tile_options(args, options);
  auto reply = isolation::lab().call(isolation::call_name<T>("attention_forward_batched"), args);
  grading::record_lab_heap_peak(reply);
  BatchedOutput<T> out;
  out.O = isolation::get_tensor4<T>(reply.results);
  out.lse = isolation::get_values<accum_t<T>>(reply.results);
  // Checked before any check reads a head of O (its dimensions and its data must agree too).
  const std::size_t heads = std::size_t(Q.B) * std::size_t(Q.H);
  isolation::expect_result_shape("O (B H, N)", std::int64_t(out.O.B) * out.O.H, out.O.N, std::int64_t(heads), Q.N);
  isolation::expect_result_shape("O (heads, d)", out.O.H, out.O.d, Q.H, V.d);
  isolation::expect_result_shape("O's data (elements, 1)", std::int64_t(out.O.data.size()), 1,
                                 std::int64_t(heads * std::size_t(Q.N) * std::size_t(V.d)), 1);
  isolation::expect_result_shape("lse (elements, 1)", std::int64_t(out.lse.size()), 1,
                                 std::int64_t(heads * std::size_t(Q.N)), 1);
  return out;
}

#define COURSE_LAB3_PROXY(T, Acc)                                                            \
  template AttentionOutput<T> attention_forward<T, Acc>(const Matrix<T>&, const Matrix<T>&, \
                                                        const Matrix<T>&, const AttentionOptions&);
COURSE_LAB3_PROXY(double, double)
COURSE_LAB3_PROXY(float, float)
COURSE_LAB3_PROXY(bf16, float)
COURSE_LAB3_PROXY(fp16, float)
COURSE_LAB3_PROXY(float, CountedFloat)
#undef COURSE_LAB3_PROXY

template BatchedOutput<double> attention_forward_batched<double>(
    const Tensor4<double>&, const Tensor4<double>&, const Tensor4<double>&, const AttentionOptions&);
template BatchedOutput<float> attention_forward_batched<float>(
    const Tensor4<float>&, const Tensor4<float>&, const Tensor4<float>&, const AttentionOptions&);
template BatchedOutput<bf16> attention_forward_batched<bf16>(
    const Tensor4<bf16>&, const Tensor4<bf16>&, const Tensor4<bf16>&, const AttentionOptions&);
template BatchedOutput<fp16> attention_forward_batched<fp16>(
    const Tensor4<fp16>&, const Tensor4<fp16>&, const Tensor4<fp16>&, const AttentionOptions&);

}  // namespace course::lab3
