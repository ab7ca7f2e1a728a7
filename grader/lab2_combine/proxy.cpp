// The grader's side of lab 2's API: each call is sent to the lab process (the student's code,
// grader/isolation/), and its result read back. The grader itself never links lab code.
//
// softmax_streaming<float, CountedFloat> runs in the lab process too; the exponentials it
// counted there come back with the reply and are added to this process's counters, so that a
// check reads CountedFloat's counts as if the code had run here (as lab 3's proxy does).
#include <string>
#include <type_traits>

#include "course/lab2_combine.hpp"
#include "lab_process.hpp"
#include "tensors.hpp"

namespace course::lab2 {

namespace {
template <class Acc>
std::string acc_name() {
  return std::is_same_v<Acc, double> ? "fp64" : "fp32";
}
template <class Acc>
BlockStats<Acc> get_stats(isolation::Packet& p) {
  const Acc m = p.get<Acc>();
  return {m, p.get<Acc>()};
}
template <class Acc>
void put_stats(isolation::Packet& p, BlockStats<Acc> s) {
  p.put(s.m);
  p.put(s.l);
}
}  // namespace

template <class Acc>
BlockStats<Acc> empty_stats() {
  auto reply = isolation::lab().call("empty_stats/" + acc_name<Acc>(), {});
  return get_stats<Acc>(reply.results);
}

template <class T, class Acc>
BlockStats<Acc> block_stats(const T* x, int n) {
  static_assert(std::is_same_v<Acc, accum_t<T>>, "the lab process serves block_stats in accum_t<T> only");
  isolation::Packet args;
  args.put<std::int64_t>(n);
  args.put_bytes(x, sizeof(T) * std::size_t(n < 0 ? 0 : n));
  auto reply = isolation::lab().call(isolation::call_name<T>("block_stats"), args);
  return get_stats<accum_t<T>>(reply.results);
}

template <class Acc>
BlockStats<Acc> combine(BlockStats<Acc> a, BlockStats<Acc> b) {
  isolation::Packet args;
  put_stats(args, a);
  put_stats(args, b);
  auto reply = isolation::lab().call("combine/" + acc_name<Acc>(), args);
  return get_stats<Acc>(reply.results);
}

template <class Acc>
Acc lse_of(BlockStats<Acc> s) {
  isolation::Packet args;
  put_stats(args, s);
  auto reply = isolation::lab().call("lse_of/" + acc_name<Acc>(), args);
  return reply.results.template get<Acc>();
}

template <class T, class Acc>
StreamingSoftmax<T> softmax_streaming(const Matrix<T>& x, int block) {
  constexpr bool counted = std::is_same_v<Acc, CountedFloat>;
  isolation::Packet args;
  isolation::put_matrix<T>(args, x);
  args.put<std::int64_t>(block);
  auto reply = isolation::lab().call(
      isolation::call_name<T>(counted ? "softmax_streaming_counted" : "softmax_streaming"), args);
  if (counted) {
    CountedFloat::multiplications() += reply.counters["multiplications"];
    CountedFloat::exponentials() += reply.counters["exponentials"];
  }
  StreamingSoftmax<T> out;
  out.y = isolation::get_result_matrix<T>(reply.results, "y", x.rows(), x.cols());
  out.lse = isolation::get_result_vector<accum_t<T>>(reply.results, "lse", x.rows());
  return out;
}

template BlockStats<float> empty_stats<float>();
template BlockStats<double> empty_stats<double>();
template BlockStats<double> block_stats<double, double>(const double*, int);
template BlockStats<float> block_stats<float, float>(const float*, int);
template BlockStats<float> block_stats<bf16, float>(const bf16*, int);
template BlockStats<float> block_stats<fp16, float>(const fp16*, int);
template BlockStats<float> combine<float>(BlockStats<float>, BlockStats<float>);
template BlockStats<double> combine<double>(BlockStats<double>, BlockStats<double>);
template float lse_of<float>(BlockStats<float>);
template double lse_of<double>(BlockStats<double>);
template StreamingSoftmax<double> softmax_streaming<double, double>(const Matrix<double>&, int);
template StreamingSoftmax<float> softmax_streaming<float, float>(const Matrix<float>&, int);
template StreamingSoftmax<bf16> softmax_streaming<bf16, float>(const Matrix<bf16>&, int);
template StreamingSoftmax<fp16> softmax_streaming<fp16, float>(const Matrix<fp16>&, int);
template StreamingSoftmax<float> softmax_streaming<float, CountedFloat>(const Matrix<float>&, int);

}  // namespace course::lab2
