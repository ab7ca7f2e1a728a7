// Lab 2 API: block statistics, the exact two-block combine, and a streaming softmax.
//
// Implemented by labs/lab2_combine/combine.cpp (you) and solutions/lab2_combine/combine.cpp.
#pragma once

#include "course/cpu.hpp"

namespace course::lab2 {

// What a block of scores x_1..x_n contributes to a softmax denominator:
//   m = max_j x_j      and      l = sum_j exp(x_j - m).
// The block's log-sum-exp is m + log(l). FA1 paper, Algorithm 1: m_ij and l_ij (line 10).
template <class Acc>
struct BlockStats {
  Acc m;
  Acc l;
};

// The statistics of a block with no (unmasked) entries: the identity element of combine.
template <class Acc>
BlockStats<Acc> empty_stats();

// Statistics of one block of scores stored as T, computed in Acc. Entries may be -inf (masked
// keys); a block whose entries are all -inf (or that is empty) gives empty_stats().
// Acc is accum_t<T> normally; the grader also uses CountedFloat to count exponentials, so use
// acc<Acc>(x) and course::exp/log/max, as in lab 3.
template <class T, class Acc = accum_t<T>>
BlockStats<Acc> block_stats(const T* x, int n);

// The statistics of the concatenation [a, b], exactly: FA1 Algorithm 1, line 11.
// Must be commutative, associative, have empty_stats() as identity, and never produce NaN
// (in particular not from combining two empty blocks).
template <class Acc>
BlockStats<Acc> combine(BlockStats<Acc> a, BlockStats<Acc> b);

// log sum exp of the block: m + log(l); -inf for an empty block.
template <class Acc>
Acc lse_of(BlockStats<Acc> s);

// Softmax of every row of x in two streaming passes over blocks of `block` columns:
// pass 1 folds block_stats<T, Acc> of each block into running statistics with combine, pass 2
// writes exp(x - m) / l. The last block may be partial. Also returns each row's log-sum-exp.
// All arithmetic is in Acc: accum_t<T> normally; the grader also instantiates
// softmax_streaming<float, CountedFloat> and counts its exponentials, which grow with the number
// of blocks (each combine rescales) in an implementation that really streams.
// Throws BadInput if block < 1 or x holds NaN or +inf.
template <class T>
struct StreamingSoftmax {
  Matrix<T> y;
  Vector<accum_t<T>> lse;
};
template <class T, class Acc = accum_t<T>>
StreamingSoftmax<T> softmax_streaming(const Matrix<T>& x, int block);

}  // namespace course::lab2
