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
  // BEGIN SOLUTION score_tile
  //! For every row r of the tile and every key c: s[r * bk + c] = sum_k q[r * d + k] * K_j^T[k, c],
  //! where K_j^T[k, c] is kt[k * bk + c]. Start each row of s at zero.
  for (int r = 0; r < rows; ++r) {
    Acc* s_row = s + size_t(r) * bk;
    std::fill(s_row, s_row + cols, Acc(0));
    for (int k = 0; k < d; ++k) {
      const Acc q_rk = q[size_t(r) * d + k];
      const Acc* kt_row = kt + size_t(k) * bk;
      for (int c = 0; c < cols; ++c) s_row[c] += q_rk * kt_row[c];
    }
  }
  // END SOLUTION
}

// Causal mask on a tile that straddles the diagonal. Query q0 + r sees keys j <= q0 + r + shift
// (shift = Nk - Nq: the bottom-right alignment); every later key of the tile gets -inf, which
// line 10 turns into a weight of exactly 0.
template <class Acc>
void mask_tile(Acc* s, int rows, int cols, int bk, int q0, int k0, int shift) {
  // BEGIN SOLUTION mask_tile
  //! Row r of the tile sees the tile's keys k0 .. q0 + r + shift: count them (between 0 and
  //! cols) and set the rest of the row to neg_inf<Acc>().
  for (int r = 0; r < rows; ++r) {
    const int visible = std::clamp(q0 + r + shift - k0 + 1, 0, cols);
    std::fill(s + size_t(r) * bk + visible, s + size_t(r) * bk + cols, neg_inf<Acc>());
  }
  // END SOLUTION
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
  // BEGIN SOLUTION online_softmax_update
  //! For each row r:
  //!   1. m_new = max(m[r], max of the row's scores)                  (lines 10-11)
  //!   2. if m_new is -inf the row has seen no key yet: skip it (exp(-inf - -inf) is NaN)
  //!   3. p = exp(s - m_new), in place, and its row sum                (line 10)
  //!   4. alpha = exp(m[r] - m_new): l[r] = alpha * l[r] + row sum; m[r] = m_new  (line 11)
  //!   5. o_row = alpha * o_row + p V_j (rescale_row, accumulate_pv)  (line 12, no division)
  for (int r = 0; r < rows; ++r) {
    Acc* p = s + size_t(r) * bk;
    Acc* o_row = o + size_t(r) * d;
    // Lines 10-11: the tile's row max m~_ij and the new running max.
    Acc m_tile = neg_inf<Acc>();
    for (int c = 0; c < cols; ++c) m_tile = course::max(m_tile, p[c]);
    const Acc m_new = course::max(m[r], m_tile);
    if (is_neg_inf(m_new)) continue;  // no key seen yet: keep m = -inf, l = 0, O = 0
    // Line 10: P~_ij = exp(S_ij - m) and l~_ij = rowsum(P~_ij). FA2 measures P from m_new
    // directly, so that P needs no second rescaling by exp(m~_ij - m_new) as in lines 11-12.
    Acc row_sum = 0;
    for (int c = 0; c < cols; ++c) {
      p[c] = course::exp(p[c] - m_new);
      row_sum += p[c];
    }
    // Line 11: l and O were measured from the old max; alpha moves them to m_new. When the
    // old max was -inf (first keys of this row) alpha is exp(-inf) = 0 and so are l and O.
    const Acc alpha = course::exp(m[r] - m_new);
    l[r] = alpha * l[r] + row_sum;
    m[r] = m_new;
    // Line 12 without FA1's diag(l_new)^-1: O stays unnormalised until the end.
    rescale_row(o_row, alpha, d);
    accumulate_pv(o_row, p, v, cols, d);
  }
  // END SOLUTION
}

// Line 12's division, done once (FA2), and line 13: instead of writing l and m we write their
// combination LSE = m + log(l), the one number the backward pass needs per row.
template <class T, class Acc>
void write_output_rows(const Acc* o, const Acc* m, const Acc* l, int q0, int rows, int d,
                       Eigen::Ref<Matrix<T>> O, accum_t<T>* lse) {
  // BEGIN SOLUTION write_output_rows
  //! Row r of the tile is query q0 + r. A row that saw no key (m = -inf) gets O = 0 and
  //! LSE = -inf; every other row gets O = o / l (rounded with store<T>) and LSE = m + log(l).
  for (int r = 0; r < rows; ++r) {
    if (is_neg_inf(m[r])) {
      O.row(q0 + r).setZero();
      lse[q0 + r] = -std::numeric_limits<accum_t<T>>::infinity();
      continue;
    }
    const Acc inv_l = Acc(1) / l[r];
    for (int k = 0; k < d; ++k) O(q0 + r, k) = store<T>(o[size_t(r) * d + k] * inv_l);
    lse[q0 + r] = store<accum_t<T>>(m[r] + course::log(l[r]));
  }
  // END SOLUTION
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
  // BEGIN SOLUTION attention_forward
  //! The scale tau: course::softmax_scale(options.scale, d, who), options.scale if given, else
  //! 1 / sqrt(d).
  //! The working set (FA1: on-chip SRAM), allocated once: Q_i [bq, d], K_j^T [d, bk],
  //! V_j [bk, d], the score tile S_ij [bq, bk], and per query row of the tile: O (unnormalised,
  //! [bq, d]), m and l. Nothing may be Nq x Nk, nor bq x Nk.
  //! Then for each query tile q0 = 0, bq, 2 bq, ... (rows = min(bq, Nq - q0)):
  //!   load Q_i; set O = 0, m = -inf, l = 0 (line 2);
  //!   for each key tile k0 = 0, bk, ... below kv_end (the last one may be partial):
  //!     load K_j, V_j; score_tile; mask_tile if causal and the tile crosses the diagonal;
  //!     online_softmax_update.
  //!   write_output_rows.
  //! Causal: query i sees keys j <= i + (Nk - Nq). The tile's last row is q0 + rows - 1, so no
  //! row of the tile sees a key at or after kv_end = q0 + rows + Nk - Nq (clamped to [0, Nk]):
  //! stop the key loop there (skip, do not mask). A tile needs the mask only if its last key is
  //! beyond what the tile's *first* row sees.
  const Acc scale = Acc(softmax_scale(options.scale, d, who));
  const int shift = Nk - Nq;  // bottom-right alignment: query i sees keys j <= i + shift

  std::vector<Acc> q_tile(size_t(bq) * d), kt_tile(size_t(d) * bk), v_tile(size_t(bk) * d);
  std::vector<Acc> S(size_t(bq) * bk);  // S_ij, overwritten by P~_ij
  std::vector<Acc> o_acc(size_t(bq) * d), m(bq), l(bq);

  for (int q0 = 0; q0 < Nq; q0 += bq) {  // FA2's outer loop (FA1 line 7, moved outside)
    const int rows = std::min(bq, Nq - q0);
    load_q_tile(Q, q0, rows, scale, q_tile.data());  // line 8
    std::fill(o_acc.begin(), o_acc.end(), Acc(0));    // line 2: O = 0, l = 0, m = -inf
    std::fill(l.begin(), l.end(), Acc(0));
    std::fill(m.begin(), m.end(), neg_inf<Acc>());

    // Causal: key tiles from kv_end on lie wholly above the diagonal for every row of this
    // query tile; they are skipped, not computed and masked.
    const int kv_end = options.causal ? std::clamp(q0 + rows + shift, 0, Nk) : Nk;
    for (int k0 = 0; k0 < kv_end; k0 += bk) {  // line 5 (the last tile may be partial)
      const int cols = std::min(bk, kv_end - k0);
      load_kv_tile(K, V, k0, cols, bk, kt_tile.data(), v_tile.data());  // line 6
      score_tile(q_tile.data(), kt_tile.data(), rows, cols, d, bk, S.data());  // line 9
      const bool on_diagonal = options.causal && k0 + cols - 1 > q0 + shift;
      if (on_diagonal) mask_tile(S.data(), rows, cols, bk, q0, k0, shift);
      online_softmax_update(S.data(), v_tile.data(), rows, cols, d, bk, m.data(), l.data(),
                            o_acc.data());  // lines 10-12
    }
    write_output_rows<T, Acc>(o_acc.data(), m.data(), l.data(), q0, rows, d, O, lse);  // 12-13
  }
  // END SOLUTION
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
  // BEGIN SOLUTION attention_forward_batched
  //! Every (b, h) is an independent head: Q.head(b, h) etc. are [N, d] views (no copy); the
  //! head's LSE goes to out.lse[(b * H + h) * Nq ...].
  for (int b = 0; b < Q.B; ++b)
    for (int h = 0; h < Q.H; ++h)
      attention_head<T, accum_t<T>>(Q.head(b, h), K.head(b, h), V.head(b, h), options,
                                    out.O.head(b, h), out.lse.data() + (size_t(b) * Q.H + h) * Q.N,
                                    who + " (head b = " + std::to_string(b) + ", h = " +
                                        std::to_string(h) + ")");
  // END SOLUTION
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
