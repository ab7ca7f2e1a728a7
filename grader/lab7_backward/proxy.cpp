// The grader's side of lab 7's API: each call is sent to the lab process (the student's code,
// grader/isolation/), and its result read back. The grader itself never links lab code.
//
// attention_backward<float, CountedFloat> runs in the lab process too; the multiplications and
// exponentials it counted there come back with the reply and are added to this process's
// counters, so that a check reads CountedFloat's counts as if the code had run here. The heap
// peak of each call comes back the same way, for grading::HeapMeter (common/remote_heap_meter.cpp).
#include "course/lab7_backward.hpp"
#include "lab_process.hpp"
#include "remote_heap_meter.hpp"
#include "tensors.hpp"
#include "tile_options.hpp"

namespace course::lab7 {

template <class T, class Acc>
Gradients<T> attention_backward(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                                const Matrix<T>& O, const Matrix<T>& dO,
                                const Vector<accum_t<T>>& lse, const BackwardOptions& options) {
  constexpr bool counted = std::is_same_v<Acc, CountedFloat>;
  isolation::Packet args;
  for (const Matrix<T>* m : {&Q, &K, &V, &O, &dO}) isolation::put_matrix<T>(args, *m);
  isolation::put_vector(args, lse);
  isolation::put_tile_options(args, options);
  auto reply = isolation::lab().call(
      isolation::call_name<T>(counted ? "attention_backward_counted" : "attention_backward"), args);
  if (counted) {
    CountedFloat::multiplications() += reply.counters["multiplications"];
    CountedFloat::exponentials() += reply.counters["exponentials"];
  }
  grading::record_lab_heap_peak(reply);
  Gradients<T> grads;
  grads.dQ = isolation::get_result_matrix<T>(reply.results, "dQ", Q.rows(), Q.cols());
  grads.dK = isolation::get_result_matrix<T>(reply.results, "dK", K.rows(), K.cols());
  grads.dV = isolation::get_result_matrix<T>(reply.results, "dV", V.rows(), V.cols());
  return grads;
}

#define COURSE_LAB7_PROXY(T, Acc)                                                              \
  template Gradients<T> attention_backward<T, Acc>(const Matrix<T>&, const Matrix<T>&,        \
                                                   const Matrix<T>&, const Matrix<T>&,        \
                                                   const Matrix<T>&, const Vector<accum_t<T>>&, \
                                                   const BackwardOptions&);
COURSE_LAB7_PROXY(double, double)
COURSE_LAB7_PROXY(float, float)
COURSE_LAB7_PROXY(bf16, float)
COURSE_LAB7_PROXY(fp16, float)
COURSE_LAB7_PROXY(float, CountedFloat)
#undef COURSE_LAB7_PROXY

}  // namespace course::lab7
