// Lab 7, part 1: the attention backward pass on the CPU, one tile of scores at a time, from the
// forward's saved LSE. Implements include/course/lab7_backward.hpp. (Part 2, the GPU kernel, is
// backward.cu beside this file.)
//
// This is FlashAttention-2's Algorithm 2 (Dao, 2023), the backward pass. Line numbers in the
// comments ("line 11") are those of FA2 Algorithm 2. The forward pass kept, per query row, only
// its output O_i and its log-sum-exp LSE_i. From them the backward recomputes every probability
// it needs, tile by tile, instead of reading a stored N x N matrix P:
//   * P_ij = exp(S_ij - LSE_i) is already normalised, because LSE_i is the log of row i's
//     softmax denominator (line 11); no running max, no rescaling, no division;
//   * the one quantity of the softmax's gradient that needs a whole row,
//       D_i = sum_j P_ij dP_ij = sum_j P_ij (dO_i . V_j) = dO_i . O_i,
//     comes from O before any tile is touched (line 4).
// Everything else is a product of tiles.
//
// The loop order is FA2's: key/value tiles outermost (line 5), so that dK_j and dV_j add up in
// two small buffers ("on chip") and are written once (line 18); the query tiles stream past them
// (line 8). dQ_i gets a contribution from every key tile, so dQ lives in an Acc matrix the size of
// Q for the whole call (line 15 reads and writes it in main memory; a GPU kernel does that with
// atomic adds, or in a pass of its own over the key tiles).
//
// Two things Algorithm 2 leaves out, and FA1's backward (its Algorithm 4, Appendix B) has:
//   * the softmax scale tau: S = tau Q K^T, so dQ = tau dS K and dK = tau dS^T Q. As in lab 3, tau
//     is folded into the Q tile when it is loaded; dK_j += dS^T (tau Q_i) then carries its tau
//     already, and dQ gets its tau once per element at the end;
//   * the causal mask, bottom-right aligned as in lab 3: query tiles that see none of a key tile
//     are skipped, tiles across the diagonal are masked.
//
// Storage is T, arithmetic is Acc (accum_t<T> normally; the grader also instantiates
// Acc = CountedFloat to count the multiplications and exponentials). dQ, dK and dV are rounded
// to T once, at the end. Memory beyond inputs and outputs: dQ and D in Acc (Nq (d + 1) numbers)
// and a few tiles, never anything of size Nq x Nk.
#include "course/lab7_backward.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace course::lab7 {

namespace {

using std::size_t;

std::string shape_of(const Eigen::Index rows, const Eigen::Index cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

// Every check on the arguments, with a message that says which argument and why.
template <class T>
void validate(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V, const Matrix<T>& O,
              const Matrix<T>& dO, const Vector<accum_t<T>>& lse, const BackwardOptions& options) {
  const std::string who = "attention_backward";
  if (Q.cols() != K.cols() || K.cols() != V.cols())
    throw BadInput(who + ": Q, K and V must have the same head dimension d; got Q " +
                   shape_of(Q.rows(), Q.cols()) + ", K " + shape_of(K.rows(), K.cols()) + ", V " +
                   shape_of(V.rows(), V.cols()));
  if (K.rows() != V.rows())
    throw BadInput(who + ": K and V must have one row per key, the same number; got K " +
                   shape_of(K.rows(), K.cols()) + ", V " + shape_of(V.rows(), V.cols()));
  if (O.rows() != Q.rows() || O.cols() != Q.cols() || dO.rows() != Q.rows() ||
      dO.cols() != Q.cols())
    throw BadInput(who + ": O and dO must have Q's shape " + shape_of(Q.rows(), Q.cols()) +
                   "; got O " + shape_of(O.rows(), O.cols()) + ", dO " +
                   shape_of(dO.rows(), dO.cols()));
  if (lse.size() != Q.rows())
    throw BadInput(who + ": lse must hold one number per query row (" + std::to_string(Q.rows()) +
                   "); it holds " + std::to_string(lse.size()));
  if (Q.cols() < 1) throw BadInput(who + ": the head dimension d must be at least 1; got d = 0");
  require_tile_options(options, who);
  softmax_scale(options.scale, int(Q.cols()), who);  // a scale given must be finite and > 0
  require_finite<T>(Q, who + ": Q");
  require_finite<T>(K, who + ": K");
  require_finite<T>(V, who + ": V");
  require_finite<T>(O, who + ": O");
  require_finite<T>(dO, who + ": dO");
  // -inf is the LSE of a row that sees no key; NaN and +inf are the LSE of nothing.
  for (Eigen::Index i = 0; i < lse.size(); ++i)
    if (std::isnan(lse[i]) || (lse[i] > 0 && std::isinf(lse[i])))
      throw BadInput(who + ": lse[" + std::to_string(i) + "] is " +
                     (std::isnan(lse[i]) ? "NaN" : "+inf") +
                     "; a row's log-sum-exp is finite, or -inf for a row that sees no key");
}

// Rows first .. first + count - 1 of X into a tile buffer [count, d], converted to Acc.
template <class T, class Acc>
void load_rows(const Matrix<T>& X, int first, int count, Acc* tile) {
  const int d = int(X.cols());
  for (int r = 0; r < count; ++r)
    for (int k = 0; k < d; ++k) tile[size_t(r) * d + k] = acc<Acc>(X(first + r, k));
}

// The rows of a tile buffer [count, d] into rows first .. first + count - 1 of X, each element
// rounded to T.
template <class T, class Acc>
void store_rows(const Acc* tile, int first, int count, Matrix<T>& X) {
  const int d = int(X.cols());
  for (int r = 0; r < count; ++r)
    for (int k = 0; k < d; ++k) X(first + r, k) = store<T>(tile[size_t(r) * d + k]);
}

// out[r * bk + c] = a_r . b_c for the rows a_r of a [rows, d] and b_c of b [cols, d]: the tile
// products S_ij = Q_i K_j^T (line 10) and dP_ij = dO_i V_j^T (line 13) alike.
template <class Acc>
void row_dots(const Acc* a, const Acc* b, int rows, int cols, int d, int bk, Acc* out) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      Acc sum = 0;
      for (int k = 0; k < d; ++k) sum += a[size_t(r) * d + k] * b[size_t(c) * d + k];
      out[size_t(r) * bk + c] = sum;
    }
}

// out_c += sum_r w[r, c] x_r: the tile's weights (transposed) times the rows x_r of x [rows, d],
// into the rows out_c of out [cols, d]. Line 12 (dV_j += P^T dO_i) and line 16 (dK_j += dS^T Q_i).
// Each step is an axpy along contiguous rows.
template <class Acc>
void add_transposed_product(const Acc* w, const Acc* x, int rows, int cols, int d, int bk,
                            Acc* out) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const Acc w_rc = w[size_t(r) * bk + c];
      for (int k = 0; k < d; ++k) out[size_t(c) * d + k] += w_rc * x[size_t(r) * d + k];
    }
}

// out_r += sum_c w[r, c] x_c: the tile's weights times the rows x_c of x [cols, d], into the rows
// out_r of out [rows, d]. Line 15 (dQ_i += dS K_j).
template <class Acc>
void add_product(const Acc* w, const Acc* x, int rows, int cols, int d, int bk, Acc* out) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const Acc w_rc = w[size_t(r) * bk + c];
      for (int k = 0; k < d; ++k) out[size_t(r) * d + k] += w_rc * x[size_t(c) * d + k];
    }
}

// Line 4: D_i = rowsum(dO_i o O_i) = dO_i . O_i for every query row, before the tile loops.
template <class T, class Acc>
void compute_D(const Matrix<T>& dO, const Matrix<T>& O, Acc* D) {
  // BEGIN SOLUTION compute_D
  //! D[i] = sum_k dO(i, k) O(i, k), each element read with acc<Acc>.
  for (Eigen::Index i = 0; i < dO.rows(); ++i) {
    Acc sum = 0;
    for (Eigen::Index k = 0; k < dO.cols(); ++k) sum += acc<Acc>(dO(i, k)) * acc<Acc>(O(i, k));
    D[i] = sum;
  }
  // END SOLUTION
}

// Causal mask on a tile that straddles the diagonal (lab 3's). Query q0 + r sees keys
// j <= q0 + r + shift (shift = Nk - Nq: the bottom-right alignment); every later key of the tile
// gets -inf, which line 11 turns into a probability of exactly 0.
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

// Line 11: P_ij = exp(S_ij - LSE_i), in place in the tile s [rows, bk]; lse holds the tile's rows.
// A row whose LSE is -inf saw no key in the forward pass: its P is 0 (and exp(-inf - -inf) would
// be NaN).
template <class Acc>
void probabilities(Acc* s, const Acc* lse, int rows, int cols, int bk) {
  // BEGIN SOLUTION probabilities
  //! For each row r: if lse[r] is -inf (is_neg_inf), the row's P is 0; otherwise
  //! p = course::exp(s - lse[r]) for each of its cols scores. One exponential per score: this is
  //! the only place the backward pass exponentiates.
  for (int r = 0; r < rows; ++r) {
    Acc* p = s + size_t(r) * bk;
    if (is_neg_inf(lse[r])) {
      std::fill(p, p + cols, Acc(0));
      continue;
    }
    for (int c = 0; c < cols; ++c) p[c] = course::exp(p[c] - lse[r]);
  }
  // END SOLUTION
}

// Line 14: dS_ij = P_ij o (dP_ij - D_i), in place in the tile dp [rows, bk] (which holds dP);
// D holds the tile's rows. This is the softmax's gradient: dP moved by the row's mean D_i.
template <class Acc>
void softmax_gradient(const Acc* p, const Acc* D, int rows, int cols, int bk, Acc* dp) {
  // BEGIN SOLUTION softmax_gradient
  //! For every entry of the tile: dp = p * (dp - D[r]).
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const size_t at = size_t(r) * bk + c;
      dp[at] = p[at] * (dp[at] - D[r]);
    }
  // END SOLUTION
}

}  // namespace

template <class T, class Acc>
Gradients<T> attention_backward(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                                const Matrix<T>& O, const Matrix<T>& dO,
                                const Vector<accum_t<T>>& lse, const BackwardOptions& options) {
  validate<T>(Q, K, V, O, dO, lse, options);
  const int Nq = int(Q.rows()), Nk = int(K.rows()), d = int(Q.cols());
  // A tile larger than the sequence would only waste memory.
  const int bq = std::min(options.block_q, std::max(Nq, 1));
  const int bk = std::min(options.block_k, std::max(Nk, 1));
  Gradients<T> grads{Matrix<T>::Zero(Nq, d), Matrix<T>::Zero(Nk, d), Matrix<T>::Zero(Nk, d)};
  // BEGIN SOLUTION attention_backward
  //! The scale tau: course::softmax_scale(options.scale, d, "attention_backward"), options.scale
  //! if given, else 1 / sqrt(d). shift = Nk - Nq (causal alignment).
  //! For every query row, in Acc: D (compute_D, line 4) and dQ = 0 (line 3), [Nq, d].
  //! The working set, allocated once: K_j, V_j, dK_j, dV_j [bk, d]; Q_i (times tau), dO_i
  //! [bq, d], the tile's LSE [bq]; two score tiles [bq, bk] (S then P; dP then dS).
  //! For each key tile k0 = 0, bk, ... (cols = min(bk, Nk - k0); the last may be partial):
  //!   load K_j, V_j (line 6); dK_j = dV_j = 0 (line 7);
  //!   for each query tile q0 that sees any key of this tile (line 8):
  //!     load Q_i times tau, dO_i, LSE_i (line 9);
  //!     S = Q_i K_j^T (row_dots, line 10); mask_tile if causal and the tile crosses the diagonal;
  //!     probabilities (line 11); dV_j += P^T dO_i (add_transposed_product, line 12);
  //!     dP = dO_i V_j^T (row_dots, line 13); softmax_gradient (line 14);
  //!     dQ_i += dS K_j (add_product, line 15); dK_j += dS^T Q_i (line 16: tau is in Q_i).
  //!   write dK_j and dV_j (store_rows, line 18).
  //! Finally dQ = tau * dQ, rounded to T once.
  //! Causal: query i sees key k0 only if i >= k0 - shift, so the query tiles before the one that
  //! holds row max(0, k0 - shift) lie wholly above the diagonal: start the query loop at that
  //! tile (skip, do not mask). A tile needs the mask only if its last key is beyond what its
  //! *first* row sees.
  const Acc scale = Acc(softmax_scale(options.scale, d, "attention_backward"));
  const int shift = Nk - Nq;  // bottom-right alignment: query i sees keys j <= i + shift

  // Line 4 (D) and line 3 (dQ = 0): the only buffers of the call that grow with N.
  std::vector<Acc> D(Nq), dq(size_t(Nq) * d, Acc(0));
  compute_D<T, Acc>(dO, O, D.data());

  // The working set (FA2: on-chip SRAM), allocated once.
  std::vector<Acc> k_tile(size_t(bk) * d), v_tile(size_t(bk) * d);
  std::vector<Acc> dk_tile(size_t(bk) * d), dv_tile(size_t(bk) * d);
  std::vector<Acc> q_tile(size_t(bq) * d), do_tile(size_t(bq) * d), lse_tile(bq);
  std::vector<Acc> P(size_t(bq) * bk);   // S_ij, overwritten by P_ij
  std::vector<Acc> dS(size_t(bq) * bk);  // dP_ij, overwritten by dS_ij

  for (int k0 = 0; k0 < Nk; k0 += bk) {  // line 5 (the last tile may be partial)
    const int cols = std::min(bk, Nk - k0);
    load_rows(K, k0, cols, k_tile.data());  // line 6
    load_rows(V, k0, cols, v_tile.data());
    std::fill(dk_tile.begin(), dk_tile.end(), Acc(0));  // line 7
    std::fill(dv_tile.begin(), dv_tile.end(), Acc(0));

    // Causal: the first query that sees key k0 is k0 - shift; the query tiles before the one
    // holding it are wholly above the diagonal for this key tile, and are skipped.
    const int q_begin = options.causal ? std::clamp(k0 - shift, 0, Nq) / bq * bq : 0;
    for (int q0 = q_begin; q0 < Nq; q0 += bq) {  // line 8
      const int rows = std::min(bq, Nq - q0);
      load_rows(Q, q0, rows, q_tile.data());  // line 9, with tau folded into Q_i
      for (int at = 0; at < rows * d; ++at) q_tile[at] = scale * q_tile[at];
      load_rows(dO, q0, rows, do_tile.data());
      for (int r = 0; r < rows; ++r) lse_tile[r] = acc<Acc>(lse[q0 + r]);

      row_dots(q_tile.data(), k_tile.data(), rows, cols, d, bk, P.data());  // line 10: S
      const bool on_diagonal = options.causal && k0 + cols - 1 > q0 + shift;
      if (on_diagonal) mask_tile(P.data(), rows, cols, bk, q0, k0, shift);
      probabilities(P.data(), lse_tile.data(), rows, cols, bk);  // line 11: P
      add_transposed_product(P.data(), do_tile.data(), rows, cols, d, bk,
                             dv_tile.data());  // line 12: dV_j += P^T dO_i
      row_dots(do_tile.data(), v_tile.data(), rows, cols, d, bk, dS.data());  // line 13: dP
      softmax_gradient(P.data(), D.data() + q0, rows, cols, bk, dS.data());  // line 14: dS
      add_product(dS.data(), k_tile.data(), rows, cols, d, bk,
                  dq.data() + size_t(q0) * d);  // line 15: dQ_i += dS K_j
      add_transposed_product(dS.data(), q_tile.data(), rows, cols, d, bk,
                             dk_tile.data());  // line 16: dK_j += dS^T (tau Q_i)
    }
    store_rows(dk_tile.data(), k0, cols, grads.dK);  // line 18
    store_rows(dv_tile.data(), k0, cols, grads.dV);
  }
  // Line 15's tau, once per element, and dQ's one rounding to T.
  for (size_t at = 0; at < dq.size(); ++at) dq[at] = scale * dq[at];
  store_rows(dq.data(), 0, Nq, grads.dQ);
  // END SOLUTION
  return grads;
}

// The four storage types, and fp32 with the grader's counting accumulator.
#define COURSE_LAB7_INSTANTIATE(T, Acc)                                                        \
  template Gradients<T> attention_backward<T, Acc>(const Matrix<T>&, const Matrix<T>&,        \
                                                   const Matrix<T>&, const Matrix<T>&,        \
                                                   const Matrix<T>&, const Vector<accum_t<T>>&, \
                                                   const BackwardOptions&);
COURSE_LAB7_INSTANTIATE(double, double)
COURSE_LAB7_INSTANTIATE(float, float)
COURSE_LAB7_INSTANTIATE(bf16, float)
COURSE_LAB7_INSTANTIATE(fp16, float)
COURSE_LAB7_INSTANTIATE(float, CountedFloat)
#undef COURSE_LAB7_INSTANTIATE

}  // namespace course::lab7
