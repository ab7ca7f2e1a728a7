// Lab 2: block statistics, the exact two-block combine, and a two-pass streaming softmax.
// Implements include/course/lab2_combine.hpp. Lecture: lectures/02-combining-blocks.md.
//
// A block of scores is summarised by (m, l): its max and sum_j exp(x_j - m). Two summaries
// combine exactly (FA1 Algorithm 1, line 11), so a softmax denominator can be built block by
// block, in any order, without ever seeing the whole row at once.
#include <algorithm>

#include "course/lab2_combine.hpp"

namespace course::lab2 {

template <class Acc>
BlockStats<Acc> empty_stats() {
  // TODO: empty_stats (see the lab README)
  // No entries: the max of nothing is -inf and the sum of nothing is 0.
  throw course::NotImplemented("empty_stats", "labs/lab2_combine/combine.cpp");
}

template <class T, class Acc>
BlockStats<Acc> block_stats(const T* x, int n) {
  // TODO: block_stats (see the lab README)
  // FA1 Algorithm 1, line 10: m~ = rowmax(S), l~ = rowsum(exp(S - m~)), in Acc.
  // A block with no finite entry is the empty block.
  throw course::NotImplemented("block_stats", "labs/lab2_combine/combine.cpp");
}

template <class Acc>
BlockStats<Acc> combine(BlockStats<Acc> a, BlockStats<Acc> b) {
  // TODO: combine (see the lab README)
  // FA1 Algorithm 1, line 11: m = max(m_a, m_b), l = e^(m_a - m) l_a + e^(m_b - m) l_b.
  // Both empty means m = -inf, and m_a - m = -inf - (-inf) = NaN: return the empty block.
  throw course::NotImplemented("combine", "labs/lab2_combine/combine.cpp");
}

template <class Acc>
Acc lse_of(BlockStats<Acc> s) {
  // TODO: lse_of (see the lab README)
  // log sum exp = m + log(l), and -inf (log 0) for the empty block.
  throw course::NotImplemented("lse_of", "labs/lab2_combine/combine.cpp");
}

template <class T, class Acc>
StreamingSoftmax<T> softmax_streaming(const Matrix<T>& x, int block) {
  if (block < 1) throw BadInput("softmax_streaming: block must be at least 1, got " + std::to_string(block));
  require_no_nan_or_pos_inf<T>(x, "softmax_streaming");
  StreamingSoftmax<T> out{Matrix<T>(x.rows(), x.cols()), Vector<accum_t<T>>(x.rows())};
  // TODO: softmax_streaming (see the lab README)
  // Pass 1: fold block_stats<T, Acc> of each block (the last one may be shorter) into
  // running stats with combine. Pass 2: the row's (m, l) are now final; write
  // exp(x - m) / l, or 0 for an empty row. The LSE is stored with store<accum_t<T>>(...).
  throw course::NotImplemented("softmax_streaming", "labs/lab2_combine/combine.cpp");
  return out;
}

// Instantiations: statistics live in the accumulation types, blocks in the storage types.
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
// fp32 with the grader's exponential-counting accumulator (the streaming check).
template BlockStats<CountedFloat> block_stats<float, CountedFloat>(const float*, int);
template StreamingSoftmax<float> softmax_streaming<float, CountedFloat>(const Matrix<float>&, int);

}  // namespace course::lab2
