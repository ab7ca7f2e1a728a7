// The one tolerance table of the course. Every grader takes its bands from here.
//
// The rule (FlashAttention's own test rule, made explicit):
//   allowed max abs error = factor * (max abs error of the plain same-precision implementation
//                                     on the same inputs, against the same fp64 reference)
//                         + floor * max(1, max |reference|)
// fp64 has no plain baseline worth the name (it *is* the reference's arithmetic), so its band
// is a pure floor at rounding-noise level. The reasons are printed in every failure message.
#pragma once

#include <string>

namespace grading {

enum class Quantity {
  probability,  // softmax output, in [0, 1], stored in the lab's dtype
  lse,          // log-sum-exp, stored in the accumulation dtype (fp32 or fp64)
  output,       // attention output O, stored in the lab's dtype
  gradient,     // dQ, dK or dV of the backward pass (lab 7), stored in the lab's dtype
};

struct Band {
  double factor;       // multiple of the plain implementation's error
  double floor;        // absolute floor, times max(1, max |reference|)
  const char* reason;  // why these numbers
};

// dtype is "fp64", "fp32", "bf16" or "fp16" (course::dtype_name<T>()).
const Band& band_for(Quantity q, const std::string& dtype);

struct Tolerance {
  double limit;         // the allowed max abs error
  std::string explain;  // "2 x plain bf16 (1.9e-03) + 3.9e-03 x 1.0 = 7.8e-03 (bf16 probability: ...)"
};

Tolerance tolerance(Quantity q, const std::string& dtype, double plain_max_abs, double ref_max_abs);

const char* to_string(Quantity q);

// The gross check of a benchmark row (bench/): a kernel whose max abs error against the fp64
// reference exceeds this computed something else, and its speed is not reported as if it were
// right. Far looser than a grading band on purpose: benchmark shapes reach N = 16k with no
// plain yardstick run beside them. dtype "fp32", "bf16" or "fp16".
double benchmark_sanity_limit(const std::string& dtype);

// An fp32 attention output whose scores reach |S| ~ 1e3 (rows of very negative scores, large
// logits) errs by more than the plain fp32 attention does even when correct: FA2's exp2 with
// scale * log2(e) folded into Q rounds every element of the scaled Q, which moves the score
// S_ij by up to u32 * scale * sum_t |q_it k_jt| <= u32 * scale |q_i| |k_j| (Cauchy-Schwarz), and a
// score off by e makes its probability off by a factor of about 1 + e; O, a P-weighted mean of
// the rows of V, then moves by up to 2 max|V| times that. So this adds
// 2 u32 score_max value_max to an fp32 output band (other dtypes are returned unchanged: their
// output rounding dwarfs it). score_max = scale * max_i |q_i| * max_j |k_j| over the problem,
// value_max = max |V|.
Tolerance with_score_rounding(Tolerance t, const std::string& dtype, double score_max,
                              double value_max);

// The same allowance for the gradients of the backward pass (lab 7). A score is a sum of d
// products, rounded as it is summed, at partial sums of up to c_ij = scale sum_t |q_it k_jt|; a
// correct code sums in another order than the plain backward does (and may fold the scale, or
// scale * log2(e), into Q, and convert the LSE to base 2: one more rounding each), so the two
// codes' S_ij differ by a random walk of such roundings, about sqrt(d) u32 c_ij each. That moves
// P_ij = exp(S_ij - LSE_i) by the factor 1 + sqrt(d) u32 c_ij, and a gradient, to first order,
// by sqrt(d) u32 times its `sensitivity`, the largest over its elements of
//   dV_jt: sum_i P_ij c_ij |dO_it|
//   dQ_it: scale sum_j P_ij c_ij |dP_ij - D_i| |K_jt|
//   dK_jt: scale sum_i P_ij c_ij |dP_ij - D_i| |Q_it|
// plus, for dQ and dK, the same walk in dP_ij - D_i (two dot products that cancel, summed in
// different orders: D in a pass of its own, dP in the tile loop), P_ij sum_t |dO_it| (|V_jt| +
// |O_it|) in place of P_ij c_ij |dP_ij - D_i| (the grader computes it all from the inputs; seen on
// the GPU at Nq = Nk = 1, where the exact dQ is 0 and the plain backward's error is 0 too). Why it is needed: where a row's two largest scores
// nearly tie, the rounding of one score decides a gradient's error, so the ratio of a correct
// code's error to the plain backward's is heavy-tailed (over 7x at scale 30 in 300 seeds) and a
// multiple of the plain error alone is no bound.
//
// score_rounding_walk is that sqrt(d) u32 sensitivity. with_gradient_score_rounding adds twice
// it (the code's walk and the plain's) to an fp32 band; other dtypes are returned unchanged
// (their outer band is set by their own, far larger, roundings). Measured beyond 2x plain: up to
// 0.45 sqrt(d) u32 sensitivity for the solution (d = 16, scale 30) and 0.6 for FA2's exp2 form
// (d = 64, outliers), in 1000 seeds each. For bf16 and fp16 the same walk is added to the plain
// fp32 error E32 of the per-element band (ElementBand below), whose fp32 term has the same tail.
double score_rounding_walk(double sensitivity, int head_dim);
Tolerance with_gradient_score_rounding(Tolerance t, const std::string& dtype, double sensitivity,
                                       int head_dim);

// A bf16 or fp16 gradient band widened by twice the fp32 error E32 of the same inputs (the plain
// fp32 backward's max abs error plus the score-rounding walk: the fp32 term of the per-element
// band below). The backward's inputs O and LSE reach the lab rounded to the dtype, and
// D = rowsum(dO o O) inherits O's rounding, up to u sum_t |dO_it O_it| per row: an error every
// correct code makes, but one that the plain same-dtype backward's own roundings can happen to
// cancel on a small problem, where its error is a poor yardstick (seen: 1.5x FlashAttention's
// band at Nq = Nk = 2, d = 1). E32 carries that error, from the same rounded O. Other dtypes are
// returned unchanged.
Tolerance with_fp32_error(Tolerance t, const std::string& dtype, double fp32_error);

// The tight, per-element band for bf16 and fp16 results (the outer band above is FlashAttention's
// rule; this one models the arithmetic a correct implementation does: fp32 inside, one rounding
// of the output to the storage dtype). For element i of a row r:
//   allowed_i = u * max(|ref_i|, row_fraction * max_j |ref_rj|)      one rounding of the output
//             + (1 + u) * fp32_factor * E32                           the fp32 arithmetic before it
//             + abs_floor                                             underflow to subnormals
// where u is the unit roundoff of the dtype (2^-8 bf16, 2^-11 fp16) and E32 is the max abs error
// of the plain fp32 implementation on the same inputs. Rounding any intermediate to the storage
// dtype (exp before dividing by l, the running O after a tile) adds errors of the same size u
// and breaks it.
struct ElementBand {
  double u;             // unit roundoff of the storage dtype
  double row_fraction;  // 0: purely relative per element
  double fp32_factor;   // multiple of E32
  double abs_floor;     // absolute, for outputs that underflow
  const char* reason;
};

// nullptr for fp32 and fp64, which have no separate output rounding to model.
const ElementBand* element_band_for(Quantity q, const std::string& dtype);

}  // namespace grading
