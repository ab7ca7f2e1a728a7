// Lab 3: attention forward on the CPU, one tile of scores at a time. Implements
// include/course/lab3_attention.hpp. Lecture: lectures/03-streaming-attention.md.
//
// This is FlashAttention-1's Algorithm 1 (Dao et al., 2022), written the way lab 4's CUDA kernel
// will be: the outer loop walks query tiles Q_i (one CTA each, in lab 4), the inner loop streams
// the K_j / V_j tiles past them, and each query row carries three running statistics, m, l and
// an unnormalised O, that are rescaled whenever its maximum grows. Line numbers in the comments
// ("line 9") are those of FA1 Algorithm 1.
//
// Two departures from the letter of FA1 Algorithm 1, both taken from FlashAttention-2
// (Dao, 2023, Section 3.1 and its Algorithm 1):
//   * The loops are swapped: FA1's outer loop is over K/V tiles (line 5) and it reads and writes
//     O, l, m in main memory on every step (lines 8 and 12-13). With the query tile outermost the
//     running statistics of a row never leave the "chip" (here: a few small buffers).
//   * FA1 line 12 divides O by l on every step and multiplies the old O by l again on the next.
//     We keep O unnormalised and divide once, at the very end: fewer operations, and no
//     intermediate division to get wrong (dividing without un-dividing is the classic bug).
//
// Storage is T, arithmetic is Acc (accum_t<T> normally; the grader also instantiates
// Acc = CountedFloat to count the multiplications). Memory: the output plus
// O(block_q * d + block_k * d + block_q * block_k), never anything of size Nq x Nk.
#include "course/lab3_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace course::lab3 {

namespace {

using std::size_t;

std::string shape_of(Eigen::Index rows, Eigen::Index cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

// Every check on the arguments, with a message that says which argument and why.
template <class T>
void validate(const Eigen::Ref<const Matrix<T>>& Q, const Eigen::Ref<const Matrix<T>>& K,
              const Eigen::Ref<const Matrix<T>>& V, const AttentionOptions& options,
              const std::string& who) {
  if (Q.cols() != K.cols() || K.cols() != V.cols())
    throw BadInput(who + ": Q, K and V must have the same head dimension d; got Q " +
                   shape_of(Q.rows(), Q.cols()) + ", K " + shape_of(K.rows(), K.cols()) + ", V " +
                   shape_of(V.rows(), V.cols()));
  if (K.rows() != V.rows())
    throw BadInput(who + ": K and V must have one row per key, the same number; got K " +
                   shape_of(K.rows(), K.cols()) + ", V " + shape_of(V.rows(), V.cols()));
  if (Q.cols() < 1) throw BadInput(who + ": the head dimension d must be at least 1; got d = 0");
  require_tile_options(options, who);
  softmax_scale(options.scale, int(Q.cols()), who);  // a scale given must be finite and > 0
  require_finite<T>(Q, who + ": Q");
  require_finite<T>(K, who + ": K");
  require_finite<T>(V, who + ": V");
}

// Line 8: load Q_i (rows q0 .. q0 + rows - 1) into the tile buffer, converted to Acc. The
// softmax scale is folded in here, once per query element, so that the scaled scores
// tau Q_i K_j^T (line 9's product, with the scale that Algorithm 1 leaves out) cost no extra
// multiplication per score.
template <class T, class Acc>
void load_q_tile(const Eigen::Ref<const Matrix<T>>& Q, int q0, int rows, Acc scale, Acc* q) {
  const int d = int(Q.cols());
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < d; ++k) q[size_t(r) * d + k] = scale * acc<Acc>(Q(q0 + r, k));
}

// Line 6: load K_j and V_j (keys k0 .. k0 + cols - 1). K_j is stored transposed, [d, bk], so
// that the score product below runs along contiguous memory; V_j as it is, [cols, d].
template <class T, class Acc>
void load_kv_tile(const Eigen::Ref<const Matrix<T>>& K, const Eigen::Ref<const Matrix<T>>& V,
                  int k0, int cols, int bk, Acc* kt, Acc* v) {
  const int d = int(K.cols());
  for (int c = 0; c < cols; ++c)
    for (int k = 0; k < d; ++k) {
      kt[size_t(k) * bk + c] = acc<Acc>(K(k0 + c, k));
      v[size_t(c) * d + k] = acc<Acc>(V(k0 + c, k));
    }
}

// Line 9: S_ij = Q_i K_j^T (the scale is already in Q_i). s is [rows, bk], row-major.
// Each row of S is built as a sum of rows of K_j^T weighted by the q's: the innermost loop is
// then "s_row[c] += q * kt_row[c]", contiguous and free of reductions, which the compiler
// vectorises. (Lab 4 computes the same tile with one thread per score.)
template <class Acc>
void score_tile(const Acc* q, const Acc* kt, int rows, int cols, int d, int bk, Acc* s) {
  // TODO: score_tile (see the lab README)
  // For every row r of the tile and every key c: s[r * bk + c] = sum_k q[r * d + k] * K_j^T[k, c],
  // where K_j^T[k, c] is kt[k * bk + c]. Start each row of s at zero.
  throw course::NotImplemented("score_tile", "labs/lab3_attention/attention.cpp");
}

// Causal mask on a tile that straddles the diagonal. Query q0 + r sees keys j <= q0 + r + shift
// (shift = Nk - Nq: the bottom-right alignment); every later key of the tile gets -inf, which
// line 10 turns into a weight of exactly 0.
template <class Acc>
void mask_tile(Acc* s, int rows, int cols, int bk, int q0, int k0, int shift) {
  // TODO: mask_tile (see the lab README)
  // Row r of the tile sees the tile's keys k0 .. q0 + r + shift: count them (between 0 and
  // cols) and set the rest of the row to neg_inf<Acc>().
  throw course::NotImplemented("mask_tile", "labs/lab3_attention/attention.cpp");
}

// o_row *= factor (d entries).
template <class Acc>
void rescale_row(Acc* o_row, Acc factor, int d) {
  for (int k = 0; k < d; ++k) o_row[k] = o_row[k] * factor;
}

// o_row += p V_j: the row of P times the tile of V ([cols, d]); an axpy per key, contiguous.
template <class Acc>
void accumulate_pv(Acc* o_row, const Acc* p, const Acc* v, int cols, int d) {
  for (int c = 0; c < cols; ++c) {
    const Acc p_c = p[c];
    const Acc* v_row = v + size_t(c) * d;
    for (int k = 0; k < d; ++k) o_row[k] += p_c * v_row[k];
  }
}

// Lines 10-12 for every row of the tile: fold the tile's scores s ([rows, bk]) into the row's
// running max m, running sum l and unnormalised output o ([rows, d]). s is overwritten by P.
template <class Acc>
void online_softmax_update(Acc* s, const Acc* v, int rows, int cols, int d, int bk, Acc* m,
                           Acc* l, Acc* o) {
  // TODO: online_softmax_update (see the lab README)
  // For each row r:
  //   1. m_new = max(m[r], max of the row's scores)                  (lines 10-11)
  //   2. if m_new is -inf the row has seen no key yet: skip it (exp(-inf - -inf) is NaN)
  //   3. p = exp(s - m_new), in place, and its row sum                (line 10)
  //   4. alpha = exp(m[r] - m_new): l[r] = alpha * l[r] + row sum; m[r] = m_new  (line 11)
  //   5. o_row = alpha * o_row + p V_j (rescale_row, accumulate_pv)  (line 12, no division)
  throw course::NotImplemented("online_softmax_update", "labs/lab3_attention/attention.cpp");
}

// Line 12's division, done once (FA2), and line 13: instead of writing l and m we write their
// combination LSE = m + log(l), the one number the backward pass needs per row.
template <class T, class Acc>
void write_output_rows(const Acc* o, const Acc* m, const Acc* l, int q0, int rows, int d,
                       Eigen::Ref<Matrix<T>> O, accum_t<T>* lse) {
  // TODO: write_output_rows (see the lab README)
  // Row r of the tile is query q0 + r. A row that saw no key (m = -inf) gets O = 0 and
  // LSE = -inf; every other row gets O = o / l (rounded with store<T>) and LSE = m + log(l).
  throw course::NotImplemented("write_output_rows", "labs/lab3_attention/attention.cpp");
}

// One head: Q [Nq, d], K and V [Nk, d]; writes O [Nq, d] and lse [Nq]. The body of lab 4's
// kernel, with the loop over query tiles that the GPU runs as a grid of CTAs.
template <class T, class Acc>
void attention_head(const Eigen::Ref<const Matrix<T>>& Q, const Eigen::Ref<const Matrix<T>>& K,
                    const Eigen::Ref<const Matrix<T>>& V, const AttentionOptions& options,
                    Eigen::Ref<Matrix<T>> O, accum_t<T>* lse, const std::string& who) {
  validate<T>(Q, K, V, options, who);
  const int Nq = int(Q.rows()), Nk = int(K.rows()), d = int(Q.cols());
  // A tile larger than the sequence would only waste memory.
  const int bq = std::min(options.block_q, std::max(Nq, 1));
  const int bk = std::min(options.block_k, std::max(Nk, 1));
  // TODO: attention_forward (see the lab README)
  // The scale tau: course::softmax_scale(options.scale, d, who), options.scale if given, else
  // 1 / sqrt(d).
  // The working set (FA1: on-chip SRAM), allocated once: Q_i [bq, d], K_j^T [d, bk],
  // V_j [bk, d], the score tile S_ij [bq, bk], and per query row of the tile: O (unnormalised,
  // [bq, d]), m and l. Nothing may be Nq x Nk, nor bq x Nk.
  // Then for each query tile q0 = 0, bq, 2 bq, ... (rows = min(bq, Nq - q0)):
  //   load Q_i; set O = 0, m = -inf, l = 0 (line 2);
  //   for each key tile k0 = 0, bk, ... below kv_end (the last one may be partial):
  //     load K_j, V_j; score_tile; mask_tile if causal and the tile crosses the diagonal;
  //     online_softmax_update.
  //   write_output_rows.
  // Causal: query i sees keys j <= i + (Nk - Nq). The tile's last row is q0 + rows - 1, so no
  // row of the tile sees a key at or after kv_end = q0 + rows + Nk - Nq (clamped to [0, Nk]):
  // stop the key loop there (skip, do not mask). A tile needs the mask only if its last key is
  // beyond what the tile's *first* row sees.
  throw course::NotImplemented("attention_forward", "labs/lab3_attention/attention.cpp");
}

}  // namespace

template <class T, class Acc>
AttentionOutput<T> attention_forward(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                                     const AttentionOptions& options) {
  AttentionOutput<T> out;
  out.O.resize(Q.rows(), Q.cols());
  out.lse.resize(Q.rows());
  attention_head<T, Acc>(Q, K, V, options, out.O, out.lse.data(), "attention_forward");
  return out;
}

template <class T>
BatchedOutput<T> attention_forward_batched(const Tensor4<T>& Q, const Tensor4<T>& K,
                                           const Tensor4<T>& V, const AttentionOptions& options) {
  const std::string who = "attention_forward_batched";
  auto describe = [](const Tensor4<T>& x) {
    return "[" + std::to_string(x.B) + ", " + std::to_string(x.H) + ", " + std::to_string(x.N) +
           ", " + std::to_string(x.d) + "]";
  };
  for (const Tensor4<T>* x : {&Q, &K, &V})
    if (x->B < 0 || x->H < 0 || x->N < 0 || x->d < 0 ||
        x->data.size() != size_t(x->B) * x->H * x->N * x->d)
      throw BadInput(who + ": a tensor of shape " + describe(*x) + " holds " +
                     std::to_string(x->data.size()) + " elements");
  if (Q.B != K.B || Q.B != V.B || Q.H != K.H || Q.H != V.H)
    throw BadInput(who + ": Q, K and V must have the same batch and head counts; got Q " +
                   describe(Q) + ", K " + describe(K) + ", V " + describe(V));
  BatchedOutput<T> out{Tensor4<T>(Q.B, Q.H, Q.N, Q.d),
                       std::vector<accum_t<T>>(size_t(Q.B) * Q.H * Q.N)};
  // TODO: attention_forward_batched (see the lab README)
  // Every (b, h) is an independent head: Q.head(b, h) etc. are [N, d] views (no copy); the
  // head's LSE goes to out.lse[(b * H + h) * Nq ...].
  throw course::NotImplemented("attention_forward_batched", "labs/lab3_attention/attention.cpp");
  return out;
}

// The four storage types, and fp32 with the grader's multiplication-counting accumulator.
#define COURSE_LAB3_INSTANTIATE(T, Acc)                                                      \
  template AttentionOutput<T> attention_forward<T, Acc>(const Matrix<T>&, const Matrix<T>&, \
                                                        const Matrix<T>&, const AttentionOptions&);
COURSE_LAB3_INSTANTIATE(double, double)
COURSE_LAB3_INSTANTIATE(float, float)
COURSE_LAB3_INSTANTIATE(bf16, float)
COURSE_LAB3_INSTANTIATE(fp16, float)
COURSE_LAB3_INSTANTIATE(float, CountedFloat)
#undef COURSE_LAB3_INSTANTIATE

template BatchedOutput<double> attention_forward_batched<double>(
    const Tensor4<double>&, const Tensor4<double>&, const Tensor4<double>&, const AttentionOptions&);
template BatchedOutput<float> attention_forward_batched<float>(
    const Tensor4<float>&, const Tensor4<float>&, const Tensor4<float>&, const AttentionOptions&);
template BatchedOutput<bf16> attention_forward_batched<bf16>(
    const Tensor4<bf16>&, const Tensor4<bf16>&, const Tensor4<bf16>&, const AttentionOptions&);
template BatchedOutput<fp16> attention_forward_batched<fp16>(
    const Tensor4<fp16>&, const Tensor4<fp16>&, const Tensor4<fp16>&, const AttentionOptions&);

}  // namespace course::lab3
