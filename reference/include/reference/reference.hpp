// The fp64 reference: row softmax, log-sum-exp and attention, written for obviousness, not
// speed. It materialises the full score matrix S. Nothing here calls lab or solution code.
//
// Templated on the real type R so that its own tests can check it against long double.
#pragma once

#include <Eigen/Core>

namespace reference {

template <class R>
using Mat = Eigen::Matrix<R, Eigen::Dynamic, Eigen::Dynamic>;
template <class R>
using Vec = Eigen::Matrix<R, Eigen::Dynamic, 1>;

// log sum_j exp(x[r, j]) per row, shifted by the row max. -inf for all -inf or empty rows.
template <class R>
Vec<R> logsumexp_rows(const Mat<R>& x);

// exp(x[r, j] - m[r]) / l[r] per row (m the row max, l the sum): a few ulps per element, also
// at logits of 1e4 (exp(x - lse) is not: lse ~ 3e4 has an ulp of 3.6e-12). A row with no finite
// entry gives zeros.
template <class R>
Mat<R> softmax_rows(const Mat<R>& x);

// Causal mask aligned to the bottom-right: query i of Nq sees key j of Nk iff j <= i + Nk - Nq.
inline bool causal_sees(Eigen::Index i, Eigen::Index j, Eigen::Index Nq, Eigen::Index Nk) {
  return j <= i + Nk - Nq;
}

// S = scale * Q K^T, with masked entries set to -inf when causal.
template <class R>
Mat<R> scores(const Mat<R>& Q, const Mat<R>& K, R scale, bool causal);

template <class R>
struct Attention {
  Mat<R> O;    // [Nq, d]; rows that see no key are 0
  Vec<R> lse;  // [Nq]; -inf for rows that see no key
};

// softmax(scale * Q K^T [masked]) V and the row LSE of the scaled, masked scores.
template <class R>
Attention<R> attention(const Mat<R>& Q, const Mat<R>& K, const Mat<R>& V, R scale, bool causal);

// The backward pass: the gradients of a loss L with respect to Q, K and V, given dO = dL/dO.
template <class R>
struct AttentionGradients {
  Mat<R> dQ;  // [Nq, d]
  Mat<R> dK;  // [Nk, d]
  Mat<R> dV;  // [Nk, d]
};

// The gradients of attention(Q, K, V, scale, causal), from the definitions, with full matrices:
//   P = softmax(S) (masked; a row that sees no key is 0), O = P V,
//   dV = P^T dO,  dP = dO V^T,  dS = P o (dP - rowsum(P o dP))  (the softmax's Jacobian),
//   dQ = scale dS K,  dK = scale dS^T Q.
// Nothing here uses a saved O or LSE: this is the truth the labs' backward passes are held to.
template <class R>
AttentionGradients<R> attention_backward(const Mat<R>& Q, const Mat<R>& K, const Mat<R>& V,
                                         const Mat<R>& dO, R scale, bool causal);

// "Plain" implementations in storage type T with T's usual arithmetic (fp32 accumulation for
// bf16/fp16, as PyTorch's unfused math path does): every intermediate (S, P, O) rounded to T.
// They are the yardstick of the tolerance bands (FlashAttention's own test rule: a fused
// kernel may err at most a small multiple of what this straightforward code errs).
// Inputs and outputs are doubles holding T values.
template <class T>
Mat<double> plain_softmax_rows(const Mat<double>& x);
template <class T>
Vec<double> plain_logsumexp_rows(const Mat<double>& x);
template <class T>
Attention<double> plain_attention(const Mat<double>& Q, const Mat<double>& K,
                                  const Mat<double>& V, double scale, bool causal);

// The backward pass the way lab 7's API states it, from the forward's saved statistics, with
// full matrices and every intermediate rounded to T: S = scale Q K^T, P = exp(S - lse) (0 in a
// row whose lse is -inf), dV = P^T dO, dP = dO V^T, D = rowsum(dO o O), dS = P o (dP - D),
// dQ = scale dS K, dK = scale dS^T Q, each rounded to T (products accumulated in fp32 for the
// 16-bit types, as PyTorch's unfused math path does). O and lse are whatever the caller gives:
// with T = double and the true O and LSE it is attention_backward above, to rounding; with
// others it is the formula the API promises for them. It is the yardstick of the gradient bands
// (the error a straightforward same-precision code makes on the same inputs) and, in fp64, the
// reference of the check that the saved statistics are used as given.
template <class T>
AttentionGradients<double> plain_attention_backward(const Mat<double>& Q, const Mat<double>& K,
                                                    const Mat<double>& V, const Mat<double>& O,
                                                    const Mat<double>& dO, const Vec<double>& lse,
                                                    double scale, bool causal);

// Round every element to T and back: the inputs every lab actually sees.
template <class T>
Mat<double> round_to(const Mat<double>& x);

// A paged KV cache made contiguous again (lab 6, part 2): the first `len` rows of one sequence's
// K (or V) for KV head `kv_head`, gathered from a pool [num_pages, H_kv, page_size, d] (doubles,
// row-major) through that sequence's row of the block table: key j is row j % page_size of page
// block_row[j / page_size]. The reference of a paged call is then attention() on these rows.
// Throws std::out_of_range for a page index outside the pool.
Mat<double> gather_pages(const double* pool, int num_pages, int kv_heads, int page_size, int d,
                         const int* block_row, int len, int kv_head);

}  // namespace reference
