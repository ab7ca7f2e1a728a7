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
  // BEGIN SOLUTION empty_stats
  //! No entries: the max of nothing is -inf and the sum of nothing is 0.
  return {neg_inf<Acc>(), Acc(0)};
  // END SOLUTION
}

template <class T, class Acc>
BlockStats<Acc> block_stats(const T* x, int n) {
  // BEGIN SOLUTION block_stats
  //! FA1 Algorithm 1, line 10: m~ = rowmax(S), l~ = rowsum(exp(S - m~)), in Acc.
  //! A block with no finite entry is the empty block.
  Acc m = neg_inf<Acc>();
  for (int j = 0; j < n; ++j) m = course::max(m, acc<Acc>(x[j]));
  if (is_neg_inf(m)) return empty_stats<Acc>();
  Acc l = 0;
  for (int j = 0; j < n; ++j) l += course::exp(acc<Acc>(x[j]) - m);
  return {m, l};
  // END SOLUTION
}

template <class Acc>
BlockStats<Acc> combine(BlockStats<Acc> a, BlockStats<Acc> b) {
  // BEGIN SOLUTION combine
  //! FA1 Algorithm 1, line 11: m = max(m_a, m_b), l = e^(m_a - m) l_a + e^(m_b - m) l_b.
  //! Both empty means m = -inf, and m_a - m = -inf - (-inf) = NaN: return the empty block.
  const Acc m = course::max(a.m, b.m);
  if (is_neg_inf(m)) return empty_stats<Acc>();
  // With m finite, an empty side contributes exp(-inf) * 0 = 0, as it should.
  const Acc l = a.l * course::exp(a.m - m) + b.l * course::exp(b.m - m);
  return {m, l};
  // END SOLUTION
}

template <class Acc>
Acc lse_of(BlockStats<Acc> s) {
  // BEGIN SOLUTION lse_of
  //! log sum exp = m + log(l), and -inf (log 0) for the empty block.
  return is_neg_inf(s.m) ? s.m : s.m + course::log(s.l);
  // END SOLUTION
}

template <class T, class Acc>
StreamingSoftmax<T> softmax_streaming(const Matrix<T>& x, int block) {
  if (block < 1) throw BadInput("softmax_streaming: block must be at least 1, got " + std::to_string(block));
  require_no_nan_or_pos_inf<T>(x, "softmax_streaming");
  StreamingSoftmax<T> out{Matrix<T>(x.rows(), x.cols()), Vector<accum_t<T>>(x.rows())};
  // BEGIN SOLUTION softmax_streaming
  //! Pass 1: fold block_stats<T, Acc> of each block (the last one may be shorter) into
  //! running stats with combine. Pass 2: the row's (m, l) are now final; write
  //! exp(x - m) / l, or 0 for an empty row. The LSE is stored with store<accum_t<T>>(...).
  const int cols = int(x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    BlockStats<Acc> row = empty_stats<Acc>();
    for (int start = 0; start < cols; start += block) {
      const int width = std::min(block, cols - start);
      row = combine(row, block_stats<T, Acc>(&x(r, start), width));
    }
    out.lse(r) = store<accum_t<T>>(lse_of(row));
    for (int c = 0; c < cols; ++c)
      out.y(r, c) = is_neg_inf(row.m) ? T(0) : store<T>(course::exp(acc<Acc>(x(r, c)) - row.m) / row.l);
  }
  // END SOLUTION
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
