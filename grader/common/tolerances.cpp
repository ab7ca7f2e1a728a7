#include "tolerances.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <utility>

namespace grading {

namespace {

// The figures quoted in the reasons are measured by `./course report` (see
// lectures/03-streaming-attention.md, "Measure it") and by the graders themselves.
const std::map<std::pair<Quantity, std::string>, Band>& table() {
  static const std::map<std::pair<Quantity, std::string>, Band> t = {
      {{Quantity::probability, "fp64"},
       {0, 1e-11,
        "fp64: exp(x - m) / l errs by ~1e-16 per element, but a correct code that carries a "
        "row's log-sum-exp instead of (m, l) (a log-domain combine, exp(x - lse)) loses the "
        "rounding of lse: half an ulp of |lse|, up to 7.3e-12 at |lse| = 6.6e4 (logits of +-1e4; "
        "3.6e-12 below 2^16, measured 1.8e-12); 1e-11 covers it and still catches every "
        "algorithmic bug (they err by 1e-3 or more)"}},
      {{Quantity::probability, "fp32"},
       {2, 1e-6,
        "fp32 storage and arithmetic: 2x a plain fp32 softmax (FlashAttention's test rule), "
        "floor 1e-6 (~8 fp32 ulps at 1) for inputs where the plain one happens to be exact"}},
      {{Quantity::probability, "bf16"},
       {2, 0x1p-8,
        "bf16 storage, fp32 arithmetic: the output's rounding to bf16 dominates (at most 2^-8 "
        "relative); 2x a plain bf16 softmax, floor 2^-8 (half a bf16 ulp at 1) times "
        "max(1, max |y|) = 1"}},
      {{Quantity::probability, "fp16"},
       {2, 0x1p-11,
        "fp16 storage, fp32 arithmetic: output rounding dominates (at most 2^-11 relative); 2x a "
        "plain fp16 softmax, floor 2^-11 (half an fp16 ulp at 1) times max(1, max |y|) = 1"}},
      {{Quantity::lse, "fp64"},
       {0, 1e-12,
        "fp64 LSE: m + log(l) with l summed in another order; rounding noise ~1e-15 relative"}},
      {{Quantity::lse, "fp32"},
       {2, 1e-5,
        "LSE is kept in fp32: 2x a plain fp32 LSE, floor 1e-5 times max(1, |LSE|): a sum of up to "
        "1e5 terms in another order errs by about sqrt(n) * 6e-8 = 1.9e-5 relative, so log(l) "
        "by 1.9e-5, which the floor covers from |LSE| = 2 on and the 2x term below"}},
      {{Quantity::lse, "bf16"},
       {2, 1e-5,
        "bf16 inputs, LSE in fp32: factor and floor as fp32, times the plain bf16 baseline's "
        "LSE error; where that baseline keeps its scores in bf16 (lab 3's plain attention, the "
        "GPU labs' standard attention) the band carries the scores' rounding too, looser than a "
        "plain fp32 LSE on the same inputs would make it"}},
      {{Quantity::lse, "fp16"},
       {2, 1e-5,
        "fp16 inputs, LSE in fp32: as bf16's (the fp16 baseline's LSE error, scores in fp16 "
        "where the baseline keeps them so)"}},
      {{Quantity::output, "fp64"},
       {0, 1e-12,
        "fp64 O: blockwise and one-shot differ by reduction order only, ~1e-15 measured at "
        "N = 4096; 1e-12 (times max |O|) leaves headroom and catches every rescaling bug"}},
      {{Quantity::output, "fp32"},
       {3, 1e-6,
        "fp32 O: the plain fp32 attention (S, P, O in fp32) on the same inputs errs mostly by "
        "the one rounding of each score, which exp turns into a relative error of P; folding "
        "the scale or log2(e) into Q (FA2's exp2) rounds the scores once more, so 2x plain "
        "(FlashAttention's rule) plus one more plain error: 3x (exp2 form measured at up to 2.5x "
        "on outlier inputs); floor 1e-6 (~8 fp32 ulps) times max(1, max |O|)"}},
      {{Quantity::output, "bf16"},
       {2, 0x1p-8,
        "bf16 O, fp32 arithmetic: 2x the plain bf16 attention (S, P, O rounded to bf16, as "
        "PyTorch's math path), floor 2^-8 (half a bf16 ulp at 1) times max(1, max |O|)"}},
      {{Quantity::output, "fp16"},
       {2, 0x1p-11,
        "fp16 O, fp32 arithmetic: 2x the plain fp16 attention, floor 2^-11 (half an fp16 ulp at "
        "1) times max(1, max |O|)"}},
      {{Quantity::gradient, "fp64"},
       {0, 1e-11,
        "fp64 dQ, dK, dV: P = exp(S - LSE) from the saved LSE carries the rounding of the score "
        "and of the LSE (half an ulp of |S| ~ 5e3 at scale 300 is 4.5e-13), and each gradient "
        "is a sum of such P; measured up to 6e-12 x max(1, max |g|) there (1000 seeds), 1e-13 "
        "on ordinary inputs; 1e-11 still catches every algorithmic bug (they err by 1e-3 or "
        "more)"}},
      {{Quantity::gradient, "fp32"},
       {2, 1e-6,
        "fp32 dQ, dK, dV: 2x the plain fp32 backward on the same inputs (S, P, dP, dS in fp32, P "
        "from the saved LSE and D from the saved O, as the API defines them; FlashAttention's "
        "rule), floor 1e-6 (~8 fp32 ulps) times max(1, max |g|), plus the rounding allowance "
        "of the scores and of dP - D (with_gradient_score_rounding); the solution used at most "
        "0.47 of it (300 seeds; 0.35 at the large scores over 1000), FA2's exp2 form 0.45, "
        "measured before the dP - D term was added (which only widens it)"}},
      {{Quantity::gradient, "bf16"},
       {2, 0x1p-8,
        "bf16 dQ, dK, dV, fp32 arithmetic: 2x the plain bf16 backward (S, P, dP, D, dS and the "
        "gradients each rounded to bf16, products in fp32, as PyTorch's unfused path), floor "
        "2^-8 (half a bf16 ulp at 1) times max(1, max |g|), plus 2 E32 (with_fp32_error: D "
        "inherits the rounding of the saved O); the solution uses at most 0.45 of it (300 "
        "seeds)"}},
      {{Quantity::gradient, "fp16"},
       {2, 0x1p-11,
        "fp16 dQ, dK, dV, fp32 arithmetic: 2x the plain fp16 backward, floor 2^-11 (half an "
        "fp16 ulp at 1) times max(1, max |g|), plus 2 E32 (with_fp32_error: D inherits the "
        "rounding of the saved O); the solution uses at most 0.45 of it (300 seeds)"}},
  };
  return t;
}

// The tight per-element bands for the 16-bit dtypes (see ElementBand in tolerances.hpp).
const std::map<std::pair<Quantity, std::string>, ElementBand>& element_table() {
  static const std::map<std::pair<Quantity, std::string>, ElementBand> t = {
      {{Quantity::probability, "bf16"},
       {0x1p-8, 0, 2, 0x1p-134,
        "bf16 probability, fp32 exp(x - m) / l rounded once: round-to-nearest errs by at most "
        "u = 2^-8 relative, per element (the solution's worst element reaches 1.00 of this "
        "band); rounding exp or l to bf16 before the division adds two more such errors"}},
      {{Quantity::probability, "fp16"},
       {0x1p-11, 0, 2, 0x1p-25,
        "fp16 probability, fp32 exp(x - m) / l rounded once: at most u = 2^-11 relative per "
        "element, floor half the smallest fp16 subnormal (2^-25) for probabilities below "
        "2^-14; rounding exp or l to fp16 before the division breaks it"}},
      {{Quantity::output, "bf16"},
       {0x1p-8, 0x1p-5, 2, 0,
        "bf16 O with fp32 S, P and O: one rounding of O, at most u = 2^-8 relative per element; "
        "elements far smaller than their row's largest (|O| < 2^-5 max_row |O|) are held to "
        "u 2^-5 max_row |O|, since their fp32 error is set by the row, not by themselves "
        "(the solution's worst element reaches 1.00 of this band); rounding the running O to "
        "bf16 after every tile, or before dividing by l, errs several u"}},
      {{Quantity::output, "fp16"},
       {0x1p-11, 0x1p-5, 2, 0x1p-25,
        "fp16 O with fp32 S, P and O: one rounding of O, at most u = 2^-11 relative per "
        "element, held to u 2^-5 max_row |O| for elements far smaller than their row's largest; "
        "floor half the smallest fp16 subnormal"}},
      {{Quantity::gradient, "bf16"},
       {0x1p-8, 0x1p-5, 2, 0,
        "bf16 dQ, dK, dV with fp32 S, P, dP, dS and accumulators: one rounding of each "
        "gradient, at most u = 2^-8 relative per element; elements far smaller than their row's "
        "largest (|g| < 2^-5 max_row |g|) are held to u 2^-5 max_row |g|, since their fp32 error "
        "is set by sums over the row's keys or queries; E32 is the plain fp32 backward's error "
        "from the same rounded inputs plus the rounding walk of the scores and of dP - D "
        "(score_rounding_walk). The solution's worst element reached 0.992 of this band (300 "
        "seeds, before the dP - D term widened it); dQ kept in bf16 between key tiles errs 2 to "
        "4 times it (16 to 50 key tiles)"}},
      {{Quantity::gradient, "fp16"},
       {0x1p-11, 0x1p-5, 2, 0x1p-25,
        "fp16 dQ, dK, dV with fp32 arithmetic: one rounding of each gradient, at most "
        "u = 2^-11 relative per element, held to u 2^-5 max_row |g| for elements far smaller "
        "than their row's largest; E32 as for bf16; floor half the smallest fp16 subnormal. The "
        "solution's worst element reached 0.987 of this band (300 seeds, before the dP - D term "
        "widened it)"}},
  };
  return t;
}

}  // namespace

const ElementBand* element_band_for(Quantity q, const std::string& dtype) {
  auto it = element_table().find({q, dtype});
  return it == element_table().end() ? nullptr : &it->second;
}

const char* to_string(Quantity q) {
  switch (q) {
    case Quantity::probability: return "probability";
    case Quantity::lse: return "lse";
    case Quantity::output: return "output";
    case Quantity::gradient: return "gradient";
  }
  return "?";
}

const Band& band_for(Quantity q, const std::string& dtype) {
  auto it = table().find({q, dtype});
  if (it == table().end())
    throw std::invalid_argument(std::string("no tolerance band for ") + to_string(q) + " in " +
                                dtype);
  return it->second;
}

Tolerance tolerance(Quantity q, const std::string& dtype, double plain_max_abs,
                    double ref_max_abs) {
  const Band& b = band_for(q, dtype);
  const double scale = std::max(1.0, ref_max_abs);
  const double limit = b.factor * plain_max_abs + b.floor * scale;
  char buf[256];
  std::snprintf(buf, sizeof buf, "band %.3e = %g x plain %s (%.3e) + %.3e x %.3g", limit, b.factor,
                dtype.c_str(), plain_max_abs, b.floor, scale);
  return {limit, std::string(buf) + " [" + dtype + " " + to_string(q) + ": " + b.reason + "]"};
}

double benchmark_sanity_limit(const std::string& dtype) {
  // fp32: ~1000x what a correct kernel errs at N = 16k (~1e-6); bf16/fp16: ~10 ulps of 2^-8 at
  // outputs of order 1, while a dropped tile or a missing rescale errs by 0.1 or more.
  if (dtype == "fp32") return 1e-3;
  if (dtype == "bf16" || dtype == "fp16") return 5e-2;
  throw std::invalid_argument("no benchmark sanity limit for " + dtype);
}

Tolerance with_score_rounding(Tolerance t, const std::string& dtype, double score_max,
                              double value_max) {
  if (dtype != "fp32") return t;
  constexpr double kU32 = 0x1p-24;  // unit roundoff of fp32
  const double extra = 2 * kU32 * score_max * value_max;
  char buf[192];
  std::snprintf(buf, sizeof buf,
                " + folded-scale rounding 2 u32 x max|S| bound (%.3g) x max|V| (%.3g) = %.3e -> band %.3e",
                score_max, value_max, extra, t.limit + extra);
  const std::size_t at = t.explain.find(" [");
  t.explain.insert(at == std::string::npos ? t.explain.size() : at, buf);
  t.limit += extra;
  return t;
}

double score_rounding_walk(double sensitivity, int head_dim) {
  constexpr double kU32 = 0x1p-24;  // unit roundoff of fp32
  return std::sqrt(double(std::max(head_dim, 1))) * kU32 * sensitivity;
}

Tolerance with_gradient_score_rounding(Tolerance t, const std::string& dtype, double sensitivity,
                                       int head_dim) {
  if (dtype != "fp32") return t;
  const double extra = 2 * score_rounding_walk(sensitivity, head_dim);
  char buf[192];
  std::snprintf(buf, sizeof buf,
                " + score rounding 2 sqrt(d) u32 x sensitivity (d %d, %.3g) = %.3e -> band %.3e",
                head_dim, sensitivity, extra, t.limit + extra);
  const std::size_t at = t.explain.find(" [");
  t.explain.insert(at == std::string::npos ? t.explain.size() : at, buf);
  t.limit += extra;
  return t;
}

Tolerance with_fp32_error(Tolerance t, const std::string& dtype, double fp32_error) {
  if (dtype != "bf16" && dtype != "fp16") return t;
  const double extra = 2 * fp32_error;
  char buf[128];
  std::snprintf(buf, sizeof buf, " + 2 x fp32 error of the same inputs (%.3e) -> band %.3e",
                fp32_error, t.limit + extra);
  const std::size_t at = t.explain.find(" [");
  t.explain.insert(at == std::string::npos ? t.explain.size() : at, buf);
  t.limit += extra;
  return t;
}

}  // namespace grading
